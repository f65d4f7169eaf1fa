"""The projection as a pure fold: events in, rows out.

`fold(state, items)` takes the current rows a batch of events can touch and the events with
their stream sequences, and returns the rows as they stand afterwards plus the rows to append.
It never mutates its input and reads no clock: the projector loads the rows, calls it, and
writes what it returns. Applying an event twice changes nothing: entity updates are guarded by
the state they move from, and appended rows carry natural keys. Rows the fold knows are new
(a log line past the sim's last, a kernel past its count) are simply inserted; any other row
is inserted only if its key is absent, which costs a lookup, so the common path avoids it.

A sim's events are load → evolve → rows: the batch holds each sim it touches as its domain
state (`cascade_core/sim.py`, which a stored row is), evolves it by each event, and maps the
sims it changed to rows once, at the end; a runner's fact makes a kernel, log or file row only
if the sim takes it there. The rules of a sim's life live in that one place, shared with the
runner. A run is held the same way (`cascade_core/run.py`): it counts its sims by state as
their evolve moves them, and its state follows from the counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar, assert_never

import msgspec

from cascade_core import events as ev
from cascade_core import sim as sim_state
from cascade_core.run import Run, SimMoved
from cascade_core.run import evolve as evolve_run
from cascade_core.run import new as new_run
from cascade_core.sim import Sim
from cascade_core.trace import evolve as evolve_trace
from cascade_core.trace import takes_rows
from cascade_nats import deflated
from projections.rows import (
    APPEND_TABLES,
    CampaignRow,
    CampaignRunRow,
    KernelRow,
    LogChunkRow,
    RealTimingRow,
    RunRow,
    SimFileRow,
    SimRow,
    StatSetRow,
    TraceFileRow,
    TraceKernelRow,
    TraceRow,
)

# What the fold makes of the log. Bump it whenever the same events would now give other rows
# (a rule, a derived value, a default) without any table changing shape: a read model built
# by another version is then rebuilt from the log when the service starts (`rebuild.py`).
VERSION = 3  # 3: stat ids in a map's order

class Rows(msgspec.Struct, frozen=True):
    """Current entity rows, by id: every row a batch's events may change must be here."""

    traces: dict[str, TraceRow] = {}
    runs: dict[str, RunRow] = {}
    sims: dict[str, SimRow] = {}


class Change(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Something a run's live event stream shows: a sim, kernel, file or run row as it
    stood right after the event at `seq`, the `k`-th (from 0) of that event's changes.

    An event's changes come in the order it made them, whatever batch it was folded in, so
    `(seq, k)` names the same change in the projector's batches and in a fold of the run's
    history from the log."""

    seq: int
    k: int
    run_id: str
    kind: str
    row: SimRow | KernelRow | SimFileRow | RunRow
    # A sim's change that moved it to another state: its run's counts of sims by state after
    # it, so that a stream's reader need not count them from the sims it has seen.
    sim_counts: dict[str, int] | None = None


class Added(msgspec.Struct):
    """Rows a batch adds to the append-only tables (`rows.APPEND_TABLES`), by table."""

    trace_files: list[TraceFileRow] = []
    trace_kernels: list[TraceKernelRow] = []
    trace_real_timing: list[RealTimingRow] = []
    kernels: list[KernelRow] = []
    sim_log: list[LogChunkRow] = []
    sim_files: list[SimFileRow] = []
    campaigns: list[CampaignRow] = []
    campaign_runs: list[CampaignRunRow] = []
    stat_sets: list[StatSetRow] = []

    def tables(self) -> list[tuple[str, list[Any]]]:
        """Each table's rows, in the order of `rows.APPEND_TABLES`."""
        return [(table, getattr(self, table)) for table in APPEND_TABLES]


class Folded(msgspec.Struct, frozen=True):
    rows: Rows
    changed: frozenset[tuple[str, str]]  # (table, id) of entity rows to write
    appended: Added  # certainly new rows
    checked: Added  # rows to add unless their key is already there
    # Rows to delete, in order, once the appended ones are written: a sim's attempts before
    # the one given, but, with a launch (a resume's first), its kernels before it and its log
    # lines, which are made the given attempt's; and, before they are written, a deleted
    # trace's files, kernels and timing.
    purged_attempts: list[tuple[str, int, int | None]]
    purged_traces: frozenset[str]
    # Deleted sample traces, whose sample runs go with them, their sims and all they hold,
    # before the batch's rows are written (this batch's own are left out of it already).
    purged_samples: frozenset[str]
    # Deleted runs, gone so too, their campaigns' links to them with them.
    purged_runs: frozenset[str]
    # Every kernel result applied, in order, kept or not: their maps' names get ids (`stats_rows`).
    kernels: list[KernelRow]
    changes: list[Change]  # none when the fold was asked for none


class _Batch:
    """The working copy one fold call writes into."""

    def __init__(self, rows: Rows, changes: bool) -> None:
        self.shows = changes
        self.traces = dict(rows.traces)
        self.run_rows = rows.runs
        self.runs: dict[str, Run] = {run_id: row.run for run_id, row in rows.runs.items()}  # each run's state
        self.run_seqs = {run_id: row.seq for run_id, row in rows.runs.items()}
        self.sims: dict[str, Sim] = dict(rows.sims)  # each sim's state: a stored row is one
        self.seqs = {sim_id: row.seq for sim_id, row in rows.sims.items()}  # what each sim's row names
        self.changed: set[tuple[str, str]] = set()
        self.changed_sims: set[str] = set()  # the sims of `changed`, kept apart on the hot path
        self.appended = Added()
        self.checked = Added()
        self.purged_attempts: list[tuple[str, int, int | None]] = []
        self.purged_traces: set[str] = set()
        self.purged_samples: set[str] = set()
        self.purged_runs: set[str] = set()
        self.kernels: list[KernelRow] = []
        self.changes: list[Change] = []

    def purge_sim(self, sim_id: str, attempt: int, first: int | None = None) -> None:
        """Forget the rows of the sim's attempts before `attempt`; with `first` (a resume's),
        make its kernels of launches before `first` and its log lines that attempt's instead.
        The projector does it once the batch's rows are written (`projector.write`): a fact of
        an attempt another one replaced counts no more, so the batch's rows after this are all
        of the new attempt."""
        self.purged_attempts.append((sim_id, attempt, first))

    def purge_trace(self, trace_id: str) -> None:
        self.purged_traces.add(trace_id)
        for rows in (self.appended, self.checked):
            rows.trace_files = [r for r in rows.trace_files if r.trace_id != trace_id]
            rows.trace_kernels = [r for r in rows.trace_kernels if r.trace_id != trace_id]
            rows.trace_real_timing = [r for r in rows.trace_real_timing if r.trace_id != trace_id]

    def purge_samples(self, trace_id: str) -> None:
        """Forget the sample runs of the trace, and everything of their sims: the projector
        deletes the stored ones (`projector.write`), and the batch's are dropped here."""
        self.purged_samples.add(trace_id)
        self.drop_runs({run_id for run_id, run in self.runs.items() if run.trace_id == trace_id and run.sample})

    def purge_run(self, run_id: str) -> None:
        """Forget a deleted run and everything of its sims, as `purge_samples` does."""
        self.purged_runs.add(run_id)
        self.drop_runs({run_id})

    def drop_runs(self, runs: set[str]) -> None:
        """The batch's rows of these runs and their sims dropped: none is written."""
        sims = {sim_id for sim_id, sim in self.sims.items() if sim.run_id in runs}
        for run_id in runs & self.runs.keys():
            del self.runs[run_id]
            self.changed.discard(("runs", run_id))
        for sim_id in sims:
            del self.sims[sim_id]
            self.changed_sims.discard(sim_id)
        for rows in (self.appended, self.checked):
            rows.kernels = [r for r in rows.kernels if r.sim_id not in sims]
            rows.sim_log = [r for r in rows.sim_log if r.sim_id not in sims]
            rows.sim_files = [r for r in rows.sim_files if r.sim_id not in sims]
            rows.campaign_runs = [r for r in rows.campaign_runs if r.run_id not in runs]
        self.purged_attempts = [p for p in self.purged_attempts if p[0] not in sims]

    def put_trace(self, row: TraceRow) -> None:
        self.traces[row.id] = row
        self.changed.add(("traces", row.id))

    def show(
        self, seq: int, run_id: str, kind: str, row: SimRow | KernelRow | SimFileRow | RunRow, sim_counts: dict[str, int] | None = None
    ) -> None:
        """A change for live streams, numbered among those of the event at `seq` (an
        event's changes are consecutive: items are applied one at a time)."""
        if not self.shows:
            return
        last = self.changes[-1] if self.changes else None
        k = last.k + 1 if last is not None and last.seq == seq else 0
        self.changes.append(Change(seq=seq, k=k, run_id=run_id, kind=kind, row=row, sim_counts=sim_counts))

    def put_sim(self, seq: int, old: Sim, sim: Sim) -> None:
        """A sim as the event at `seq` changed it from `old`, which its row then names; a move
        to another state is counted in its run, whose counts the sim's change carries."""
        sim_id = sim.id
        self.sims[sim_id] = sim
        self.seqs[sim_id] = seq
        self.changed_sims.add(sim_id)
        if old.state == sim.state:
            if self.shows:
                self.show(seq, sim.run_id, "sim", self.sim_row(sim_id))
            return
        was = self.runs[sim.run_id]
        run = self.put_run(seq, evolve_run(was, SimMoved(old.state, sim.state, sim.state == "succeeded" and sim.cut_short is not None)))
        if self.shows:
            self.show(seq, sim.run_id, "sim", self.sim_row(sim_id), run.sim_counts)
        if run.state != "active" or was.state != run.state:  # it ended, or a retry made it active again
            self.show(seq, sim.run_id, "run", self.run_row(sim.run_id))

    def keep_sim(self, sim: Sim, seq: int | None = None) -> None:
        """A sim to write; without `seq`, bookkeeping no reader sees: its row keeps the
        sequence it had, and no change is shown to live streams."""
        self.sims[sim.id] = sim
        if seq is not None:
            self.seqs[sim.id] = seq
        self.changed_sims.add(sim.id)

    def sim_row(self, sim_id: str) -> SimRow:
        """The sim's row as it stands, its fields the state's by name. A stored row is a state,
        and evolving it keeps its type (`msgspec.structs.replace`): of such a state only the
        seq is new, a copy that costs a small part of building a row field by field, which
        every heartbeat's change does."""
        sim = self.sims[sim_id]
        seq = self.seqs[sim_id]
        if isinstance(sim, SimRow):
            return sim if sim.seq == seq else msgspec.structs.replace(sim, seq=seq)
        return SimRow(**msgspec.structs.asdict(sim), seq=seq)

    def sim_rows(self) -> dict[str, SimRow]:
        return {sim_id: self.sim_row(sim_id) for sim_id in self.sims}

    def put_run(self, seq: int, run: Run) -> Run:
        """A run as the event at `seq` changed it, which its row then names."""
        self.runs[run.id] = run
        self.run_seqs[run.id] = seq
        self.changed.add(("runs", run.id))
        return run

    def run_row(self, run_id: str) -> RunRow:
        if ("runs", run_id) not in self.changed:
            return self.run_rows[run_id]
        return RunRow.of(self.runs[run_id], self.run_seqs[run_id])


class Unfoldable(Exception):
    """The event at `seq` cannot be applied: the projector parks it and folds the rest."""

    def __init__(self, seq: int, error: str) -> None:
        super().__init__(f"event {seq}: {error}")
        self.seq = seq
        self.error = error


def fold(rows: Rows, items: Iterable[tuple[int, ev.AnyEvent]], *, changes: bool = True) -> Folded:
    """`Unfoldable` names the first event that cannot be applied; the fold is pure, so the
    same event fails the same way wherever a batch starts or ends. Without `changes` it makes
    the same rows and no `Change`: for a replay, which no live stream reads."""
    batch = _Batch(rows, changes)
    for seq, event in items:
        try:
            (_APPLY.get(type(event)) or _remember(_APPLY, _applier, event))(batch, seq, event)
        except Exception as err:  # noqa: BLE001 - a fold that raises has met an event it cannot apply
            raise Unfoldable(seq, str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}") from err
    return Folded(
        rows=Rows(batch.traces, {run_id: batch.run_row(run_id) for run_id in batch.runs}, batch.sim_rows()),
        changed=frozenset(batch.changed | {("sims", sim_id) for sim_id in batch.changed_sims}),
        appended=batch.appended,
        checked=batch.checked,
        purged_attempts=batch.purged_attempts,
        purged_traces=frozenset(batch.purged_traces),
        purged_samples=frozenset(batch.purged_samples),
        purged_runs=frozenset(batch.purged_runs),
        kernels=batch.kernels,
        changes=batch.changes,
    )


H = TypeVar("H")


def _remember(table: dict[type, H], choose: Callable[[ev.AnyEvent], H], e: ev.AnyEvent) -> H:
    """What `choose` gives for events of `e`'s type, kept in `table` by type: the hot path of
    the fold then finds it with a dict lookup, where the match `choose` makes, one arm after
    another, would cost more than the rest of a small event's fold."""
    table[type(e)] = chosen = choose(e)
    return chosen


Apply = Callable[[_Batch, int, Any], None]
_APPLY: dict[type, Apply] = {}  # how each event type is applied (`_applier`)


def _applier(e: ev.AnyEvent) -> Apply:
    """How events of `e`'s type are applied; the match is exhaustive, so an event type
    without a case fails the type check, and one outside the union fails here."""
    match e:
        case ev.SimHeartbeat():
            return _to_sim(_heartbeat)
        case ev.KernelFinished():
            return _to_sim(_kernel_finished)
        case ev.SimClaimed() | ev.SimLaunched() | ev.SimFinished():
            return _to_sim(_life_event)
        case ev.SimFileStored():
            return _to_sim(_file_stored)
        case ev.SimQueued() | ev.RunnerEnded() | ev.GpuConfigDerived():
            return _for_runners
        case ev.RunCreated():
            return _run_created
        case ev.RunCancelRequested():
            return _cancel_requested
        case ev.RunRetryRequested():
            return _retry_requested
        case ev.RunEntriesAdded():
            return _entries_added
        case ev.RunDeleted():
            return _run_deleted
        case ev.TraceEvent():
            return _apply_trace
        case ev.CampaignCreated():
            return _campaign_created
        case ev.CampaignRunsAdded():
            return _campaign_runs_added
        case ev.StatNamesDefined():
            return _stat_names_defined
        case _:
            assert_never(e)


E = TypeVar("E", bound=ev.SimEvent)


def _to_sim(handler: Callable[[_Batch, int, Sim, E], None]) -> Callable[[_Batch, int, E], None]:
    """A handler of a sim's facts, given the sim each names; a sim no run created has none."""

    def apply(b: _Batch, seq: int, e: E) -> None:
        sim = b.sims.get(e.sim_id)
        if sim is None:
            return
        if sim.run_id != e.run_id:
            # Its run's row was never loaded, and what it says is about a sim it does not own.
            raise ValueError(f"sim {e.sim_id} belongs to run {sim.run_id}, not to run {e.run_id}")
        handler(b, seq, sim, e)

    return apply


def _for_runners(b: _Batch, seq: int, e: ev.SimQueued | ev.RunnerEnded | ev.GpuConfigDerived) -> None:
    # A queued sim stays pending until a runner claims it; a runner's end is read by the
    # runner that claims its sims again, and the read model shows what that decides; a
    # config variant is read from its own subject by the service and the runners.
    pass


def _apply_trace(b: _Batch, seq: int, e: ev.TraceEvent) -> None:
    row = b.traces.get(e.trace_id)
    trace = None if row is None else row.trace
    if trace is not None and takes_rows(trace, e):
        _listed(b, e, trace.sample)
    after = evolve_trace(trace, e)
    if after is None or after is trace:
        return
    b.put_trace(TraceRow.of(after, seq))
    if isinstance(e, ev.TraceFailed | ev.TraceDeleted):
        b.purge_trace(e.trace_id)  # a failed upload's files were removed from the object store
    if isinstance(e, ev.TraceDeleted) and after.sample:
        b.purge_samples(e.trace_id)  # a sample run is there to show its trace, and no other run can use it


def _listed(b: _Batch, e: ev.TraceEvent, sample: bool) -> None:
    """The files, kernels or timing rows the event lists, as rows of its trace."""
    trace_id = e.trace_id
    match e:
        case ev.TraceFilesStored():
            for f in e.files:
                b.checked.trace_files.append(TraceFileRow(trace_id=trace_id, **msgspec.structs.asdict(f), sample=sample))
        case ev.TraceKernelsListed():
            for k in e.kernels:
                b.checked.trace_kernels.append(TraceKernelRow(trace_id=trace_id, **msgspec.structs.asdict(k), sample=sample))
        case ev.TraceRealTimingListed():
            for r in e.rows:
                timing = RealTimingRow(trace_id=trace_id, timing_id=e.timing_id, **msgspec.structs.asdict(r), sample=sample)
                b.checked.trace_real_timing.append(timing)


def _run_created(b: _Batch, seq: int, e: ev.RunCreated) -> None:
    if e.run_id in b.runs:
        return
    b.put_run(seq, new_run(e))
    for spec in e.sims:
        b.keep_sim(sim_state.new(e, spec), seq)


def _cancel_requested(b: _Batch, seq: int, e: ev.RunCancelRequested) -> None:
    run = b.runs.get(e.run_id)
    if run is None:
        return
    # In the order the run lists its sims, not the order they were loaded in: the changes'
    # order, and so their `k`, must not depend on where a batch began.
    configs = [entry.gpu_config for entry in run.entries]
    for sim in listed([s for s in b.sims.values() if s.run_id == e.run_id], configs):
        _evolved(b, seq, sim, e)


def _retry_requested(b: _Batch, seq: int, e: ev.RunRetryRequested) -> None:
    """Each sim still failed or cancelled waits for the attempt the retry asked for, its
    earlier attempt's rows forgotten (as a new attempt's claim forgets them), in the order
    the event lists them (the run's); of a split sim, each chunk listed."""
    for sim_id in dict.fromkeys([c.sim_id for c in e.chunks] + [s.sim_id for s in e.sims]):
        sim = b.sims.get(sim_id)
        if sim is not None:
            _evolved(b, seq, sim, e)


def _evolved(b: _Batch, seq: int, sim: Sim, e: sim_state.Evolving) -> None:
    """The sim after a life event; a sim whole's new attempt forgets the rows of the earlier
    ones, but what a resume carries on from."""
    after = sim_state.evolve(sim, e)
    if after is sim or after == sim:
        return
    if after.attempt != sim.attempt and sim.attempt and sim.split is None:
        resume = e.resume if isinstance(e, ev.SimClaimed) else None
        b.purge_sim(sim.id, after.attempt, None if resume is None else resume.first)
    b.put_sim(seq, sim, after)


def _entries_added(b: _Batch, seq: int, e: ev.RunEntriesAdded) -> None:
    """The run's new sims, pending, and its entries and counts with them; a second time,
    nothing (its sims are there)."""
    run = b.runs.get(e.run_id)
    if run is None or any(spec.sim_id in b.sims for spec in e.sims):
        return
    b.put_run(seq, evolve_run(run, e))
    for spec in e.sims:
        b.keep_sim(sim_state.new(e, spec), seq)
        if b.shows:
            b.show(seq, e.run_id, "sim", b.sim_row(spec.sim_id))
    b.show(seq, e.run_id, "run", b.run_row(e.run_id))


def _run_deleted(b: _Batch, seq: int, e: ev.RunDeleted) -> None:
    """The run gone, its sims and every row they hold; its events stay in the log. A second
    time, or after a replay that never saw the run, the same (it deletes nothing)."""
    b.purge_run(e.run_id)


S = TypeVar("S", bound=Sim)


def listed(sims: Iterable[S], configs: Sequence[str]) -> list[S]:
    """Sims in the order their run lists them: by config, in the order of the run's
    entries (`configs`, a config's first entry counting), then by replica."""
    order: dict[str, int] = {}
    for i, config in enumerate(configs):
        order.setdefault(config, i)
    return sorted(sims, key=lambda s: (order.get(s.gpu_config, len(order)), s.replica))


def _campaign_created(b: _Batch, seq: int, e: ev.CampaignCreated) -> None:
    """A campaign's row, kept once by its id (its name's subject takes one creation)."""
    row = CampaignRow(id=e.campaign_id, name=e.name, tags=list(e.tags), baseline=e.baseline, created_at=e.at, seq=seq)
    b.checked.campaigns.append(row)


def _campaign_runs_added(b: _Batch, seq: int, e: ev.CampaignRunsAdded) -> None:
    b.checked.campaign_runs += [
        CampaignRunRow(campaign_id=e.campaign_id, run_id=r.run_id, trace_id=r.trace_id, seq=seq, position=i) for i, r in enumerate(e.runs)
    ]


def _stat_names_defined(b: _Batch, seq: int, e: ev.StatNamesDefined) -> None:
    b.checked.stat_sets.append(StatSetRow(digest=e.digest, names=e.names))


def _kernel_finished(b: _Batch, seq: int, sim: Sim, e: ev.KernelFinished) -> None:
    if not sim_state.takes(sim, e):
        return
    row = KernelRow(
        sim_id=sim.id,
        attempt=e.attempt if e.chunk is None else sim.attempt,  # a split sim's are all its attempt's
        kernel_index=e.kernel_index,
        uid=e.uid,
        name=e.name,
        gpu_sim_cycle=e.gpu_sim_cycle,
        gpu_sim_insn=e.gpu_sim_insn,
        gpu_ipc=e.gpu_ipc,
        sim_time_ns=e.sim_time_ns,
        stats=e.stats,
        reused_from=e.reused_from,
        per_kernel=e.per_kernel,
        sample=sim.sample,
        seq=seq,
    )
    b.kernels.append(row)
    b.show(seq, sim.run_id, "kernel", row)
    after = sim_state.recorded(sim, e.kernel_index)
    if after is sim:
        b.checked.kernels.append(row)
        return
    b.appended.kernels.append(row)
    b.keep_sim(after)  # bookkeeping no reader sees


def _heartbeat(b: _Batch, seq: int, sim: Sim, e: ev.SimHeartbeat) -> None:
    if not sim_state.takes(sim, e):
        return
    # Lines past the last one recorded are certainly new; earlier ones (a late or repeated
    # heartbeat) are kept only if their chunk is absent.
    text = deflated.log_text(e)  # deflated by the runner: read once
    count = ev.lines_in(text)
    if count:
        # Lines past the last one recorded are certainly new; earlier ones (a late or repeated
        # heartbeat), and a chunk's (any chunk may come first), are kept only if absent.
        whole = e.chunk is None
        chunk = LogChunkRow(
            sim_id=sim.id, attempt=e.attempt if whole else sim.attempt, first_line_seq=e.first_line_seq, line_count=count, sample=sim.sample, seq=seq
        )
        fresh = whole and sim.log_seq < e.first_line_seq
        (b.appended if fresh else b.checked).sim_log.append(chunk)
    after = sim_state.heartbeat(sim, e, text, count)
    if after is not sim:
        b.put_sim(seq, sim, after)


def _file_stored(b: _Batch, seq: int, sim: Sim, e: ev.SimFileStored) -> None:
    if not sim_state.takes(sim, e):
        return
    row = SimFileRow(
        sim_id=sim.id,
        attempt=e.attempt if e.chunk is None else sim.attempt,
        name=e.name,
        size=e.size,
        content_type=e.content_type,
        created_at=e.at,
        object_name=e.object_name,
        digest=e.digest,
        sample=sim.sample,
        seq=seq,
    )
    b.checked.sim_files.append(row)
    b.show(seq, sim.run_id, "file", row)


def _life_event(b: _Batch, seq: int, sim: Sim, e: ev.SimClaimed | ev.SimLaunched | ev.SimFinished) -> None:
    _evolved(b, seq, sim, e)


class _Touched:
    def __init__(self) -> None:
        self.traces: set[str] = set()
        self.runs: set[str] = set()
        self.sims: set[str] = set()
        self.whole_runs: set[str] = set()


def touched(items: Iterable[tuple[int, ev.AnyEvent]]) -> tuple[set[str], set[str], set[str], set[str]]:
    """Trace ids, run ids, sim ids, and runs all of whose sims a batch needs loaded."""
    found = _Touched()
    for _, e in items:
        (_TOUCH.get(type(e)) or _remember(_TOUCH, _toucher, e))(e, found)
    return found.traces, found.runs, found.sims, found.whole_runs


Touch = Callable[[Any, _Touched], None]
_TOUCH: dict[type, Touch] = {}  # what each event type's ids add (`_toucher`)


def _toucher(e: ev.AnyEvent) -> Touch:
    match e:
        case ev.SimEvent():
            return _touch_sim
        case ev.RunCancelRequested():
            return _touch_cancel
        case ev.RunCreated() | ev.RunDeleted():
            return _touch_run
        case ev.RunRetryRequested() | ev.RunEntriesAdded():
            return _touch_listed
        case ev.TraceEvent():
            return _touch_trace
        case ev.RunnerEnded() | ev.GpuConfigDerived() | ev.CampaignEvent() | ev.StatNamesDefined():
            return _touch_nothing
        case _:
            assert_never(e)


def _touch_sim(e: ev.SimEvent, found: _Touched) -> None:
    found.sims.add(e.sim_id)
    found.runs.add(e.run_id)


def _touch_cancel(e: ev.RunCancelRequested, found: _Touched) -> None:
    found.whole_runs.add(e.run_id)
    found.runs.add(e.run_id)


def _touch_run(e: ev.RunCreated | ev.RunDeleted, found: _Touched) -> None:
    found.runs.add(e.run_id)


def _touch_listed(e: ev.RunRetryRequested | ev.RunEntriesAdded, found: _Touched) -> None:
    found.runs.add(e.run_id)
    found.sims.update(s.sim_id for s in e.sims)
    if isinstance(e, ev.RunRetryRequested):
        found.sims.update(c.sim_id for c in e.chunks)


def _touch_nothing(e: ev.RunnerEnded | ev.GpuConfigDerived | ev.CampaignEvent | ev.StatNamesDefined, found: _Touched) -> None:
    pass  # it changes no entity row


def _touch_trace(e: ev.TraceEvent, found: _Touched) -> None:
    found.traces.add(e.trace_id)
