"""Limits on what one request may make the server hold or store, as pure checks. Each
refusal names the setting that sets its limit, so the one refused knows what to ask for."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

import msgspec

from cascade_core.refusals import TooLarge

# Below this many decoded bytes the expansion ratio is not looked at: a small archive is mostly
# tar headers and zero padding, which compress 50-100 fold and cost nothing to take.
RATIO_FLOOR = 16 << 20


def too_large(what: str, limit: int, setting: str, size: int | None = None) -> str:
    """`what` (declared `size` bytes long, if it said) is over `limit` bytes."""
    size_said = "" if size is None else f" {size} bytes,"
    return f"the {what} is{size_said} over this server's limit of {limit} bytes ({setting})"


class Limited:
    """A stream's pieces until more than `limit` bytes came, then `TooLarge(detail)`;
    `received` counts the bytes so far."""

    def __init__(self, pieces: AsyncIterable[bytes], limit: int, detail: str) -> None:
        self.pieces = pieces
        self.limit = limit
        self.detail = detail
        self.received = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self.pieces:
            self.received += len(piece)
            if self.received > self.limit:
                raise TooLarge(self.detail)
            if piece:
                yield piece


class Expansion(msgspec.Struct, frozen=True):
    """How far a compressed upload may expand: to `max_bytes` of tar stream in all, and to
    `max_ratio` times the compressed bytes it came from once past `RATIO_FLOOR`."""

    max_bytes: int
    max_ratio: float

    def problem(self, expanded: int, compressed: int) -> str | None:
        """Why `expanded` bytes decoded from the first `compressed` bytes are too many, or None."""
        if expanded > self.max_bytes:
            return too_large("upload", self.max_bytes, "CASCADE_MAX_EXPANDED_BYTES") + " once decompressed"
        if expanded > RATIO_FLOOR and expanded > self.max_ratio * compressed:
            return (
                f"the upload expands more than {self.max_ratio:g}-fold once decompressed ({expanded} bytes from "
                f"its first {compressed}), over this server's limit of {self.max_ratio:g} (CASCADE_MAX_EXPANSION_RATIO); "
                "send it as a plain tar, or with each kernel file xz-compressed on its own as the tracer writes them"
            )
        return None

    def member_problem(self, name: str, size: int) -> str | None:
        """Why an archive member that says it holds `size` bytes cannot fit, or None."""
        if size > self.max_bytes:
            return (
                f"archive member {name[:200]!r} is {size} bytes, over this server's limit of {self.max_bytes} bytes "
                "for a whole trace once decompressed (CASCADE_MAX_EXPANDED_BYTES)"
            )
        return None
