"""Reuse of repeated kernels, pure: a launch of a kernel the sim has already simulated twice is
not simulated again, and takes the result of its second occurrence.

Measured on the real simulator (Accel-Sim 73f9fac, SM61_TITANX; /work/research/i16/REPORT.md,
bench/README.md):

- matrixmul-x40 launches one kernel 40 times: 7,528 cycles the first time (cold caches), then
  7,426 (7,444 from its 30th launch on). Reusing the first, cold result for the other 39 is
  +1.27 % in total; reusing the second, warm one for the other 38 is -0.067 %, and simulating
  a third adds nothing. So each kernel's first two occurrences are simulated (cold, then
  warm), and every later one takes the second's result.
- combo's launch 3 repeats launch 1 two launches later: it is that kernel's second
  occurrence, so it is simulated (exact), where reusing launch 1's cold result would be +2.3 %.
- Two launches are the same kernel when their kernel files have the same digest, as the trace
  stored them: a file holds the kernel's launch (name, grid, block, shared memory, registers,
  stream) and every instruction and address it runs. Within a sim the config and the
  simulator build are fixed, so the file's digest alone tells.

The simulator runs a kernelslist of the simulated launches, each with the memcpys before it
(`split.kernelslist_of`, as a chunk's); the memcpys before a reused launch go with it. In a
split sim, each chunk reuses within its own launches (its warm-up all simulated, as without
reuse), so chunks never wait for each other's results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from cascade_core.split import Chunk, is_kernel

SIMULATED_OCCURRENCES = 2  # cold, then warm: the warm one is reused
KERNELSLIST = "kernelslist.reuse.g"


class Reuse(msgspec.Struct, frozen=True, gc=False):
    """Which launches (uids from 1) a simulator run of a sim, or of a chunk of it, simulates,
    and whose result each other one takes."""

    kernelslist: str  # the name of the list of the launches it simulates, beside the trace's
    first: int  # the first launch it covers: 1, or a chunk's first simulated (its warm-up's)
    sources: tuple[int, ...]  # per launch from `first`, at uid - first: whose result it is (its own uid when simulated)
    simulated: tuple[int, ...]  # the simulated launches in order: the simulator's local uid u is simulated[u - 1]

    def simulates(self, uid: int) -> bool:
        return 0 <= uid - self.first < len(self.sources) and self.sources[uid - self.first] == uid

    def source(self, uid: int) -> int:
        return self.sources[uid - self.first]

    def global_uid(self, local_uid: int) -> int:
        return self.simulated[local_uid - 1]

    def sources_reused(self) -> set[int]:
        """The simulated launches whose results later ones take."""
        return {source for uid, source in enumerate(self.sources, self.first) if source != uid}

    def reused_after(self, uid: int) -> list[int]:
        """The reused launches right after launch `uid`, up to the next simulated one: their
        results are known once `uid`'s is, the sources all coming before them."""
        after = []
        for later in range(uid + 1, self.first + len(self.sources)):
            if self.simulates(later):
                break
            after.append(later)
        return after

    @property
    def label(self) -> str:
        reused = len(self.sources) - len(self.simulated)
        return (
            f"reuse: launches {ranges(self.simulated)} simulated, {reused} more reused, each taking the result of its "
            "kernel's second (warm) occurrence"
        )


def plan(kernelslist: Iterable[str], digests: Mapping[str, str], chunk: Chunk | None = None) -> Reuse | None:
    """The reuse of a trace whose `kernelslist.g` has these lines, its files having these
    digests by path, in a sim run whole or in `chunk` of it (whose warm-up launches are all
    simulated, and whose own launches reuse only each other's results); None when no launch
    repeats a kernel often enough to be reused."""
    first, last, measured = (1, None, 1) if chunk is None else (chunk.first - chunk.warmup, chunk.last, chunk.first)
    seen: dict[str, list[int]] = {}  # a kernel file's digest: the launches of it simulated
    sources: list[int] = []
    uid = 0
    for line in kernelslist:
        if not is_kernel(line):
            continue
        uid += 1
        if uid < first:
            continue
        if last is not None and uid > last:
            break
        path = line.strip()
        simulated = seen.setdefault(digests.get(path, f"path:{path}"), [])
        if uid < measured or len(simulated) < SIMULATED_OCCURRENCES:
            simulated += [uid] if uid >= measured else []
            sources.append(uid)
        else:
            sources.append(simulated[-1])
    simulated_uids = tuple(uid for uid, source in enumerate(sources, first) if uid == source)
    if len(simulated_uids) == len(sources):
        return None
    name = KERNELSLIST if chunk is None else f"kernelslist.{chunk.name}.reuse.g"
    return Reuse(kernelslist=name, first=first, sources=tuple(sources), simulated=simulated_uids)


def ranges(uids: Iterable[int]) -> str:
    """Launches as runs, `1-3, 5`."""
    runs: list[list[int]] = []
    for uid in uids:
        if runs and runs[-1][1] == uid - 1:
            runs[-1][1] = uid
        else:
            runs.append([uid, uid])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
