"""Responses whose bodies msgspec encodes: the Structs in `cascade_api.models` go out as is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import msgspec
from starlette.exceptions import HTTPException
from starlette.responses import Response, StreamingResponse
from starlette.types import Send

from cascade_api.models import ErrorDetail
from cascade_core.refusals import Conflict, Invalid, NoSpace, NotFound, Refused, TimedOut, TooLarge, Unanswerable, Unavailable, UnsupportedMedia

ENCODER = msgspec.json.Encoder()


class MsgspecResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return ENCODER.encode(content)


class ClosingStreamingResponse(StreamingResponse):
    """A streamed body whose generator is closed however the response ends: finished, its
    client gone (the send fails) or the request cancelled. Starlette leaves it suspended for
    the garbage collector, and one reading NATS holds a connection open until then."""

    async def stream_response(self, send: Send) -> None:
        try:
            await self.send_body(send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()

    async def send_body(self, send: Send) -> None:
        await super().stream_response(send)


class UnbrokenStreamingResponse(ClosingStreamingResponse):
    """A streamed body whose failure is never taken for its end. Its status is sent with its
    first piece, so a failure before that is answered with an error status as any route's is;
    one after it raises on, and the server closes the connection without the body's end (the
    last, empty chunk), which every HTTP/1.1 client reports as a body cut short: a download
    that looks whole is whole. Starlette's own sends the status before reading the body."""

    async def send_body(self, send: Send) -> None:
        pieces = aiter(self.body_iterator)
        first = await anext(pieces, b"")
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": _bytes(first, self.charset), "more_body": True})
        async for piece in pieces:
            await send({"type": "http.response.body", "body": _bytes(piece, self.charset), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _bytes(piece: str | bytes | memoryview, charset: str) -> bytes | memoryview:
    return piece.encode(charset) if isinstance(piece, str) else piece


def download(content: Any, filename: str) -> MsgspecResponse:
    return MsgspecResponse(content, headers={"Content-Disposition": f'attachment; filename="{filename}"'})


class ApiError(HTTPException):
    """An error answered as `{"detail": <text>}` with its status."""

    def __init__(self, status_code: int, detail: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status_code, detail, headers)


def not_found(detail: str) -> ApiError:
    return ApiError(404, detail)


# What went wrong, as the status that says it over HTTP (the detail is the core's own text).
STATUSES: dict[type[Refused], int] = {
    Unanswerable: 400,
    NotFound: 404,
    TimedOut: 408,
    Conflict: 409,
    TooLarge: 413,
    UnsupportedMedia: 415,
    Invalid: 422,
    Unavailable: 503,
    NoSpace: 507,
}


def refusal(refused: Refused) -> MsgspecResponse:
    """The answer to a refused request: `{"detail": ...}` with the status of its reason."""
    status = next(STATUSES[kind] for kind in type(refused).__mro__ if kind in STATUSES)
    headers = {"Retry-After": str(refused.retry_after_s)} if isinstance(refused, Unavailable) else None
    return MsgspecResponse(ErrorDetail(refused.detail), status_code=status, headers=headers)
