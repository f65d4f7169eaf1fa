"""Incremental gzip and xz decoding with bounded output.

`Inflater.feed` decodes whatever input it is given and yields the output in pieces of at
most `PIECE` bytes, so a small input that expands enormously (a compression bomb) never sits
in memory whole. It hands the input to the decoder `STEP` bytes at a time and counts them in
`total_in`, so a caller can weigh the output against the input it came from. Concatenated gzip members and xz streams, and the zero padding xz allows
between streams, are read as one stream, as `gzip -d` and `xz -d` do. Errors are
`TraceError`s naming `what` is being decoded, ready to show to the uploader.
"""

from __future__ import annotations

import lzma
import zlib
from collections.abc import Generator, Iterator
from typing import Literal

from cascade_formats.tracefiles import TraceError

PIECE = 1 << 20
STEP = 64 * 1024
# An xz file made with `xz -9` needs 65 MiB to decode; anything asking for more than this is
# not worth the server's memory.
XZ_MEMLIMIT = 128 << 20

Codec = Literal["gzip", "xz"]

_MAGIC = {"gzip": b"\x1f\x8b", "xz": b"\xfd7zXZ\x00"}


class Inflater:
    def __init__(self, codec: Codec, what: str) -> None:
        self.codec = codec
        self.what = what
        self.total_in = 0
        self._decoder: zlib._Decompress | lzma.LZMADecompressor | None = None
        self._between = b""  # input seen after a stream ended, before the next one starts
        self._fed = False
        self._streams = 0

    def feed(self, data: bytes) -> Iterator[bytes]:
        self._fed = self._fed or bool(data)
        for start in range(0, len(data), STEP):
            step = data[start : start + STEP]
            self.total_in += len(step)
            while step:
                if self._decoder is None:
                    step = self._start(step)
                    if self._decoder is None:
                        break
                step = yield from self._decode(step)

    def finish(self) -> None:
        """Raise if the input ended in the middle of a stream, or held none at all."""
        if not self._fed:
            raise TraceError(f"{self.what} is empty: it holds no {self.codec} data")
        if self._decoder is not None or self._between:
            raise TraceError(
                f"{self.what} is truncated: its {self.codec} data ends after {self.total_in} bytes, "
                "before the end of the compressed stream"
            )

    def _start(self, data: bytes) -> bytes:
        """Begin the next stream; zero padding between streams is skipped."""
        data = (self._between + data).lstrip(b"\0")
        self._between = b""
        magic = _MAGIC[self.codec]
        if len(data) < len(magic) and magic.startswith(data):
            self._between = data  # wait for the rest of the magic number
            return b""
        if not data.startswith(magic):
            if not self._streams:
                raise TraceError(f"{self.what} is not {self.codec} data (it does not start with the {self.codec} magic number)")
            raise TraceError(f"{self.what} has data after the end of its {self.codec} stream that is not another stream")
        self._streams += 1
        if self.codec == "gzip":
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        else:
            self._decoder = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=XZ_MEMLIMIT)
        return data

    def _decode(self, data: bytes) -> Generator[bytes, None, bytes]:
        """Decode `data` with the current stream's decoder; returns input left after its end."""
        decoder = self._decoder
        assert decoder is not None
        try:
            while True:
                out = decoder.decompress(data, PIECE)
                if isinstance(decoder, lzma.LZMADecompressor):
                    data = b""
                    more = not decoder.needs_input
                else:
                    data = decoder.unconsumed_tail
                    more = bool(data) or len(out) == PIECE
                if out:
                    yield out
                if decoder.eof:
                    self._decoder = None
                    return decoder.unused_data
                if not more:
                    return b""
        except (zlib.error, lzma.LZMAError) as error:
            raise TraceError(f"{self.what} is not valid {self.codec} data: {_reason(error)}") from None


def _reason(error: Exception) -> str:
    text = str(error)
    if "Memory usage limit" in text:
        return f"decoding it needs more than {XZ_MEMLIMIT >> 20} MiB of memory; recompress it with xz -6 or a lower preset"
    if "Corrupt input" in text or "invalid" in text.lower() or "incorrect" in text.lower():
        return f"{text} (the file is damaged; compress it again from the original)"
    return text
