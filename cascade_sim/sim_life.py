"""A sim's life as the log holds it, read by a runner: the last event on the life subject of
the sim (or of its chunk), and from it the sim as a launch request finds it. A runner claims
or gives up on a sim expecting exactly that subject's sequence, so that no other runner moved
it on meanwhile."""

from __future__ import annotations

from cascade_core import events as ev
from cascade_core import sims
from cascade_nats import subjects
from cascade_nats.store import EventStore

LifeEvent = ev.SimClaimed | ev.SimLaunched | ev.SimFinished  # what a sim's life subject holds


async def last_life(store: EventStore, run_id: str, sim_id: str, chunk: int | None = None) -> tuple[int, LifeEvent | None]:
    """The sequence and the event last on the sim's (or its chunk's) life subject (0 and
    None: none yet)."""
    last = await store.last_on(subjects.chunk(run_id, sim_id, "life", chunk))
    if last is None:
        return 0, None
    assert isinstance(last.event, LifeEvent)  # `subjects.decode` lets no other event in
    return last.seq, last.event


async def as_requested(store: EventStore, request: ev.SimQueued) -> tuple[int, sims.SimLife]:
    """The sim (or its chunk) as `request` finds it, awaiting the attempt the request asks
    for, and the sequence its next life event is appended after."""
    seq, last = await last_life(store, request.run_id, request.sim_id, request.chunk)
    return seq, sims.awaiting(sims.latest(request.run_id, request.sim_id, last, request.chunk), request.attempt)
