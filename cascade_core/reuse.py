"""Reuse of repeated kernels, pure: a launch of a kernel the sim has already simulated twice is
not simulated again, and takes the result of its second occurrence.

Measured on the real simulator (Accel-Sim 73f9fac, SM61_TITANX; docs/fast-sim-measurements.md,
bench/README.md):

- matrixmul-x40 launches one kernel 40 times: 7,528 cycles the first time (cold caches), then
  7,426 (7,444 from its 30th launch on). Reusing the first, cold result for the other 39 is
  +1.27 % in total; reusing the second, warm one for the other 38 is -0.067 %, and simulating
  a third adds nothing. So each kernel's first two occurrences are simulated (cold, then
  warm), and every later one takes the second's result.
- combo's launch 3 repeats launch 1 two launches later: it is that kernel's second
  occurrence, so it is simulated (exact), where reusing launch 1's cold result would be +2.3 %.
- Two launches are the same kernel when their kernel files have the same launch digest
  (`launch_digest`): the sha256 of the file's decompressed content without its header's
  `-kernel id = N` line. A file holds the kernel's launch (name, grid, block, shared memory,
  registers, stream, shared and local memory bases) and every instruction and address it
  runs, all of which the simulator reads; NVBit writes one file per launch, numbered by that
  line (its launch counter), which the simulator parses and never uses. So a decode loop's
  launches, each in its own file, are one kernel; a stored digest would tell them apart, and
  would tell apart the same content compressed twice. Within a sim the config and the
  simulator build are fixed, so the launch digest alone tells.

The simulator runs a kernelslist of the simulated launches, each with the memcpys before it
(`split.kernelslist_of`, as a chunk's); the memcpys before a reused launch go with it. In a
split sim, each chunk reuses within its own launches (its warm-up all simulated, as without
reuse), so chunks never wait for each other's results.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping

import msgspec

from cascade_core.split import Chunk, is_kernel

SIMULATED_OCCURRENCES = 2  # cold, then warm: the warm one is reused
KERNELSLIST = "kernelslist.reuse.g"
# The line the tracer numbers a launch's file with (`-kernel id = %d`, its launch counter).
KERNEL_ID_LINE = re.compile(rb"-kernel id = [0-9]+\r?")
# A header line longer than this is no tracer's: the header is taken to end there.
LONGEST_HEADER_LINE = 64 * 1024


class Reuse(msgspec.Struct, frozen=True, gc=False, kw_only=True):
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


def launches(kernelslist: Iterable[str], chunk: Chunk | None = None) -> Iterator[tuple[int, str]]:
    """The launches (uid, kernel file) a plan of the sim, or of `chunk` of it, looks at: from
    its warm-up's first to its last."""
    first, last = (1, None) if chunk is None else (chunk.first - chunk.warmup, chunk.last)
    uid = 0
    for line in kernelslist:
        if not is_kernel(line):
            continue
        uid += 1
        if last is not None and uid > last:
            return
        if uid >= first:
            yield uid, line.strip()


def plan(kernelslist: Iterable[str], digests: Mapping[str, str], chunk: Chunk | None = None) -> Reuse | None:
    """The reuse of a trace whose `kernelslist.g` has these lines, its kernel files having
    these launch digests by path, in a sim run whole or in `chunk` of it (whose warm-up
    launches are all simulated, and whose own launches reuse only each other's results); None
    when no launch repeats a kernel often enough to be reused."""
    first, measured = (1, 1) if chunk is None else (chunk.first - chunk.warmup, chunk.first)
    seen: dict[str, list[int]] = {}  # a launch digest: the launches of it simulated
    sources: list[int] = []
    for uid, path in launches(kernelslist, chunk):
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


def launch_digest(content: Iterable[bytes]) -> str:
    """The launch digest of a kernel file whose decompressed content comes in these pieces:
    sha256 over it all but the `-kernel id = N` lines of its header (the lines before the
    first that is neither blank nor `-key = value`, as `tracefiles` reads a header). Only the
    header is cut into lines; the rest is hashed as it comes."""
    digest = hashlib.sha256()
    header: bytes | None = b""  # the header's unfinished last line; None once it is over
    for piece in content:
        if header is None:
            digest.update(piece)
            continue
        header = _hash_header(digest, header + piece)
    if header and not KERNEL_ID_LINE.fullmatch(header):
        digest.update(header)  # a file that is all header, its last line without a newline
    return digest.hexdigest()


def _hash_header(digest: hashlib._Hash, text: bytes) -> bytes | None:
    """Hash the header lines `text` finishes but its kernel id ones, and the content after
    the header; the header's unfinished last line, or None if the header is over."""
    start = 0
    while (end := text.find(b"\n", start)) >= 0:
        line = text[start : end + 1]
        if (line.strip() and not line.startswith(b"-")) or end - start > LONGEST_HEADER_LINE:
            break
        if not KERNEL_ID_LINE.fullmatch(line, 0, len(line) - 1):
            digest.update(line)
        start = end + 1
    else:
        if len(text) - start <= LONGEST_HEADER_LINE:
            return text[start:]
    digest.update(memoryview(text)[start:])
    return None


def ranges(uids: Iterable[int]) -> str:
    """Launches as runs, `1-3, 5`."""
    runs: list[list[int]] = []
    for uid in uids:
        if runs and runs[-1][1] == uid - 1:
            runs[-1][1] = uid
        else:
            runs.append([uid, uid])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
