"""Streamed answers from the DuckDB read model: sync generators over a cursor of their own,
advanced in worker threads piece by piece as the response is sent (single reads are
`cascade_app.reads.read`)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Generator, Iterator, Mapping
from typing import Any, TypeVar

import anyio
from starlette.concurrency import iterate_in_threadpool

from cascade_app.service import Cascade
from cascade_host.heap import give_back_free_memory
from cascade_http.responses import UnbrokenStreamingResponse


T = TypeVar("T")


def _pieces(c: Cascade, pieces: Callable[..., Iterator[T]], args: tuple[Any, ...]) -> Generator[T, None, None]:
    try:
        with c.reader() as con:
            yield from pieces(con, *args)
    finally:
        give_back_free_memory()  # a streamed answer is a whole run's: what it freed, the next read starts without


def pieces_of(c: Cascade, pieces: Callable[..., Iterator[T]], *args: Any) -> AsyncGenerator[T, None]:
    """What `pieces(cursor, *args)` yields, advanced in worker threads and closed in one."""
    return _closed_at_the_end(_pieces(c, pieces, args))


async def _closed_at_the_end(pieces: Generator[T, None, None]) -> AsyncGenerator[T, None]:
    """`pieces` advanced in worker threads, and closed in one however the response ends.
    Starlette leaves a sync generator suspended when its client goes: its cursor, and the
    read transaction that cursor holds open, would last until the garbage collector came,
    by then perhaps after the read model had closed under it."""
    try:
        async for piece in iterate_in_threadpool(pieces):
            yield piece
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(pieces.close)


def attachment(filename: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{filename}"'}


def streamed(
    c: Cascade,
    pieces: Callable[..., Iterator[bytes]],
    *args: Any,
    media_type: str,
    filename: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> UnbrokenStreamingResponse:
    """A response whose body is what `pieces(cursor, *args)` yields, read as it is sent; one
    that fails midway is never taken for a whole one (`UnbrokenStreamingResponse`)."""
    every = {**(attachment(filename) if filename is not None else {}), **(headers or {})}
    return UnbrokenStreamingResponse(pieces_of(c, pieces, *args), media_type=media_type, headers=every or None)
