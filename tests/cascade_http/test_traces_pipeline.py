"""The upload pipeline's parts on their own: incremental decoding, the streaming tar reader,
and where archive entries land in the trace."""

from __future__ import annotations

import gzip
import io
import lzma
import tarfile
from collections.abc import AsyncIterator

import pytest

from cascade_app.uploads.inflate import PIECE, Inflater
from cascade_app.uploads.layout import Layout, Placed
from cascade_app.uploads.tar import Entry, TarReader
from cascade_formats.tracefiles import TraceError

pytestmark = pytest.mark.anyio


def inflate(codec: str, data: bytes, step: int = 1000) -> bytes:
    inflater = Inflater(codec, "the upload")  # type: ignore[arg-type]
    out = b"".join(piece for i in range(0, len(data), step) for piece in inflater.feed(data[i : i + step]))
    inflater.finish()
    return out


@pytest.mark.parametrize("codec", ["gzip", "xz"])
def test_concatenated_streams_and_padding_read_as_one(codec: str) -> None:
    pack = gzip.compress if codec == "gzip" else lzma.compress
    padding = b"\0" * 8 if codec == "xz" else b""
    assert inflate(codec, pack(b"first ") + padding + pack(b"second"), step=3) == b"first second"


def test_output_comes_in_bounded_pieces_however_much_one_input_expands() -> None:
    bomb = lzma.compress(bytes(32 << 20), preset=0)  # 32 MiB of zeros in 5 KB
    inflater = Inflater("xz", "bomb.xz")
    sizes = [len(piece) for piece in inflater.feed(bomb)]
    inflater.finish()
    assert max(sizes) <= PIECE and sum(sizes) == 32 << 20


@pytest.mark.parametrize(
    ("codec", "data", "error"),
    [
        ("xz", lzma.compress(b"abc" * 1000)[:-9], "the upload is truncated: its xz data ends after"),
        ("gzip", gzip.compress(b"abc")[:-3], "the upload is truncated"),
        ("gzip", gzip.compress(b"abc") + b"trailing junk", "the upload has data after the end of its gzip stream"),
        ("xz", b"", "the upload is empty"),
        ("xz", b"plain text", "the upload is not xz data"),
    ],
)
def test_broken_compressed_data_is_named(codec: str, data: bytes, error: str) -> None:
    with pytest.raises(TraceError, match="^" + error):
        inflate(codec, data)


async def pieces(data: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


async def entries(archive: bytes, size: int = 7) -> list[tuple[Entry, bytes]]:
    reader = TarReader(pieces(archive, size))
    out = []
    while (entry := await reader.next()) is not None:
        out.append((entry, b"".join([p async for p in reader.pieces()])))
    await reader.drain()
    return out


def archive(fmt: int, files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        info = tarfile.TarInfo("top")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


LONG = "top/" + "very-long-directory-name/" * 8 + "kernel-1.traceg"
FILES = {LONG: b"x" * 1500, "top/kernelslist.g": b"kernel-1.traceg\n", "top/ünïcode.txt": b"", "top/big": bytes(300_000)}


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
async def test_long_names_pax_headers_and_tiny_pieces(fmt: int) -> None:
    got = await entries(archive(fmt, FILES))
    assert [(e.name, e.kind, e.size) for e, _ in got] == [("top", "directory", 0)] + [(n, "file", len(d)) for n, d in FILES.items()]
    assert [data for _, data in got[1:]] == list(FILES.values())


async def test_entries_may_be_skipped_unread() -> None:
    reader = TarReader(pieces(archive(tarfile.PAX_FORMAT, FILES), 4096))
    names = []
    while (entry := await reader.next()) is not None:
        names.append(entry.name)
    assert names == ["top", *FILES]


async def test_a_damaged_header_is_an_error_not_the_end() -> None:
    data = bytearray(archive(tarfile.GNU_FORMAT, {"a": b"1", "b": b"2"}))
    data[1536 + 10] ^= 0x55  # inside b's header: the folder's, a's header and a's data come first
    with pytest.raises(TraceError, match="the archive is damaged: the tar header after 'a' is invalid"):
        await entries(bytes(data))


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([("kernelslist.g", "file"), ("configs", "directory"), ("configs/a", "file")], ["kernelslist.g", "configs", "configs/a"]),
        ([("demo", "directory"), ("demo/kernelslist.g", "file"), ("demo/sub/x", "file")], [None, "kernelslist.g", "sub/x"]),
        ([("./", "directory"), ("./demo/kernelslist.g", "file")], [None, "kernelslist.g"]),
        ([("./", "directory"), ("./kernelslist.g", "file")], [None, "kernelslist.g"]),
    ],
)
def test_layout_strips_one_top_folder(steps: list[tuple[str, str]], expected: list[str | None]) -> None:
    layout = Layout()
    assert [layout.place(name, kind).path for name, kind in steps] == expected


def test_layout_says_when_the_top_folder_guess_was_wrong() -> None:
    layout = Layout()
    assert layout.place("configs/", "directory") == Placed(None)
    assert layout.place("configs/a.config", "file") == Placed("a.config")
    assert layout.place("kernelslist.g", "file") == Placed("kernelslist.g", moved_under="configs")
    assert layout.place("configs/b.config", "file") == Placed("configs/b.config")


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/abs", "a\\b", "bad\nname", "bad\udcffname"])
def test_layout_refuses_names_that_leave_the_trace(name: str) -> None:
    with pytest.raises(TraceError, match="is not allowed"):
        Layout().place(name, "file")
