"""Where each event lives in the one `CASCADE` stream.

    cascade.ev.trace.<trace>                  a trace's history
    cascade.ev.run.<run>.run                  a run's own events (created, cancel requested)
    cascade.ev.run.<run>.sim.<sim>.queued     the launch request runners consume
    cascade.ev.run.<run>.sim.<sim>.life       claimed, launched, finished
    cascade.ev.run.<run>.sim.<sim>.data       heartbeats, kernel results, stored files

so a run's whole history is `cascade.ev.run.<run>.>` and a sim's is
`cascade.ev.run.*.sim.<sim>.>`: one subject filter each.
"""

from __future__ import annotations

from cascade_core import events as ev
from cascade_core.ids import subject_token

STREAM = "CASCADE"
PREFIX = "cascade.ev"
ALL = f"{PREFIX}.>"
RUN_EVENTS = f"{PREFIX}.run.*.run"
LAUNCH_REQUESTS = f"{PREFIX}.run.*.sim.*.queued"
LAUNCH_CONSUMER = "launch"  # the durable consumer all runners share
RUNNERS_BUCKET = "cascade_runners"  # key-value bucket where runners announce themselves


def trace(trace_id: str) -> str:
    return f"{PREFIX}.trace.{subject_token(trace_id)}"


def run(run_id: str) -> str:
    return f"{PREFIX}.run.{subject_token(run_id)}.run"


def run_history(run_id: str) -> str:
    return f"{PREFIX}.run.{subject_token(run_id)}.>"


def sim(run_id: str, sim_id: str, kind: str) -> str:
    return f"{PREFIX}.run.{subject_token(run_id)}.sim.{subject_token(sim_id)}.{kind}"


def sim_history(sim_id: str) -> str:
    return f"{PREFIX}.run.*.sim.{subject_token(sim_id)}.>"


def of(event: ev.Event) -> str:
    """The subject an event is appended to."""
    match event:
        case ev.SimQueued():
            return sim(event.run_id, event.sim_id, "queued")
        case ev.SimClaimed() | ev.SimLaunched() | ev.SimFinished():
            return sim(event.run_id, event.sim_id, "life")
        case ev.SimEvent():
            return sim(event.run_id, event.sim_id, "data")
        case ev.RunCreated() | ev.RunCancelRequested():
            return run(event.run_id)
        case _:
            return trace(event.trace_id)  # type: ignore[attr-defined]
