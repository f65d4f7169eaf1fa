"""Messages no consumer can use, as a foreign or newer writer could store them, each with
what it is parked for: published raw, past the event store."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from nats.aio.client import Client

from cascade_core import events as ev
from cascade_nats import subjects
from cascade_nats.subject_tokens import subject_token



class Poison:
    def __init__(self, *, name: str, subject: str, data: bytes, error: str, event_type: str | None) -> None:
        self.name = name
        self.subject = subject
        self.data = data
        self.error = error  # a part of the error it is parked with
        self.event_type = event_type

    def __repr__(self) -> str:
        return f"Poison({self.name})"


def not_json(run_id: str) -> Poison:
    return Poison(name="not JSON", subject=subjects.run(run_id), data=b"\xff\x00 not json", error="not an event: JSON is malformed", event_type=None)


def unknown_type(run_id: str) -> Poison:
    data = json.dumps({"type": "run.exploded.v1", "id": "p-unknown", "at": datetime.now(UTC).isoformat(), "run_id": run_id}).encode()
    return Poison(
        name="unknown type", subject=subjects.run(run_id), data=data, error="unknown event type 'run.exploded.v1'", event_type="run.exploded.v1"
    )


def newer_version(run_id: str, sim_id: str) -> Poison:
    beat = ev.SimHeartbeat(
        id="p-v9", at=datetime.now(UTC), run_id=run_id, sim_id=sim_id, attempt=1, kernels_done=0, current_kernel=None,
        latest=ev.SimMetrics(gpu_tot_sim_cycle=1.0, gpu_tot_sim_insn=1.0, gpu_tot_ipc=1.0, sim_rate_ips=1.0),
    )
    data = ev.encode(beat).replace(b'"sim.heartbeat.v1"', b'"sim.heartbeat.v9"')
    return Poison(
        name="newer version", subject=subjects.sim(run_id, sim_id, "data"), data=data, error="unknown event type 'sim.heartbeat.v9'", event_type="sim.heartbeat.v9"
    )


def misplaced(run_id: str, trace_id: str) -> Poison:
    """A cancel of a run, stored on a trace's subject."""
    cancel = ev.RunCancelRequested(id="p-misplaced", at=datetime.now(UTC), run_id=run_id)
    where = subjects.trace(trace_id)
    return Poison(
        name="on another subject", subject=where, data=ev.encode(cancel), error=f"belongs on {subjects.run(run_id)}, not on {where}", event_type="run.cancel_requested.v1"
    )


def naive_time(trace_id: str) -> Poison:
    """A trace event without a time zone, which the fold cannot compare with the trace's times."""
    at = datetime.now(UTC).replace(microsecond=0)
    ready = ev.TraceReady(
        id="p-naive", at=at, trace_id=trace_id, trace_gpu_arch="sm_61", kernel_count=1, bytes=1, suggested_sim_config=None,
        has_real_timing=False, has_step_timeline=False,
    )
    data = ev.encode(ready).replace(at.isoformat().replace("+00:00", "Z").encode(), at.replace(tzinfo=None).isoformat().encode())
    assert data != ev.encode(ready)
    return Poison(
        name="fails in the fold", subject=subjects.trace(trace_id), data=data, error="cannot be folded: TypeError", event_type="trace.ready.v1"
    )


def too_big(trace_id: str) -> Poison:
    """A number DuckDB cannot store in 64 bits, in kernels listed for the trace's upload."""
    listed = ev.TraceKernelsListed(
        id="p-big", at=datetime.now(UTC), trace_id=trace_id,
        kernels=[ev.TraceKernel(uid=99, name="_Z3bigv", grid="1x1x1", block="1x1x1", shmem=2**63, nregs=8, file="kernel-99.traceg")],
    )
    return Poison(
        name="too big to store", subject=subjects.trace(trace_id), data=ev.encode(listed), error="cannot be stored", event_type="trace.kernels_listed.v1"
    )


def foreign_sim(run_id: str, sim_id: str) -> Poison:
    """A fact about an existing sim that names another run than its own: on its own
    subject, so readable, but the fold cannot apply it."""
    claim = ev.SimClaimed(id="p-foreign", at=datetime.now(UTC), run_id=run_id, sim_id=sim_id, attempt=9, runner_id="r", host="h")
    return Poison(
        name="a sim of another run", subject=subjects.sim(run_id, sim_id, "life"), data=ev.encode(claim), error=f"not to run {run_id}", event_type="sim.claimed.v1"
    )


LAUNCHED_CONFIG = "SM61_TITANX"  # the config whose runners' consumer meets the launch requests below


def launch_request_not_json(run_id: str, sim_id: str) -> Poison:
    where = subjects.sim(run_id, sim_id, f"queued.{subject_token(LAUNCHED_CONFIG)}")
    return Poison(name="a launch request that is not JSON", subject=where, data=b"{oops", error="not an event", event_type=None)


def misplaced_launch_request(run_id: str, sim_id: str, other_sim: str) -> Poison:
    queued = ev.SimQueued(
        id="p-queued", at=datetime.now(UTC), run_id=run_id, sim_id=other_sim, trace_id="t", gpu_config=LAUNCHED_CONFIG, kernels_total=1, by_config=True
    )
    where = subjects.sim(run_id, sim_id, f"queued.{subject_token(LAUNCHED_CONFIG)}")
    return Poison(name="a launch request of another sim", subject=where, data=ev.encode(queued), error="belongs on", event_type="sim.queued.v1")


async def publish(nc: Client, poisons: list[Poison]) -> list[int]:
    """Store each message as is; returns their stream sequences."""
    js = nc.jetstream()
    return [(await js.publish(p.subject, p.data, stream=subjects.STREAM)).seq for p in poisons]
