"""The one conflict rule, on a real event store: a command that loses a race is decided
again on what won, and only what it decided last is stored."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from starlette.testclient import TestClient

from cascade_app.conflicts import Decision, decided, seq_of
from cascade_core import events as ev
from cascade_core.refusals import Conflict
from cascade_nats import subjects
from tests.cascade_http.conftest import service

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def started(event_id: str) -> ev.TraceUploadStarted:
    return ev.TraceUploadStarted(id=event_id, at=AT, trace_id="raced", content_type="application/x-tar")


def test_a_command_that_loses_a_race_is_decided_again_on_what_won(client: TestClient) -> None:
    c = service(client)
    seen: list[int] = []

    async def decide() -> Decision[int]:
        last = await c.store.last_on(subjects.trace("raced"))
        seen.append(seq_of(last))
        if len(seen) == 1:  # another writer comes first, after this try read the subject
            await c.store.append(started("theirs"), expected_last_subject_seq=seq_of(last))
        return Decision([started(f"ours.{len(seen)}.a"), started(f"ours.{len(seen)}.b")], seq_of(last), len(seen))

    async def run() -> tuple[int, list[str]]:
        outcome = await decided(c, decide)
        return outcome, [item.event.id async for item in c.store.read(subjects.trace("raced"))]

    outcome, stored = client.portal.call(run)  # type: ignore[union-attr]
    assert (outcome, stored) == (2, ["theirs", "ours.2.a", "ours.2.b"])
    assert seen[0] == 0 and seen[1] > 0
    assert c.projector.applied >= seen[1] + 2  # waited until the read model shows the last one


def test_a_decision_that_refuses_on_what_won_ends_the_command(client: TestClient) -> None:
    c = service(client)

    async def decide() -> Decision[None]:
        last = await c.store.last_on(subjects.trace("raced"))
        if last is not None:
            raise Conflict("trace raced already exists")
        await c.store.append(started("theirs"), expected_last_subject_seq=0)
        return Decision([started("ours")], 0, None)

    with pytest.raises(Conflict, match="^trace raced already exists$"):
        client.portal.call(decided, c, decide)  # type: ignore[union-attr]
