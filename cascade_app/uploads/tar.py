"""A tar archive read as it streams in: one entry at a time, its data in pieces.

Stricter than `tarfile`'s stream mode, which takes a damaged header or a missing end for the
end of the archive: here every header must check out, an entry's data must all be there, and
the archive must end with its end-of-archive block, or a `TraceError` says what is wrong.
Headers are decoded by `tarfile.TarInfo.frombuf`; GNU long names and pax extended headers
(long paths, sizes past 8 GiB) apply to the entry that follows them.
"""

from __future__ import annotations

import tarfile
from collections.abc import AsyncIterable, AsyncIterator

import msgspec

from cascade_formats.tracefiles import TraceError

BLOCK = 512
PIECE = 128 * 1024  # the object store's chunk size, so pieces pass through it unsliced
MAX_META = 1 << 20  # a long name or pax header this big belongs to no trace

_ZERO = bytes(BLOCK)
_KINDS = {
    tarfile.REGTYPE: "file",
    tarfile.AREGTYPE: "file",
    tarfile.CONTTYPE: "file",
    tarfile.DIRTYPE: "directory",
    tarfile.SYMTYPE: "symbolic link",
    tarfile.LNKTYPE: "hard link",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "fifo",
    tarfile.GNUTYPE_SPARSE: "sparse file",
}
_NO_DATA = (tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE)
_META = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)


class Entry(msgspec.Struct, frozen=True):
    name: str
    kind: str  # "file", "directory", "symbolic link", ... as said to the uploader
    size: int


class _Bytes:
    """An async byte stream read by count."""

    def __init__(self, body: AsyncIterable[bytes]) -> None:
        self._body = body.__aiter__()
        self._buf = b""
        self._pos = 0

    async def read(self, n: int) -> bytes:
        """`n` bytes, or fewer if the stream ends first."""
        while len(self._buf) - self._pos < n and await self._more():
            pass
        out = self._buf[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    async def some(self, n: int) -> bytes:
        """Between 1 and `n` bytes; empty only at the end of the stream."""
        if self._pos >= len(self._buf) and not await self._more():
            return b""
        out = self._buf[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    async def _more(self) -> bool:
        try:
            received = await anext(self._body)
        except StopAsyncIteration:
            return False
        self._buf = self._buf[self._pos :] + received if self._pos < len(self._buf) else received
        self._pos = 0
        return True


class TarReader:
    def __init__(self, data: AsyncIterable[bytes]) -> None:
        self._stream = _Bytes(data)
        self._entries = 0
        self._last: Entry | None = None
        self._left = 0  # data of the current entry not read yet
        self._padding = 0

    async def next(self) -> Entry | None:
        """The next entry, or None once the end-of-archive block is read."""
        async for _ in self.pieces():
            pass
        await self._skip(self._padding)
        self._padding = 0
        long_name: str | None = None
        pax: dict[str, str] = {}
        while True:
            block = await self._stream.read(BLOCK)
            if len(block) < BLOCK:
                raise self._cut_short()
            if block == _ZERO:
                return None
            info = self._header(block)
            if info.type in _META:
                data = (await self._data(info, limit=MAX_META)).rstrip(b"\0")
                if info.type == tarfile.GNUTYPE_LONGNAME:
                    long_name = data.decode("utf-8", "surrogateescape")
                elif info.type in (tarfile.XHDTYPE, tarfile.SOLARIS_XHDTYPE):
                    pax.update(_pax_records(data, self._where()))
                continue
            kind = _KINDS.get(info.type, f"member of tar type {info.type.decode('latin-1')!r}")
            name = pax.get("path", long_name if long_name is not None else info.name)
            size = _pax_size(pax["size"], self._where()) if "size" in pax else info.size
            if kind == "directory":
                name = name.rstrip("/")
            entry = Entry(name, kind, size)
            self._entries += 1
            self._last = entry
            # As in tarfile: data follows a regular file and any type it does not know.
            self._left = 0 if info.type in _NO_DATA else size
            self._padding = -self._left % BLOCK
            return entry

    async def pieces(self) -> AsyncIterator[bytes]:
        """The data of the entry `next` returned last, in pieces of at most `PIECE` bytes."""
        while self._left:
            piece = await self._stream.some(min(self._left, PIECE))
            if not piece:
                raise self._cut_short()
            self._left -= len(piece)
            yield piece

    async def drain(self) -> None:
        """Read what follows the end-of-archive block (tar pads archives to whole records)."""
        while await self._stream.some(PIECE):
            pass

    def _header(self, block: bytes) -> tarfile.TarInfo:
        try:
            return tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
        except tarfile.HeaderError as error:
            if self._entries == 0:
                hint = ""
                if block.startswith(b"\x1f\x8b"):
                    hint = "; it looks gzip-compressed, so send it with Content-Type application/gzip"
                elif block.startswith(b"\xfd7zXZ\x00"):
                    hint = "; it looks xz-compressed, so send it with Content-Type application/x-xz"
                raise TraceError(f"the upload is not a tar archive: its first 512 bytes are no tar header ({error}){hint}") from None
            raise TraceError(f"the archive is damaged: the tar header {self._where()} is invalid ({error})") from None

    async def _data(self, info: tarfile.TarInfo, *, limit: int) -> bytes:
        if info.size > limit:
            raise TraceError(f"the archive is damaged: an extended tar header {self._where()} claims {info.size} bytes")
        data = await self._stream.read(info.size)
        if len(data) < info.size:
            raise self._cut_short()
        await self._skip(-info.size % BLOCK)
        return data

    async def _skip(self, n: int) -> None:
        while n:
            got = await self._stream.some(min(n, PIECE))
            if not got:
                raise self._cut_short()
            n -= len(got)

    def _where(self) -> str:
        return "at the start" if self._last is None else f"after {self._last.name!r}"

    def _cut_short(self) -> TraceError:
        last = self._last
        if last is None and self._entries == 0:
            return TraceError("the upload is not a tar archive: it ends before its first tar header is complete")
        if self._left and last is not None:
            return TraceError(
                f"the archive is truncated: it ends inside {last.name!r} ({last.size - self._left} of {last.size} bytes present)"
            )
        return TraceError(f"the archive is truncated: it ends {self._where()} without the end-of-archive block")


def _pax_size(value: str, where: str) -> int:
    """A pax size record's value: ASCII digits, at most 20 (10^20 bytes is past any file).
    `int` alone would take other scripts' digits, and fail past 4300 of them."""
    if not (value.isascii() and value.isdigit() and len(value) <= 20):
        raise TraceError(f"the archive is damaged: the pax extended header {where} gives the size {value[:40]!r}")
    return int(value)


def _pax_records(data: bytes, where: str) -> dict[str, str]:
    """`<length> <key>=<value>\\n` records, as POSIX defines pax extended headers."""
    records: dict[str, str] = {}
    pos = 0
    try:
        while pos < len(data):
            space = data.index(b" ", pos)
            length = int(data[pos:space])
            record = data[space + 1 : pos + length]
            if length <= 0 or not record.endswith(b"\n"):
                raise ValueError("bad record length")
            key, _, value = record[:-1].partition(b"=")
            records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
            pos += length
    except ValueError:
        raise TraceError(f"the archive is damaged: the pax extended header {where} is malformed") from None
    return records
