"""A sim's events on their way to NATS: in order, and the output reader held back only when
NATS falls behind by more than the reporter's bound."""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import UTC, datetime

import pytest

from cascade_core import events as ev
from cascade_core.models import SimMetrics
from cascade_nats import server
from cascade_nats.store import EventStore
from cascade_sim.reporter import MAX_QUEUED_BYTES, Reporter

pytestmark = pytest.mark.anyio


def heartbeat(reporter: Reporter, log: str) -> ev.SimHeartbeat:
    return ev.SimHeartbeat(
        id=reporter.next_id(), at=datetime.now(UTC), run_id="run-1", sim_id="sim-1", attempt=1, kernels_done=0,
        current_kernel=None, latest=SimMetrics(), first_line_seq=1, log=log,
    )


async def test_the_reader_waits_while_nats_is_behind_and_nothing_is_lost(
    nats_server: server.EmbeddedNats, store: EventStore
) -> None:
    reporter = Reporter(store, "sim-1", 1)
    lines = "x" * (MAX_QUEUED_BYTES // 8)
    os.kill(nats_server.process.pid, signal.SIGSTOP)
    try:
        reporter.emit(heartbeat(reporter, lines))
        await asyncio.sleep(0.1)  # the sender takes it, and waits on the stopped server
        for _ in range(8):
            reporter.emit(heartbeat(reporter, lines))
        await asyncio.wait_for(reporter.caught_up(), 1)  # the bound queued: no wait
        reporter.emit(heartbeat(reporter, lines))
        waiting = asyncio.ensure_future(reporter.caught_up())
        await asyncio.sleep(1)
        assert not waiting.done()  # past the bound: the reader waits
    finally:
        os.kill(nats_server.process.pid, signal.SIGCONT)
    await asyncio.wait_for(waiting, 30)
    await reporter.flush()
    stored = [s.event async for s in store.read()]
    assert [e.id for e in stored] == [f"sim-1.1.{n}" for n in range(1, 11)]
