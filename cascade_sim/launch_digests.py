"""Launch digests (`reuse.launch_digest`) of the kernel files of a trace on the runner's disk,
for a reusing sim's plan: each file read as the simulator reads it (`.xz` decompressed), a
piece at a time, and once per runner process, its digest kept by the file's place in the
trace cache (whose directories are named by what the trace holds).

Computed here rather than at upload: only reusing sims pay for it, on the files the runner
has fetched for them anyway, and traces stored before need nothing new.
"""

from __future__ import annotations

import logging
import lzma
from collections.abc import Iterable
from pathlib import Path

from cascade_core import reuse

log = logging.getLogger("cascade.runner")

PIECE = 1 << 20


class LaunchDigests:
    def __init__(self) -> None:
        self._known: dict[Path, str] = {}

    def of(self, trace_dir: Path, paths: Iterable[str]) -> dict[str, str]:
        """The launch digests of the kernel files at these paths in `trace_dir`, by path; a
        file that cannot be read has none (the simulator says what is wrong with it)."""
        digests = {}
        for path in set(paths):
            file = trace_dir / path
            if file not in self._known:
                try:
                    self._known[file] = file_digest(file)
                except (OSError, EOFError, lzma.LZMAError) as err:
                    log.warning("%s: no launch digest, its launches are not reused (%s)", file, err)
                    continue
            digests[path] = self._known[file]
        return digests


def file_digest(file: Path) -> str:
    with lzma.open(file) if file.name.endswith(".xz") else file.open("rb") as content:
        return reuse.launch_digest(iter(lambda: content.read(PIECE), b""))
