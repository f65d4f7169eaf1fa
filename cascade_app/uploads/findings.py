"""What an upload learns from its files as they stream past, for `trace_contents`:

- the header of every kernel file (`.traceg`, `.traceg.xz`), from its first 64 KiB of text;
- that every `.xz` file decodes to its end with intact checksums, in a worker thread, keeping
  nothing of the decoded text but a kernel file's first 64 KiB;
- the small files at the trace's root that are read whole (kernelslist.g, step_timeline.json,
  real_timing.csv, cascade.json), each up to a cap.

A kernel file's bad header is only kept as an error: it matters only if kernelslist.g names
that file, which may come later in the archive. A damaged `.xz` file ends the upload at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from cascade_app.uploads.inflate import Inflater
from cascade_core import events as ev
from cascade_formats import realtiming
from cascade_formats.timeline import TIMELINE_FILE
from cascade_formats.trace_contents import Received
from cascade_formats.tracefiles import (
    CASCADE_JSON,
    HEADER_PREFIX_BYTES,
    KERNEL_SUFFIXES,
    KERNELSLIST,
    REAL_TIMING,
    KernelHeader,
    TraceError,
    parse_kernel_header,
)

# Files read whole, at the trace's root, and the most of each that is read.
SMALL_FILES = {KERNELSLIST: 64 << 20, TIMELINE_FILE: 64 << 20, REAL_TIMING: realtiming.MAX_BYTES, CASCADE_JSON: 1 << 20}


class Findings:
    def __init__(self) -> None:
        self.headers: dict[str, KernelHeader] = {}
        self.header_errors: dict[str, str] = {}
        self.small: dict[str, bytes] = {}
        self.kernelslists_elsewhere: list[str] = []

    def watch(self, path: str, size: int) -> Watch:
        """Start looking at the file `path` of `size` bytes (a later file of the same path
        replaces an earlier one, as when tar extracts)."""
        self.headers.pop(path, None)
        self.header_errors.pop(path, None)
        self.small.pop(path, None)
        if path.endswith("/" + KERNELSLIST):
            self.kernelslists_elsewhere.append(path)
        cap = SMALL_FILES.get(path)
        if cap is not None and size > cap:
            raise TraceError(
                f"{path} is {size} bytes, more than the {cap >> 20} MiB Cascade reads of it; "
                "leave it out of the trace or make it smaller"
            )
        return Watch(self, path, whole=cap is not None)

    def move_under(self, folder: str) -> None:
        """Every path found so far is really inside `folder` (see `Layout`)."""
        self.headers = {f"{folder}/{p}": h for p, h in self.headers.items()}
        self.header_errors = {f"{folder}/{p}": e for p, e in self.header_errors.items()}
        self.kernelslists_elsewhere = [f"{folder}/{p}" for p in self.kernelslists_elsewhere]
        if KERNELSLIST in self.small:
            self.kernelslists_elsewhere.append(f"{folder}/{KERNELSLIST}")
        self.small = {}  # none of them is at the root any more

    def received(self, files: Sequence[ev.StoredFile]) -> Received:
        return Received(
            files=list(files),
            headers=self.headers,
            header_errors=self.header_errors,
            kernelslist=self.small.get(KERNELSLIST),
            step_timeline=self.small.get(TIMELINE_FILE),
            real_timing=self.small.get(REAL_TIMING),
            cascade_json=self.small.get(CASCADE_JSON),
            kernelslists_elsewhere=self.kernelslists_elsewhere,
        )


class Watch:
    """One file's bytes as they pass on their way to the object store."""

    def __init__(self, findings: Findings, path: str, *, whole: bool) -> None:
        self.findings = findings
        self.path = path
        self.kernel = path.endswith(KERNEL_SUFFIXES)
        self.xz = Inflater("xz", path) if path.endswith(".xz") else None
        self.prefix = bytearray()
        self.whole = bytearray() if whole else None

    async def see(self, piece: bytes) -> None:
        if self.whole is not None:
            self.whole += piece
        if self.xz is not None:
            await anyio.to_thread.run_sync(self._decode, piece)
        elif self.kernel:
            self._keep_prefix(piece)

    def _decode(self, piece: bytes) -> None:
        assert self.xz is not None
        for out in self.xz.feed(piece):
            if self.kernel:
                self._keep_prefix(out)

    def _keep_prefix(self, data: bytes) -> None:
        room = HEADER_PREFIX_BYTES - len(self.prefix)
        if room > 0:
            self.prefix += data[:room]

    def end(self) -> None:
        """The file is complete: check the end of its xz data and record what it says."""
        if self.xz is not None:
            self.xz.finish()
        if self.kernel:
            try:
                self.findings.headers[self.path] = parse_kernel_header(self.prefix.decode("utf-8", "replace"), self.path)
            except TraceError as error:
                self.findings.header_errors[self.path] = str(error)
        if self.whole is not None:
            self.findings.small[self.path] = bytes(self.whole)
