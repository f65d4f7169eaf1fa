"""Request bodies under their size limits: read as streams and counted, so one over its limit
is refused without being held whole, and one whose Content-Length says so before any of it
is read."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

from starlette.requests import Request


class TooLarge(Exception):
    """Over a limit; `detail` says which, for the one refused."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


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
