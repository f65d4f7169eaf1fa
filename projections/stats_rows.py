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

Ids go to names in the order kernels first show them (sorted among those one kernel shows
first), counting every kernel result the fold applied, in the order applied, whether or not
its rows are kept: a replay, whatever its batches, gives every name the same id.
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb
import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from cascade_core import packed_stats
from cascade_core.packed_stats import PackedStats
from cascade_nats import deflated
from projections.rows import KernelRow, StatNameRow


class StatNames:
    """The `stat_names` of one read model as the projector last committed it, and the
    names the batch being written adds."""

    def __init__(self) -> None:
        self._ids: dict[str, int] | None = None  # None: read from DuckDB when next needed
        self._layouts: dict[str, pa.Array] = {}  # by the names' text (`PackedStats.names`)
        self.added: list[StatNameRow] = []

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
        for name in sorted(n for n in names if n not in ids):
            ids[name] = len(ids) + 1
            self.added.append(StatNameRow(id=ids[name], name=name))
        return packed_stats.kept(self._layouts, stats.names, pa.array([ids[name] for name in names], pa.int32()))

    def committed(self) -> None:
        self.added = []

    def forget(self) -> None:
        """What DuckDB holds is not known any more (a transaction failed)."""
        self._ids = None


_SCHEMA = pa.schema([("seq", pa.int64()), ("stat", pa.int32()), ("value", pa.float64()), ("text", pa.string()), ("sample", pa.bool_())])


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
    for kernel in applied:
        if kernel.stats is None:
            continue  # a result without a map (older events, or none printed): no names, no rows
        ids = names.ids(con, kernel.stats)
        if kernel.seq not in kept or not len(ids):
            continue
        stats.append(ids)
        number, text = _columns(kernel.stats, len(ids))
        values.append(number)
        texts.append(text)
        seqs.append(kernel.seq)
        samples.append(kernel.sample)
        ends.append((ends[-1] if ends else 0) + len(ids))
    if not seqs:
        return _SCHEMA.empty_table()
    # Each kernel's seq and sample on each of its rows, made in Arrow rather than a list of them all.
    run_ends = pa.array(ends, pa.int32())
    seq = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(run_ends, pa.array(seqs, pa.int64())))
    sample = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(run_ends, pa.array(samples, pa.bool_())))
    columns = [seq, pa.concat_arrays(stats), pa.concat_arrays(values), pa.concat_arrays(texts), sample]
    return pa.Table.from_arrays(columns, schema=_SCHEMA)


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


def _columns(stats: PackedStats, count: int) -> tuple[pa.Array, pa.Array]:
    """A map's `value` and `text` columns: its floats as they are, but null where it has a
    text or null; its texts there, null elsewhere. Made in Arrow: a map has hundreds of texts
    (`none`), too many to place one by one in Python."""
    floats = pa.py_buffer(deflated.floats_of(stats))
    if not stats.texts:
        return pa.Array.from_buffers(pa.float64(), count, [None, floats]), pa.nulls(count, pa.string())
    where = (count, tuple(stats.texts))
    layout = _layouts.get(where)
    if layout is None:
        place = pc.index_in(pa.array(range(count), pa.int32()), value_set=pa.array(where[1], pa.int32()))
        layout = packed_stats.kept(_layouts, where, _Layout(numbers=pc.is_null(place).buffers()[1], place=place))
    key = (*where, tuple(stats.texts.values()))
    texts = _texts.get(key)
    if texts is None:
        texts = packed_stats.kept(_texts, key, pc.take(pa.array(key[2], pa.string()), layout.place))
    return pa.Array.from_buffers(pa.float64(), count, [layout.numbers, floats]), texts
