from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cascade_core import events as ev
from cascade_nats import subjects
from cascade_nats.store import DIRECT_WINDOW, ConcurrencyError, EventStore, EventTooLarge, Stored, StoreError, Unread
from cascade_nats.subject_tokens import from_subject_token, subject_token
from tests import poison

pytestmark = pytest.mark.anyio
AT = datetime(2026, 11, 8, 8, 59, 3, tzinfo=UTC)


def deleted(trace_id: str = "demo", event_id: str | None = None) -> ev.TraceDeleted:
    return ev.TraceDeleted(id=event_id or uuid.uuid4().hex, at=AT, trace_id=trace_id)


def heartbeat(i: int, sim_id: str = "sim-1") -> ev.SimHeartbeat:
    return ev.SimHeartbeat(
        id=f"hb-{sim_id}-{i}", at=AT, run_id="run-1", sim_id=sim_id, attempt=1, kernels_done=i, current_kernel=None, latest=ev.SimMetrics()
    )


async def test_same_event_twice_is_stored_once(store: EventStore) -> None:
    event = deleted(event_id="e-1")
    first = await store.append(event)
    again = await store.append(event)
    assert first == again == 1
    assert await store.last_seq() == 1


async def test_retry_of_a_decided_append_is_not_a_conflict(store: EventStore) -> None:
    event = deleted(event_id="e-1")
    assert await store.append(event, expected_last_subject_seq=0) == 1
    assert await store.append(event, expected_last_subject_seq=0) == 1
    assert await store.last_seq() == 1


async def test_stale_expected_sequence_loses(store: EventStore) -> None:
    await store.append(deleted(), expected_last_subject_seq=0)
    with pytest.raises(ConcurrencyError):
        await store.append(deleted(), expected_last_subject_seq=0)
    assert await store.append(deleted(), expected_last_subject_seq=1) == 2


async def test_concurrent_appends_with_same_expectation_exactly_one_wins(store: EventStore) -> None:
    # A known race in some server versions: run it many times.
    for round_ in range(150):
        trace_id = f"race-{round_}"
        results = await asyncio.gather(
            *(store.append(deleted(trace_id), expected_last_subject_seq=0) for _ in range(4)), return_exceptions=True
        )
        wins = [r for r in results if isinstance(r, int)]
        losses = [r for r in results if isinstance(r, ConcurrencyError)]
        assert len(wins) == 1 and len(losses) == 3, results
        history = [item async for item in store.read(subjects.trace(trace_id))]
        assert len(history) == 1


async def test_facts_are_stored_in_order_and_a_resend_adds_nothing(store: EventStore) -> None:
    facts = [heartbeat(i) for i in range(5000)]
    seqs = await store.append_facts(facts)
    assert seqs == list(range(1, 5001))
    assert await store.append_facts(facts) == seqs
    stored = [item.event for item in [x async for x in store.read()]]
    assert stored == facts


async def test_history_of_one_aggregate_is_one_subject_filter(store: EventStore) -> None:
    await store.append_facts([heartbeat(i, "sim-a") for i in range(3)] + [heartbeat(i, "sim-b") for i in range(2)])
    await store.append(deleted("sim-a"))  # a trace whose id looks like a sim's
    sim_a = [x.event async for x in store.read(subjects.sim_history("sim-a"))]
    assert [e.id for e in sim_a] == ["hb-sim-a-0", "hb-sim-a-1", "hb-sim-a-2"]
    run = [x async for x in store.read(subjects.run_history("run-1"))]
    assert len(run) == 5
    assert [x async for x in store.read(subjects.run_history("run-none"))] == []


async def test_messages_are_read_at_the_sequences_asked_in_the_order_asked(store: EventStore) -> None:
    # Logs of up to 400 KB, so that answers span socket reads; more than a window of them.
    beats = [msgspec.structs.replace(heartbeat(i), first_line_seq=1, log=f"line {i}\n" * (i % 40 * 1000)) for i in range(3 * DIRECT_WINDOW)]
    seqs = await store.append_facts(beats)
    asked = [*seqs[::-3], seqs[0], seqs[0], *seqs[1::2]]  # backwards, twice the same, forwards
    frames = [frame async for frame in store.at(asked)]
    assert [seq for seq, _, _ in frames] == asked
    assert [subjects.decode(subject, payload) for _, subject, payload in frames] == [beats[seqs.index(seq)] for seq in asked]
    assert [frame async for frame in store.at([])] == []
    with pytest.raises(StoreError, match=f"no message at sequence {seqs[-1] + 1}"):
        [frame async for frame in store.at([seqs[0], seqs[-1] + 1])]


async def test_events_over_the_size_limit_are_refused(store: EventStore) -> None:
    big = ev.SimHeartbeat(
        id="big", at=AT, run_id="r", sim_id="s", attempt=1, kernels_done=0, current_kernel=None, latest=ev.SimMetrics(), log="x" * 600_000
    )
    with pytest.raises(EventTooLarge):
        await store.append(big)
    assert await store.last_seq() == 0


@given(st.text(min_size=1, max_size=40))
def test_subject_tokens_round_trip_and_never_split(value: str) -> None:
    token = subject_token(value)
    assert from_subject_token(token) == value
    assert all(c.isascii() and (c.isalnum() or c in "-_") for c in token)


def test_ids_cannot_forge_another_aggregates_subject() -> None:
    assert subjects.trace("a.b") != subjects.trace("a_2Eb")
    assert subjects.trace("x.>") == "cascade.ev.trace.x_2E_3E"
    assert subjects.sim_history("*") == "cascade.ev.run.*.sim._2A.>"


async def test_a_message_that_is_no_event_is_passed_over_and_shown_in_a_history(store: EventStore) -> None:
    cancel = ev.RunCancelRequested(id="c-1", at=AT, run_id="run-1")
    first = await store.append(cancel)
    (bad,) = await poison.publish(store.nc, [poison.not_json("run-1")])
    assert [item.seq async for item in store.read(subjects.run("run-1"))] == [first]
    history = [item async for item in store.history(subjects.run("run-1"))]
    assert history[0] == Stored(first, subjects.run("run-1"), cancel)
    assert isinstance(history[1], Unread) and history[1].seq == bad and history[1].error.startswith("not an event")

    # The newest event, and the sequence an append after the bad message must expect.
    assert await store.last_on(subjects.run("run-1")) == Stored(bad, subjects.run("run-1"), cancel)
    again = ev.RunCancelRequested(id="c-2", at=AT, run_id="run-1")
    assert await store.append(again, expected_last_subject_seq=bad) == bad + 1

    await poison.publish(store.nc, [poison.not_json("run-2")])
    with pytest.raises(ev.Unreadable):
        await store.last_on(subjects.run("run-2"))
