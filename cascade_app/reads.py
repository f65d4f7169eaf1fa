"""Reading the DuckDB read model, for commands and request handlers alike.

DuckDB calls block, so each read runs in a worker thread on a cursor of its own, closed when
the read is done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import duckdb

from cascade_app.service import Cascade
from cascade_core.refusals import Unavailable

T = TypeVar("T")

RETRY_AFTER_S = 5  # what a request that waits for a rebuild is told to wait


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
        raise Unavailable(detail, retry_after_s=RETRY_AFTER_S) from err
