"""Reading the DuckDB read model from request handlers.

DuckDB calls block, so each read runs in a worker thread on a cursor of its own, closed when
the read is done. Streamed answers are sync generators, which Starlette's StreamingResponse
advances in worker threads chunk by chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anyio
import duckdb
from starlette.responses import StreamingResponse

from cascade_http.service import Cascade

T = TypeVar("T")


def _with_cursor(c: Cascade, query: Callable[..., T], args: tuple[Any, ...]) -> T:
    con = c.reader()
    try:
        return query(con, *args)
    finally:
        con.close()


async def read(c: Cascade, query: Callable[..., T], *args: Any) -> T:
    """`query(cursor, *args)`, run in a worker thread."""
    return await anyio.to_thread.run_sync(_with_cursor, c, query, args)


def _chunks(c: Cascade, chunks: Callable[..., Iterator[bytes]], args: tuple[Any, ...]) -> Iterator[bytes]:
    con: duckdb.DuckDBPyConnection = c.reader()
    try:
        yield from chunks(con, *args)
    finally:
        con.close()


def attachment(filename: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{filename}"'}


def streamed(
    c: Cascade, chunks: Callable[..., Iterator[bytes]], *args: Any, media_type: str, filename: str | None = None
) -> StreamingResponse:
    """A response whose body is what `chunks(cursor, *args)` yields, read as it is sent."""
    headers = attachment(filename) if filename is not None else None
    return StreamingResponse(_chunks(c, chunks, args), media_type=media_type, headers=headers)
