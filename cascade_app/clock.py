"""What commands take from the world: the time, and ids of their own."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


def event_id() -> str:
    return str(uuid.uuid4())
