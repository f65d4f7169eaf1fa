"""Runs as pure decisions: a command and the read model's view in, the events to append out.

No I/O and no clock: ids and the time arrive in the command, the trace and the run arrive as
the API Structs the read model serves. A rejection is a `cascade_core.refusals` type whose
message is the API's `detail` text; each edge says it its own way.

A run is active while any of its sims is unfinished (a sim's states: `cascade_core/sims.py`),
then cancelled if any sim was cancelled, else failed if any failed, else succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import msgspec

from cascade_core import events as ev
from cascade_core.models import GpuConfig, RunCreate, RunSummary, SplitSpec, Trace
from cascade_core.refusals import Conflict, Invalid, NotFound
from cascade_core.sims import FINISHED, SIM_STATES
from cascade_core.split import auto, chunk_count


def run_state(counts: Mapping[str, int]) -> str:
    """A run's state from its sims' per-state counts."""
    if any(counts.get(s, 0) for s in SIM_STATES if s not in FINISHED):
        return "active"
    for state in ("cancelled", "failed"):
        if counts.get(state, 0):
            return state
    return "succeeded"


class TraceNotFound(NotFound):
    pass


class TraceNotUsable(Conflict):
    """The trace exists but cannot be simulated: not ready, or a sample."""


class BadEntry(Invalid):
    """An entry names an unknown config, or one of another arch than the trace."""


class TooManySims(Invalid):
    """The entries ask for more sims than one run may have."""


class CreateRun(msgspec.Struct, frozen=True, kw_only=True):
    event_id: str
    at: datetime
    run_id: str
    sim_ids: Sequence[str]  # one fresh id per sim: the sum of the entries' counts
    body: RunCreate
    # Free slots now, by config, of the live runners that have it: what a split "auto" spreads
    # a sim over (a config missing counts one).
    free_slots: Mapping[str, int] = {}


class CancelRun(msgspec.Struct, frozen=True, kw_only=True):
    event_id: str
    at: datetime


def sim_count(body: RunCreate) -> int:
    return sum(entry.count for entry in body.entries)


def check_create(body: RunCreate, trace: Trace | None, configs: Sequence[GpuConfig], *, max_sims: int) -> Trace:
    """The trace a run of `body` would simulate, or a refusal saying why there can be no such
    run: the reference's reasons in its order, then more than `max_sims` sims (every entry
    being at least one, that caps the entries too, and with them the size of the run's event)."""
    trace_id = body.trace_id
    if trace is None:
        raise TraceNotFound(f"trace {trace_id} not found")
    if trace.sample:
        raise TraceNotUsable(f"trace {trace_id} is a sample, which has no instruction traces")
    if trace.state != "ready":
        raise TraceNotUsable(f"trace {trace_id} is {trace.state}, not ready")
    by_name = {c.name: c for c in configs}
    for entry in body.entries:
        config = by_name.get(entry.gpu_config)
        if config is None:
            raise BadEntry(f"unknown GPU config {entry.gpu_config}")
        if config.arch != trace.trace_gpu_arch:
            raise BadEntry(f"{config.name} is {config.arch} but trace {trace_id} is {trace.trace_gpu_arch}")
    sims = sim_count(body)
    if sims > max_sims:
        raise TooManySims(
            f"the run asks for {sims} sims in {len(body.entries)} entries, more than this server's limit of "
            f"{max_sims} sims per run (CASCADE_MAX_SIMS_PER_RUN); split it into smaller runs"
        )
    return trace


def decide_create(cmd: CreateRun, trace: Trace | None, configs: Sequence[GpuConfig], *, max_sims: int) -> list[ev.Event]:
    """The run, with its sims: each entry fans out to `count` sims. Replicas are numbered
    from 0 per config, so two entries naming the same config continue one numbering."""
    trace = check_create(cmd.body, trace, configs, max_sims=max_sims)
    if len(cmd.sim_ids) != sim_count(cmd.body):
        raise ValueError(f"{len(cmd.sim_ids)} sim ids for {sim_count(cmd.body)} sims")
    ids = iter(cmd.sim_ids)
    replicas: dict[str, int] = {}
    sims = []
    for entry in cmd.body.entries:
        first = replicas.get(entry.gpu_config, 0)
        split = _split(entry.split, trace.kernel_count, cmd.free_slots.get(entry.gpu_config, 1))
        sims += [ev.SimSpec(next(ids), entry.gpu_config, first + i, split, entry.reuse) for i in range(entry.count)]
        replicas[entry.gpu_config] = first + entry.count
    created = ev.RunCreated(
        id=cmd.event_id,
        at=cmd.at,
        run_id=cmd.run_id,
        trace_id=cmd.body.trace_id,
        entries=msgspec.convert(cmd.body.entries, list[ev.ConfigCount], from_attributes=True),
        sims=sims,
        kernels_total=trace.kernel_count,
    )
    return [created]


def _split(asked: SplitSpec | str | None, kernels_total: int, free_slots: int) -> ev.Split | None:
    """How an entry's sims are split: as asked, as `auto` picks, or not at all when that
    makes one chunk (which is the sim run whole)."""
    if asked is None:
        return None
    if isinstance(asked, SplitSpec):
        split = ev.Split(kernels_per_chunk=asked.kernels_per_chunk, warmup=asked.warmup)
        return split if chunk_count(kernels_total, split) > 1 else None
    return auto(kernels_total, free_slots)


def decide_cancel(run: RunSummary, cmd: CancelRun) -> list[ev.Event]:
    """Cancel every unfinished sim; nothing when none is left or the run is a sample, so
    cancelling again changes nothing."""
    if run.sample or run.state != "active":
        return []
    return [ev.RunCancelRequested(id=cmd.event_id, at=cmd.at, run_id=run.id)]
