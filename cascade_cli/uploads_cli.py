"""`cascade trace upload DIR|FILE`: a local trace directory streamed to the server as a tar, or
an archive of one (`.tar`, `.tar.gz`, `.tar.xz`) streamed as it is.

The tar is made on the fly, file by file in 1 MiB reads, with the files at the archive's
root; its exact size is known before the first byte goes out, so it is sent with a
Content-Length (and the server can refuse an oversized upload at once) and the progress bar
on stderr shows bytes sent of the total. Symbolic links are followed: the server takes
regular files only. Kernel files already xz-compressed stay as they are.
"""

from __future__ import annotations

import os
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

import msgspec

from cascade_app.config import ConfigError
from cascade_cli.client import ApiClient, SendInterrupted
from cascade_api.models import Trace
from cascade_host import new_ids

READ_SIZE = 1 << 20
POLL_S = 0.5


class TarPlan(msgspec.Struct, frozen=True):
    """What the tar of a directory will hold: each file's header, and the total size."""

    files: list[tuple[Path, bytes, int]]  # source, tar header, size
    total: int


def plan(directory: Path) -> TarPlan:
    files: list[tuple[Path, bytes, int]] = []
    total = 2 * tarfile.BLOCKSIZE  # the end-of-archive blocks
    for root, dirs, names in os.walk(directory, followlinks=True):
        dirs.sort()
        for name in sorted(names):
            source = Path(root, name)
            if not source.is_file():
                raise ConfigError(f"{source}: not a regular file (a trace holds only files and directories)")
            info = tarfile.TarInfo(source.relative_to(directory).as_posix())
            info.size = source.stat().st_size
            info.mtime = int(source.stat().st_mtime)
            info.mode = 0o644
            header = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
            files.append((source, header, info.size))
            total += len(header) + info.size + -info.size % tarfile.BLOCKSIZE
    if not files:
        raise ConfigError(f"{directory}: no files to upload")
    return TarPlan(files, total)


def tar_stream(tar: TarPlan) -> Iterator[bytes]:
    for source, header, size in tar.files:
        yield header
        yield from file_pieces(source, size)
        if pad := -size % tarfile.BLOCKSIZE:
            yield bytes(pad)
    yield bytes(2 * tarfile.BLOCKSIZE)


def file_pieces(source: Path, size: int) -> Iterator[bytes]:
    """The first `size` bytes of `source`, a megabyte at a time: what a Content-Length of
    `size` promised, or an error if the file has fewer by now."""
    left = size
    with source.open("rb") as f:
        while left:
            data = f.read(min(READ_SIZE, left))
            if not data:
                raise ConfigError(f"{source}: shrank while it was being uploaded")
            left -= len(data)
            yield data


class Progress:
    """`sent / total  percent  rate` on one line of a terminal, redrawn a few times a second."""

    def __init__(self, total: int, out: TextIO = sys.stderr) -> None:
        self.total = total
        self.out = out
        self.sent = 0
        self.started = self.drawn = time.monotonic()

    def counted(self, pieces: Iterator[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            yield piece
            self.sent += len(piece)
            if time.monotonic() - self.drawn >= 0.2:
                self.draw()
        self.draw(end="\n")

    def draw(self, end: str = "") -> None:
        self.drawn = time.monotonic()
        if not self.out.isatty() and not end:
            return
        rate = self.sent / max(self.drawn - self.started, 1e-6)
        percent = 100 * self.sent / self.total if self.total else 100.0
        print(f"\r{size_text(self.sent)} / {size_text(self.total)}  {percent:5.1f}%  {size_text(rate)}/s   ", end=end, file=self.out, flush=True)


def size_text(n: float) -> str:
    return f"{n / (1 << 20):,.1f} MiB" if n >= 1 << 20 else f"{n / 1024:,.1f} KiB"


# An archive is sent as it is, its type told by its name's ending.
ARCHIVE_TYPES = {".tar": "application/x-tar", ".tgz": "application/gzip", ".gz": "application/gzip", ".txz": "application/x-xz", ".xz": "application/x-xz"}


def send(client: ApiClient, source: Path, trace_id: str | None, out: TextIO = sys.stderr) -> Trace:
    """Stream a trace directory (as a tar made on the fly) or an archive of one (as it is) to
    the server, with the progress bar on `out`; the trace once it is ready or failed."""
    if source.is_dir():
        tar = plan(source)
        total, media_type, pieces = tar.total, "application/x-tar", tar_stream(tar)
    elif source.is_file() and source.suffix in ARCHIVE_TYPES:
        total, media_type = source.stat().st_size, ARCHIVE_TYPES[source.suffix]
        pieces = file_pieces(source, total)
    else:
        raise ConfigError(f"{source}: neither a directory nor an archive ({', '.join(ARCHIVE_TYPES)})")
    progress = Progress(total, out)
    trace_id = trace_id or new_ids.trace_id()  # chosen here, so the trace can be asked for if the answer is lost
    path = f"/api/traces?id={quote(trace_id)}"
    try:
        raw = client.send_stream("POST", path, progress.counted(pieces), total, {"Content-Type": media_type})
    except SendInterrupted as interrupted:
        # The server ends an upload at the first bad file, while the body is still going out.
        try:
            raw = client.get(f"/api/traces/{quote(trace_id)}")
        except ConfigError:
            raise interrupted from None
    trace = msgspec.json.decode(raw, type=Trace)
    if trace.state in ("uploading", "processing"):
        print(f"trace {trace.id}: {trace.state}", flush=True)
    while trace.state in ("uploading", "processing"):
        time.sleep(POLL_S)
        trace = msgspec.json.decode(client.get(f"/api/traces/{quote(trace.id)}"), type=Trace)
    return trace

