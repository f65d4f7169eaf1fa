"""Streamed answers from the DuckDB read model: sync generators over a cursor of their own,
which Starlette's StreamingResponse advances in worker threads piece by piece (single reads
are `cascade_app.reads.read`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cascade_app.service import Cascade
from cascade_http.responses import UnbrokenStreamingResponse


def _pieces(c: Cascade, pieces: Callable[..., Iterator[bytes]], args: tuple[Any, ...]) -> Iterator[bytes]:
    with c.reader() as con:
        yield from pieces(con, *args)


def attachment(filename: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{filename}"'}


def streamed(
    c: Cascade, pieces: Callable[..., Iterator[bytes]], *args: Any, media_type: str, filename: str | None = None
) -> UnbrokenStreamingResponse:
    """A response whose body is what `pieces(cursor, *args)` yields, read as it is sent; one
    that fails midway is never taken for a whole one (`UnbrokenStreamingResponse`)."""
    headers = attachment(filename) if filename is not None else None
    return UnbrokenStreamingResponse(_pieces(c, pieces, args), media_type=media_type, headers=headers)
