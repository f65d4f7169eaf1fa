"""Kernel-parallel sims, pure: a sim's launches cut into chunks that run concurrently, and how
a chunk's output maps back onto the sim simulated whole.

Measured on the real simulator (Accel-Sim 73f9fac, SM61_TITANX; docs/fast-sim-measurements.md):

- a chunk is a kernelslist of its own, in the trace's folder (the simulator reads kernel
  files relative to the list), holding every command from just after launch
  `first - warmup - 1` up to launch `last`: the memcpys before each of its kernels, and
  `warmup` launches simulated first and discarded, which warm the caches as the sequence did;
- the simulator numbers a run's launches from 1 (`kernel_launch_uid`), so a chunk's local
  uid u is global launch `first - warmup + u - 1`, and its first `warmup` results are warm-up;
- `gpu_tot_*` are running sums over a run, so a split sim's totals are the sums of its
  measured kernels' `gpu_sim_*`, recomputed, never a chunk's own.

`auto` picks the warm-up from those measurements: W=2 is the only warm-up that kept the
total-cycle error under 0.5 % on both traces measured (matrixmul-x40 −0.067 % at every K;
combo 0.000 %, against +0.69 % with W=0 and +0.74 % with W=1), since a kernel re-reading data
of two launches before needs both in its warm-up. Warm-up costs W/K of the work, so K is at
least 5·W, and a trace of fewer launches than that is not split at all: its chunks would hold
less work than a simulator start costs (combo, 3 launches: split per kernel, it took 40 % more
CPU and longer wall time).

An attempt that takes over from a lost runner's is cut the same way (`resume_at`, `resumed`):
GPGPU-Sim's `-checkpoint_option`/`-resume_option` do not work in trace mode (its resume
aborts or crashes at the kernel it resumes), so it runs the launches from the first
unfinished one on, after `DEFAULT_WARMUP` launches before it. Cut at launch 10 of
matrixmul-x40, the total-cycle error was −0.026 % with W=0 and −0.048 % with W=2; W=2 is
kept for what the combo trace showed of W=0 above.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol

import msgspec

from cascade_core.events import Resume, Split

DEFAULT_WARMUP = 2
MIN_KERNELS_PER_CHUNK = 5 * DEFAULT_WARMUP


class Chunk(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """Chunk `index` of `count`: it measures global launches `first`..`last` (from 1), after
    `warmup` launches discarded."""

    index: int
    count: int
    first: int
    last: int
    warmup: int

    @property
    def name(self) -> str:
        """As its kernelslist is named, `kernelslist.<name>.g`: `k11-20`, `w2_k11-20`."""
        measured = f"k{self.first}-{self.last}"
        return f"w{self.warmup}_{measured}" if self.warmup else measured

    @property
    def kernelslist(self) -> str:
        return f"kernelslist.{self.name}.g"

    @property
    def label(self) -> str:
        warm = f", after warm-up launches {self.first - self.warmup}-{self.first - 1}" if self.warmup else ""
        return f"chunk {self.index + 1} of {self.count}: launches {self.first}-{self.last}{warm}"

    def simulates(self, uid: int) -> bool:
        """Whether global launch `uid` is one of the chunk's, warm-up included."""
        return self.first - self.warmup <= uid <= self.last

    def global_uid(self, local_uid: int) -> int:
        return self.first - self.warmup + local_uid - 1

    def measures(self, local_uid: int) -> bool:
        """Whether the chunk's result of local launch `local_uid` is one of its own (not warm-up)."""
        return local_uid > self.warmup


def chunk_count(kernels_total: int, split: Split) -> int:
    return max(1, math.ceil(kernels_total / split.kernels_per_chunk))


def plan(kernels_total: int, split: Split) -> list[Chunk]:
    """The chunks of a sim of `kernels_total` launches; the first has no launch before it to
    warm up with, and no chunk warms up with more launches than precede it."""
    k = split.kernels_per_chunk
    count = chunk_count(kernels_total, split)
    return [
        Chunk(index=i, count=count, first=i * k + 1, last=min((i + 1) * k, kernels_total), warmup=min(split.warmup, i * k))
        for i in range(count)
    ]


def chunk_of(kernels_total: int, split: Split, index: int) -> Chunk:
    return plan(kernels_total, split)[index]


def whole(kernels_total: int) -> Chunk:
    """A sim run whole, as the one chunk of itself (what an attempt of it resumes)."""
    return Chunk(index=0, count=1, first=1, last=kernels_total, warmup=0)


def resume_at(chunk: Chunk, done: int, warmup: int = DEFAULT_WARMUP) -> Resume | None:
    """Where an attempt of `chunk` whose first `done` launches are recorded is carried on: at
    the next, after up to `warmup` launches before it; None when there is nothing to carry
    on: none is recorded, or all are (its end was not: it runs again, its kernels kept once,
    by launch)."""
    first = chunk.first + done
    if done <= 0 or first > chunk.last:
        return None
    return Resume(first=first, warmup=min(warmup, first - 1))


def resumed(chunk: Chunk, resume: Resume) -> Chunk:
    """What an attempt resuming `chunk` simulates: its launches from `resume.first` on,
    after the resume's warm-up."""
    return msgspec.structs.replace(chunk, first=resume.first, warmup=resume.warmup)


def auto(kernels_total: int, free_slots: int) -> Split | None:
    """The split `"auto"` asks for: the launches spread over the free slots (at least one),
    at least `MIN_KERNELS_PER_CHUNK` a chunk, warm-up `DEFAULT_WARMUP`; None when that makes
    a single chunk, which is the sim run whole."""
    k = max(math.ceil(kernels_total / max(1, free_slots)), MIN_KERNELS_PER_CHUNK)
    if k >= kernels_total:
        return None
    return Split(kernels_per_chunk=k, warmup=DEFAULT_WARMUP)


def is_kernel(line: str) -> bool:
    # The simulator takes a line for a kernel only if it starts so (trace_parser::parse_commandlist_file).
    return line.strip().startswith("kernel")


class Launches(Protocol):
    """Which of a trace's launches (uids from 1) one simulator run simulates, in order, and
    the name of the kernelslist that holds them (beside the trace's own)."""

    @property
    def kernelslist(self) -> str: ...

    def simulates(self, uid: int) -> bool: ...

    def global_uid(self, local_uid: int) -> int:
        """The launch whose result is the simulator's `local_uid`-th."""
        ...


def kernelslist_of(lines: Iterable[str], launches: Launches) -> list[str]:
    """The lines of the trace's kernelslist that simulate `launches`: each of them with the
    memcpys before it (since the launch before it), in order."""
    uid = 0  # launches on the lines before this one
    waiting: list[str] = []  # the commands since the last launch, which go with the next
    kept: list[str] = []
    for line in lines:
        if not is_kernel(line):
            waiting.append(line)
            continue
        uid += 1
        if launches.simulates(uid):
            kept += waiting
            kept.append(line)
        waiting = []
    return kept


def sim_state(chunk_states: Sequence[str]) -> str:
    """A split sim's state from its chunks': failed once one failed (the others stop), else
    cancelled once one was, succeeded when all did, running while any runs or some are done,
    launching while one is claimed, else pending."""
    states = set(chunk_states)
    for final in ("failed", "cancelled"):
        if final in states:
            return final
    if states == {"succeeded"}:
        return "succeeded"
    if states & {"running", "succeeded"}:
        return "running"
    return "launching" if "launching" in states else "pending"
