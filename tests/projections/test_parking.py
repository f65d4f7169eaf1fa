from __future__ import annotations

from pathlib import Path
from typing import get_args

import anyio
import msgspec
import pytest

from cascade_core import events as ev
from cascade_nats import subjects
from cascade_nats.store import EventStore
from cascade_nats.supervise import Supervision, supervise
from projections import parking
from projections import projector as projector_module
from projections.fold import Rows, Unfoldable, fold
from projections.projector import Projector, apply, connect
from projections.replay import replay
from tests import poison
from tests.projections.histories import T0, lifecycle
from tests.projections.test_fold import dump

pytestmark = pytest.mark.anyio


class Crash(Exception):
    pass


async def poisoned_log(store: EventStore) -> tuple[list[tuple[int, ev.Event]], dict[int, poison.Poison]]:
    """The lifecycle history with a message of every kind that is parked among its events,
    each once what it names exists; returns the good events and the bad messages by sequence."""
    history = lifecycle()
    bad_after = {
        0: [poison.not_json("run-a"), poison.unknown_type("demo")],
        3: [poison.too_big("demo"), poison.naive_time("demo")],
        4: [poison.misplaced("run-a", "demo"), poison.newer_version("run-a", "sim-a0")],
        6: [poison.foreign_sim("run-x", "sim-a0")],
    }
    good: list[tuple[int, ev.Event]] = []
    bad: dict[int, poison.Poison] = {}
    for i, event in enumerate(history):
        good.append((await store.append(event), event))
        for p, seq in zip(bad_after.get(i, []), await poison.publish(store.nc, bad_after.get(i, []))):
            bad[seq] = p
    return good, bad


def parked_rows(con) -> list[tuple[int, str, str | None, str]]:  # type: ignore[no-untyped-def]
    return con.execute("SELECT seq, subject, event_type, error FROM parked ORDER BY seq").fetchall()  # type: ignore[no-any-return]


def assert_parked(con, bad: dict[int, poison.Poison]) -> None:  # type: ignore[no-untyped-def]
    rows = parked_rows(con)
    assert [r[0] for r in rows] == sorted(bad)
    for seq, subject, event_type, error in rows:
        assert (subject, event_type) == (bad[seq].subject, bad[seq].event_type), bad[seq]
        assert bad[seq].error in error, (bad[seq], error)


@pytest.mark.parametrize("batch", [projector_module.MAX_BATCH, 3, 1])
async def test_every_good_event_is_applied_and_every_bad_one_parked(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    good, bad = await poisoned_log(store)
    monkeypatch.setattr(projector_module, "MAX_BATCH", batch)
    con = connect(tmp_path / "live.duckdb")
    projector = Projector(store, con)
    await projector.catch_up()
    assert projector.applied == await store.last_seq()
    assert_parked(con, bad)

    # What the good events alone make, at the same sequences.
    alone = connect(tmp_path / "alone.duckdb")
    apply(alone, good)  # type: ignore[arg-type]
    assert dump(con, with_checkpoint=False) | {"parked": []} == dump(alone, with_checkpoint=False)

    monkeypatch.setattr(projector_module, "MAX_BATCH", projector_module.MAX_BATCH if batch != projector_module.MAX_BATCH else 2)
    await replay(store, tmp_path / "fresh.duckdb")
    assert dump(connect(tmp_path / "fresh.duckdb")) == dump(con), "other batches park the same"


async def test_a_failure_that_is_not_the_events_parks_nothing(store: EventStore, tmp_path: Path) -> None:
    good, bad = await poisoned_log(store)
    failures: list[str] = []

    def fail_twice(where: str) -> None:
        if where == "before_commit" and len(failures) < 2:
            failures.append(where)
            raise Crash(where)

    con = connect(tmp_path / "live.duckdb")
    projector = Projector(store, con, fault=fail_twice)
    async with anyio.create_task_group() as tg:
        tg.start_soon(supervise, "projector", projector.run, Supervision())  # as the service runs it
        await projector.wait_for(await store.last_seq(), timeout=20)
        tg.cancel_scope.cancel()
    assert len(failures) == 2
    assert_parked(con, bad)


class TraceReadyV0(ev.TraceEvent, frozen=True, tag="trace.ready.v0"):
    """A trace.ready as an older Cascade could have stored it: the arch by family name."""

    family: str
    kernel_count: int
    bytes: int
    suggested_sim_config: str | None
    has_real_timing: bool
    has_step_timeline: bool


def trace_ready_v1(old: TraceReadyV0) -> ev.TraceReady:
    fields = msgspec.structs.asdict(old)
    arch = {"pascal": "sm_61", "volta": "sm_70"}[fields.pop("family")]  # KeyError for a family it never knew
    return ev.TraceReady(trace_gpu_arch=arch, **fields)


@pytest.mark.parametrize("batch", [projector_module.MAX_BATCH, 1])
async def test_an_old_version_is_upcast_and_applied_and_one_that_fails_to_upcast_is_parked(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    # The codec every reader shares (`ev.decode`, `ev.decode_all`, `subjects.decode`), as a
    # version of Cascade that still reads trace.ready.v0 would build it.
    monkeypatch.setattr(ev, "_CODEC", ev.Codec(get_args(ev.AnyEvent), {TraceReadyV0: trace_ready_v1}))
    monkeypatch.setattr(projector_module, "MAX_BATCH", batch)
    history = lifecycle()
    ready = history[3]
    assert isinstance(ready, ev.TraceReady) and ready.trace_gpu_arch == "sm_61"
    v0 = TraceReadyV0(
        id=ready.id, at=ready.at, trace_id=ready.trace_id, family="pascal", kernel_count=ready.kernel_count, bytes=ready.bytes,
        suggested_sim_config=ready.suggested_sim_config, has_real_timing=ready.has_real_timing, has_step_timeline=ready.has_step_timeline,
    )
    unknown = msgspec.structs.replace(v0, id="p-hopper", family="hopper")
    where = subjects.trace(ready.trace_id)
    good: list[tuple[int, ev.Event]] = []
    for i, event in enumerate(history):
        if i != 3:
            good.append((await store.append(event), event))
            continue
        seq, parked_seq = await poison.publish(
            store.nc,
            [
                poison.Poison(name=name, subject=where, data=ev.encode(e), error="", event_type=None)
                for name, e in (("v0", v0), ("fails to upcast", unknown))
            ],
        )
        good.append((seq, ready))

    con = connect(tmp_path / "live.duckdb")
    await Projector(store, con).catch_up()
    assert parked_rows(con) == [(parked_seq, where, "trace.ready.v0", "cannot upcast trace.ready.v0: 'hopper'")]
    alone = connect(tmp_path / "alone.duckdb")
    apply(alone, good)  # type: ignore[arg-type]
    assert dump(con, with_checkpoint=False) | {"parked": []} == dump(alone, with_checkpoint=False), "v0 applied as the v1 it upcasts to"
    await replay(store, tmp_path / "fresh.duckdb")
    assert dump(connect(tmp_path / "fresh.duckdb")) == dump(con)


def test_the_fold_refuses_an_event_type_it_does_not_know() -> None:
    class Stranger(ev.Event, frozen=True, tag="stranger.v1"):
        pass

    stranger = Stranger(id="s", at=T0)
    with pytest.raises(Unfoldable) as caught:
        fold(Rows(), [(7, stranger)])  # type: ignore[list-item]
    assert caught.value.seq == 7
    with pytest.raises(AssertionError):
        subjects.of(stranger)


def test_what_a_message_that_is_no_event_is_parked_for() -> None:
    cases = {
        b"\xff": ("not an event: JSON is malformed", None),
        b'{"type": "sim.heartbeat.v9", "id": "x"}': ("unknown event type 'sim.heartbeat.v9' (written by a newer version?)", "sim.heartbeat.v9"),
        b'{"type": "run.cancel_requested.v1", "id": "x", "at": "2026-12-01T09:00:00Z"}': (
            "not a valid run.cancel_requested.v1: Object missing required field `run_id`",
            "run.cancel_requested.v1",
        ),
        b"[]": ("not an event: Expected `object`, got `array`", None),
    }
    for data, (error, event_type) in cases.items():
        with pytest.raises(ev.Unreadable) as caught:
            ev.decode(data)
        assert caught.value.error.startswith(error) and caught.value.event_type == event_type
        with pytest.raises(ev.Unreadable):
            ev.decode_all([ev.encode(lifecycle()[0]), data])

    cancel = ev.RunCancelRequested(id="c", at=T0, run_id="run-a")
    assert subjects.decode(subjects.run("run-a").encode(), ev.encode(cancel)) == cancel
    with pytest.raises(ev.Unreadable, match="belongs on cascade.ev.run.run-a.run, not on cascade.ev.run.run-b.run"):
        subjects.decode(subjects.run("run-b").encode(), ev.encode(cancel))
    nameless = msgspec.json.encode({"type": "run.cancel_requested.v1", "id": "c", "at": T0, "run_id": ""})
    with pytest.raises(ev.Unreadable, match="has no subject"):
        subjects.decode(b"cascade.ev.run.x.run", nameless)


def test_a_sequence_missing_from_the_whole_stream_is_parked_as_lost_naming_what_was_around_it() -> None:
    frames = [(4, b"cascade.ev.run.r.run", b"{}"), (7, b"cascade.ev.run.r.sim.s.data", b"{}")]
    rows = parking.lost(frames, after=2)
    assert [(r.seq, r.subject, r.event_type) for r in rows] == [(3, "", None), (5, "", None), (6, "", None)]
    assert rows[0].error == f"{parking.LOST}; stored after the messages before and before cascade.ev.run.r.run (sequence 4)"
    assert rows[1].error == rows[2].error == (
        f"{parking.LOST}; stored after cascade.ev.run.r.run (sequence 4) and before cascade.ev.run.r.sim.s.data (sequence 7)"
    )
    tail = parking.lost(frames, after=3, up_to=9)
    assert [r.seq for r in tail] == [5, 6, 8, 9] and tail[-1].error.endswith("before the end of what the stream delivers")
    assert parking.lost(frames[:1], after=3) == [] and parking.lost([], after=3, up_to=3) == []
    # Read from the whole stream, a batch parks its gaps beside what is no event.
    batch = parking.sort_out([(5, b"cascade.ev.x", b"not json"), (7, b"cascade.ev.y", b"nor this")], after=4)
    assert [(p.seq, p.subject) for p in batch.parked] == [(5, "cascade.ev.x"), (6, ""), (7, "cascade.ev.y")]
    assert parking.sort_out([(5, b"cascade.ev.x", b"not json"), (7, b"cascade.ev.y", b"nor this")]).parked[1].seq == 7, "a filtered read has gaps"


async def test_a_result_naming_a_set_of_stat_names_no_event_gave_is_parked_and_the_rest_applied(store: EventStore, tmp_path: Path) -> None:
    history = [e for e in lifecycle() if not isinstance(e, ev.StatNamesDefined)]  # as if the sets' events were lost
    seqs = [await store.append(e) for e in history]
    con = connect(tmp_path / "live.duckdb")
    projector = Projector(store, con)
    await projector.catch_up()
    by_digest = {seq for seq, e in zip(seqs, history) if isinstance(e, ev.KernelFinished) and e.stats is not None and not e.stats.names}
    rows = parked_rows(con)
    assert rows and {r[0] for r in rows} <= by_digest
    assert all(r[2] == "sim.kernel_finished.v2" and "names the set of names" in r[3] and "which no event before it defined" in r[3] for r in rows)
    assert projector.applied == seqs[-1]
    (kept,) = con.execute("SELECT count(*) FROM kernels").fetchone()  # type: ignore[misc]
    assert kept > 0, "the results that hold their names are applied"
