"""Which unfinished sims wait for a runner, and which need someone to act: decided from what
the read model says of a sim, the runners that announced themselves lately, and the time.
Pure, so the API, the queue depth and the tests say the same.

A sim is held by a live runner when that runner claimed its current attempt or lists it as
running. One that no live runner holds is waiting (the queue depth counts these); it needs
attention when it was never taken and no live runner has its GPU config, once it has
waited `UNTAKEN_AFTER_S`; or when the runner that took it is gone and the sim has been
silent for a whole lease, so no one is keeping its request either.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from cascade_core import sims
from cascade_core.runners import Runner
from cascade_core.sims import FINISHED, SIM_STATES

UNFINISHED = frozenset(SIM_STATES) - FINISHED
# Longer than a runner's announcement period, so a runner that just started has said what
# it can run; short enough that an operator is told before wondering.
UNTAKEN_AFTER_S = 10.0


class Watch(msgspec.Struct, frozen=True):
    """What attention is judged against: the live runners, now, and the runners' lease."""

    runners: list[Runner]
    now: datetime
    lease_s: float


class Seen(msgspec.Struct, frozen=True, kw_only=True):
    """What the read model says of a sim."""

    id: str
    state: str
    gpu_config: str
    created_at: datetime
    runner_id: str | None  # the runner that claimed the current attempt; None before any claim
    last_heard: datetime | None  # its last heartbeat, else its launch


def held(sim: Seen, runners: Sequence[Runner]) -> bool:
    # A split sim's chunks are listed each on its own (`sims.chunk_name`).
    return any(r.id == sim.runner_id or any(sims.names_sim(name, sim.id) for name in r.running) for r in runners)


def waiting(sims: Sequence[Seen], runners: Sequence[Runner]) -> int:
    """How many of `sims` wait for a runner: unfinished, and held by no live runner."""
    return sum(1 for s in sims if s.state in UNFINISHED and not held(s, runners))


def attention(sim: Seen, watch: Watch) -> str | None:
    """Why `sim` may never finish unless someone acts, or None."""
    if sim.state not in UNFINISHED or held(sim, watch.runners):
        return None
    capable = any(sim.gpu_config in r.configs for r in watch.runners)
    lacking = f"no live runner has GPU config {sim.gpu_config}"
    if sim.runner_id is None:
        waited = (watch.now - sim.created_at).total_seconds()
        if capable or waited < UNTAKEN_AFTER_S:
            return None  # queued for a runner that can run it
        return f"no runner has taken this for {waited:.0f} s; {lacking}"
    silent = None if sim.last_heard is None else (watch.now - sim.last_heard).total_seconds()
    if silent is not None and silent < watch.lease_s:
        return None  # its lease may still run: the runner may only be slow to announce itself
    lost = f"runner {sim.runner_id} lost" + ("" if silent is None else f": silent for {silent:.0f} s")
    return f"{lost}; {lacking} to take over" if not capable else lost
