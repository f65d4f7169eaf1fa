"""Request bodies under their size limits: read as streams and counted, so one over its limit
is refused without being held whole, and one whose Content-Length says so before any of it
is read. Trace uploads stream on through `cascade_http.uploads`; a JSON body is gathered (it
is small by then) and decoded into its Struct as FastAPI would (`validation.py`)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterable, AsyncIterator
from typing import TypeVar

from starlette.requests import Request

from cascade_core.limits import too_large
from cascade_core.refusals import TooLarge
from cascade_http.responses import ApiError
from cascade_http.service import cascade
from cascade_http.validation import UnparsableBody, decode_body

T = TypeVar("T")


class Limited:
    """The body's chunks until more than `limit` bytes came, then `TooLarge(detail)`;
    `received` counts the bytes so far."""

    def __init__(self, chunks: AsyncIterable[bytes], limit: int, detail: str) -> None:
        self.chunks = chunks
        self.limit = limit
        self.detail = detail
        self.received = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.chunks:
            self.received += len(chunk)
            if self.received > self.limit:
                raise TooLarge(self.detail)
            if chunk:
                yield chunk


def content_length(request: Request) -> int | None:
    value = request.headers.get("content-length")
    return int(value) if value is not None and value.isdigit() else None


async def json_body(request: Request, type_: type[T]) -> T:
    """The body decoded into `type_`: 413 over CASCADE_MAX_BODY_BYTES, 400 if unparsable,
    422 with FastAPI's issues if invalid."""
    limit = cascade(request).settings.max_body_bytes
    over = functools.partial(too_large, "body", limit, "CASCADE_MAX_BODY_BYTES")
    declared = content_length(request)
    if declared is not None and declared > limit:
        raise TooLarge(over(declared))
    raw = b"".join([chunk async for chunk in Limited(request.stream(), limit, over())])
    try:
        return decode_body(raw, type_)
    except UnparsableBody:
        raise ApiError(400, "There was an error parsing the body") from None
