"""A run as the domain holds it: its entries, its sims counted by state, and its own state,
which follows from theirs (`run_state`); `evolve` is the one place an event changes it.

Pure: the run and an event in, the run out (`run` itself when nothing changed). A sim's
change of state reaches its run as `SimMoved`, which the sim's own evolve tells apart
(`cascade_core/sim.py`): the run counts its sims, it does not hold them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

import msgspec

from cascade_core import events as ev
from cascade_core.sims import FINISHED, SIM_STATES


RunState = Literal["active", "succeeded", "failed", "cancelled"]


class Run(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    id: str
    trace_id: str
    created_at: datetime
    state: str
    entries: list[ev.ConfigCount]  # in request order
    sim_counts: dict[str, int]  # state -> count, in the order of `sims.SIM_STATES`
    sample: bool
    kernels_total: int
    cut_short: int = 0  # its sims that succeeded without simulating every launch (`sim.Sim.cut_short`)
    name: str | None = None  # as created
    tags: list[str] = []


def run_state(counts: Mapping[str, int]) -> str:
    """A run's state from its sims' per-state counts: active while any of its sims is
    unfinished, then cancelled if any was cancelled, else failed if any failed, else succeeded."""
    if any(counts.get(s, 0) for s in SIM_STATES if s not in FINISHED):
        return "active"
    for state in ("cancelled", "failed"):
        if counts.get(state, 0):
            return state
    return "succeeded"


class SimMoved(msgspec.Struct, frozen=True):
    """One of the run's sims went from state `was` to `now`; `cut_short`, to a success that
    did not simulate every launch (a finished sim moves again only by a retry of a failure)."""

    was: str
    now: str
    cut_short: bool = False


def new(e: ev.RunCreated) -> Run:
    """A run as created: its sims all pending."""
    counts, state = _counted({"pending": len(e.sims)} if e.sims else {})
    return Run(
        id=e.run_id, trace_id=e.trace_id, created_at=e.at, state=state, entries=list(e.entries), sim_counts=counts, sample=e.sample,
        kernels_total=e.kernels_total, name=e.name, tags=list(e.tags),
    )


def evolve(run: Run, event: ev.RunEntriesAdded | SimMoved) -> Run:
    match event:
        case ev.RunEntriesAdded():
            if event.run_id != run.id:
                return run
            counts, state = _counted({**run.sim_counts, "pending": run.sim_counts.get("pending", 0) + len(event.sims)})
            return msgspec.structs.replace(run, entries=[*run.entries, *event.entries], sim_counts=counts, state=state)
        case SimMoved():
            if event.was == event.now:
                return run
            moved = dict(run.sim_counts)
            moved[event.was] -= 1
            moved[event.now] = moved.get(event.now, 0) + 1
            counts, state = _counted(moved)
            return msgspec.structs.replace(run, sim_counts=counts, state=state, cut_short=run.cut_short + event.cut_short)


def _counted(counts: dict[str, int]) -> tuple[dict[str, int], str]:
    """A run's counts of its sims by state, those at none left out, and the state they give it."""
    return {s: counts[s] for s in SIM_STATES if counts.get(s)}, run_state(counts)
