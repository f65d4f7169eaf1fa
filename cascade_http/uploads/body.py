"""The request body as a stream of tar bytes: counted against the size limit, and decoded as
its Content-Type says, with the decoding (the CPU-heavy part) in worker threads so the event
loop keeps serving other requests."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

import anyio

from cascade_core.traces import Compression
from cascade_http.uploads.inflate import Inflater

# Body chunks are gathered to this size before a thread decodes them: fewer thread hops.
BLOCK = 256 * 1024


class TooLarge(Exception):
    def __init__(self, received: int, limit: int) -> None:
        super().__init__(f"received {received} bytes, over the limit of {limit}")
        self.received = received
        self.limit = limit


class Limited:
    """The body's chunks until more than `limit` bytes came, then `TooLarge`; `received`
    counts the bytes so far."""

    def __init__(self, chunks: AsyncIterable[bytes], limit: int) -> None:
        self.chunks = chunks
        self.limit = limit
        self.received = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.chunks:
            self.received += len(chunk)
            if self.received > self.limit:
                raise TooLarge(self.received, self.limit)
            if chunk:
                yield chunk


async def decoded(chunks: AsyncIterable[bytes], compression: Compression) -> AsyncIterator[bytes]:
    """The tar stream inside the body; raises `TraceError` if the compression is broken."""
    if compression == "tar":
        async for chunk in chunks:
            yield chunk
        return
    inflater = Inflater(compression, "the upload")
    async for block in _gathered(chunks, BLOCK):
        pieces = inflater.feed(block)
        while (piece := await anyio.to_thread.run_sync(next, pieces, None)) is not None:
            yield piece
    inflater.finish()


async def _gathered(chunks: AsyncIterable[bytes], size: int) -> AsyncIterator[bytes]:
    parts: list[bytes] = []
    held = 0
    async for chunk in chunks:
        parts.append(chunk)
        held += len(chunk)
        if held >= size:
            yield b"".join(parts)
            parts, held = [], 0
    if parts:
        yield b"".join(parts)
