"""Where each event lives in the one `CASCADE` stream.

    cascade.ev.trace.<trace>                        a trace's history
    cascade.ev.run.<run>.run                        a run's own events (created, cancel and retry requested, entries added)
    cascade.ev.run.<run>.sim.<sim>.queued.<config>  the launch request runners with the config consume
    cascade.ev.run.<run>.sim.<sim>.life             claimed, launched, finished
    cascade.ev.run.<run>.sim.<sim>.data             heartbeats, kernel results, stored files
    cascade.ev.run.<run>.sim.<sim>.life.<c>         the same of chunk c of a split sim (its
    cascade.ev.run.<run>.sim.<sim>.data.<c>         launch requests are all on `queued.<config>`)
    cascade.ev.runner.<runner>                      what ended a runner (its Slurm job's end)
    cascade.ev.config.<name>                        a config variant's definition
    cascade.ev.stat_names.<digest>                  a set of stats maps' names, which kernel results name by digest

so a run's whole history is `cascade.ev.run.<run>.>` and a sim's is
`cascade.ev.run.*.sim.<sim>.>`: one subject filter each. Launch requests from before
placement by config are on `cascade.ev.run.<run>.sim.<sim>.queued`, which the `launch`
consumer every runner took from delivers (`SimQueued.by_config`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never, cast

from cascade_core import events as ev
from cascade_nats.subject_tokens import subject_token

STREAM = "CASCADE"
PREFIX = "cascade.ev"
ALL = f"{PREFIX}.>"
RUN_EVENTS = f"{PREFIX}.run.*.run"
# Launch requests from before placement by config, and the durable consumer every runner took
# them from; runners drain it, and delete it once nothing is left (`runner.py`).
LEGACY_LAUNCH_REQUESTS = f"{PREFIX}.run.*.sim.*.queued"
LEGACY_LAUNCH_CONSUMER = "launch"
RUNNERS_BUCKET = "cascade_runners"  # key-value bucket where runners announce themselves


def trace(trace_id: str) -> str:
    return f"{PREFIX}.trace.{subject_token(trace_id)}"


def run(run_id: str) -> str:
    return f"{PREFIX}.run.{subject_token(run_id)}.run"


def run_history(run_id: str) -> str:
    return f"{PREFIX}.run.{subject_token(run_id)}.>"


def sim(run_id: str, sim_id: str, kind: str) -> str:
    return f"{PREFIX}.run.{subject_token(run_id)}.sim.{subject_token(sim_id)}.{kind}"


def chunk(run_id: str, sim_id: str, kind: str, chunk: int | None) -> str:
    """A sim's `kind` subject, or its chunk's."""
    return sim(run_id, sim_id, kind if chunk is None else f"{kind}.{chunk}")


def launch_requests(gpu_config: str) -> str:
    """Where the launch requests of `gpu_config` are, of every run."""
    return f"{PREFIX}.run.*.sim.*.queued.{subject_token(gpu_config)}"


def launch_consumer(gpu_config: str) -> str:
    """The durable consumer of `gpu_config`'s launch requests, shared by the runners that have it."""
    return f"launch-{subject_token(gpu_config)}"


CONFIGS = f"{PREFIX}.config.*"


def gpu_config(name: str) -> str:
    return f"{PREFIX}.config.{subject_token(name)}"


def runner(runner_id: str) -> str:
    return f"{PREFIX}.runner.{subject_token(runner_id)}"


def campaign(name: str) -> str:
    return f"{PREFIX}.campaign.{subject_token(name)}"


def run_lives(run_id: str) -> list[str]:
    """Filters for the life subjects of a run's sims and of their chunks."""
    lives = f"{PREFIX}.run.{subject_token(run_id)}.sim.*.life"
    return [lives, f"{lives}.*"]


def stat_names(digest: str) -> str:
    return f"{PREFIX}.stat_names.{subject_token(digest)}"


def sim_history(sim_id: str) -> str:
    return f"{PREFIX}.run.*.sim.{subject_token(sim_id)}.>"


def of(event: ev.Event) -> str:
    """The subject an event is appended to.

    Events travel as the base type, and each is one of `ev.AnyEvent`: the match covers that
    union, so a type added without a case fails the type check, and one outside it fails
    here rather than landing on some subject by default."""
    known = cast(ev.AnyEvent, event)
    match known:
        case ev.SimQueued():
            return sim(known.run_id, known.sim_id, f"queued.{subject_token(known.gpu_config)}" if known.by_config else "queued")
        case ev.SimClaimed() | ev.SimLaunched() | ev.SimFinished():
            return chunk(known.run_id, known.sim_id, "life", known.chunk)
        case ev.SimHeartbeat() | ev.KernelFinished() | ev.SimFileStored():
            return chunk(known.run_id, known.sim_id, "data", known.chunk)
        case ev.RunCreated() | ev.RunCancelRequested() | ev.RunRetryRequested() | ev.RunEntriesAdded() | ev.RunDeleted():
            return run(known.run_id)
        case ev.TraceEvent():
            return trace(known.trace_id)
        case ev.RunnerEnded():
            return runner(known.runner_id)
        case ev.GpuConfigDerived():
            return gpu_config(known.name)
        case ev.StatNamesDefined():
            return stat_names(known.digest)
        case ev.CampaignEvent():
            return campaign(known.name)
        case _:
            assert_never(known)


def decode(subject: bytes, data: bytes) -> ev.AnyEvent:
    """The event stored on `subject` as `data`. `ev.Unreadable` if it is no event, or one that
    belongs on another subject: that one was not appended through the store, and no decision
    made from its own subject's history would see it."""
    event = ev.decode(data)
    if not belongs(event, subject):
        try:
            home = f"belongs on {of(event)}"
        except ValueError as err:  # an empty id: it belongs nowhere
            home = f"has no subject: {err}"
        raise ev.Unreadable(f"a {ev.event_type(event)} that {home}, not on {subject.decode(errors='replace')}", ev.event_type(event))
    return event


def belongs(event: ev.Event, subject: bytes) -> bool:
    """Whether `subject` is the one `event` is appended to."""
    return all_belong([event], [subject])


def all_belong(events: Sequence[ev.Event], stored_on: Sequence[bytes]) -> bool:
    """Whether each event was stored on the subject it is appended to. The projector asks
    this of every event, so a sim event's subject is remembered by its type, run, sim and chunk
    (but a launch request's, which its config and placement decide too: there is one a sim)."""
    remembered = _sim_subjects
    for event, subject in zip(events, stored_on):
        if isinstance(event, ev.SimEvent) and not isinstance(event, ev.SimQueued):
            key = (type(event), event.run_id, event.sim_id, event.chunk)
            home = remembered.get(key)
            if home is None:
                if len(remembered) >= _REMEMBERED:
                    remembered.clear()
                home = remembered[key] = _encoded(event)
        else:
            home = _encoded(event)
        if home != subject:
            return False
    return True


_sim_subjects: dict[tuple[type, str, str, int | None], bytes | None] = {}
_REMEMBERED = 65536


def _encoded(event: ev.Event) -> bytes | None:
    try:
        return of(event).encode()
    except ValueError:  # an id that makes no subject token
        return None
