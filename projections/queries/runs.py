"""Reads of runs, sims, kernels, log lines and files, answered as the API's Structs.

Every function takes a DuckDB connection (a cursor of the read model, used by one thread) and
reads what the projector last committed. A read made of several queries runs in one
transaction (`snapshot`), so its parts agree. Rows become API Structs here and only here.

Orders, as the reference gives them: sims by config (the order of the run's entries), then
replica; kernels by config, replica, kernel_index; a run's files by config, replica, name.
Only the current attempt of a sim counts. Long answers (kernel lists, results, logs) come in
pieces built from `fetchmany` batches; stats maps are made again from their rows
(`stats_maps`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import statistics
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

import duckdb
import msgspec

from cascade_core import attention, counters, reference
from cascade_core import events as ev
from cascade_core import split as splitting
from cascade_core.correlation import Correlation, Spread, correlate, measured
from cascade_core.gpu_configs import config_labels
from cascade_formats.kernel_names import short_name
from cascade_formats import perfetto
from cascade_formats.perfetto import RunnerSpan
from cascade_formats.tracefiles import MemcpyHtoD
from cascade_core import run as run_state
from cascade_core import sim as sim_state
from cascade_core.run import Run
from cascade_core.sim import SimChunk, SimSplit, cut_short_said
from cascade_api.models import (
    ChunkView,
    Comparison,
    ComparisonRow,
    ConfigCycles,
    CounterComparison,
    CounterRow,
    CutShortView,
    KernelStat,
    ReferenceComparison,
    ReferenceSim,
    RunDetail,
    RunFile,
    RunResults,
    RunSummary,
    Sim,
    SimFile,
    SimResults,
    SplitView,
    Trace,
    TraceDetail,
    TraceMetadata,
)
from cascade_core.gpu_configs import GpuConfig
from cascade_core.runs import RunEntry
from cascade_core.packed_stats import StatValue
from projections import tables
from projections.fold import listed
from projections.queries import stats_maps, traces
from projections.queries.convert import from_row, one_row
from projections.rows import KernelRow, RunRow, SimFileRow, SimRow, TraceRow
from projections.tables import R

BATCH = 4096

Con = duckdb.DuckDBPyConnection
Place = tuple[str, int]  # a sim's (gpu_config, replica)

_encoder = msgspec.json.Encoder()
# Stands in for a list while a Struct is encoded and is then split out: msgspec never writes
# a NUL byte of its own (strings escape it), so the split is unambiguous.
_HOLE = msgspec.Raw(b"\x00")
_EMPTY_STATS = msgspec.Raw(b"{}")

CURRENT_KERNELS = "kernels k JOIN sims s ON s.id = k.sim_id AND s.attempt = k.attempt"
# The kernels table's column of each KernelStat field whose name differs. Lists select every
# field but stats and kernel_short_name, in the Struct's own order, and a row is matched to
# them by name, then given its map (made again from its rows, or left empty) and short name.
_KERNEL_STAT_COLUMN = {"kernel_name": "name", "kernel_launch_uid": "uid"}
_KERNEL_FIELDS = tuple(field for field in KernelStat.__struct_fields__ if field not in ("stats", "kernel_short_name"))
_KERNEL_NAME = _KERNEL_FIELDS.index("kernel_name")
# Every KernelResult field is a kernels column of the same name.
_KERNEL_RESULT_FIELDS = reference.KernelResult.__struct_fields__
_KERNEL_RESULT_COLUMNS = ", ".join(f"k.{field}" for field in _KERNEL_RESULT_FIELDS)
_KERNEL_COLUMNS = ", ".join(f"k.{_KERNEL_STAT_COLUMN.get(field, field)}" for field in _KERNEL_FIELDS)


@contextlib.contextmanager
def snapshot(con: Con) -> Iterator[Con]:
    """One read transaction: every query inside sees the same committed batch."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    finally:
        con.execute("ROLLBACK")


def _select(con: Con, row_type: type[R], where: str, params: Sequence[object]) -> list[R]:
    return tables.from_rows(row_type, con.execute(f"SELECT * FROM {tables.TABLE_OF[row_type]} WHERE {where}", params).fetchall())


def _one(con: Con, row_type: type[R], where: str, params: Sequence[object]) -> R | None:
    rows = _select(con, row_type, where, params)
    return rows[0] if rows else None


# --- rows to Structs -----------------------------------------------------------------------


def seen(row: sim_state.Sim) -> attention.Seen:
    return attention.Seen(
        id=row.id,
        state=row.state,
        gpu_config=row.gpu_config,
        created_at=row.created_at,
        runner_id=row.runner_id,
        last_heard=row.last_heartbeat_at or row.started_at,
    )


def sim_from_row(row: sim_state.Sim, watch: attention.Watch | None = None) -> Sim:
    """The sim as the API shows it, its latest metrics the columns of the same names; with
    `watch`, with what needs attention."""
    return from_row(
        Sim,
        row,
        latest=from_row(ev.SimMetrics, row),
        log_tail=row.log_lines,
        current_kernel_short_name=None if row.current_kernel is None else short_name(row.current_kernel),
        split=None if row.split is None else split_view(row.kernels_total, row.split),
        attention=None if watch is None else attention.attention(seen(row), watch),
        attempt=row.attempt if row.attempt > 1 else None,
        attempts=list(row.attempts),
        resumed=list(row.resumed),
        cut_short=None if row.cut_short is None else from_row(CutShortView, row.cut_short, said=cut_short_said(row.cut_short)),
    )


def split_view(kernels_total: int, split: SimSplit) -> SplitView:
    plan = splitting.plan(kernels_total, split.cut)
    chunks = [
        from_row(ChunkView, row, index=c.index, first=c.first, last=c.last, warmup=c.warmup) for c, row in zip(plan, split.chunks)
    ]
    return SplitView(kernels_per_chunk=split.kernels_per_chunk, warmup=split.warmup, chunks=chunks)


def run_from_row(row: RunRow) -> RunSummary:
    return _summary(row, [entry.entry for entry in row.entries])


def _summary(run: RunRow | Run, entries: Sequence[ev.ConfigCount]) -> RunSummary:
    # Its cycles are its sims', which neither a run's row nor its state holds: `_with_cycles`
    # adds them where asked.
    return from_row(RunSummary, run, entries=[from_row(RunEntry, entry) for entry in entries], sim_counts=dict(run.sim_counts), cycles=[])


def kernel_from_row(row: KernelRow) -> KernelStat:
    """A kernel as lists and live streams show it: its stats map left empty."""
    renamed = {field: getattr(row, column) for field, column in _KERNEL_STAT_COLUMN.items()}
    return from_row(KernelStat, row, **renamed, stats={}, kernel_short_name=short_name(row.name))


def file_from_row(row: SimFileRow, place: Place) -> RunFile:
    return from_row(RunFile, row, gpu_config=place[0], replica=place[1])


# --- runs and sims -------------------------------------------------------------------------


def run_row(con: Con, run_id: str) -> RunRow | None:
    return _one(con, RunRow, "id = ?", [run_id])


def run_summary(con: Con, run_id: str) -> RunSummary | None:
    row = run_row(con, run_id)
    return None if row is None else run_from_row(row)


def runs(con: Con, tag: str | None = None, name: str | None = None, cycles: bool = False) -> list[RunSummary]:
    """Every run, newest first; with `tag`, those that have it; with `name`, those of that name;
    with `cycles`, each with its total cycles per config."""
    with snapshot(con):
        rows = _select(
            con, RunRow, "(?::VARCHAR IS NULL OR list_contains(tags, ?)) AND (?::VARCHAR IS NULL OR name = ?) ORDER BY created_at DESC, id DESC",
            [tag, tag, name, name],
        )
        summaries = [run_from_row(r) for r in rows]
        return _with_cycles(con, summaries) if cycles else summaries


def _with_cycles(con: Con, runs: list[RunSummary]) -> list[RunSummary]:
    """The runs with their total cycles per config (`cycles_by_config`), their replicas read at once."""
    replicas = _replicas(con, [run.id for run in runs])
    return [msgspec.structs.replace(run, cycles=cycles_by_config(run, replicas.get(run.id, []))) for run in runs]


def configs(run: RunSummary | Run) -> list[str]:
    """The run's configs in the order of its entries, each once."""
    return list(dict.fromkeys(e.gpu_config for e in run.entries))


def sim_rows(con: Con, run: RunSummary | Run) -> list[SimRow]:
    """The run's sims by config, then replica."""
    return listed(_select(con, SimRow, "run_id = ?", [run.id]), configs(run))


def places(sims: Sequence[SimRow]) -> dict[str, Place]:
    return {s.id: (s.gpu_config, s.replica) for s in sims}


def sim_row(con: Con, sim_id: str) -> SimRow | None:
    return _one(con, SimRow, "id = ?", [sim_id])


def _trace(con: Con, run: RunSummary) -> Trace:
    """The run's trace; one deleted since is shown as it stood when it was deleted."""
    trace = traces.trace_summary(con, run.trace_id)
    if trace is not None:
        return trace
    (row,) = _select(con, TraceRow, "id = ?", [run.trace_id])
    return traces.trace_from_row(row)


def _trace_detail(con: Con, run: RunSummary) -> TraceDetail:
    detail = traces.trace_detail(con, run.trace_id)
    if detail is not None:
        return detail
    trace = _trace(con, run)
    metadata = TraceMetadata(status="deleted", files=[], trace_gpu_arch=trace.trace_gpu_arch, suggested_sim_config=trace.suggested_sim_config)
    return TraceDetail(**msgspec.structs.asdict(trace), metadata=metadata, kernels=[])


def _detail(con: Con, run: RunSummary, sims: Sequence[SimRow], watch: attention.Watch | None) -> RunDetail:
    return RunDetail(**msgspec.structs.asdict(run), trace=_trace(con, run), sims=[sim_from_row(r, watch) for r in sims])


def run_detail(con: Con, run_id: str, watch: attention.Watch | None = None) -> RunDetail | None:
    with snapshot(con):
        run = run_summary(con, run_id)
        return None if run is None else _detail(con, run, sim_rows(con, run), watch)


def run_as_created(con: Con, created: ev.RunCreated) -> RunDetail:
    """The run as its creation left it, every sim pending, whatever the runners did since:
    a create's answer, which the reference promises so (the read model may already show
    sims launched, running or needing attention)."""
    run = _summary(run_state.new(created), created.entries)
    sims = listed([sim_state.new(created, spec) for spec in created.sims], configs(run))
    return RunDetail(**msgspec.structs.asdict(run), trace=_trace(con, run), sims=[sim_from_row(s) for s in sims])


def unfinished_sims(con: Con) -> list[attention.Seen]:
    """Every sim not finished yet, of every run."""
    states = sorted(attention.UNFINISHED)
    return [seen(r) for r in _select(con, SimRow, "state IN (SELECT unnest(?))", [states])]


# --- kernels and comparison ----------------------------------------------------------------


_RUNNING = "OVER (PARTITION BY k.sim_id ORDER BY k.kernel_index)"
# A split sim's kernels come from chunks that each summed `gpu_tot_*` over their own launches,
# warm-up included, and a reusing sim's from a run of its simulated launches only (a reused
# one's map is its source's): the sim's running totals are its kernels' sums in launch order,
# which its maps answer with in place of the simulator's.
_RUNNING_TOTALS = {
    "gpu_tot_sim_cycle": f"sum(k.gpu_sim_cycle) {_RUNNING}",
    "gpu_tot_sim_insn": f"sum(k.gpu_sim_insn) {_RUNNING}",
    # as the simulator prints it (`gpu_tot_ipc = %12.4f`)
    "gpu_tot_ipc": f"round(sum(k.gpu_sim_insn) {_RUNNING} / sum(k.gpu_sim_cycle) {_RUNNING}, 4)",
}
# A kernel's `_RUNNING_TOTALS`, by name: null but in a split or reusing sim (a resumed sim
# whole's maps hold them as they are: its runner knew the kept launches' sums).
RECOMPUTED_TOTALS = {name: f"CASE WHEN s.split IS NOT NULL OR s.reuse THEN ({total})::DOUBLE END" for name, total in _RUNNING_TOTALS.items()}
_TOTALS_COLUMNS = "".join(f", {column}" for column in RECOMPUTED_TOTALS.values())
_SEQ = len(_KERNEL_FIELDS)  # where a record of `_kernels` has its kernel's seq

StatsChoice = Literal["none", "headline", "all"]
# The stats the runs and compare views show: a kernel's own cycles, instructions and IPC, and
# the sim's running totals of them.
HEADLINE_STATS = ("gpu_sim_cycle", "gpu_sim_insn", "gpu_ipc", *_RUNNING_TOTALS)


class Page(msgspec.Struct, frozen=True):
    """Which of an answer's kernels it holds, in the answer's order: from the `offset`th
    (counting from 0), at most `limit` of them (every one left: None)."""

    offset: int = 0
    limit: int | None = None


WHOLE = Page()


def _kernels_query(run: RunSummary, sim_ids: Sequence[str], *, totals: bool = False, page: Page = WHOLE) -> tuple[str, list[object]]:
    """The query of the given sims' kernels' columns of `_KERNEL_COLUMNS`, then each one's
    seq, then if `totals` its `_RUNNING_TOTALS` (null but in a split or reusing sim), the
    `page` of them; and its parameters. The totals run over every kernel of a sim, whatever
    the page (SQL windows come before LIMIT)."""
    paged = "" if page.limit is None else f" LIMIT {page.limit:d}"
    return (
        f"SELECT {_KERNEL_COLUMNS}, k.seq{_TOTALS_COLUMNS if totals else ''} FROM {CURRENT_KERNELS} "
        f"WHERE k.sim_id IN (SELECT unnest(?)) ORDER BY list_position(?, s.gpu_config), s.replica, k.kernel_index{paged} OFFSET {page.offset:d}",
        [list(sim_ids), configs(run)],
    )


def _kernels(con: Con, run: RunSummary, sim_ids: Sequence[str], *, page: Page = WHOLE) -> duckdb.DuckDBPyConnection:
    return con.execute(*_kernels_query(run, sim_ids, page=page))


def kernel_count(con: Con, sim_ids: Sequence[str]) -> int:
    """How many kernels the given sims have finished (their current attempts')."""
    ((count,),) = con.execute(f"SELECT count(*) FROM {CURRENT_KERNELS} WHERE k.sim_id IN (SELECT unnest(?))", [list(sim_ids)]).fetchall()
    return int(count)


def run_kernel_count(con: Con, run: RunSummary) -> int:
    with snapshot(con):
        return kernel_count(con, [s.id for s in sim_rows(con, run)])


def _kernel_stat(record: tuple[Any, ...], stats: dict[str, StatValue] | msgspec.Raw) -> KernelStat:
    """The KernelStat of a record of `_kernels` (its trailing seq and totals unnamed, so left out)."""
    short = short_name(record[_KERNEL_NAME])
    return KernelStat(**dict(zip(_KERNEL_FIELDS, record)), stats=stats, kernel_short_name=short)  # type: ignore[arg-type]  # a Raw map is encoded as it is


# The kernel's DRAM reads and writes, as docs/stats-naming.md names them: running totals, so
# a kernel's own `value` is its difference from the launch before.
DRAM_ACCESSES = ("number of total read accesses.total dram reads", "number of total write accesses.total dram writes")


def _spans(sim: SimRow) -> list[RunnerSpan]:
    """The sim's times on runners: its own, or each of its chunks' (which ran on runners of
    their own), of those launched and finished."""
    lives: Sequence[SimRow | SimChunk] = [sim] if sim.split is None else sim.split.chunks
    return [
        RunnerSpan(
            runner_id=life.runner_id, sim_id=sim.id, gpu_config=sim.gpu_config, replica=sim.replica, state=life.state,
            launched_at=life.started_at, finished_at=life.finished_at, chunk=None if sim.split is None else index,
        )
        for index, life in enumerate(lives)
        if life.started_at is not None and life.finished_at is not None
    ]


# The kernels of a sim a Perfetto trace holds at once (`perfetto.perfetto_pieces`): about 4 MB
# of their events.
PERFETTO_KERNELS = 4096


def perfetto_pieces(
    con: Con, run: RunDetail, atom_bytes: Mapping[str, float], memcpys: Mapping[int, Sequence[MemcpyHtoD]]
) -> Iterator[bytes]:
    """The run's Perfetto trace in pieces (`perfetto.perfetto_pieces`): its finished kernels
    (stats maps empty), each one's own DRAM accesses where its stats have them, and each
    finished sim's launch to end on its runner (a split sim's, each chunk's on its own)."""
    with snapshot(con):
        spans = [span for s in sim_rows(con, run) for span in _spans(s)]
        parts = functools.partial(_perfetto_parts, con, run)
        yield from perfetto.perfetto_pieces(run, run.sims, parts, atom_bytes=atom_bytes, memcpys=memcpys, spans=spans)


def _perfetto_parts(con: Con, run: RunSummary, sim_id: str, dram: bool) -> Iterator[perfetto.KernelPart]:
    """The sim's finished kernels, `PERFETTO_KERNELS` at a time, with their DRAM accesses if `dram`."""
    for offset in itertools.count(0, PERFETTO_KERNELS):
        records = _kernels(con, run, [sim_id], page=Page(offset, PERFETTO_KERNELS)).fetchall()
        if not records:
            return
        kernels = [_kernel_stat(r, {}) for r in records]
        if not dram:
            yield perfetto.KernelPart(kernels)
            continue
        seqs = [r[_SEQ] for r in records]
        # The seqs' range lets DuckDB skip kernel_stats' row groups outside it (as `stats_maps`).
        accesses = con.execute(
            f"SELECT k.kernel_index, sum(v.value) FROM {CURRENT_KERNELS} "
            "JOIN kernel_stats v ON v.seq = k.seq JOIN stat_names n ON n.id = v.stat "
            "WHERE v.seq BETWEEN ? AND ? AND k.sim_id = ? AND k.kernel_index BETWEEN ? AND ? "
            "AND n.name IN (SELECT unnest(?)) AND v.value IS NOT NULL GROUP BY ALL",
            [min(seqs), max(seqs), sim_id, kernels[0].kernel_index, kernels[-1].kernel_index, list(DRAM_ACCESSES)],
        ).fetchall()
        yield perfetto.KernelPart(kernels, {index: float(n) for index, n in accesses})


def kernel_pieces(
    con: Con, run: RunSummary, sim_ids: Sequence[str], maps: stats_maps.Names | None = None, stats: StatsChoice = "all", page: Page = WHOLE
) -> Iterator[bytes]:
    """The JSON list of the `page` of the given sims' KernelStats, in pieces, by config,
    replica and kernel_index; each with its stats map (`stats`: all of it, its
    `HEADLINE_STATS` or none) given the read model's stat names (`maps`), or with `{}`."""
    separator = b"["
    if maps is None or stats == "none":
        result = _kernels(con, run, sim_ids, page=page)
        while records := result.fetchmany(BATCH):
            yield separator + _encoder.encode([_kernel_stat(r, _EMPTY_STATS) for r in records])[1:-1]
            separator = b","
    else:
        only = HEADLINE_STATS if stats == "headline" else None
        # Headline maps are small: a part can be as many kernels as one query of rows reads.
        at_once = MAPS_AT_ONCE if only is None else stats_maps.KERNELS_AT_ONCE
        for part in _kernel_parts(con, run, sim_ids, page, at_once):
            totals = {r[_SEQ]: _totals(r) for r in part if r[_SEQ + 1] is not None}
            by_seq = stats_maps.kernel_maps(con, [r[_SEQ] for r in part], maps, totals, only)
            yield separator + _encoder.encode([_kernel_stat(r, msgspec.Raw(by_seq.get(r[_SEQ], b"{}"))) for r in part])[1:-1]
            separator = b","
    yield b"[]" if separator == b"[" else b"]"


# Kernels whose full maps one piece of an answer holds: a piece is held several times over (as
# maps, encoded, joined), so it is what an answer with maps costs in memory.
MAPS_AT_ONCE = 64


def _kernel_parts(con: Con, run: RunSummary, sim_ids: Sequence[str], page: Page, at_once: int) -> Iterator[list[tuple[Any, ...]]]:
    """The `page` of the sims' kernels' records of `_kernels` with totals, as lists of at most
    `at_once`. The records are read at once, as Arrow columns (a few hundred bytes a kernel,
    where its map is tens of KB), since the maps' query cannot share the connection with a
    result still being read; one query, where a query per part would sort and total every
    kernel again for each part."""
    query, params = _kernels_query(run, sim_ids, totals=True, page=page)
    records = con.sql(query, params=params).to_arrow_table()
    for start in range(0, records.num_rows, at_once):
        part = records.slice(start, at_once)
        yield list(zip(*(column.to_pylist() for column in part.columns)))


def _totals(record: tuple[Any, ...]) -> dict[str, float]:
    """A split or reusing sim's kernel's running totals, from its record of `_kernels`, those it has."""
    return {name: total for name, total in zip(_RUNNING_TOTALS, record[_SEQ + 1 :]) if total is not None}


def run_kernel_pieces(con: Con, run: RunSummary, page: Page = WHOLE) -> Iterator[bytes]:
    with snapshot(con):
        yield from kernel_pieces(con, run, [s.id for s in sim_rows(con, run)], page=page)


class _Real(msgspec.Struct, frozen=True, kw_only=True):
    """A kernel's real timing: each measure's mean over the hardware repetitions, and their
    spread when there are several."""

    ns: float | None = None
    ns_spread: Spread | None = None
    cycles: float | None = None
    cycles_spread: Spread | None = None
    counters: dict[str, list[float]] = {}  # by ncu's metric name: its value in each repetition


_NO_REAL = _Real()


class Labelled(msgspec.Struct, frozen=True):
    """A run's replicas' configs as its comparison shows them."""

    configs: list[str]  # the comparison's configs, the labels of a config of several digests in its place
    apart: dict[str, str]  # by sim id, the labels that are not the sim's config's name


class Replica(NamedTuple):
    """A run's sim but a reference, as its configs' labels and totals take it."""

    sim_id: str
    gpu_config: str
    config_digests: dict[str, str] | None  # its launch's config files: file -> sha256
    cycles: float | None  # its total cycles when it succeeded and simulated every launch


# The sims column of each Replica field, selected in the Replica's own order.
_REPLICA_COLUMN = {
    "sim_id": "id",
    "gpu_config": "gpu_config",
    "config_digests": "config_digests",
    "cycles": "CASE WHEN state = 'succeeded' AND cut_short IS NULL THEN gpu_tot_sim_cycle END",
}
_REPLICA_COLUMNS = ", ".join(_REPLICA_COLUMN[field] for field in Replica._fields)


def _replicas(con: Con, run_ids: Sequence[str]) -> dict[str, list[Replica]]:
    """The runs' replicas (their sims but references) by run, each run's by replica."""
    records = con.execute(
        f"""SELECT run_id, {_REPLICA_COLUMNS} FROM sims
            WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND reference_for IS NULL ORDER BY run_id, replica""",
        [list(run_ids)],
    ).fetchall()
    by_run: dict[str, list[Replica]] = {}
    for run_id, *replica in records:
        by_run.setdefault(run_id, []).append(Replica(*replica))
    return by_run


def labels_from(run: RunSummary, replicas: Sequence[Replica]) -> Labelled:
    """Each replica's config as the comparison shows it (`gpu_configs.config_labels`), by sim
    id; and the comparison's configs: the run's in the order of its entries, a config of
    several digests as its labels, in the order its replicas took them."""
    labels = config_labels((r.sim_id, r.gpu_config, r.config_digests) for r in replicas)
    apart = {r.sim_id: labels[r.sim_id] for r in replicas if labels[r.sim_id] != r.gpu_config}
    shown = []
    for name in configs(run):
        shown += list(dict.fromkeys(apart[r.sim_id] for r in replicas if r.gpu_config == name and r.sim_id in apart)) or [name]
    return Labelled(shown, apart)


def labels_of(con: Con, run: RunSummary) -> Labelled:
    return labels_from(run, _replicas(con, [run.id]).get(run.id, []))


def cycles_by_config(run: RunSummary, replicas: Sequence[Replica]) -> list[ConfigCycles]:
    """The run's total cycles per config as its comparison labels them: the median, least and
    most of the replicas that succeeded and simulated every launch (a cut-short success's
    total is of fewer launches, so it would pass for a faster config)."""
    labels = labels_from(run, replicas)
    counted: dict[str, list[float]] = {}
    for r in replicas:
        if r.cycles is not None:
            counted.setdefault(labels.apart.get(r.sim_id, r.gpu_config), []).append(r.cycles)
    return [
        ConfigCycles(gpu_config=label, sims=len(cycles), median=statistics.median(cycles), min=min(cycles), max=max(cycles))
        for label in labels.configs
        if (cycles := counted.get(label))
    ]


# Kernels with their sim's config as the comparison labels it (`l.label`, else `s.gpu_config`),
# bound to the sims listed apart and their labels (`Labelled.apart`); and a run's replicas.
_LABELLED_KERNELS = f"{CURRENT_KERNELS} LEFT JOIN (SELECT unnest(?::VARCHAR[]) AS sim_id, unnest(?::VARCHAR[]) AS label) l ON l.sim_id = s.id"
_REPLICAS_OF_RUN = "s.run_id = ? AND s.reference_for IS NULL"


def _comparison_rows(con: Con, run_id: str, labelled: Labelled, real: list[_Real], indices: list[int] | None) -> list[ComparisonRow]:
    """Comparison rows for the given kernel indices (all when None): a value per config of `labelled`."""
    names, apart = labelled.configs, labelled.apart
    cycles = any(r.cycles is not None for r in real)
    only = "AND k.kernel_index IN (SELECT unnest(?))" if indices is not None else ""
    records = con.execute(
        f"""SELECT k.kernel_index, coalesce(l.label, s.gpu_config) AS config, median(k.sim_time_ns), median(k.gpu_sim_cycle),
                   arg_min(k.name, s.replica)
            FROM {_LABELLED_KERNELS}
            WHERE {_REPLICAS_OF_RUN} {only}
            GROUP BY k.kernel_index, config
            ORDER BY k.kernel_index, list_position(?, config)""",
        [list(apart), list(apart.values()), run_id, *([indices] if indices is not None else []), names],
    ).fetchall()
    rows: list[ComparisonRow] = []
    for index, config, median_ns, median_cycles, name in records:
        if not rows or rows[-1].kernel_index != index:
            known = real[index] if index < len(real) else _NO_REAL
            row = ComparisonRow(
                kernel_index=index,
                kernel_name=name,
                kernel_short_name=short_name(name),
                real_ns=known.ns,
                sim_ns=dict.fromkeys(names),
                real_ns_spread=known.ns_spread,
                real_cycles=known.cycles,
                real_cycles_spread=known.cycles_spread,
                sim_cycles=dict.fromkeys(names) if cycles else None,
            )
            rows.append(row)
        rows[-1].sim_ns[config] = median_ns
        if rows[-1].sim_cycles is not None:
            rows[-1].sim_cycles[config] = median_cycles
    return rows


def _real_timing(con: Con, trace_id: str) -> list[_Real]:
    """The real timing the trace uses, kernel by kernel in kernel_id order."""
    records = con.execute(
        """SELECT list(r.duration_ns ORDER BY r.repeat) FILTER (WHERE r.duration_ns IS NOT NULL),
                  list(r.cycles ORDER BY r.repeat) FILTER (WHERE r.cycles IS NOT NULL),
                  list(r.counters ORDER BY r.repeat) FILTER (WHERE r.counters IS NOT NULL)
           FROM trace_real_timing r JOIN traces t ON t.id = r.trace_id AND t.real_timing = r.timing_id
           WHERE r.trace_id = ? GROUP BY r.kernel_id ORDER BY r.kernel_id""",
        [trace_id],
    ).fetchall()
    real = []
    for durations, cycles, counted in records:
        ns, ns_spread = measured(durations or [])
        mean_cycles, cycles_spread = measured(cycles or [])
        by_metric: dict[str, list[float]] = {}
        for repetition in counted or []:
            for metric, value in repetition.items():
                by_metric.setdefault(metric, []).append(value)
        real.append(_Real(ns=ns, ns_spread=ns_spread, cycles=mean_cycles, cycles_spread=cycles_spread, counters=by_metric))
    return real


def _counter_comparison(
    con: Con, run_id: str, labelled: Labelled, real: list[_Real], rows: list[ComparisonRow]
) -> dict[str, CounterComparison] | None:
    """Each hardware counter the real timing has (`cascade_core.counters`), against the sum of
    its stats' per-kernel values (`kernel_stats.value`: never a running total), median over a
    config's replicas; a kernel lacking one of the stats, or with a value that is not finite
    (`gpu_occupancy = -nan%` when no warp ran), has none. Scored per config as time is."""
    present = [c for c in counters.COUNTERS if any(c.metric in r.counters for r in real)]
    if not present:
        return None
    wanted = [(c.name, stat) for c in present for stat in c.stats]
    records = con.execute(
        f"""WITH wanted AS (SELECT unnest(?::VARCHAR[]) AS counter, unnest(?::VARCHAR[]) AS stat),
                parts AS (SELECT counter, count(*) AS n FROM wanted GROUP BY counter),
                own AS (SELECT k.kernel_index, coalesce(l.label, s.gpu_config) AS config, w.counter, sum(v.value) AS value, count(*) AS n
                        FROM {_LABELLED_KERNELS}
                        JOIN kernel_stats v ON v.seq = k.seq JOIN stat_names n ON n.id = v.stat JOIN wanted w ON w.stat = n.name
                        WHERE {_REPLICAS_OF_RUN} AND isfinite(v.value)
                        GROUP BY k.seq, k.kernel_index, config, w.counter)
            SELECT own.kernel_index, own.config, own.counter, median(own.value) FROM own JOIN parts USING (counter)
            WHERE own.n = parts.n GROUP BY ALL""",
        [[name for name, _ in wanted], [stat for _, stat in wanted], list(labelled.apart), list(labelled.apart.values()), run_id],
    ).fetchall()
    simulated = {(index, config, counter): value for index, config, counter, value in records}
    compared = {}
    for counter in present:
        counter_rows = []
        for row in rows:
            known = real[row.kernel_index] if row.kernel_index < len(real) else _NO_REAL
            mean, spread = measured(known.counters.get(counter.metric, []))
            sim = {config: simulated.get((row.kernel_index, config, counter.name)) for config in labelled.configs}
            counter_rows.append(CounterRow(kernel_index=row.kernel_index, real=mean, real_spread=spread, sim=sim))
        compared[counter.name] = CounterComparison(
            label=counter.label,
            hw_metric=counter.metric,
            sim_stats=list(counter.stats),
            rows=counter_rows,
            correlation=_scores(counter_rows, labelled.configs, _counted),
        )
    return compared


def _compared(
    con: Con, run: RunSummary, labelled: Labelled, has_real_timing: bool, rows: list[ComparisonRow], real: list[_Real], kernels_total: int
) -> Comparison:
    """The comparison of these rows, a column per config of `labelled`, scored per config
    against the real values it has (time, cycles, the hardware counters), and said to be
    partial while the run is active or a config lacks rows another has: with how many rows
    each config has, and how many all have."""
    names = labelled.configs
    compared = sum(all(ns is not None for ns in row.sim_ns.values()) for row in rows)
    partial = run.state == "active" or compared < len(rows)
    return Comparison(
        has_real_timing=has_real_timing,
        configs=names,
        config_labels=labelled.apart or None,
        rows=rows,
        correlation=_scores(rows, names, _durations) if any(r.ns is not None for r in real) else None,
        cycles_correlation=_scores(rows, names, _cycles) if any(r.cycles is not None for r in real) else None,
        partial=partial,
        kernels_done={c: sum(row.sim_ns[c] is not None for row in rows) for c in names} if partial else None,
        kernels_compared=compared if partial else None,
        kernels_total=kernels_total if partial else None,
        counters=_counter_comparison(con, run.id, labelled, real, rows),
    )


def _kernels_total(con: Con, run: RunSummary) -> int:
    return int(one_row(con, "SELECT kernels_total FROM runs WHERE id = ?", [run.id])[0])


_Pair = tuple[float | None, float | None]  # (real, simulated)
_Scored = TypeVar("_Scored", ComparisonRow, CounterRow)


def _durations(row: ComparisonRow, config: str) -> _Pair:
    return row.real_ns, row.sim_ns[config]


def _cycles(row: ComparisonRow, config: str) -> _Pair:
    return row.real_cycles, (row.sim_cycles or {})[config]


def _counted(row: CounterRow, config: str) -> _Pair:
    return row.real, row.sim[config]


def _scores(rows: Sequence[_Scored], names: list[str], pair: Callable[[_Scored, str], _Pair]) -> dict[str, Correlation]:
    """Each config's scores over the rows where both of its values are known."""
    scored = {}
    for config in names:
        both = [(hw, sim) for hw, sim in (pair(row, config) for row in rows) if hw is not None and sim is not None]
        scored[config] = correlate(both)
    return scored


def comparison(con: Con, run: RunSummary, has_real_timing: bool) -> Comparison:
    """Row i: the kernels of index i, with each config's median sim_time_ns over the
    replicas that finished it (null if none did; a fast sim's reference is no replica; a
    config whose replicas ran files of several digests apart per digest, `labels_of`), the name from the first sim by config and
    replica, and the i-th kernel by kernel_id of the trace's real timing, with the scores of
    each config against it."""
    real = _real_timing(con, run.trace_id) if has_real_timing else []
    labelled = labels_of(con, run)
    return _compared(con, run, labelled, has_real_timing, _comparison_rows(con, run.id, labelled, real, None), real, _kernels_total(con, run))


class _Computed(msgspec.Struct, frozen=True, kw_only=True):
    comparison: Comparison
    real: list[_Real]
    labelled: Labelled
    kernels: int  # the kernels table's rows when computed
    last_seq: int  # and its highest sequence


class Cache(Protocol):
    def get(self, key: Hashable, /) -> Any: ...
    def __setitem__(self, key: Hashable, value: Any, /) -> None: ...


def run_comparison(con: Con, run: RunSummary, cache: Cache) -> Comparison:
    """The run's comparison, kept per run and brought up to date from the kernels added since
    (the rows of only the kernel indices they touch are computed again): a run that is still
    simulating changes a row or two between requests, out of thousands. Both checks read only
    what is new: the kernels table's metadata, and its rows past the last sequence seen; and
    every row is computed again when the labels change (a sim launched on other files)."""
    with snapshot(con):
        trace = _trace(con, run)
        labelled = labels_of(con, run)
        last_seq, kernels = one_row(con, "SELECT coalesce((SELECT max(seq) FROM kernels), 0), (SELECT count(*) FROM kernels)")
        # The rows of a timing id are all listed before it is attached, and never change after;
        # a run that ends with no new kernel row makes its comparison no longer partial.
        key = (run.id, run.state, trace.created_at, one_row(con, "SELECT (SELECT real_timing FROM traces WHERE id = ?)", [run.trace_id]))
        known: _Computed | None = cache.get(key)
        if known is not None and known.labelled != labelled:
            known = None
        if known is not None and (known.kernels, known.last_seq) == (kernels, last_seq):
            return known.comparison
        touched: list[int] | None = None
        if known is not None:
            added, touched = one_row(
                con,
                "SELECT count(*), list(DISTINCT k.kernel_index) FILTER (WHERE s.run_id = ?) "
                "FROM kernels k LEFT JOIN sims s ON s.id = k.sim_id AND s.attempt = k.attempt WHERE k.seq > ?",
                [run.id, known.last_seq],
            )
            if known.kernels + added != kernels:
                touched = None  # rows went away too (a sim's new attempt): start over
        if known is None or touched is None:
            real = _real_timing(con, run.trace_id) if trace.has_real_timing else []
            rows = _comparison_rows(con, run.id, labelled, real, None)
        else:
            real = known.real
            fresh = {row.kernel_index: row for row in _comparison_rows(con, run.id, labelled, real, sorted(touched))} if touched else {}
            kept = [fresh.pop(row.kernel_index, row) for row in known.comparison.rows]
            rows = kept + sorted(fresh.values(), key=lambda r: r.kernel_index)
        result = _compared(con, run, labelled, trace.has_real_timing, rows, real, _kernels_total(con, run))
        cache[key] = _Computed(comparison=result, real=real, labelled=labelled, kernels=kernels, last_seq=last_seq)
        return result


def _reference_side(con: Con, sim: SimRow) -> ReferenceSim:
    """The sim's side, its wall time the simulation's: a cached sim's is its source's, unknown
    once the source's run is deleted (its own is the moment the result was taken)."""
    timed: SimRow | None = sim
    if sim.cached_from is not None:
        timed = next(iter(_select(con, SimRow, "id = ?", [sim.cached_from])), None)
    wall = None
    if sim.state == "succeeded" and timed is not None and timed.started_at is not None and timed.finished_at is not None:
        wall = (timed.finished_at - timed.started_at).total_seconds()
    return from_row(ReferenceSim, sim, sim_id=sim.id, wall_s=wall)


def _kernel_results(con: Con, sim: SimRow) -> list[reference.KernelResult]:
    records = con.execute(f"SELECT {_KERNEL_RESULT_COLUMNS} FROM {CURRENT_KERNELS} WHERE k.sim_id = ? ORDER BY k.uid", [sim.id]).fetchall()
    return [reference.KernelResult(**dict(zip(_KERNEL_RESULT_FIELDS, record))) for record in records]


def reference_comparison(con: Con, fast: SimRow, ref: SimRow) -> ReferenceComparison:
    """The split or reusing sim `fast` against its reference `ref`, kernel by kernel and in total."""
    with snapshot(con):
        kernels = reference.kernels(_kernel_results(con, fast), _kernel_results(con, ref), short_name)
    fast_side, ref_side = _reference_side(con, fast), _reference_side(con, ref)
    known = fast_side.config_digests is not None and ref_side.config_digests is not None
    return ReferenceComparison(
        sim_id=fast.id,
        run_id=fast.run_id,
        gpu_config=fast.gpu_config,
        split=None if fast.split is None else split_view(fast.kernels_total, fast.split),
        reuse=fast.reuse,
        fast=fast_side,
        reference=ref_side,
        same_config=fast_side.config_digests == ref_side.config_digests if known else None,
        speedup=reference.speedup(fast_side.wall_s, ref_side.wall_s),
        totals=reference.totals(kernels),
        kernels=kernels,
    )


class SimKernelTimes(msgspec.Struct, frozen=True):
    sim_id: str
    last_seq: int  # the sequence of the sim's last kernel result
    sim_ns: dict[int, float]  # kernel_launch_uid -> sim_time_ns
    config_label: str | None  # its config's label when the run's replicas of it ran several digests (`labels_of`)


def succeeded_kernel_times(con: Con, run: RunSummary) -> list[SimKernelTimes]:
    """Each succeeded sim's kernel times by launch uid, and its config's label."""
    with snapshot(con):
        records = con.execute(
            f"SELECT k.sim_id, max(k.seq), map(list(k.uid), list(k.sim_time_ns)) FROM {CURRENT_KERNELS} "
            "WHERE s.run_id = ? AND s.state = 'succeeded' GROUP BY k.sim_id",
            [run.id],
        ).fetchall()
        apart = labels_of(con, run).apart
    return [SimKernelTimes(sim_id, last, dict(times), apart.get(sim_id)) for sim_id, last, times in records]


# --- results -------------------------------------------------------------------------------


def _around(struct: msgspec.Struct, field: str, pieces: Iterator[bytes]) -> Iterator[bytes]:
    """`struct` as JSON, with the value of its field `field` streamed from `pieces`."""
    head, tail = _encoder.encode(msgspec.structs.replace(struct, **{field: _HOLE})).split(b"\x00")
    yield head
    yield from pieces
    yield tail


def _json_list(items: Iterable[Iterator[bytes]]) -> Iterator[bytes]:
    yield b"["
    for i, item in enumerate(items):
        if i:
            yield b","
        yield from item
    yield b"]"


def _sim_outline(run: RunSummary, sim: SimRow, gpu_configs: Mapping[str, GpuConfig]) -> SimResults:
    """A sim's results without its kernels."""
    view = sim_from_row(sim)
    return SimResults(sim=view, trace_id=run.trace_id, gpu_config=gpu_configs.get(sim.gpu_config), kernels=[], totals=view.latest)


def sim_results_json(
    con: Con, run: RunSummary, sim: SimRow, gpu_configs: Mapping[str, GpuConfig], maps: stats_maps.Names, stats: StatsChoice = "all", page: Page = WHOLE
) -> Iterator[bytes]:
    """A SimResults as JSON pieces, the `page` of its kernels with their `stats`, read in the
    caller's transaction."""
    return _around(_sim_outline(run, sim, gpu_configs), "kernels", kernel_pieces(con, run, [sim.id], maps, stats, page))


def sim_results_pieces(
    con: Con, run: RunSummary, sim: SimRow, gpu_configs: Mapping[str, GpuConfig], maps: stats_maps.Names, stats: StatsChoice = "all", page: Page = WHOLE
) -> Iterator[bytes]:
    """A SimResults as JSON pieces, the `page` of its kernels with their `stats` (full maps by default)."""
    with snapshot(con):
        yield from sim_results_json(con, run, sim, gpu_configs, maps, stats, page)


def run_outline(con: Con, run: RunSummary, gpu_configs: Mapping[str, GpuConfig]) -> tuple[RunResults, list[SimRow]]:
    """The run's RunResults with each sim's results but none of their kernels, and its sims'
    rows, read in the caller's transaction."""
    trace = _trace_detail(con, run)
    sims = sim_rows(con, run)
    outlines = [_sim_outline(run, s, gpu_configs) for s in sims]
    return RunResults(run=run, trace=trace, sims=outlines, comparison=comparison(con, run, trace.has_real_timing)), sims


def run_results_pieces(con: Con, run: RunSummary, gpu_configs: Mapping[str, GpuConfig], maps: stats_maps.Names) -> Iterator[bytes]:
    """A RunResults as JSON pieces: the run, its trace in detail, each sim's results with
    full stats maps, and the comparison."""
    with snapshot(con):
        outline, sims = run_outline(con, run, gpu_configs)
        sims_json = _json_list(sim_results_json(con, run, s, gpu_configs, maps) for s in sims)
        yield from _around(msgspec.structs.replace(outline, sims=[]), "sims", sims_json)


# --- log and files -------------------------------------------------------------------------


def log_start(con: Con, sim: SimRow, line: int) -> int:
    """The first line of the heartbeat of the sim's current attempt that holds line `line`
    (1 when none does: the log starts there)."""
    (first,) = one_row(con, "SELECT max(first_line_seq) FROM sim_log WHERE sim_id = ? AND attempt = ? AND first_line_seq <= ?", [sim.id, sim.attempt, line])
    return 1 if first is None else int(first)


def log_places(con: Con, sim: SimRow, after_line: int, limit: int) -> list[tuple[int, int]]:
    """Where the log lines of the sim's current attempt are, in line order, from the first
    line past `after_line` on: (first_line_seq, stream sequence) of up to `limit` heartbeats."""
    records = con.execute(
        "SELECT first_line_seq, seq FROM sim_log WHERE sim_id = ? AND attempt = ? AND first_line_seq > ? ORDER BY first_line_seq LIMIT ?",
        [sim.id, sim.attempt, after_line, limit],
    ).fetchall()
    return [(int(line), int(seq)) for line, seq in records]


def _file_rows(con: Con, sim_ids: Sequence[str]) -> list[SimFileRow]:
    records = con.execute(
        "SELECT f.* FROM sim_files f JOIN sims s ON s.id = f.sim_id AND s.attempt = f.attempt "
        "WHERE s.id IN (SELECT unnest(?)) ORDER BY f.name",
        [list(sim_ids)],
    ).fetchall()
    return tables.from_rows(SimFileRow, records)


def file_rows(con: Con, sim: SimRow) -> list[SimFileRow]:
    """The rows of the sim's files (its current attempt's), by name."""
    return _file_rows(con, [sim.id])


def sim_files(con: Con, sim: SimRow) -> list[SimFile]:
    """The sim's files, by name."""
    return [from_row(SimFile, f) for f in file_rows(con, sim)]


def file_row(con: Con, sim: SimRow, name: str) -> SimFileRow | None:
    return _one(con, SimFileRow, "sim_id = ? AND attempt = ? AND name = ?", [sim.id, sim.attempt, name])


def run_files(con: Con, run: RunSummary) -> list[RunFile]:
    """The files of every sim of the run, by config, replica, then name."""
    with snapshot(con):
        sims = sim_rows(con, run)
        where = places(sims)
        order = {s.id: i for i, s in enumerate(sims)}
        files = sorted(_file_rows(con, list(order)), key=lambda f: order[f.sim_id])
        return [file_from_row(f, where[f.sim_id]) for f in files]


# --- live streams --------------------------------------------------------------------------


def run_rows(con: Con, run_id: str) -> tuple[RunRow, list[SimRow]] | None:
    """The run's row and its sims' rows, from one batch."""
    with snapshot(con):
        row = run_row(con, run_id)
        return None if row is None else (row, _select(con, SimRow, "run_id = ?", [run_id]))


def stream_snapshot(con: Con, run_id: str) -> tuple[int, RunDetail] | None:
    """The run as of the last committed batch, with that batch's sequence."""
    with snapshot(con):
        seq = tables.checkpoint(con)
        run = run_summary(con, run_id)
        return None if run is None else (seq, _detail(con, run, sim_rows(con, run), None))
