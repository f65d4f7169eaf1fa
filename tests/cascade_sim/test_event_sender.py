"""The event sender: a sim's events wait for NATS, in bounded number, and a batch sent again after a
failure stores only what the failed try did not."""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import UTC, datetime

import anyio
import msgspec
import pytest

from cascade_core import events as ev
from cascade_core import packed_stats
from cascade_nats import server, subjects
from cascade_nats.store import EventStore
from cascade_nats.supervise import Supervision
from cascade_sim import event_sender as event_sender_module
from cascade_sim.event_sender import MAX_QUEUED_BYTES, EventSender

pytestmark = pytest.mark.anyio


def beat(sender: EventSender) -> ev.SimHeartbeat:
    return ev.SimHeartbeat(
        id=sender.next_id(), at=datetime.now(UTC), run_id="run-1", sim_id="sim-1", attempt=1, kernels_done=0, current_kernel=None,
        latest=ev.SimMetrics(),
    )


def launched(sender: EventSender) -> ev.SimLaunched:
    return ev.SimLaunched(
        id=sender.next_id(), at=datetime.now(UTC), run_id="run-1", sim_id="sim-1", attempt=1, launcher_ref="1", host="h", config_digests={}
    )


async def test_a_batch_sent_again_leaves_out_what_the_failed_try_stored(store: EventStore) -> None:
    sender = EventSender(store=store, sim_id="sim-1", attempt=1, supervision=Supervision())
    batch: list[ev.Event] = [launched(sender), beat(sender), beat(sender), beat(sender), launched(sender), beat(sender)]
    # The failed try got the first three out (on the sims' data and life subjects) before the
    # connection went; they are older than any duplicate window could know.
    await store.append_facts(batch[:3])
    assert [e.id for e in await sender._unsent(batch)] == ["sim-1.1.4", "sim-1.1.5", "sim-1.1.6"]
    assert await sender._unsent([]) == []
    other = EventSender(store=store, sim_id="sim-1", attempt=2, supervision=Supervision())
    assert [e.id for e in await other._unsent([beat(other)])] == ["sim-1.2.1"], "another attempt's events are not its own"


async def test_the_output_waits_for_room_once_enough_events_wait(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_sender_module, "MAX_QUEUED", 3)
    sender = EventSender(store=store, sim_id="sim-1", attempt=1, supervision=Supervision())
    sender._queue = [beat(sender) for _ in range(3)]  # as emitted while nothing is sent
    assert sender.full
    with anyio.move_on_after(0.2) as waited:
        await sender.room()
    assert waited.cancelled_caught, "no room while they wait"
    sender.emit(beat(sender))  # the sender takes what waits
    with anyio.fail_after(10):
        await sender.room()
        await sender.flush()
    assert not sender.full


async def test_the_reader_waits_while_nats_is_behind_by_more_than_the_bytes_bound_and_nothing_is_lost(
    nats_server: server.EmbeddedNats, store: EventStore
) -> None:
    sender = EventSender(store=store, sim_id="sim-1", attempt=1, supervision=Supervision())
    lines = "x" * (MAX_QUEUED_BYTES // 8)

    def logged() -> ev.SimHeartbeat:
        return msgspec.structs.replace(beat(sender), log=lines)

    os.kill(nats_server.process.pid, signal.SIGSTOP)
    try:
        sender.emit(logged())
        await asyncio.sleep(0.1)  # the sender takes it, and waits on the stopped server
        for _ in range(8):
            sender.emit(logged())
        await asyncio.wait_for(sender.room(), 1)  # the bound queued: no wait
        sender.emit(logged())
        waiting = asyncio.ensure_future(sender.room())
        await asyncio.sleep(1)
        assert not waiting.done()  # past the bound: the reader waits
    finally:
        os.kill(nats_server.process.pid, signal.SIGCONT)
    await asyncio.wait_for(waiting, 30)
    await sender.flush()
    stored = [s.event async for s in store.read()]
    assert [e.id for e in stored] == [f"sim-1.1.{n}" for n in range(1, 11)]


def result(sender: EventSender, stats: dict[str, float | str]) -> ev.KernelFinished:
    return ev.KernelFinished(
        id=sender.next_id(), at=datetime.now(UTC), run_id="run-1", sim_id=sender.prefix.split(".")[0], attempt=int(sender.prefix.split(".")[1]),
        kernel_index=0, uid=1, name="k", gpu_sim_cycle=1, gpu_sim_insn=1, gpu_ipc=1.0, sim_time_ns=1.0,
        stats=packed_stats.from_mapping(stats),
    )


async def test_a_set_of_stat_names_is_stored_once_a_runner_before_the_first_result_that_names_it(store: EventStore) -> None:
    stored: set[str] = set()  # a runner's, shared by its senders
    one = EventSender(store=store, sim_id="sim-1", attempt=1, supervision=Supervision(), names_stored=stored)
    two = EventSender(store=store, sim_id="sim-2", attempt=1, supervision=Supervision(), names_stored=stored)
    for sender in (one, two, one):
        sender.emit(result(sender, {"kernel_name": "k", "a": 1.0, "b": "none"}))
        await sender.flush()
    one.emit(result(one, {"kernel_name": "k", "c": 2.0}))
    await one.flush()
    log = [s.event async for s in store.read()]
    defined = [e for e in log if isinstance(e, ev.StatNamesDefined)]
    results = [e for e in log if isinstance(e, ev.KernelFinished)]
    assert [packed_stats.names_in(d.names) for d in defined] == [("kernel_name", "a", "b"), ("kernel_name", "c")]
    assert [r.stats.names_digest for r in results if r.stats] == [defined[0].digest] * 3 + [defined[1].digest]
    assert all(r.stats is not None and r.stats.names == "" for r in results), "results carry the digest alone"
    assert log.index(defined[1]) < log.index(results[3]), "a set is stored before the result that names it"
    # Another runner (or this one started again) knows of none: it sends the set again, under
    # the same id, which the duplicate window drops (past it, a second alike is harmless).
    again = EventSender(store=store, sim_id="sim-3", attempt=1, supervision=Supervision())
    again.emit(result(again, {"kernel_name": "k", "a": 3.0, "b": "none"}))
    await again.flush()
    assert again.names_stored == {defined[0].digest}
    assert [s.event async for s in store.read(subjects.stat_names(defined[0].digest))] == [defined[0]]
