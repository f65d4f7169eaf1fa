"""A sim's events written by the test itself, as a runner would write them, but as many and
as large as a scenario needs: a chatty simulator's heartbeats, each with many log lines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import nats

from cascade_core import events as ev
from cascade_nats.store import EventStore

RUNNER = "test-runner"


def _at() -> datetime:
    return datetime.now(UTC)


async def claim(nats_url: str, run_id: str, sim_id: str) -> None:
    """Attempt 1 of the sim, claimed and launched."""
    common = {"run_id": run_id, "sim_id": sim_id, "attempt": 1}
    await _append(nats_url, [
        ev.SimClaimed(id=f"{sim_id}.1.claim", at=_at(), runner_id=RUNNER, host="test", **common),  # type: ignore[arg-type]
        ev.SimLaunched(id=f"{sim_id}.1.1", at=_at(), launcher_ref="1", host="test", config_digests={}, **common),  # type: ignore[arg-type]
    ])


async def heartbeats(nats_url: str, run_id: str, sim_id: str, *, first: int, count: int, name_bytes: int) -> None:
    """`count` heartbeats of attempt 1, numbered from `first`, each naming a kernel of its
    own `name_bytes` long: rows that are big in memory but replace each other in the read
    model, so that what the server holds for its clients is all that grows."""
    now = _at()
    beats: list[ev.Event] = [
        ev.SimHeartbeat(
            id=f"{sim_id}.1.beat{n}", at=now + timedelta(microseconds=n - first), run_id=run_id, sim_id=sim_id, attempt=1, kernels_done=0,
            current_kernel=f"{n:08d}".ljust(name_bytes, "k"), latest=ev.SimMetrics(),
        )
        for n in range(first, first + count)
    ]
    for start in range(0, len(beats), 256):
        await _append(nats_url, beats[start : start + 256])


async def finish(nats_url: str, run_id: str, sim_id: str) -> None:
    await _append(nats_url, [
        ev.SimFinished(id=f"{sim_id}.1.end", at=_at(), run_id=run_id, sim_id=sim_id, attempt=1, outcome="failed", error="the test's own sim"),
    ])


async def _append(nats_url: str, events: list[ev.Event]) -> None:
    nc = await nats.connect(nats_url)
    store = EventStore(nc)
    try:
        await store.append_facts(events, timeout=60)
    finally:
        await store.close()
        await nc.close()
