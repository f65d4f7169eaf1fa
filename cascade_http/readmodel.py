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
from starlette.exceptions import HTTPException
from starlette.responses import StreamingResponse

from cascade_http.read_only import RETRY_AFTER_S
from cascade_http.service import Cascade

T = TypeVar("T")


def _with_cursor(c: Cascade, query: Callable[..., T], args: tuple[Any, ...]) -> T:
    with c.reader() as con:
        return query(con, *args)


async def read(c: Cascade, query: Callable[..., T], *args: Any, limiter: anyio.CapacityLimiter | None = None) -> T:
    """`query(cursor, *args)`, run in a worker thread (one `limiter` lets run, if given).

    While the read model is rebuilt, reads go to the old one, which may lack a table or column
    this version reads: such a read is answered once the rebuild is done."""
    try:
        return await anyio.to_thread.run_sync(_with_cursor, c, query, args, limiter=limiter)
    except (duckdb.CatalogException, duckdb.BinderException) as err:
        if c.read_model.rebuild is None:
            raise
        detail = f"the read model is being rebuilt from the event log, and the old one cannot answer this ({str(err).splitlines()[0]}); try again later"
        raise HTTPException(503, detail, headers={"Retry-After": str(RETRY_AFTER_S)}) from err


def _chunks(c: Cascade, chunks: Callable[..., Iterator[bytes]], args: tuple[Any, ...]) -> Iterator[bytes]:
    with c.reader() as con:
        yield from chunks(con, *args)


def attachment(filename: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{filename}"'}


def streamed(
    c: Cascade, chunks: Callable[..., Iterator[bytes]], *args: Any, media_type: str, filename: str | None = None
) -> StreamingResponse:
    """A response whose body is what `chunks(cursor, *args)` yields, read as it is sent."""
    headers = attachment(filename) if filename is not None else None
    return StreamingResponse(_chunks(c, chunks, args), media_type=media_type, headers=headers)
