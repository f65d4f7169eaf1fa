"""Request bodies under their size limits: read as streams and counted, so one over its limit
is refused without being held whole, and one whose Content-Length says so before any of it
is read. Trace uploads stream on through `cascade_app.uploads`; a JSON body is gathered (it
is small by then) and decoded into its Struct as FastAPI would (`validation.py`)."""

from __future__ import annotations

from typing import TypeVar

from starlette.requests import Request

from cascade_core.limits import Limited, too_large
from cascade_core.refusals import TooLarge
from cascade_http.responses import ApiError
from cascade_http.state import cascade
from cascade_http.validation import UnparsableBody, decode_body

T = TypeVar("T")


def content_length(request: Request) -> int | None:
    value = request.headers.get("content-length")
    return int(value) if value is not None and value.isdigit() else None


async def gathered(request: Request, limit: int, what: str, setting: str) -> bytes:
    """The whole body, refused (`TooLarge`) once over `limit` bytes: at once if its
    Content-Length says so, else as soon as more came. `what` and `setting` name the body and
    its limit to the one refused."""
    declared = content_length(request)
    if declared is not None and declared > limit:
        raise TooLarge(too_large(what, limit, setting, declared))
    return b"".join([piece async for piece in Limited(request.stream(), limit, too_large(what, limit, setting))])


async def json_body(request: Request, type_: type[T]) -> T:
    """The body decoded into `type_`: 413 over CASCADE_MAX_BODY_BYTES, 400 if unparsable,
    422 with FastAPI's issues if invalid."""
    raw = await gathered(request, cascade(request).settings.max_body_bytes, "body", "CASCADE_MAX_BODY_BYTES")
    try:
        return decode_body(raw, type_)
    except UnparsableBody:
        raise ApiError(400, "There was an error parsing the body") from None
