"""Every id Cascade makes, the one place that draws them at random.

Decisions never make ids: the edge draws one here and passes it in (a command's `event_id`,
an `Upload`'s `upload_id`, an `Attachment`'s `timing_id`), so the same decision with the same
input gives the same events. Each id keeps the form the log and the API already hold.
"""

from __future__ import annotations

import secrets
import uuid


def event_id() -> str:
    """An event's id (also its `Nats-Msg-Id`), when nothing it derives from names it."""
    return str(uuid.uuid4())


def trace_id() -> str:
    """A trace's id when its uploader chose none."""
    return f"trace-{secrets.token_hex(6)}"


def upload_id() -> str:
    """One upload attempt's: its events' ids derive from it."""
    return secrets.token_hex(8)


def timing_id() -> str:
    """A real timing file attached to a trace: its events' ids derive from it."""
    return f"timing-{secrets.token_hex(6)}"


def trace_deleted_id() -> str:
    """The id of a trace's `trace.deleted.v1`."""
    return f"delete.{secrets.token_hex(8)}"


def run_id() -> str:
    return f"run-{secrets.token_hex(6)}"


def campaign_id() -> str:
    return f"campaign-{secrets.token_hex(6)}"


def sim_id() -> str:
    return f"sim-{secrets.token_hex(6)}"


def runner_id(host: str) -> str:
    """A runner's id when its launcher gave it none: its host and a few random digits."""
    return f"{host}-{secrets.token_hex(3)}"


def idempotency_key() -> str:
    """What a client sends as `Idempotency-Key`, so a request it sends again is done once."""
    return uuid.uuid4().hex


def inbox(kind: str) -> str:
    """A NATS inbox of one's own for replies, `kind` saying whose (`cascade`, `pipe`)."""
    return f"_INBOX.{kind}.{secrets.token_hex(8)}"


def object_chunks_id() -> str:
    """The `nuid` an object store entry's chunks are published under (`$O.<bucket>.C.<nuid>`)."""
    return secrets.token_hex(11)
