"""Kernel stats maps as a long table: a row per value of a map in `kernel_stats`, naming its
kernel by the kernels row's `seq` and its stat by an id of `stat_names`, in the map's order.

The projector writes them for the kernels rows it writes, in the same transaction
(`projector.write`). They are the only copy of the maps in the read model: a map read back is
made from them (`queries/stats_maps.py`). bench/README.md has the measurements: writing the
rows costs about what writing the maps' text did, and reading one map back from them takes a
millisecond or two where reading it from a column of JSON texts took over a hundred.

A real map holds 4,000 to 9,000 values, and turning them into rows must cost little. Events
carry maps packed (`cascade_core/packed_stats.py`): the values become a column as the
float64s they are, and each set of names, known again by its text, gets its ids as an Arrow
array once per read model.

Ids go to names in the order kernels first show them (in a map's order among those one
kernel shows first), counting every kernel result the fold applied, in the order applied,
whether or not its rows are kept: a replay, whatever its batches, gives every name the same
id. So a map's rows mostly run through consecutive ids, which DuckDB stores in a few bits a
row where ids in no order took two bytes (bench/README.md, "Stat names once").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import duckdb
import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from cascade_core import packed_stats
from cascade_formats import stat_kinds
from cascade_core.packed_stats import PackedStats
from cascade_formats.stat_kinds import kind_of
from cascade_nats import deflated
from projections.fold import Unfoldable
from projections.rows import KernelRow, StatNameRow


class StatNames:
    """The `stat_names` of one read model as the projector last committed it, and the
    names the batch being written adds; and the sets of names (`stat_sets`) results name by
    digest."""

    def __init__(self) -> None:
        self._ids: dict[str, int] | None = None  # None: read from DuckDB when next needed
        self._layouts: dict[str, pa.Array] = {}  # by the names' text (`PackedStats.names`)
        self._sets: dict[str, str] = {}  # the names' text by digest, as read from `stat_sets`
        self.added: list[StatNameRow] = []

    def with_names(self, con: duckdb.DuckDBPyConnection, kernel: KernelRow) -> KernelRow:
        """The kernel row, its map holding its set of names' text where it held the digest:
        that set's event came before it, and its row is in `stat_sets` (the batch's own
        written first). `fold.Unfoldable` where no event gave the set: the result is parked."""
        stats = kernel.stats
        if stats is None or stats.names or not stats.names_digest:
            return kernel
        text = self._sets.get(stats.names_digest)
        if text is None:
            found = con.execute("SELECT names FROM stat_sets WHERE digest = ?", [stats.names_digest]).fetchone()
            if found is None:
                raise Unfoldable(kernel.seq, f"its stats map names the set of names {stats.names_digest}, which no event before it defined")
            text = packed_stats.kept(self._sets, stats.names_digest, found[0])
        return msgspec.structs.replace(kernel, stats=packed_stats.with_names(stats, text))

    def _loaded(self, con: duckdb.DuckDBPyConnection) -> dict[str, int]:
        if self._ids is None:
            self._ids = dict(con.execute("SELECT name, id FROM stat_names").fetchall())
            self._layouts.clear()
            self.added.clear()
        return self._ids

    def ids(self, con: duckdb.DuckDBPyConnection, stats: PackedStats) -> pa.Array:
        """The ids of the map's names, in its order; names without one get one."""
        known = self._layouts.get(stats.names)
        if known is not None:
            return known
        ids = self._loaded(con)
        names = packed_stats.names_of(stats)
        for name in (n for n in names if n not in ids):
            ids[name] = len(ids) + 1
            self.added.append(StatNameRow(id=ids[name], name=name, kind=kind_of(name)))
        return packed_stats.kept(self._layouts, stats.names, pa.array([ids[name] for name in names], pa.int32()))

    def committed(self) -> None:
        self.added = []

    def forget(self) -> None:
        """What DuckDB holds is not known any more (a transaction failed)."""
        self._ids = None
        self._sets.clear()


_SCHEMA = pa.schema(
    [("seq", pa.int64()), ("stat", pa.int32()), ("value", pa.float64()), ("text", pa.string()), ("printed_total", pa.float64()), ("sample", pa.bool_())]
)


def rows(con: duckdb.DuckDBPyConnection, applied: Iterable[KernelRow], kept: set[int], names: StatNames) -> pa.Table:
    """The `kernel_stats` rows of the maps of the kernels `kept` (by seq), out of every
    kernel result `applied`, in order, whose names all get ids. A map's rows are in its
    order, which a read of them gives back."""
    seqs: list[int] = []
    samples: list[bool] = []
    ends: list[int] = []  # where each kept kernel's rows end
    stats: list[pa.Array] = []
    values: list[pa.Array] = []
    texts: list[pa.Array] = []
    totals: list[pa.Array] = []
    for kernel in applied:
        if kernel.stats is None:
            continue  # a result without a map (older events, or none printed): no names, no rows
        ids = names.ids(con, kernel.stats)
        if kernel.seq not in kept or not len(ids):
            continue
        stats.append(ids)
        floats, own = deflated.floats_and_differences(kernel.stats, kernel.per_kernel)
        printed, text = _columns(kernel.stats, floats, len(ids))
        value, printed_total = _per_kernel(kernel.stats, printed, own)
        values.append(value)
        texts.append(text)
        totals.append(printed_total)
        seqs.append(kernel.seq)
        samples.append(kernel.sample)
        ends.append((ends[-1] if ends else 0) + len(ids))
    if not seqs:
        return _SCHEMA.empty_table()
    # Each kernel's seq and sample on each of its rows, made in Arrow rather than a list of them all.
    run_ends = pa.array(ends, pa.int32())
    seq = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(run_ends, pa.array(seqs, pa.int64())))
    sample = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(run_ends, pa.array(samples, pa.bool_())))
    columns = [seq, pa.concat_arrays(stats), pa.concat_arrays(values), pa.concat_arrays(texts), pa.concat_arrays(totals), sample]
    return pa.Table.from_arrays(columns, schema=_SCHEMA)


# Results from before `per_kernel` (older events): a sim run whole and straight printed its
# running totals over its own launches, so its kernels' own values are the differences of
# consecutive kernels' printed totals (its first's as printed); a split, reusing or resumed
# sim's cannot be told, and stay null. Then each ratio of them from its parts. Every scan of
# kernel_stats is held to the $seqs written and the kernels before them: the table is the
# read model's largest, and a join built over all of it outgrows the memory budget.
_OLD_RUNNING = """
UPDATE kernel_stats_hot SET value = own.value FROM (
  WITH pairs AS (
    SELECT k.seq, pk.seq AS before
    FROM kernels k JOIN sims s ON s.id = k.sim_id
    LEFT JOIN kernels pk ON pk.sim_id = k.sim_id AND pk.attempt = k.attempt AND pk.kernel_index = k.kernel_index - 1
    WHERE k.seq IN (SELECT unnest($seqs)) AND s.split IS NULL AND NOT s.reuse AND len(s.resumed) = 0),
  printed AS (
    SELECT seq, stat, printed_total FROM kernel_stats
    WHERE (seq IN (SELECT seq FROM pairs) OR seq IN (SELECT before FROM pairs)) AND stat IN (SELECT unnest($running)))
  SELECT v.seq, v.stat, v.printed_total - coalesce(p.printed_total, 0) AS value
  FROM pairs JOIN printed v ON v.seq = pairs.seq LEFT JOIN printed p ON p.seq = pairs.before AND p.stat = v.stat) own
WHERE kernel_stats_hot.seq = own.seq AND kernel_stats_hot.stat = own.stat"""
_OLD_RATIOS = """
UPDATE kernel_stats_hot SET value = own.value FROM (
  WITH q AS (SELECT unnest($ratios) AS stat, unnest($numerators) AS numerator, unnest($denominators) AS denominator),
  written AS (
    SELECT seq, stat, value FROM kernel_stats WHERE seq IN (SELECT unnest($seqs))
    AND (stat IN (SELECT unnest($ratios)) OR stat IN (SELECT unnest($numerators)) OR stat IN (SELECT unnest($denominators))))
  SELECT r.seq, r.stat, n.value / d.value AS value
  FROM written r JOIN q USING (stat)
  JOIN written n ON n.seq = r.seq AND n.stat = q.numerator JOIN written d ON d.seq = r.seq AND d.stat = q.denominator) own
WHERE kernel_stats_hot.seq = own.seq AND kernel_stats_hot.stat = own.stat"""
# Kernels made again at a time: a replay's batch may bring thousands, each with thousands of
# rows, and an UPDATE holds what it changes in memory until it commits.
_OLD_KERNELS_AT_ONCE = 64


def old_results(written: Iterable[KernelRow]) -> list[int]:
    """The seqs of the results among `written` whose events carry no differences: their own
    values are made from the rows of the kernel before (`own_values_of_old_results`)."""
    return [k.seq for k in written if k.per_kernel is None and k.stats is not None and not k.stats.with_differences]


def own_values_of_old_results(con: duckdb.DuckDBPyConnection, written: Iterable[KernelRow]) -> None:
    """The kernels' own values of running totals and their ratios, for the results just
    written (`rows`) whose events carry no differences."""
    seqs = old_results(written)
    if not seqs:
        return
    ids = dict(con.execute("SELECT name, id FROM stat_names").fetchall())
    running = [i for name, i in ids.items() if stat_kinds.kind_of(name) == "running_total"]
    ratios = ratio_part_ids({i: name for name, i in ids.items() if stat_kinds.kind_of(name) == "ratio_of_totals"}, ids)
    for at in range(0, len(seqs), _OLD_KERNELS_AT_ONCE):
        some = seqs[at : at + _OLD_KERNELS_AT_ONCE]
        con.execute(_OLD_RUNNING, {"seqs": some, "running": running})
        if ratios["ratios"]:
            con.execute(_OLD_RATIOS, {"seqs": some, **ratios})


def ratio_part_ids(ratios: Mapping[int, str], ids: Mapping[str, int]) -> dict[str, list[int]]:
    """The ratios of running totals (`ratios`: their names by id) whose numerator and
    denominator have ids in `ids`, as query parameters: `ratios`, `numerators` and
    `denominators`, in one order."""
    parts = {i: p for i, name in ratios.items() if (p := stat_kinds.ratio_parts(name)) is not None and p[0] in ids and p[1] in ids}
    return {"ratios": list(parts), "numerators": [ids[n] for n, _ in parts.values()], "denominators": [ids[d] for _, d in parts.values()]}


class _Kinds(msgspec.Struct, frozen=True, gc=False):
    """Which of a set of names are running totals, and which ratios of two of them (each
    with its numerator's and denominator's places, in the order of its own)."""

    running: pa.BooleanArray
    totals: pa.BooleanArray  # running totals and ratios
    ratios: pa.BooleanArray  # those whose parts the map has
    unknown: pa.BooleanArray  # the others: no value of their own
    numerators: pa.Array
    denominators: pa.Array


_kinds: dict[str, _Kinds] = {}  # by the names' text


def _kinds_of(stats: PackedStats) -> _Kinds:
    known = _kinds.get(stats.names)
    if known is not None:
        return known
    names = packed_stats.names_of(stats)
    place = {name: i for i, name in enumerate(names)}
    kinds = [stat_kinds.kind_of(name) for name in names]
    parts = [stat_kinds.ratio_parts(name) if kind == "ratio_of_totals" else None for name, kind in zip(names, kinds)]
    ratios = [p is not None and p[0] in place and p[1] in place for p in parts]
    running = pa.array([kind == "running_total" for kind in kinds], pa.bool_())
    held = [p for p, ratio in zip(parts, ratios) if ratio and p is not None]
    return packed_stats.kept(
        _kinds,
        stats.names,
        _Kinds(
            running=running,
            totals=pa.array([kind in ("running_total", "ratio_of_totals") for kind in kinds], pa.bool_()),
            ratios=pa.array(ratios, pa.bool_()),
            unknown=pa.array([kind == "ratio_of_totals" and not ratio for kind, ratio in zip(kinds, ratios)], pa.bool_()),
            numerators=pa.array([place[n] for n, _ in held], pa.int32()),
            denominators=pa.array([place[d] for _, d in held], pa.int32()),
        ),
    )


def _per_kernel(stats: PackedStats, printed: pa.Array, differences: bytes | None) -> tuple[pa.Array, pa.Array]:
    """A map's `value` and `printed_total` columns, from its printed numbers and their
    `differences` from the block before (None in older events): a running total's value is
    its difference, a ratio of them the ratio of their differences, any other as printed
    (`KernelStatRow`)."""
    kinds = _kinds_of(stats)
    nothing = pa.nulls(len(printed), pa.float64())
    printed_total = pc.if_else(kinds.totals, printed, nothing)
    if differences is None:
        return pc.if_else(kinds.totals, nothing, printed), printed_total
    # The differences are numbers where the printed values are (texts are nans in both).
    own = pa.Array.from_buffers(pa.float64(), len(printed), [printed.buffers()[0], pa.py_buffer(differences)])
    value = pc.if_else(kinds.unknown, nothing, pc.if_else(kinds.running, own, printed))
    if len(kinds.numerators):
        value = pc.replace_with_mask(value, kinds.ratios, pc.divide(own.take(kinds.numerators), own.take(kinds.denominators)))
    return value, printed_total


class _Layout(msgspec.Struct, frozen=True, gc=False):
    """Where a map of a size has its texts: which of its rows have a number (the `value`
    column's validity bitmap), and each row's place among the texts (null where it has none)."""

    numbers: pa.Buffer
    place: pa.Array


# Maps of a kind have their texts in the same places and mostly the same texts (`none`, and
# the kernel's name): both are worked out once, so a map's columns are its floats under a
# bitmap already made and a text column already made, where an if_else and a take per map
# had made `rows` cost twice as much (bench/README.md, "kernel_stats rows for less").
_layouts: dict[tuple[int, tuple[int, ...]], _Layout] = {}
_texts: dict[tuple[int, tuple[int, ...], tuple[str | None, ...]], pa.Array] = {}


def _columns(stats: PackedStats, packed: bytes, count: int) -> tuple[pa.Array, pa.Array]:
    """A map's `value` and `text` columns: its floats (`packed`, as `deflated.floats_of`
    gives them) as they are, but null where it has a text or null; its texts there, null
    elsewhere. Made in Arrow: a map has hundreds of texts (`none`), too many to place one by
    one in Python."""
    floats = pa.py_buffer(packed)
    found = deflated.texts_of(stats, packed)
    if not found:
        return pa.Array.from_buffers(pa.float64(), count, [None, floats]), pa.nulls(count, pa.string())
    where = (count, tuple(found))
    layout = _layouts.get(where)
    if layout is None:
        place = pc.index_in(pa.array(range(count), pa.int32()), value_set=pa.array(where[1], pa.int32()))
        layout = packed_stats.kept(_layouts, where, _Layout(numbers=pc.is_null(place).buffers()[1], place=place))
    key = (*where, tuple(found.values()))
    texts = _texts.get(key)
    if texts is None:
        texts = packed_stats.kept(_texts, key, pc.take(pa.array(key[2], pa.string()), layout.place))
    return pa.Array.from_buffers(pa.float64(), count, [layout.numbers, floats]), texts
