"""The projection as a pure fold: events in, rows out.

`fold(state, items)` takes the current rows a batch of events can touch and the events with
their stream sequences, and returns the rows as they stand afterwards plus the rows to append.
It never mutates its input and reads no clock: the projector loads the rows, calls it, and
writes what it returns. Applying an event twice changes nothing: entity updates are guarded by
the state they move from, and appended rows carry natural keys. Rows the fold knows are new
(a log line past the sim's last, a kernel past its count) are simply inserted; any other row
is inserted only if its key is absent, which costs a lookup, so the common path avoids it.

A sim's row changes state only as `cascade_core/sims.py` evolves it, and takes a runner's
fact only if it counts there: the rules of a sim's life live in that one place, shared with
the runner. A run's state follows from its sims' (`cascade_core/runs.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar, assert_never

import msgspec

from cascade_core import events as ev
from cascade_core import sims as life
from cascade_core import split as splitting
from cascade_core.models import Resumed, SimAttempt
from cascade_core.runs import run_state
from cascade_core.sims import FINISHED, SIM_STATES, UNDER_WAY
from cascade_nats import deflated
from projections.rows import (
    APPEND_TABLES,
    ChunkRow,
    KernelRow,
    LogChunkRow,
    RealTimingRow,
    RunRow,
    SimFileRow,
    SimRow,
    SplitRow,
    TraceFileRow,
    TraceKernelRow,
    TraceRow,
)

LOG_TAIL = 20

# What the fold makes of the log. Bump it whenever the same events would now give other rows
# (a rule, a derived value, a default) without any table changing shape: a read model built
# by another version is then rebuilt from the log when the service starts (`rebuild.py`).
VERSION = 1

_json = msgspec.json.Encoder()
_counts_decoder = msgspec.json.Decoder(dict[str, int])
_entries = msgspec.json.Decoder(list[ev.ConfigCount])
_splits = msgspec.json.Decoder(SplitRow)
_attempts = msgspec.json.Decoder(list[SimAttempt])
_resumed = msgspec.json.Decoder(list[Resumed])


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


class Folded(msgspec.Struct, frozen=True):
    rows: Rows
    changed: frozenset[tuple[str, str]]  # (table, id) of entity rows to write
    appended: dict[str, list[msgspec.Struct]]  # certainly new rows
    checked: dict[str, list[msgspec.Struct]]  # rows to add unless their key is already there
    # Rows to delete before the appended ones are written, in order: a sim's attempts before
    # the one given, but, with a launch (a resume's first), its kernels before it and its log
    # lines, which are made the given attempt's; and a deleted trace's files, kernels and timing.
    purged_attempts: list[tuple[str, int, int | None]]
    purged_traces: frozenset[str]
    # Every kernel result applied, in order, kept or not: their maps' names get ids (`stats_rows`).
    kernels: list[KernelRow]
    changes: list[Change]  # none when the fold was asked for none


class _Batch:
    """The working copy one fold call writes into."""

    def __init__(self, rows: Rows, changes: bool) -> None:
        self.shows = changes
        self.traces = dict(rows.traces)
        self.runs = dict(rows.runs)
        self.sims = dict(rows.sims)
        self.made: set[str] = set()  # sims whose row in `sims` this batch made (`advance_sim`)
        self.changed: set[tuple[str, str]] = set()
        self.appended: dict[str, list[msgspec.Struct]] = {table: [] for table in APPEND_TABLES}
        self.checked: dict[str, list[msgspec.Struct]] = {table: [] for table in APPEND_TABLES}
        self.purged_attempts: list[tuple[str, int, int | None]] = []
        self.purged_traces: set[str] = set()
        self.kernels: list[KernelRow] = []
        self.changes: list[Change] = []

    def purge_sim(self, sim_id: str, attempt: int, first: int | None = None) -> None:
        """Forget the rows of the sim's attempts before `attempt`, stored or in this batch."""
        self.purged_attempts.append((sim_id, attempt, first))
        for rows in (self.appended, self.checked):
            for table in ("kernels", "sim_log", "sim_files"):
                rows[table] = [r for r in rows[table] if r.sim_id != sim_id or r.attempt >= attempt]  # type: ignore[attr-defined]  # rows of these tables, untyped here, all have both

    def carry_sim(self, sim_id: str, attempt: int, first: int) -> None:
        """Make the sim's kernels of launches before `first` and its log lines, of its
        attempts before `attempt`, that attempt's, stored or in this batch; forget the rest."""
        for rows in (self.appended, self.checked):
            rows["kernels"] = [_carried(r, sim_id, attempt, r.uid < first) for r in rows["kernels"]]  # type: ignore[attr-defined]  # these are KernelRows
            rows["sim_log"] = [_carried(r, sim_id, attempt, True) for r in rows["sim_log"]]
        self.purge_sim(sim_id, attempt, first)

    def purge_trace(self, trace_id: str) -> None:
        self.purged_traces.add(trace_id)
        for rows in (self.appended, self.checked):
            for table in ("trace_files", "trace_kernels", "trace_real_timing"):
                rows[table] = [r for r in rows[table] if r.trace_id != trace_id]  # type: ignore[attr-defined]  # rows of these tables, untyped here, all have it

    def put_trace(self, row: TraceRow) -> None:
        self.traces[row.id] = row
        self.changed.add(("traces", row.id))

    def update_sim(self, seq: int, old: SimRow, changes: dict[str, object]) -> None:
        """Change some of a sim's fields. An update that changes nothing leaves the row as it
        is, with the sequence of the event that last changed it."""
        for name, value in changes.items():
            if getattr(old, name) != value:
                self.put_sim(seq, old, msgspec.structs.replace(old, seq=seq, **changes))
                return

    def show(self, seq: int, run_id: str, kind: str, row: SimRow | KernelRow | SimFileRow | RunRow) -> None:
        """A change for live streams, numbered among those of the event at `seq` (an
        event's changes are consecutive: items are applied one at a time)."""
        if not self.shows:
            return
        last = self.changes[-1] if self.changes else None
        k = last.k + 1 if last is not None and last.seq == seq else 0
        self.changes.append(Change(seq=seq, k=k, run_id=run_id, kind=kind, row=row))

    def put_sim(self, seq: int, old: SimRow, row: SimRow) -> None:
        """A sim's row as the event at `seq` changed it from `old`; an attempt another one
        replaces (a retry, or a lost runner's) goes to its past attempts."""
        if row.attempt != old.attempt and old.attempt and old.state != "pending":
            row = msgspec.structs.replace(row, attempts=_json.encode([*_attempts.decode(old.attempts), _past(old)]).decode())
        self.keep_sim(row)
        self.show(seq, row.run_id, "sim", row)
        if old.state != row.state:
            self._count(seq, row.run_id, old.state, row.state)

    def keep_sim(self, row: SimRow) -> None:
        """A sim's row to write, with no change of it shown to live streams."""
        self.sims[row.id] = row
        self.changed.add(("sims", row.id))
        self.made.add(row.id)

    def advance_sim(self, sim: SimRow, fields: dict[str, Any], seq: int | None) -> None:
        """A sim's progress, `fields` that change neither its state nor its attempt, as the
        event at `seq` changed it, which its row then names (None: bookkeeping no reader sees,
        kept without a change shown). Without changes for live streams, a row this batch made
        itself is changed in place: nothing but `sims` holds it (only a `Change` would), and a
        replay's heartbeats and kernel results then copy a sim's row once per batch, not once
        each (a row's copy was a fifth of their fold: bench/README.md). Rows the fold was given
        are never changed."""
        if not self.shows and sim.id in self.made:
            for name, value in fields.items():
                msgspec.structs.force_setattr(sim, name, value)
            if seq is not None:
                msgspec.structs.force_setattr(sim, "seq", seq)
        elif seq is None:
            self.keep_sim(msgspec.structs.replace(sim, **fields))
        else:
            self.put_sim(seq, sim, msgspec.structs.replace(sim, seq=seq, **fields))

    def _count(self, seq: int, run_id: str, old: str, new: str) -> None:
        run = self.runs[run_id]
        counts = _counts_decoder.decode(run.sim_counts)
        counts[old] -= 1
        counts[new] = counts.get(new, 0) + 1
        was = run.state
        run = self.count(seq, run, counts)
        if run.state != "active" or was != run.state:  # it ended, or a retry made it active again
            self.show(seq, run_id, "run", run)

    def count(self, seq: int, run: RunRow, counts: dict[str, int], **changes: object) -> RunRow:
        """The run with these per-state counts of its sims, and the state they give it."""
        ordered = {s: counts[s] for s in SIM_STATES if counts.get(s)}
        run = msgspec.structs.replace(run, sim_counts=_json.encode(ordered).decode(), state=run_state(counts), seq=seq, **changes)
        self.runs[run.id] = run
        self.changed.add(("runs", run.id))
        return run


def _carried(row: msgspec.Struct, sim_id: str, attempt: int, kept: bool) -> msgspec.Struct:
    """A kernel or log row of the batch as a resume leaves it: made the resuming attempt's
    when it is kept from an earlier one of its sim."""
    if kept and row.sim_id == sim_id and row.attempt < attempt:  # type: ignore[attr-defined]  # rows of these tables, untyped here, all have both
        return msgspec.structs.replace(row, attempt=attempt)
    return row


def _past(sim: SimRow) -> SimAttempt:
    """The sim's current attempt as one of its past ones: how it ended, or lost when a new
    attempt took over from an unfinished one."""
    state = "lost" if sim.state in UNDER_WAY else sim.state
    error = f"runner lost: {sim.runner_id} on {sim.host} stopped responding" if sim.state in UNDER_WAY else sim.error
    return SimAttempt(
        attempt=sim.attempt, state=state, error=error, exit_code=sim.exit_code, runner_id=sim.runner_id,  # type: ignore[arg-type]  # one of its Literal: `sims` leaves a replaced attempt nothing else
        host=sim.host, started_at=sim.started_at, finished_at=sim.finished_at,
    )


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
        rows=Rows(batch.traces, batch.runs, batch.sims),
        changed=frozenset(batch.changed),
        appended=batch.appended,
        checked=batch.checked,
        purged_attempts=batch.purged_attempts,
        purged_traces=frozenset(batch.purged_traces),
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
        case ev.SimClaimed():
            return _to_sim(_claimed)
        case ev.SimLaunched():
            return _to_sim(_launched)
        case ev.SimFileStored():
            return _to_sim(_file_stored)
        case ev.SimFinished():
            return _to_sim(_finished)
        case ev.SimQueued() | ev.RunnerEnded():
            return _for_runners
        case ev.RunCreated():
            return _run_created
        case ev.RunCancelRequested():
            return _cancel_requested
        case ev.RunRetryRequested():
            return _retry_requested
        case ev.RunEntriesAdded():
            return _entries_added
        case ev.TraceEvent():
            return _apply_trace
        case _:
            assert_never(e)


E = TypeVar("E", bound=ev.SimEvent)


def _to_sim(handler: Callable[[_Batch, int, SimRow, E], None]) -> Callable[[_Batch, int, E], None]:
    """A handler of a sim's facts, given the sim each names; a sim no run created has none."""

    def apply(b: _Batch, seq: int, e: E) -> None:
        sim = b.sims.get(e.sim_id)
        if sim is None:
            return
        if sim.run_id != e.run_id:
            # Its run's row was never loaded, and what it says is about a sim it does not own.
            raise ValueError(f"sim {e.sim_id} belongs to run {sim.run_id}, not to run {e.run_id}")
        if e.chunk is None:
            handler(b, seq, sim, e)
        elif sim.split is not None:  # a chunk of a sim that is not split says nothing that counts
            _chunk_fact(b, seq, sim, e)

    return apply


def _for_runners(b: _Batch, seq: int, e: ev.SimQueued | ev.RunnerEnded) -> None:
    # A queued sim stays pending until a runner claims it; a runner's end is read by the
    # runner that claims its sims again, and the read model shows what that decides.
    pass


def _apply_trace(b: _Batch, seq: int, e: ev.TraceEvent) -> None:
    trace_id = e.trace_id
    trace = b.traces.get(trace_id)
    if trace is not None and e.at < trace.created_at:
        return  # from an earlier upload under the same id, since deleted
    match e:
        case ev.TraceUploadStarted():
            if trace is None or trace.deleted and e.at > trace.updated_at:
                b.put_trace(_new_trace(seq, e))
            return
        case ev.TraceFilesStored() if trace is not None and _open(trace):
            for f in e.files:
                b.checked["trace_files"].append(TraceFileRow(trace_id=trace_id, **msgspec.structs.asdict(f)))
            if trace.state == "uploading":  # the whole upload is stored: processing it starts
                b.put_trace(msgspec.structs.replace(trace, state="processing", updated_at=e.at, seq=seq))
            return
        case ev.TraceKernelsListed() if trace is not None and _open(trace):
            for k in e.kernels:
                b.checked["trace_kernels"].append(TraceKernelRow(trace_id=trace_id, **msgspec.structs.asdict(k)))
            return
        case ev.TraceRealTimingListed() if trace is not None and _open(trace):
            for r in e.rows:
                timing = RealTimingRow(trace_id=trace_id, timing_id=e.timing_id, **msgspec.structs.asdict(r))
                b.checked["trace_real_timing"].append(timing)
            return
        case ev.TraceRealTimingAttached():
            if trace is not None and not trace.deleted and trace.state == "ready" and trace.real_timing == e.replaces:
                b.put_trace(msgspec.structs.replace(trace, real_timing=e.timing_id, has_real_timing=True, updated_at=e.at, seq=seq))
            return
    if trace is None or trace.deleted or trace.state in ("ready", "failed") and not isinstance(e, ev.TraceDeleted):
        return
    match e:
        case ev.TraceReady():
            b.put_trace(
                msgspec.structs.replace(
                    trace,
                    state="ready",
                    updated_at=e.at,
                    trace_gpu_arch=e.trace_gpu_arch,
                    kernel_count=e.kernel_count,
                    bytes=e.bytes,
                    suggested_sim_config=e.suggested_sim_config,
                    has_real_timing=e.has_real_timing,
                    real_timing=ev.UPLOAD_TIMING if e.has_real_timing else None,
                    has_step_timeline=e.has_step_timeline,
                    model=e.model,
                    layers=_json.encode(e.layers).decode(),
                    source_gpu=e.source_gpu,
                    seq=seq,
                )
            )
        case ev.TraceFailed():
            b.put_trace(msgspec.structs.replace(trace, state="failed", error=e.error, bytes=e.bytes, updated_at=e.at, seq=seq))
            b.purge_trace(trace_id)  # a failed upload's files were removed from the object store
        case ev.TraceDeleted():
            b.put_trace(msgspec.structs.replace(trace, deleted=True, updated_at=e.at, seq=seq))
            b.purge_trace(trace_id)


def _open(trace: TraceRow) -> bool:
    """Whether the trace still takes files, kernels and timing rows."""
    return not trace.deleted and trace.state != "failed"


def _new_trace(seq: int, e: ev.TraceUploadStarted) -> TraceRow:
    return TraceRow(
        id=e.trace_id,
        state="uploading",
        error=None,
        created_at=e.at,
        updated_at=e.at,
        model=None,
        layers="[]",
        source_gpu=None,
        trace_gpu_arch=None,
        suggested_sim_config=None,
        kernel_count=0,
        bytes=0,
        has_real_timing=False,
        has_step_timeline=False,
        sample=e.sample,
        deleted=False,
        seq=seq,
        real_timing=None,
    )


def _run_created(b: _Batch, seq: int, e: ev.RunCreated) -> None:
    if e.run_id in b.runs:
        return
    counts = {"pending": len(e.sims)} if e.sims else {}
    b.runs[e.run_id] = RunRow(
        id=e.run_id,
        trace_id=e.trace_id,
        created_at=e.at,
        state=run_state(counts),
        entries=_json.encode(e.entries).decode(),
        sim_counts=_json.encode(counts).decode(),
        sample=e.sample,
        kernels_total=e.kernels_total,
        seq=seq,
    )
    b.changed.add(("runs", e.run_id))
    for spec in e.sims:
        b.keep_sim(_new_sim(seq, e, spec))


def _cancel_requested(b: _Batch, seq: int, e: ev.RunCancelRequested) -> None:
    run = b.runs.get(e.run_id)
    if run is None:
        return
    # In the order the run lists its sims, not the order they were loaded in: the changes'
    # order, and so their `k`, must not depend on where a batch began.
    configs = [entry.gpu_config for entry in _entries.decode(run.entries)]
    for sim in listed([s for s in b.sims.values() if s.run_id == e.run_id], configs):
        if sim.split is not None:
            _chunks_evolve(b, seq, sim, e, {})
            continue
        before = _life(sim)
        after = life.evolve(before, e)
        if after is not before:
            b.update_sim(seq, sim, {**_lifecycle(after), "finished_at": e.at})


def _retry_requested(b: _Batch, seq: int, e: ev.RunRetryRequested) -> None:
    """Each sim still failed or cancelled waits for the attempt the retry asked for, its
    earlier attempt's rows forgotten (as a new attempt's claim forgets them), in the order
    the event lists them (the run's); of a split sim, each chunk listed."""
    for chunk in e.chunks:
        sim = b.sims.get(chunk.sim_id)
        if sim is not None and sim.run_id == e.run_id and sim.split is not None:
            _chunk_retried(b, seq, sim, chunk.chunk, chunk.attempt)
    for retried in e.sims:
        sim = b.sims.get(retried.sim_id)
        if sim is None or sim.run_id != e.run_id or sim.split is not None:
            continue
        before = _life(sim)
        after = life.retried(before, retried.attempt)
        if after is before:
            continue
        b.purge_sim(sim.id, after.attempt)
        b.update_sim(seq, sim, {**_lifecycle(after), **_NO_PROGRESS, "error": None, "exit_code": None, "finished_at": None})


def _chunk_retried(b: _Batch, seq: int, sim: SimRow, index: int, attempt: int) -> None:
    """A split sim's chunk waits for the attempt a retry asked for, its kernels, log and files
    kept (its sim's, by natural key: a kernel it records again is stored once), and the sim
    goes on as its chunks make it."""
    split = sim.splitting
    assert split is not None
    if not 0 <= index < len(split.chunks):
        raise ValueError(f"sim {sim.id} has {len(split.chunks)} chunks, not a chunk {index}")
    chunk = split.chunks[index]
    before = _chunk_life(sim, index, chunk)
    after = life.retried(before, attempt)
    if after is before:
        return
    chunks = list(split.chunks)
    chunks[index] = msgspec.structs.replace(chunk, **_lifecycle(after), error=None, exit_code=None)
    state = splitting.sim_state([c.state for c in chunks])
    changes = {"split": _json.encode(msgspec.structs.replace(split, chunks=chunks)).decode(), "state": state}
    b.update_sim(seq, sim, {**changes, "error": None, "exit_code": None, "finished_at": None})


def _entries_added(b: _Batch, seq: int, e: ev.RunEntriesAdded) -> None:
    """The run's new sims, pending, and its entries and counts with them; a second time,
    nothing (its sims are there)."""
    run = b.runs.get(e.run_id)
    if run is None or any(spec.sim_id in b.sims for spec in e.sims):
        return
    counts = _counts_decoder.decode(run.sim_counts)
    counts["pending"] = counts.get("pending", 0) + len(e.sims)
    run = b.count(seq, run, counts, entries=_json.encode([*_entries.decode(run.entries), *e.entries]).decode())
    for spec in e.sims:
        sim = _new_sim(seq, e, spec)
        b.keep_sim(sim)
        b.show(seq, e.run_id, "sim", sim)
    b.show(seq, e.run_id, "run", run)


def listed(sims: Iterable[SimRow], configs: Sequence[str]) -> list[SimRow]:
    """Sims in the order their run lists them: by config, in the order of the run's
    entries (`configs`, a config's first entry counting), then by replica."""
    order: dict[str, int] = {}
    for i, config in enumerate(configs):
        order.setdefault(config, i)
    return sorted(sims, key=lambda s: (order.get(s.gpu_config, len(order)), s.replica))


# The SimRow fields an attempt's run sets: a sim starts without, and a new attempt starts
# over. Typed loosely, so as not to write SimRow's field types out twice: SimRow refuses a
# name it lacks each time it is built from these, which every new sim is.
_NO_PROGRESS: dict[str, Any] = {
    "launcher_ref": None,
    "started_at": None,
    "last_heartbeat_at": None,
    "kernels_done": 0,
    "current_kernel": None,
    "gpu_tot_sim_cycle": None,
    "gpu_tot_sim_insn": None,
    "gpu_tot_ipc": None,
    "sim_rate_ips": None,
    "log_tail": [],
    "log_seq": 0,
    "kernels_recorded": 0,
}


def _new_sim(seq: int, e: ev.RunCreated | ev.RunEntriesAdded, spec: ev.SimSpec) -> SimRow:
    return SimRow(
        id=spec.sim_id,
        run_id=e.run_id,
        gpu_config=spec.gpu_config,
        replica=spec.replica,
        state="pending",
        error=None,
        created_at=e.at,
        finished_at=None,
        exit_code=None,
        kernels_total=e.kernels_total,
        attempt=0,
        runner_id=None,
        host=None,
        config_digests=None,
        accel_sim_build=None,
        gpgpu_sim_build=None,
        split=None if spec.split is None else _new_split(e.kernels_total, spec.split),
        reuse=spec.reuse,
        attempts="[]",
        reference_for=spec.reference_for,
        resumed="[]",
        seq=seq,
        **_NO_PROGRESS,
    )


def _new_split(kernels_total: int, split: ev.Split) -> str:
    chunks = [ChunkRow()] * splitting.chunk_count(kernels_total, split)
    return _json.encode(SplitRow(kernels_per_chunk=split.kernels_per_chunk, warmup=split.warmup, chunks=chunks)).decode()


def _life(sim: SimRow) -> life.SimState:
    return life.SimState(run_id=sim.run_id, sim_id=sim.id, state=sim.state, attempt=sim.attempt, runner_id=sim.runner_id, host=sim.host)


def _lifecycle(sim: life.SimState) -> dict[str, object]:
    """The row's fields a sim's lifecycle state sets."""
    return {"state": sim.state, "attempt": sim.attempt, "runner_id": sim.runner_id, "host": sim.host}


def _claimed(b: _Batch, seq: int, sim: SimRow, e: ev.SimClaimed) -> None:
    before = _life(sim)
    after = life.evolve(before, e)
    if after is before:
        return
    resume = e.resume
    if resume is None or not sim.attempt:
        if sim.attempt:
            b.purge_sim(sim.id, after.attempt)
        b.update_sim(seq, sim, {**_lifecycle(after), **_NO_PROGRESS})
        return
    # It carries on from the lost attempt: what that recorded before the resume's first
    # launch is kept (the log whole), the rest goes, as the launches after run again.
    b.carry_sim(sim.id, after.attempt, resume.first)
    kept = resume.first - 1
    progress = {**_NO_PROGRESS, "kernels_done": kept, "kernels_recorded": kept, "log_tail": sim.log_tail, "log_seq": sim.log_seq}
    progress |= {name: getattr(sim, name) for name in ("gpu_tot_sim_cycle", "gpu_tot_sim_insn", "gpu_tot_ipc")}
    resumed = [*_resumed.decode(sim.resumed), Resumed(attempt=after.attempt, first=resume.first, warmup=resume.warmup)]
    b.update_sim(seq, sim, {**_lifecycle(after), **progress, "resumed": _json.encode(resumed).decode()})


def _finished(b: _Batch, seq: int, sim: SimRow, e: ev.SimFinished) -> None:
    before = _life(sim)
    after = life.evolve(before, e)
    if after is not before:
        b.update_sim(seq, sim, {**_lifecycle(after), "exit_code": e.exit_code, "error": e.error, "finished_at": e.at})


def _launched(b: _Batch, seq: int, sim: SimRow, e: ev.SimLaunched) -> None:
    before = _life(sim)
    after = life.evolve(before, e)
    if after is before:
        return
    launched = {
        **_lifecycle(after),
        "launcher_ref": e.launcher_ref,
        "started_at": e.at,
        "config_digests": _json.encode(e.config_digests).decode(),
        "accel_sim_build": e.accel_sim_build,
        "gpgpu_sim_build": e.gpgpu_sim_build,
    }
    b.update_sim(seq, sim, launched)


def _kernel_finished(b: _Batch, seq: int, sim: SimRow, e: ev.KernelFinished) -> None:
    if not life.counts(sim, e):
        return
    row = KernelRow(
        sim_id=sim.id,
        attempt=e.attempt,
        kernel_index=e.kernel_index,
        uid=e.uid,
        name=e.name,
        gpu_sim_cycle=e.gpu_sim_cycle,
        gpu_sim_insn=e.gpu_sim_insn,
        gpu_ipc=e.gpu_ipc,
        sim_time_ns=e.sim_time_ns,
        stats=e.stats,
        reused_from=e.reused_from,
        seq=seq,
    )
    b.kernels.append(row)
    b.show(seq, sim.run_id, "kernel", row)
    if e.kernel_index < sim.kernels_recorded:
        b.checked["kernels"].append(row)
        return
    b.appended["kernels"].append(row)
    # Bookkeeping no reader sees: the row keeps the sequence it had and shows no change.
    b.advance_sim(sim, {"kernels_recorded": e.kernel_index + 1}, None)


def _heartbeat(b: _Batch, seq: int, sim: SimRow, e: ev.SimHeartbeat) -> None:
    if not life.counts(sim, e):
        return
    # Lines past the last one recorded are certainly new; earlier ones (a late or repeated
    # heartbeat) are kept only if their chunk is absent.
    text = deflated.log_text(e)  # deflated by the runner: read once
    count = ev.lines_in(text)
    fresh_from = max(0, sim.log_seq + 1 - e.first_line_seq)
    if count:
        chunk = LogChunkRow(sim_id=sim.id, attempt=e.attempt, first_line_seq=e.first_line_seq, line_count=count, seq=seq)
        (b.appended if fresh_from == 0 else b.checked)["sim_log"].append(chunk)
    # Either change certainly changes the row: new lines move `log_seq` on, a later
    # heartbeat moves `last_heartbeat_at` on.
    changes: dict[str, Any] = {}
    if fresh_from < count:
        last = text.rsplit("\n", LOG_TAIL)[-min(LOG_TAIL, count - fresh_from) :]
        changes["log_tail"] = (sim.log_tail + last)[-LOG_TAIL:]
        changes["log_seq"] = e.first_line_seq + count - 1
    if sim.last_heartbeat_at is None or e.at > sim.last_heartbeat_at:
        latest = e.latest
        changes["last_heartbeat_at"] = e.at
        changes["kernels_done"] = e.kernels_done
        changes["current_kernel"] = e.current_kernel
        changes["gpu_tot_sim_cycle"] = latest.gpu_tot_sim_cycle
        changes["gpu_tot_sim_insn"] = latest.gpu_tot_sim_insn
        changes["gpu_tot_ipc"] = latest.gpu_tot_ipc
        changes["sim_rate_ips"] = latest.sim_rate_ips
    if changes:
        b.advance_sim(sim, changes, seq)


def _file_stored(b: _Batch, seq: int, sim: SimRow, e: ev.SimFileStored) -> None:
    if not life.counts(sim, e):
        return
    row = SimFileRow(
        sim_id=sim.id,
        attempt=e.attempt,
        name=e.name,
        size=e.size,
        content_type=e.content_type,
        created_at=e.at,
        object_name=e.object_name,
        digest=e.digest,
        seq=seq,
    )
    b.checked["sim_files"].append(row)
    b.show(seq, sim.run_id, "file", row)


# --- a split sim: each chunk lives as a sim does, the sim's row sums them up -----------------


def _chunk_life(sim: SimRow, index: int, chunk: ChunkRow) -> life.SimState:
    return life.SimState(
        run_id=sim.run_id, sim_id=sim.id, state=chunk.state, attempt=chunk.attempt, runner_id=chunk.runner_id, host=chunk.host,
        chunk=index,
    )


def _chunk_fact(b: _Batch, seq: int, sim: SimRow, e: ev.SimEvent) -> None:
    assert sim.split is not None and e.chunk is not None
    split = _splits.decode(sim.split)
    if not 0 <= e.chunk < len(split.chunks):
        raise ValueError(f"sim {sim.id} has {len(split.chunks)} chunks, not a chunk {e.chunk}")
    chunk = split.chunks[e.chunk]
    match e:
        case ev.SimClaimed() | ev.SimLaunched() | ev.SimFinished():
            _chunks_evolve(b, seq, sim, e, _launch_fields(sim, e))
        case ev.SimHeartbeat() if life.counts(_chunk_life(sim, e.chunk, chunk), e):
            _chunk_heartbeat(b, seq, sim, split, e)
        case ev.KernelFinished() if life.counts(_chunk_life(sim, e.chunk, chunk), e):
            _kernel_finished(b, seq, sim, msgspec.structs.replace(e, attempt=sim.attempt, chunk=None))
        case ev.SimFileStored() if life.counts(_chunk_life(sim, e.chunk, chunk), e):
            _file_stored(b, seq, sim, msgspec.structs.replace(e, attempt=sim.attempt, chunk=None))


def _launch_fields(sim: SimRow, e: ev.SimEvent) -> dict[str, object]:
    """What a chunk's launch tells of the sim: its first launch is the sim's."""
    if not isinstance(e, ev.SimLaunched) or sim.started_at is not None:
        return {}
    return {
        "launcher_ref": e.launcher_ref,
        "started_at": e.at,
        "config_digests": _json.encode(e.config_digests).decode(),
        "accel_sim_build": e.accel_sim_build,
        "gpgpu_sim_build": e.gpgpu_sim_build,
    }


def _chunks_evolve(b: _Batch, seq: int, sim: SimRow, e: life.SimLife, fields: dict[str, object]) -> None:
    """Every chunk after a life event (a chunk's own, a sibling's failure, the run's cancel),
    and the sim as they leave it."""
    assert sim.split is not None
    split = _splits.decode(sim.split)
    chunks = list(split.chunks)
    lives = [_chunk_life(sim, i, chunk) for i, chunk in enumerate(chunks)]
    for i, (chunk, before, after) in enumerate(zip(split.chunks, lives, life.evolve_split(lives, e))):
        if after == before:
            continue
        changed: dict[str, object] = {"state": after.state, "attempt": after.attempt, "runner_id": after.runner_id, "host": after.host}
        if isinstance(e, ev.SimClaimed) and e.resume is not None:  # it carries on from its lost attempt's last heartbeat
            changed |= {"resumed": [*chunk.resumed, Resumed(attempt=after.attempt, first=e.resume.first, warmup=e.resume.warmup)]}
        elif isinstance(e, ev.SimClaimed):  # a new attempt of the chunk starts over
            changed |= {"kernels_done": 0, "gpu_tot_sim_cycle": None, "gpu_tot_sim_insn": None, "sim_rate_ips": None, "last_heartbeat_at": None}
        if isinstance(e, ev.SimFinished) and e.chunk == i:
            changed |= {"error": e.error, "exit_code": e.exit_code}
        chunks[i] = msgspec.structs.replace(chunk, **changed)
    if chunks == split.chunks:
        return
    b.update_sim(seq, sim, {**fields, **_split_fields(sim, split, chunks, e)})


def _split_fields(sim: SimRow, split: SplitRow, chunks: list[ChunkRow], e: life.SimLife) -> dict[str, object]:
    """The sim's row as its chunks make it: its state from theirs, its attempt 1 once one was
    claimed (its kernels, log and files are all stored under it), its progress their sum."""
    state = splitting.sim_state([c.state for c in chunks])
    fields: dict[str, object] = {
        "split": _json.encode(msgspec.structs.replace(split, chunks=chunks)).decode(),
        "state": state,
        "attempt": max(sim.attempt, 1 if any(c.attempt for c in chunks) else 0),
        "kernels_done": sum(c.kernels_done for c in chunks),
    }
    fields |= _summed(chunks)
    if isinstance(e, ev.SimClaimed):
        fields |= {"runner_id": e.runner_id, "host": e.host}
    if state in FINISHED and sim.state not in FINISHED:
        fields["finished_at"] = e.at
        failed = next((i for i, c in enumerate(chunks) if c.state == "failed"), None)
        if failed is not None:
            plan = splitting.chunk_of(sim.kernels_total, ev.Split(split.kernels_per_chunk, split.warmup), failed)
            fields |= {"error": f"{plan.label}: {chunks[failed].error}", "exit_code": chunks[failed].exit_code}
        elif isinstance(e, ev.SimFinished):
            fields["exit_code"] = e.exit_code
    return fields


def _summed(chunks: list[ChunkRow]) -> dict[str, object]:
    """A split sim's totals: those of its chunks' measured kernels, summed (`gpu_tot_*` are
    running sums over the launches, so the sums over the chunks are the sim's)."""
    cycles = [c.gpu_tot_sim_cycle for c in chunks if c.gpu_tot_sim_cycle is not None]
    insn = [c.gpu_tot_sim_insn for c in chunks if c.gpu_tot_sim_insn is not None]
    rates = [c.sim_rate_ips for c in chunks if c.sim_rate_ips is not None]
    total_cycles, total_insn = (sum(cycles) if cycles else None), (sum(insn) if insn else None)
    return {
        "gpu_tot_sim_cycle": total_cycles,
        "gpu_tot_sim_insn": total_insn,
        # as the simulator prints it (`gpu_tot_ipc = %12.4f`)
        "gpu_tot_ipc": round(total_insn / total_cycles, 4) if total_cycles and total_insn is not None else None,
        "sim_rate_ips": sum(rates) if rates else None,
    }


def _chunk_heartbeat(b: _Batch, seq: int, sim: SimRow, split: SplitRow, e: ev.SimHeartbeat) -> None:
    """A chunk's progress and log lines: numbered in a range of its own (`SimReport`), so the
    log reads chunk after chunk; any may come first, so each is kept only if absent."""
    assert e.chunk is not None
    text = deflated.log_text(e)  # deflated by the runner: read once
    count = ev.lines_in(text)
    changes: dict[str, Any] = {}
    chunks = list(split.chunks)
    chunk = chunks[e.chunk]
    if count:
        chunk_rows = LogChunkRow(sim_id=sim.id, attempt=sim.attempt, first_line_seq=e.first_line_seq, line_count=count, seq=seq)
        b.checked["sim_log"].append(chunk_rows)
        fresh_from = max(0, chunk.log_seq + 1 - e.first_line_seq)  # lines before it were recorded already
        if fresh_from < count:
            last = e.first_line_seq + count - 1
            changes["log_tail"] = (sim.log_tail + text.rsplit("\n", LOG_TAIL)[-min(LOG_TAIL, count - fresh_from) :])[-LOG_TAIL:]
            changes["log_seq"] = max(sim.log_seq, last)
            chunks[e.chunk] = chunk = msgspec.structs.replace(chunk, log_seq=last)
    if chunk.last_heartbeat_at is None or e.at > chunk.last_heartbeat_at:
        latest = e.latest
        chunks[e.chunk] = msgspec.structs.replace(
            chunk, last_heartbeat_at=e.at, kernels_done=e.kernels_done, gpu_tot_sim_cycle=latest.gpu_tot_sim_cycle,
            gpu_tot_sim_insn=latest.gpu_tot_sim_insn, sim_rate_ips=latest.sim_rate_ips,
        )
        changes |= {"kernels_done": sum(c.kernels_done for c in chunks), **_summed(chunks)}
        if sim.last_heartbeat_at is None or e.at > sim.last_heartbeat_at:
            changes |= {"last_heartbeat_at": e.at, "current_kernel": e.current_kernel}
    if chunks != split.chunks:
        changes["split"] = _json.encode(msgspec.structs.replace(split, chunks=chunks)).decode()
    if changes:
        b.put_sim(seq, sim, msgspec.structs.replace(sim, seq=seq, **changes))


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
        case ev.RunCreated():
            return _touch_run
        case ev.RunRetryRequested() | ev.RunEntriesAdded():
            return _touch_listed
        case ev.TraceEvent():
            return _touch_trace
        case ev.RunnerEnded():
            return _touch_nothing
        case _:
            assert_never(e)


def _touch_sim(e: ev.SimEvent, found: _Touched) -> None:
    found.sims.add(e.sim_id)
    found.runs.add(e.run_id)


def _touch_cancel(e: ev.RunCancelRequested, found: _Touched) -> None:
    found.whole_runs.add(e.run_id)
    found.runs.add(e.run_id)


def _touch_run(e: ev.RunCreated, found: _Touched) -> None:
    found.runs.add(e.run_id)


def _touch_listed(e: ev.RunRetryRequested | ev.RunEntriesAdded, found: _Touched) -> None:
    found.runs.add(e.run_id)
    found.sims.update(s.sim_id for s in e.sims)
    if isinstance(e, ev.RunRetryRequested):
        found.sims.update(c.sim_id for c in e.chunks)


def _touch_nothing(e: ev.RunnerEnded, found: _Touched) -> None:
    pass  # it changes no row


def _touch_trace(e: ev.TraceEvent, found: _Touched) -> None:
    found.traces.add(e.trace_id)
