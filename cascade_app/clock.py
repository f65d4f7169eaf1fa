"""What commands take from the world: the time (new ids: `cascade_host.new_ids`)."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)
