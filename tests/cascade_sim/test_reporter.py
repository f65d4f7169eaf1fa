"""The reporter: a sim's events wait for NATS, in bounded number, and a batch sent again after a
failure stores only what the failed try did not."""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
import pytest

from cascade_core import events as ev
from cascade_core.models import SimMetrics
from cascade_nats.store import EventStore
from cascade_nats.supervise import Supervision
from cascade_sim import reporter as reporter_module
from cascade_sim.reporter import Reporter

pytestmark = pytest.mark.anyio


def beat(reporter: Reporter) -> ev.SimHeartbeat:
    return ev.SimHeartbeat(
        id=reporter.next_id(), at=datetime.now(UTC), run_id="run-1", sim_id="sim-1", attempt=1, kernels_done=0, current_kernel=None,
        latest=SimMetrics(),
    )


def launched(reporter: Reporter) -> ev.SimLaunched:
    return ev.SimLaunched(
        id=reporter.next_id(), at=datetime.now(UTC), run_id="run-1", sim_id="sim-1", attempt=1, launcher_ref="1", host="h", config_digests={}
    )


async def test_a_batch_sent_again_leaves_out_what_the_failed_try_stored(store: EventStore) -> None:
    reporter = Reporter(store, "sim-1", 1, Supervision())
    batch: list[ev.Event] = [launched(reporter), beat(reporter), beat(reporter), beat(reporter), launched(reporter), beat(reporter)]
    # The failed try got the first three out (on the sims' data and life subjects) before the
    # connection went; they are older than any duplicate window could know.
    await store.append_facts(batch[:3])
    assert [e.id for e in await reporter._unsent(batch)] == ["sim-1.1.4", "sim-1.1.5", "sim-1.1.6"]
    assert await reporter._unsent([]) == []
    other = Reporter(store, "sim-1", 2, Supervision())
    assert [e.id for e in await other._unsent([beat(other)])] == ["sim-1.2.1"], "another attempt's events are not its own"


async def test_the_output_waits_for_room_once_enough_events_wait(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reporter_module, "MAX_QUEUED", 3)
    reporter = Reporter(store, "sim-1", 1, Supervision())
    reporter._queue = [beat(reporter) for _ in range(3)]  # as emitted while nothing is sent
    assert reporter.full
    with anyio.move_on_after(0.2) as waited:
        await reporter.room()
    assert waited.cancelled_caught, "no room while they wait"
    reporter.emit(beat(reporter))  # the sender takes what waits
    with anyio.fail_after(10):
        await reporter.room()
        await reporter.flush()
    assert not reporter.full
