"""The request body as a stream of tar bytes: decoded as its Content-Type says, with the
decoding (the CPU-heavy part) in worker threads so the event loop keeps serving other
requests, and counted as it comes out, so a small body that expands enormously (a
compression bomb) is refused long before it is stored."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

import anyio

from cascade_app.uploads.inflate import Inflater
from cascade_core.limits import Expansion
from cascade_core.refusals import TooLarge
from cascade_core.traces import Compression

# Body pieces are gathered to this size before a thread decodes them: fewer thread hops.
BLOCK = 256 * 1024


async def decoded(body: AsyncIterable[bytes], compression: Compression, expansion: Expansion) -> AsyncIterator[bytes]:
    """The tar stream inside the body; raises `TraceError` if the compression is broken and
    `TooLarge` once the stream expands past `expansion`."""
    inflater = None if compression == "tar" else Inflater(compression, "the upload")
    expanded = 0
    async for piece in body if inflater is None else _inflated(body, inflater):
        expanded += len(piece)
        # A piece comes from input the decoder was already handed: the ratio is never overstated.
        problem = expansion.problem(expanded, expanded if inflater is None else inflater.total_in)
        if problem is not None:
            raise TooLarge(problem)
        yield piece


async def _inflated(body: AsyncIterable[bytes], inflater: Inflater) -> AsyncIterator[bytes]:
    async for block in _gathered(body, BLOCK):
        pieces = inflater.feed(block)
        while (piece := await anyio.to_thread.run_sync(next, pieces, None)) is not None:
            yield piece
    inflater.finish()


async def _gathered(body: AsyncIterable[bytes], size: int) -> AsyncIterator[bytes]:
    parts: list[bytes] = []
    held = 0
    async for piece in body:
        parts.append(piece)
        held += len(piece)
        if held >= size:
            yield b"".join(parts)
            parts, held = [], 0
    if parts:
        yield b"".join(parts)
