"""The projector: reads the stream in order and applies it to DuckDB.

Each batch of events is folded (`fold.py`) and written in ONE transaction that also moves the
checkpoint to the batch's last sequence. A crash anywhere therefore leaves either the whole
batch and its checkpoint, or neither; a restart resumes after the checkpoint. What cannot be
applied is parked (`parking.py`) in the transaction that moves past it. Readers that must see
their own writes wait on `wait_for(seq)`; live run streams get each batch's changes from
`live` once it is committed.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import logging
import operator
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import duckdb
import msgspec

from cascade_core import events as ev
from cascade_host.heap import settle_heap
from cascade_nats import subjects
from cascade_nats.firehose import Frame
from cascade_nats.store import EventStore
from projections import parking, stats_parts, stats_rows, tables, version
from projections.database import incoming, memory_limit, open_database
from projections.fold import Folded, Rows, Unfoldable, fold, touched
from projections.live import Live
from projections.parking import Batch
from projections.rows import APPEND_TABLES, ENTITY_TABLES, PARKED_KEY, PARKED_TABLE, ParkedRow, RunRow, SimRow, TraceRow

log = logging.getLogger("cascade.projector")

Entity = TypeVar("Entity", TraceRow, RunRow, SimRow)  # a row of one of `rows.ENTITY_TABLES`

FaultHook = Callable[[str], None]
# A batch takes up to this many events, and stops at the first that brings it past its
# memory's `batch_bytes` (real kernel results carry large stats maps): big batches spread each
# transaction's fixed cost thin, the byte bound keeps a batch's memory in check, since a batch
# and the next one arriving are serve's largest transient.
MAX_BATCH = 32768
# Frames read and not yet applied are at most about two batches: one being applied, the next
# arriving. A replay reads faster than it applies; past that it waits to read on, so that it
# holds no more of the log than that however long the log is.
WAITING_BATCHES = 2
# A replay up to a sequence another read model applied waits this long for a server that has
# not got it yet (`Projector.catch_up`), reading again every STRAGGLER_POLL_S.
STRAGGLER_S = 15.0
STRAGGLER_POLL_S = 0.2


# A checkpoint folds DuckDB's write-ahead log into the database file and stalls commits while
# it runs. It rewrites each table's last, partly filled vector of 2,048 rows whole, and with
# large stats maps per row that can take seconds (bench/README.md). So the projector
# checkpoints when the stream goes quiet (nothing for IDLE_S) once the log passes its memory's
# `idle_checkpoint_at`, and after a batch only past its `checkpoint_at`; DuckDB's own
# threshold, inside a commit, is the last resort.
# Rows written wait in memory until a checkpoint, and a campaign's stream never goes quiet.
# A budget brings the checkpoint closer (a quarter of it), at no cost to a replay's speed
# (bench/README.md).
CHECKPOINT_AT = 256 << 20
IDLE_S = 0.5
# While the stream is busy (a batch applied less than this long ago), the next batch waits
# until this long after it, or until it is full: a transaction has a fixed CPU cost however
# few events it holds, and a campaign's events come one or two at a time. The first event
# after a quiet spell goes in at once. The pause is the shortest that took most of that cost
# off serve's CPU over a campaign (bench/README.md, commit pacing).
GATHER_S = 0.05


class Memory(msgspec.Struct, frozen=True):
    """What the read model's DuckDB may hold in memory, in bytes.

    DuckDB keeps there the blocks of the file it has read, everything written since the last
    checkpoint (rows deleted and written again included: a sim's row is rewritten by every
    batch that touches it), query intermediates, and what its allocator freed. At its default
    limit, 80 % of the machine's RAM, it never evicted a block, and serve grew with the read
    model (bench/README.md). Within the limit, DuckDB evicts the file's blocks (the OS page
    cache still has them) and spills intermediates and unwritten rows to `<db>.tmp`. What it
    cannot go past: a commit pins what it writes, and a checkpoint the vector it rewrites; one
    that does not fit is a fatal error that leaves the database unusable until serve starts
    again (it happened while `sim_log` kept the log's text, whose last vector grew with it).
    So what waits for a checkpoint is kept to a quarter of the limit, DuckDB's own threshold
    to half."""

    limit: int

    @property
    def batch_bytes(self) -> int:
        """The payload bytes past which a batch ends: each kernel result's map becomes its
        3,815 rows in Arrow and in the transaction, so a batch's rows grow with its bytes. At
        64 MiB that is 2 MiB, where serve's peak fell and the CPU per event did not rise
        (bench/README.md, "serve within 286 MiB" at 8 MiB, when a result's bytes were five
        times what they are now, and "A batch's bytes, after the stream shrank")."""
        return self.limit // 32

    @property
    def part_rows(self) -> int:
        """The rows of `kernel_stats` the table holds before they move to a part
        (`stats_parts.py`): 2 M at 64 MiB, about 550 kernels of the bench's maps, 15 MB of the
        file. A part written takes little memory (DuckDB writes it a row group at a time), and
        fewer parts are read faster (each query of the view reads every part's footer)."""
        return self.limit // 32

    @property
    def idle_checkpoint_at(self) -> int:
        """The write-ahead log's size past which a quiet spell brings a checkpoint: 2 MiB at
        64 MiB. What the log holds waits in DuckDB's memory until one, and reads of
        `kernel_stats`' parts need that memory: with 16 MiB of log left after a 40k-kernel
        ingest, the stats catalogue ran out of 64 MiB (bench/README.md, "kernel_stats as parts")."""
        return self.limit // 32

    @property
    def checkpoint_at(self) -> int:
        """The write-ahead log's size past which a batch is followed by a checkpoint."""
        return min(CHECKPOINT_AT, self.limit // 4)

    def settings(self) -> dict[str, str]:
        return {
            "memory_limit": f"{self.limit}B",
            "checkpoint_threshold": f"{self.limit // 2}B",
            # DuckDB's allocator keeps much of what it freed unless told otherwise.
            "allocator_flush_threshold": f"{min(128 << 20, self.limit // 8)}B",
        }


# With no log text in the read model nothing it holds grows with a sim's log, so a small
# budget holds any log; this one keeps serve's memory flat over a long campaign and is still
# several times a batch (bench/README.md, "serve within 286 MiB").
DEFAULT_MEMORY = Memory(64 << 20)


def connect(path: Path | str, memory: Memory | None = None) -> duckdb.DuckDBPyConnection:
    """The read model at `path` within `memory` (by default `DEFAULT_MEMORY`), a new one made
    this version's (`version.py`). One another version built raises `version.Outdated` and is
    left as it is (`rebuild.py` rebuilds it)."""
    con = open_database(path, settings=(memory or DEFAULT_MEMORY).settings())
    try:
        version.ensure(con)
    except BaseException:
        con.close()
        raise
    return con


def _checkpoint(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("CHECKPOINT")
    except duckdb.TransactionException:
        pass  # a reader's transaction is open; the next batch tries again


def wal_of(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The database's write-ahead log file, or None for an in-memory database."""
    row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return Path(f"{row[0]}.wal") if row and row[0] else None


_payload = operator.itemgetter(2)


def payload_bytes(frames: Iterable[Frame]) -> Iterator[int]:
    """The size of each frame's payload (in C calls: a replay asks it of every frame)."""
    return map(len, map(_payload, frames))


def batch_length(frames: list[Frame], most_bytes: int) -> tuple[int, int]:
    """How many of `frames` (one or more) the next batch takes, when a batch ends at the frame
    that brings it past `most_bytes`, and their payloads' bytes."""
    ends = list(itertools.accumulate(payload_bytes(itertools.islice(frames, MAX_BATCH))))
    count = min(bisect.bisect_left(ends, most_bytes) + 1, len(ends))  # the frame that passes the bound ends it
    return count, ends[count - 1]


class RowCache:
    """Entity rows as the last committed batch left them, so that a batch touching the same
    sims as the one before (the usual case) reads nothing back from DuckDB, and the stat
    names' ids. Filled only after a commit and emptied on any failure, so it never shows
    what DuckDB does not."""

    LIMIT = 50_000

    def __init__(self) -> None:
        self.rows = Rows()
        self.stat_names = stats_rows.StatNames()

    def update(self, rows: Rows) -> None:
        self._keep(self.rows.traces, rows.traces)
        self._keep(self.rows.runs, rows.runs)
        self._keep(self.rows.sims, rows.sims)
        self.stat_names.committed()

    def _keep(self, cached: dict[str, Entity], committed: dict[str, Entity]) -> None:
        cached.update(committed)
        if len(cached) > self.LIMIT:
            cached.clear()

    def clear(self) -> None:
        self.rows = Rows()
        self.stat_names.forget()


def load(con: duckdb.DuckDBPyConnection, items: Sequence[tuple[int, ev.AnyEvent]], cache: RowCache) -> Rows:
    """The current rows of everything the batch's events may change."""
    trace_ids, run_ids, sim_ids, whole_runs = touched(items)
    known = cache.rows

    def select(row_type: type[Entity], cached: dict[str, Entity], where: str, keys: set[str]) -> dict[str, Entity]:
        found = {k: cached[k] for k in keys if k in cached} if where == "id" else {}
        missing = sorted(keys - found.keys())
        if missing:
            table = tables.TABLE_OF[row_type]
            records = con.execute(f"SELECT * FROM {table} WHERE {where} IN (SELECT unnest(?))", [missing]).fetchall()
            found.update((r.id, r) for r in tables.from_rows(row_type, records))
        return found

    return Rows(
        traces=select(TraceRow, known.traces, "id", trace_ids),
        runs=select(RunRow, known.runs, "id", run_ids),
        # A cancel needs every sim of its run, which only DuckDB knows.
        sims=select(SimRow, known.sims, "id", sim_ids) | select(SimRow, known.sims, "run_id", whole_runs),
    )


def write(
    con: duckdb.DuckDBPyConnection,
    folded: Folded,
    seq: int,
    parked: Sequence[ParkedRow] = (),
    cache: RowCache | None = None,
    stored: Rows | None = None,
    *,
    part_rows: int,
) -> None:
    """Everything a fold produced, the kernels' stats maps as rows, what was parked, and the
    checkpoint; the caller owns the transaction. `stored`: the rows the fold started from, as
    DuckDB holds them (`load`); `part_rows`: the memory's (`Memory.part_rows`)."""
    if folded.purged_samples:
        _purge_runs(con, "SELECT id FROM runs WHERE sample AND trace_id IN (SELECT unnest($ids))", sorted(folded.purged_samples), part_rows)
    if folded.purged_runs:
        _purge_runs(con, "SELECT unnest($ids)", sorted(folded.purged_runs), part_rows)
    for table in ENTITY_TABLES:
        ids = sorted(key for t, key in folded.changed if t == table)
        if not ids:
            continue
        rows = getattr(folded.rows, table)
        before = getattr(stored or Rows(), table)
        if len(ids) == 1 and ids[0] in before:
            _update(con, table, before[ids[0]], rows[ids[0]])
            continue
        con.execute(f"DELETE FROM {table} WHERE id IN (SELECT unnest(?))", [ids])
        _insert(con, table, [rows[i] for i in ids], dedupe=None)
    if folded.purged_traces:
        for table in ("trace_files", "trace_kernels", "trace_real_timing"):
            con.execute(f"DELETE FROM {table} WHERE trace_id IN (SELECT unnest(?))", [sorted(folded.purged_traces)])
    for table, rows in folded.appended.tables():
        if rows:
            _insert(con, table, rows, dedupe=None)
    for table, rows in folded.checked.tables():
        if rows:
            _insert(con, table, rows, dedupe=APPEND_TABLES[table][1])
    _write_stats(con, folded, (cache or RowCache()).stat_names, part_rows)
    _purge_attempts(con, folded, part_rows)
    if parked:
        _insert(con, PARKED_TABLE, list(parked), dedupe=PARKED_KEY)
    con.execute("UPDATE checkpoint SET seq = ? WHERE id = 1", [seq])


def _purge_runs(con: duckdb.DuckDBPyConnection, runs: str, ids: list[str], part_rows: int) -> None:
    """The runs `runs` selects (a query of `$ids`), their sims, every row those hold, and
    campaigns' links to them: the sample runs of deleted sample traces, or deleted runs."""
    sims = f"SELECT id FROM sims WHERE run_id IN ({runs})"
    params = {"ids": ids}
    gone = con.execute(f"SELECT seq FROM kernels WHERE sim_id IN ({sims})", params).fetchall()
    stats_parts.delete(con, [seq for (seq,) in gone], part_rows)
    for table in ("kernels", "sim_log", "sim_files"):
        con.execute(f"DELETE FROM {table} WHERE sim_id IN ({sims})", params)
    con.execute(f"DELETE FROM campaign_runs WHERE run_id IN ({runs})", params)
    con.execute(f"DELETE FROM sims WHERE run_id IN ({runs})", params)
    con.execute(f"DELETE FROM runs WHERE id IN ({runs})", params)


def _purge_attempts(con: duckdb.DuckDBPyConnection, folded: Folded, part_rows: int) -> None:
    """The sims' rows of the attempts a new one replaced, the batch's own included (so they are
    written first): gone, but, in order, what a resume keeps of the attempt before it."""
    for sim_id, attempt, first in folded.purged_attempts:
        if first is not None:  # kernel rows keep their seq, and with it their stats rows
            con.execute("UPDATE kernels SET attempt = ? WHERE sim_id = ? AND attempt < ? AND uid < ?", [attempt, sim_id, attempt, first])
            con.execute("UPDATE sim_log SET attempt = ? WHERE sim_id = ? AND attempt < ?", [attempt, sim_id, attempt])
        gone = con.execute("SELECT seq FROM kernels WHERE sim_id = ? AND attempt < ?", [sim_id, attempt]).fetchall()
        stats_parts.delete(con, [seq for (seq,) in gone], part_rows)
        for table in ("kernels", "sim_log", "sim_files"):
            con.execute(f"DELETE FROM {table} WHERE sim_id = ? AND attempt < ?", [sim_id, attempt])


def _write_stats(con: duckdb.DuckDBPyConnection, folded: Folded, names: stats_rows.StatNames, part_rows: int) -> None:
    """The stats maps of the kernels rows just written, as rows: into the table, or, as many
    as a replay's batch brings, a part of their own. Every kernel result the fold applied
    names its stats, kept or not (`stats_rows`)."""
    if not folded.kernels:
        return
    kept = {row.seq for row in folded.appended.kernels}
    if folded.checked.kernels:
        # Those not already there were written, under the seq of the event that brought them.
        candidates = [row.seq for row in folded.checked.kernels]
        kept.update(s for (s,) in con.execute("SELECT seq FROM kernels WHERE seq IN (SELECT unnest(?))", [candidates]).fetchall())
    stats = stats_rows.rows(con, [names.with_names(con, k) for k in folded.kernels], kept, names)
    if names.added:
        _insert(con, "stat_names", names.added, dedupe=None)
    written = [k for k in folded.kernels if k.seq in kept]
    # Old results' own values are made by an UPDATE of the table's rows.
    if stats.num_rows and stats_parts.worth_a_part(con, stats.num_rows, part_rows) and not stats_rows.old_results(written):
        stats_parts.add(con, stats, part_rows)
    elif stats.num_rows:
        with incoming(con, stats):
            con.execute(f"INSERT INTO {stats_parts.HOT} SELECT * FROM incoming")
        stats_rows.own_values_of_old_results(con, written)


def _update(con: duckdb.DuckDBPyConnection, table: str, stored: Entity, row: Entity) -> None:
    """One stored row made `row` by an UPDATE of the columns that changed: the live path's
    usual write, one sim's heartbeats, changes its progress and rarely its nested columns, and
    DuckDB's delete and insert of a row with nested columns costs more than an update of a
    few of them (bench/README.md, "Typed sims columns: the live path back to back")."""
    changed: dict[str, object] = tables.changed_columns(stored, row)
    if changed:
        sets = ", ".join(f"{name} = ?" for name in changed)
        con.execute(f"UPDATE {table} SET {sets} WHERE id = ?", [*changed.values(), row.id])


# Up to this many rows go in as one parameterised statement: for the few rows a live event
# brings, that costs a third of handing DuckDB an Arrow table; beyond it, Arrow wins.
FEW_ROWS = 8


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[msgspec.Struct], dedupe: tuple[str, ...] | None) -> None:
    if dedupe is None and len(rows) <= FEW_ROWS:
        width = len(tables.stored_fields(type(rows[0])))
        values = ", ".join(["(" + ", ".join(["?"] * width) + ")"] * len(rows))
        con.execute(f"INSERT INTO {table} VALUES {values}", [v for row in rows for v in tables.values(row)])
        return
    with incoming(con, tables.to_arrow(table, rows)):
        if dedupe is None:
            con.execute(f"INSERT INTO {table} SELECT * FROM incoming")
        else:
            # The same event applied twice, in this batch or an earlier one, adds one row.
            key = ", ".join(dedupe)
            same = " AND ".join(f"t.{k} = i.{k}" for k in dedupe)
            con.execute(
                f"INSERT INTO {table} SELECT * FROM (SELECT DISTINCT ON ({key}) * FROM incoming) i "
                f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {same})"
            )


def _move_stats(con: duckdb.DuckDBPyConnection, part_rows: int) -> None:
    """`kernel_stats_hot`'s rows to a part once it is full, in a transaction of its own: in the
    batch's, its rows are held in memory with the part being written, more than a small budget
    holds. A crash between the two leaves the rows in the table, for the next batch to move.
    Then a checkpoint: until one, DuckDB holds the rows written since the last in memory (34
    MiB of 64 after a 10k-kernel sim), where reads of the parts need it. Only the projector
    writes the table, so whether it is full holds from the count to the move."""
    if not stats_parts.full(con, part_rows):
        return
    con.execute("BEGIN TRANSACTION")
    try:
        stats_parts.move(con, part_rows)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    _checkpoint(con)


def apply(
    con: duckdb.DuckDBPyConnection,
    items: Sequence[tuple[int, ev.AnyEvent]],
    fault: FaultHook | None = None,
    cache: RowCache | None = None,
    *,
    parked: Sequence[ParkedRow] = (),
    seq: int | None = None,
    changes: bool = True,
) -> Folded:
    """Fold and write one batch in one transaction, and move the checkpoint to `seq` (by
    default the last event's); with or without the `changes` live streams show."""
    cache = cache or RowCache()
    part_rows = Memory(memory_limit(con)).part_rows
    con.execute("BEGIN TRANSACTION")
    try:
        stored = load(con, items, cache)
        folded = fold(stored, items, changes=changes)
        write(con, folded, items[-1][0] if seq is None else seq, parked, cache, stored, part_rows=part_rows)
        if fault is not None:
            fault("before_commit")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        cache.clear()
        raise
    if folded.kernels:
        _move_stats(con, part_rows)
    if folded.purged_samples or folded.purged_runs:
        cache.clear()  # it may hold rows of the runs and sims deleted
    cache.update(folded.rows)
    return folded


class Applied(msgspec.Struct, frozen=True):
    """What one transaction committed: the fold's result, what it parked, and the sequence
    the checkpoint moved to."""

    folded: Folded
    parked: list[ParkedRow]
    seq: int


def apply_batch(
    con: duckdb.DuckDBPyConnection, batch: Batch, fault: FaultHook | None, cache: RowCache, changes: bool = True
) -> tuple[Applied, Batch | None]:
    """Apply as much of `batch` as one transaction can: all of it, or the part before an
    event that cannot be applied, with that event parked. Returns the rest, to apply next.

    An event the fold cannot apply names itself; rows DuckDB refuses do not say whose they
    are, so the batch is halved until the event is alone."""
    try:
        folded = apply(con, batch.items, fault, cache, parked=batch.parked, seq=batch.last_seq, changes=changes)
        return Applied(folded, batch.parked, batch.last_seq), None
    except Unfoldable as err:
        head, rest = parking.park(batch, err.seq, f"cannot be folded: {err.error}")
    except tables.REFUSED_ROWS as err:
        if len(batch.items) > 1:
            head, rest = parking.halves(batch)
        else:
            head, rest = parking.park(batch, batch.items[0][0], f"cannot be stored: {str(err).splitlines()[0]}")
    applied, left = apply_batch(con, head, fault, cache, changes)
    return applied, parking.join(left, rest)


def apply_frames(
    con: duckdb.DuckDBPyConnection, frames: Sequence[Frame], fault: FaultHook | None, cache: RowCache, changes: bool = True, after: int | None = None
) -> tuple[Applied, Batch | None]:
    """Apply the frames; `after`: the frames are the whole stream's from the sequence after
    it on, so a sequence missing among them is a message lost (`parking.lost`)."""
    return apply_batch(con, parking.sort_out(frames, after), fault, cache, changes)


class Projector:
    """`changes`: whether batches make the changes live run streams show (`fold.Change`); a
    replay into a file of its own, which no stream reads, makes none."""

    def __init__(
        self,
        store: EventStore,
        con: duckdb.DuckDBPyConnection,
        *,
        fault: FaultHook | None = None,
        memory: Memory | None = None,
        changes: bool = True,
    ) -> None:
        """`con` as `connect` opened it, within `memory` (the same)."""
        self.store = store
        self.con = con
        self.fault = fault
        memory = memory or DEFAULT_MEMORY
        self.checkpoint_at = memory.checkpoint_at
        self.idle_checkpoint_at = memory.idle_checkpoint_at
        self.batch_bytes = memory.batch_bytes
        self.changes = changes
        self.applied = tables.checkpoint(con)
        self.cache = RowCache()
        self._wal = wal_of(con)
        self.live = Live()
        self._advanced = asyncio.Condition()

    async def run(self, *, until_seq: int | None = None) -> None:
        """Apply batches as they arrive, or until `until_seq` is applied (or everything stored,
        if less), until something fails (the stream's server gone, a broken connection). A
        failure leaves DuckDB at its last committed batch, so whatever runs this (a supervisor)
        can start it again, and it goes on from there."""
        self.cache.clear()
        self.applied = tables.checkpoint(self.con)
        if until_seq is None:
            await self._consume(until_caught_up=False)
        else:
            await self.catch_up(until_seq=until_seq)

    def reopened(self, con: duckdb.DuckDBPyConnection) -> None:
        """Go on in `con`: the same read model, opened again under another name."""
        assert tables.checkpoint(con) == self.applied, "not the read model the projector wrote"
        self.con = con
        self._wal = wal_of(con)

    async def catch_up(self, *, until_seq: int | None = None) -> None:
        """Apply everything stored now, or up to `until_seq`, then return."""
        if until_seq is not None and self.applied >= until_seq:
            return
        await self._consume(until_caught_up=True, until_seq=until_seq)
        # `until_seq` was stored (a read model applied it), but the server a replay reads from
        # may say nothing more is pending before it: in a cluster, one behind the others (just
        # restarted, catching up). So read on from there while that brings more, for up to
        # STRAGGLER_S without any; past that the log holds no more (the rest lost from the store).
        waited_since = time.monotonic()
        while until_seq is not None and self.applied < until_seq and time.monotonic() - waited_since < STRAGGLER_S:
            before = self.applied
            await anyio.sleep(STRAGGLER_POLL_S)
            await self._consume(until_caught_up=True, until_seq=until_seq)
            if self.applied > before:
                waited_since = time.monotonic()

    async def _consume(self, *, until_caught_up: bool, until_seq: int | None = None) -> None:
        settle_heap()
        # Frames keep arriving while a batch is written, and the next batch takes all of
        # them: under load batches grow, so the per-transaction cost is spread thin.
        pending: list[Frame] = []
        waiting = 0  # the bytes of their payloads
        arrived, room, full = asyncio.Event(), asyncio.Event(), asyncio.Event()
        finished = False
        committed_at = -GATHER_S  # when the last batch was applied (time.monotonic)

        async def receive() -> None:
            nonlocal finished, waiting
            stream = self.store.raw(subjects.ALL, self.applied + 1, until_caught_up=until_caught_up)
            async with contextlib.aclosing(stream) as batches:  # its connection, closed on a break too
                async for frames in batches:
                    if until_seq is not None and frames[-1][0] >= until_seq:
                        pending.extend(f for f in frames if f[0] <= until_seq)
                        break
                    pending.extend(frames)
                    waiting += sum(payload_bytes(frames))
                    arrived.set()
                    if len(pending) >= MAX_BATCH or waiting >= self.batch_bytes:
                        full.set()
                    if len(pending) >= WAITING_BATCHES * MAX_BATCH or waiting >= WAITING_BATCHES * self.batch_bytes:
                        room.clear()
                        await room.wait()
            finished = True
            arrived.set()
            full.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(receive)
            while True:
                if self._wal_bytes() > self.idle_checkpoint_at:
                    with anyio.move_on_after(IDLE_S) as quiet:
                        await arrived.wait()
                    if quiet.cancelled_caught:
                        await anyio.to_thread.run_sync(_checkpoint, self.con)
                        continue
                await arrived.wait()
                gather = committed_at + GATHER_S - time.monotonic()
                if gather > 0:
                    with anyio.move_on_after(gather):
                        await full.wait()
                arrived.clear()
                full.clear()
                while pending:
                    count, size = batch_length(pending, self.batch_bytes)
                    batch = pending[:count]
                    del pending[:count]
                    waiting -= size
                    room.set()
                    await self._apply_frames(batch)
                    committed_at = time.monotonic()
                if finished:
                    break
            tg.cancel_scope.cancel()

    async def _apply_frames(self, frames: list[Frame]) -> None:
        if frames[0][0] <= self.applied:  # in stream order: only the first ones can be
            frames = [f for f in frames if f[0] > self.applied]
            if not frames:
                return
        changes = self.changes and frames[-1][0] > self.live.quiet_until  # none that would reach no stream
        applied, rest = await anyio.to_thread.run_sync(apply_frames, self.con, frames, self.fault, self.cache, changes, self.applied)
        while True:
            await self._committed(applied)
            if rest is None:
                break
            applied, rest = await anyio.to_thread.run_sync(apply_batch, self.con, rest, self.fault, self.cache, changes)
        if self._wal_bytes() > self.checkpoint_at:
            await anyio.to_thread.run_sync(_checkpoint, self.con)

    async def _committed(self, applied: Applied) -> None:
        if self.fault is not None:
            self.fault("after_commit")
        for row in applied.parked:
            log.warning("parked the message at sequence %d on %s: %s", row.seq, row.subject, row.error)
        self.applied = applied.seq
        self.live.publish(applied.folded.changes)
        async with self._advanced:
            self._advanced.notify_all()

    def _wal_bytes(self) -> int:
        try:
            return self._wal.stat().st_size if self._wal is not None else 0
        except FileNotFoundError:
            return 0

    async def wait_for(self, seq: int, timeout: float = 10.0) -> None:
        """Return once events up to `seq` are queryable."""
        with anyio.fail_after(timeout):
            async with self._advanced:
                await self._advanced.wait_for(lambda: self.applied >= seq)
