"""Runs as pure decisions: a command and the domain state in, the events to append out.

No I/O and no clock: ids and the time arrive in the command; a run arrives as its domain state
(`cascade_core/run.py`), its sims as the facts a decision reads of them (`SimFacts`, which a
sim's domain state holds, `cascade_core/sim.py`), the trace as its domain state
(`cascade_core/trace.py`). A rejection is a `cascade_core.refusals` type whose
message is the API's `detail` text; each edge says it its own way.

A run's state follows from its sims' (`cascade_core/run.py`); a retry or a top-up gives it
unfinished sims again, so it is active again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Literal, Protocol

import msgspec

from cascade_core import events as ev
from cascade_core.gpu_configs import GpuConfig, unknown_config
from cascade_core.variants import unnamed_name
from cascade_core.refusals import Conflict, Invalid, NotFound
from cascade_core.run import Run
from cascade_core.sims import FINISHED, RETRIABLE
from cascade_core.split import auto, chunk_count
from cascade_core.trace import Trace


# What a request to create a run or add to one asks for: the commands' bodies, as the API takes them.

Count = Annotated[int, msgspec.Meta(ge=1, le=64, description="How many sims run this config.")]


class SplitSpec(msgspec.Struct, frozen=True):
    kernels_per_chunk: Annotated[int, msgspec.Meta(ge=1, description="Kernel launches each chunk measures.")]
    warmup: Annotated[
        int,
        msgspec.Meta(ge=0, le=64, description="Launches simulated before each chunk's own and discarded, to warm its caches."),
    ] = 2


ENTRY_OPTIONS = (
    "Simulator options for these sims alone (as in Derive a GPU config, such as -gpgpu_max_insn): they run an unnamed "
    "variant of gpu_config, `<gpu_config>+<12 hex of the options' digest>`, checked alike."
)


class RunEntry(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    gpu_config: Annotated[str, msgspec.Meta(description="A GpuConfig.name whose arch matches the trace.")]
    count: Count
    split: Annotated[
        SplitSpec | Literal["auto"] | None,
        msgspec.Meta(
            description="Cut each sim's kernel launches into chunks simulated concurrently, on any runners with the "
            'config, and stitched into one sim. "auto": chunks over the free slots, at least 10 launches each, '
            "warm-up 2; a trace too short for two such chunks runs whole. Absent: each sim runs whole."
        ),
    ] = None
    reuse: Annotated[
        bool,
        msgspec.Meta(
            description="Simulate each kernel (a kernel file's content, its `-kernel id` line aside) only the first two "
            "times the trace launches it, cold then warm; every later launch takes the second one's result, marked with "
            "`reused_from`. With `split`, each chunk so, within its own launches."
        ),
    ] = False
    reference: Annotated[
        bool,
        msgspec.Meta(
            description="With `split` or `reuse`: each sim gets a reference too, a sim of the same trace and config run "
            "whole and in sequence (its `reference_for` names the fast sim), and Get a sim's reference compares the two."
        ),
    ] = False
    options: Annotated[dict[str, str] | None, msgspec.Meta(description=ENTRY_OPTIONS)] = None
    fresh: Annotated[
        bool,
        msgspec.Meta(
            description="Simulate its sims even when a sim of the same trace contents, config files, simulator build "
            "and settings already succeeded; without it such a sim takes that result (its `cached_from` names the source)."
        ),
    ] = False

    @property
    def sim_config(self) -> str:
        """The config its sims run: `gpu_config`, or with `options` its unnamed variant."""
        return unnamed_name(self.gpu_config, self.options) if self.options else self.gpu_config


Name = Annotated[str, msgspec.Meta(min_length=1, max_length=100, description="A name a person gives.")]
Tag = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Tags = Annotated[list[Tag], msgspec.Meta(max_length=16, description="Labels to find it by (`?tag=`).")]


class RunCreate(msgspec.Struct, frozen=True, omit_defaults=True):
    trace_id: Annotated[str, msgspec.Meta(description="A trace in state ready.")]
    entries: Annotated[list[RunEntry], msgspec.Meta(min_length=1, description="One entry per config.")]
    name: Name | None = None
    tags: Tags = []


class RunEntries(msgspec.Struct, frozen=True):
    entries: Annotated[
        list[RunEntry], msgspec.Meta(min_length=1, description="One entry per config, as in RunCreate: its sims are added to the run.")
    ]


class TraceNotFound(NotFound):
    pass


class TraceNotUsable(Conflict):
    """The trace exists but cannot be simulated: not ready, or a sample."""


class BadEntry(Invalid):
    """An entry names an unknown config (one neither this server nor a live runner has), or
    one of another arch than the trace."""


class TooManySims(Invalid):
    """The entries ask for more sims than one run may have."""


class KeyReused(Invalid):
    """A top-up's idempotency key the run took with other entries: which of the two was
    meant cannot be told, so neither is done again."""


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


class RetryRun(msgspec.Struct, frozen=True, kw_only=True):
    event_id: str
    at: datetime


class AddEntries(msgspec.Struct, frozen=True, kw_only=True):
    event_id: str
    at: datetime
    sim_ids: Sequence[str]  # one fresh id per sim: the sum of the entries' counts
    body: RunEntries
    key: str | None = None  # the request's idempotency key
    free_slots: Mapping[str, int] = {}  # as in `CreateRun`


class SampleRun(Conflict):
    """A sample run's sims never run: none is added to it."""


def sim_count(body: RunCreate | RunEntries) -> int:
    """The sims the entries ask for, references included (at most: an entry whose `auto`
    split runs whole and that does not reuse needs none, its sims being sequential)."""
    return sum(_sims_of(entry) for entry in body.entries)


def _sims_of(entry: RunEntry) -> int:
    return entry.count * (2 if entry.reference else 1)


def check_create(body: RunCreate, trace: Trace | None, configs: Sequence[GpuConfig], *, max_sims: int) -> Trace:
    """The trace a run of `body` would simulate, or a refusal saying why there can be no such
    run: the reference's reasons in its order, then more than `max_sims` sims (every entry
    being at least one, that caps the entries too, and with them the size of the run's event)."""
    trace = _check_trace(body.trace_id, trace, configs, body.entries)
    sims = sim_count(body)
    if sims > max_sims:
        raise TooManySims(
            f"the run asks for {sims} sims in {len(body.entries)} entries, more than this server's limit of "
            f"{max_sims} sims per run (CASCADE_MAX_SIMS_PER_RUN); split it into smaller runs"
        )
    return trace


def _check_trace(trace_id: str, trace: Trace | None, configs: Sequence[GpuConfig], entries: Sequence[RunEntry]) -> Trace:
    """The trace, if the entries' sims can simulate it."""
    if trace is None:
        raise TraceNotFound(f"trace {trace_id} not found")
    if trace.sample:
        raise TraceNotUsable(f"trace {trace_id} is a sample, which has no instruction traces")
    if trace.state != "ready":
        raise TraceNotUsable(f"trace {trace_id} is {trace.state}, not ready")
    by_name = {c.name: c for c in configs}
    for entry in entries:
        if entry.reference and entry.split is None and not entry.reuse:
            raise BadEntry(
                f"the entry of {entry.gpu_config} asks for a reference but is neither split nor reusing repeated "
                "kernels: its sims run whole and in sequence already, as a reference would"
            )
        config = by_name.get(entry.gpu_config)
        if config is None:
            raise BadEntry(unknown_config(entry.gpu_config, configs, trace.trace_gpu_arch))
        if config.arch != trace.trace_gpu_arch:
            raise BadEntry(f"{config.name} is {config.arch} but trace {trace_id} is {trace.trace_gpu_arch}")
    return trace


def decide_create(cmd: CreateRun, trace: Trace | None, configs: Sequence[GpuConfig], *, max_sims: int) -> list[ev.RunCreated]:
    """The run, with its sims: each entry fans out to `count` sims. Replicas are numbered
    from 0 per config, so two entries naming the same config continue one numbering."""
    trace = check_create(cmd.body, trace, configs, max_sims=max_sims)
    created = ev.RunCreated(
        id=cmd.event_id,
        at=cmd.at,
        run_id=cmd.run_id,
        trace_id=cmd.body.trace_id,
        entries=_entries(cmd.body.entries),
        sims=_fanned_out(cmd.body.entries, cmd.sim_ids, trace.kernel_count, cmd.free_slots, {}),
        kernels_total=trace.kernel_count,
        name=cmd.body.name,
        tags=list(dict.fromkeys(cmd.body.tags)),
    )
    return [created]


def _entries(entries: Sequence[RunEntry]) -> list[ev.ConfigCount]:
    return msgspec.convert(entries, list[ev.ConfigCount], from_attributes=True)


def _fanned_out(
    entries: Sequence[RunEntry], sim_ids: Sequence[str], kernels_total: int, free_slots: Mapping[str, int], replicas: dict[str, int]
) -> list[ev.SimSpec]:
    """Each entry's `count` sims, numbered by replica on from `replicas` (the count each
    config has so far, updated), so that entries naming the same config continue one
    numbering."""
    if len(sim_ids) != sum(map(_sims_of, entries)):
        raise ValueError(f"{len(sim_ids)} sim ids for {sum(map(_sims_of, entries))} sims")
    ids = iter(sim_ids)
    sims = []
    for entry in entries:
        config = entry.sim_config
        first = replicas.get(config, 0)
        split = _split(entry.split, kernels_total, free_slots.get(entry.gpu_config, 1))
        fast = [
            ev.SimSpec(sim_id=next(ids), gpu_config=config, replica=first + i, split=split, reuse=entry.reuse, fresh=entry.fresh)
            for i in range(entry.count)
        ]
        references = [next(ids) for _ in fast] if entry.reference else []
        if split is not None or entry.reuse:  # else the sims are sequential already
            fast += [
                _reference(spec.sim_id, config, sim_id, first + entry.count + i, fresh=entry.fresh)
                for i, (spec, sim_id) in enumerate(zip(fast, references))
            ]
        sims += fast
        replicas[config] = first + len(fast)
    return sims


def _reference(fast_id: str, gpu_config: str, sim_id: str, replica: int, *, fresh: bool = False) -> ev.SimSpec:
    """The reference of sim `fast_id`: the same config, run whole and in sequence."""
    return ev.SimSpec(sim_id=sim_id, gpu_config=gpu_config, replica=replica, reference_for=fast_id, fresh=fresh)


def _split(asked: SplitSpec | str | None, kernels_total: int, free_slots: int) -> ev.Split | None:
    """How an entry's sims are split: as asked, as `auto` picks, or not at all when that
    makes one chunk (which is the sim run whole)."""
    if asked is None:
        return None
    if isinstance(asked, SplitSpec):
        split = ev.Split(kernels_per_chunk=asked.kernels_per_chunk, warmup=asked.warmup)
        return split if chunk_count(kernels_total, split) > 1 else None
    return auto(kernels_total, free_slots)


class ChunkFacts(Protocol):
    """What a retry reads of a split sim's chunk."""

    @property
    def state(self) -> str: ...
    @property
    def attempt(self) -> int: ...


class SplitFacts(Protocol):
    """How a split sim was cut, and its chunks in order."""

    @property
    def kernels_per_chunk(self) -> int: ...
    @property
    def warmup(self) -> int: ...
    @property
    def chunks(self) -> Sequence[ChunkFacts]: ...


class SimFacts(Protocol):
    """What a retry or a top-up reads of a run's sims: the read model's rows hold it."""

    @property
    def id(self) -> str: ...
    @property
    def gpu_config(self) -> str: ...
    @property
    def replica(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def kernels_total(self) -> int: ...
    @property
    def split(self) -> SplitFacts | None: ...
    @property
    def reuse(self) -> bool: ...
    @property
    def reference_for(self) -> str | None: ...


class Again(msgspec.Struct, frozen=True):
    """A sim a retry runs again, or one chunk of a split sim, and the attempt it is at."""

    sim: SimFacts
    chunk: int | None
    attempt: int


def retried(sims: Sequence[SimFacts]) -> list[Again]:
    """What a retry runs again: each failed or cancelled sim, and of a split one, each of its
    failed or cancelled chunks, its finished chunks kept."""
    again = []
    for s in sims:
        if s.state not in RETRIABLE:
            continue
        split = s.split
        if split is None:
            again.append(Again(s, None, s.attempt))
        else:
            again += [Again(s, i, c.attempt) for i, c in enumerate(split.chunks) if c.state in RETRIABLE]
    return again


def decide_retry(
    run: Run, sims: Sequence[SimFacts], cmd: RetryRun, claimed: Mapping[tuple[str, int | None], int] = {}
) -> list[ev.Event]:
    """Run every failed or cancelled sim (or chunk) again, as the attempt after its last;
    nothing when none is (a sample's sims all succeeded), so retrying again while they wait
    or run changes nothing. `claimed`: the newest attempt each one's life subject names (by
    sim and chunk), which is past the read model's when a runner claimed it after it was
    cancelled (its claim changed nothing there)."""
    again = retried(sims)
    if run.sample or not again:
        return []
    attempts = [max(a.attempt, claimed.get((a.sim.id, a.chunk), 0)) + 1 for a in again]
    retry = ev.RunRetryRequested(
        id=cmd.event_id, at=cmd.at, run_id=run.id, trace_id=run.trace_id, kernels_total=again[0].sim.kernels_total,
        sims=[
            ev.RetriedSim(sim_id=a.sim.id, gpu_config=a.sim.gpu_config, attempt=n, reuse=a.sim.reuse)
            for a, n in zip(again, attempts)
            if a.chunk is None
        ],
        chunks=[_retried_chunk(a, n) for a, n in zip(again, attempts) if a.chunk is not None],
    )
    return [retry]


def _retried_chunk(again: Again, attempt: int) -> ev.RetriedChunk:
    s, split = again.sim, again.sim.split
    assert split is not None and again.chunk is not None  # a chunk is of a split sim
    cut = ev.Split(kernels_per_chunk=split.kernels_per_chunk, warmup=split.warmup)
    return ev.RetriedChunk(sim_id=s.id, gpu_config=s.gpu_config, chunk=again.chunk, split=cut, attempt=attempt, reuse=s.reuse)


def check_add(
    run: Run, sims: Sequence[SimFacts], body: RunEntries, trace: Trace | None, configs: Sequence[GpuConfig], *, max_sims: int
) -> Trace:
    """The trace the added sims would simulate, or a refusal: a sample run, the trace's and the
    entries' reasons as for a new run, or more sims in the run than `max_sims` with them."""
    if run.sample:
        raise SampleRun(f"run {run.id} is a sample, whose sims never run; create a run of a trace of your own")
    trace = _check_trace(run.trace_id, trace, configs, body.entries)
    total = len(sims) + sim_count(body)
    if total > max_sims:
        raise TooManySims(
            f"the run would have {total} sims with these entries, more than this server's limit of {max_sims} sims "
            "per run (CASCADE_MAX_SIMS_PER_RUN); create another run"
        )
    return trace


def decide_add(
    run: Run,
    sims: Sequence[SimFacts],
    cmd: AddEntries,
    trace: Trace | None,
    configs: Sequence[GpuConfig],
    *,
    max_sims: int,
    keys: Mapping[str, Sequence[ev.ConfigCount]],
) -> list[ev.Event]:
    """The entries' sims added to the run, numbered on from the replicas each config has;
    nothing when a top-up with the same key and entries (`keys`: the entries each key the run
    took added) is in the run, refused when that key came with other entries."""
    if cmd.key is not None and cmd.key in keys:
        if list(keys[cmd.key]) != _entries(cmd.body.entries):
            raise KeyReused(
                f"Idempotency-Key {cmd.key} was used with another body on run {run.id}: "
                "send the same body again, or this one with a new key"
            )
        return []
    trace = check_add(run, sims, cmd.body, trace, configs, max_sims=max_sims)
    replicas: dict[str, int] = {}
    for sim in sims:
        replicas[sim.gpu_config] = max(replicas.get(sim.gpu_config, 0), sim.replica + 1)
    fanned_out = _fanned_out(cmd.body.entries, cmd.sim_ids, trace.kernel_count, cmd.free_slots, replicas)
    return [_added(run, cmd, trace, _entries(cmd.body.entries), fanned_out, cmd.key)]


def _added(
    run: Run,
    cmd: AddEntries | RequestReference,
    trace: Trace,
    entries: list[ev.ConfigCount],
    sims: list[ev.SimSpec],
    key: str | None = None,
) -> ev.RunEntriesAdded:
    """The run's sims added: a top-up's (`entries` as asked) or a reference (no entry)."""
    return ev.RunEntriesAdded(
        id=cmd.event_id, at=cmd.at, run_id=run.id, trace_id=run.trace_id, kernels_total=trace.kernel_count,
        entries=entries, sims=sims, key=key,
    )


class RequestReference(msgspec.Struct, frozen=True, kw_only=True):
    event_id: str
    at: datetime
    sim_id: str  # the sim whose reference is asked for
    reference_id: str  # a fresh id, for the reference if there is none yet


class NotFast(Invalid):
    """A reference was asked for a sim that is neither split nor reusing, or that is a reference."""


def reference_of(sims: Sequence[SimFacts], sim_id: str) -> SimFacts | None:
    """The reference sim of sim `sim_id` among the run's, if it has one."""
    return next((s for s in sims if s.reference_for == sim_id), None)


def check_reference(sim: SimFacts) -> None:
    """Refused when `sim` can have no reference: it is one, or it runs whole and in sequence."""
    if sim.reference_for is not None:
        raise NotFast(f"sim {sim.id} is the reference of sim {sim.reference_for}; a reference has no reference of its own")
    if sim.split is None and not sim.reuse:
        raise NotFast(
            f"sim {sim.id} is neither split nor reusing repeated kernels: it runs whole and in sequence, as a reference "
            "would, so there is nothing to measure it against"
        )


def decide_reference(
    run: Run,
    sims: Sequence[SimFacts],
    cmd: RequestReference,
    trace: Trace | None,
    configs: Sequence[GpuConfig],
    *,
    max_sims: int,
) -> list[ev.Event]:
    """A reference for the run's split or reusing sim `cmd.sim_id`: a sim of the same config
    run whole and in sequence, added to the run with no entry of its own (the run's entries
    are what was asked of it), numbered on from the config's replicas. Nothing when the sim
    has its reference already, so asking again changes nothing."""
    sim = next((s for s in sims if s.id == cmd.sim_id), None)
    if sim is None:
        raise NotFound(f"sim {cmd.sim_id} not found")
    check_reference(sim)
    if reference_of(sims, sim.id) is not None:
        return []
    trace = check_add(run, sims, RunEntries(entries=[RunEntry(gpu_config=sim.gpu_config, count=1)]), trace, configs, max_sims=max_sims)
    replica = max(s.replica for s in sims if s.gpu_config == sim.gpu_config) + 1
    return [_added(run, cmd, trace, [], [_reference(sim.id, sim.gpu_config, cmd.reference_id, replica)])]


def decide_cancel(run: Run, cmd: CancelRun) -> list[ev.Event]:
    """Cancel every unfinished sim; nothing when none is left or the run is a sample, so
    cancelling again changes nothing."""
    if run.sample or run.state != "active":
        return []
    return [ev.RunCancelRequested(id=cmd.event_id, at=cmd.at, run_id=run.id)]


class DeleteRun(msgspec.Struct, frozen=True, kw_only=True):
    event_id: str
    at: datetime


class RunActive(Conflict):
    """A run with unfinished sims cannot be deleted: a runner may still work for it."""


def decide_delete(run: Run, cmd: DeleteRun) -> list[ev.Event]:
    """Delete a run none of whose sims is unfinished; refused while one is, so that no runner
    reports on a run that is gone. A deleted run is no run: the edge answers for it as for
    an unknown one, before asking this."""
    if run.state == "active":
        unfinished = sum(n for state, n in run.sim_counts.items() if state not in FINISHED)
        raise RunActive(
            f"run {run.id} is active ({unfinished} of its sims unfinished): cancel it first "
            f"(POST /api/runs/{run.id}/cancel, or cascade run cancel {run.id}), then delete it"
        )
    return [ev.RunDeleted(id=cmd.event_id, at=cmd.at, run_id=run.id)]
