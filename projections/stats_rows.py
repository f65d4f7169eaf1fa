"""Kernel stats maps as a long table: a row per value of a map in `kernel_stats`, naming its
kernel by the kernels row's `seq` and its stat by an id of `stat_names`, in the map's order.

The projector writes them for the kernels rows it writes, in the same transaction
(`projector.write`). They are the only copy of the maps in the read model: a map read back is
made from them (`queries/stats_maps.py`). bench/README.md has the measurements: writing the
rows costs about what writing the maps' text did, and reading one map back from them takes a
millisecond or two where reading it from a column of JSON texts took over a hundred.

A real map holds 4,000 to 9,000 values, and turning them into rows must cost no more than
storing the text. Maps of one config and kernel have the same names, so each set of names
met becomes a `Layout`: a msgspec Struct with a field per name, which decodes such a map
without making a string of any name, and the names' ids as an Arrow array, made once per read
model. A map no known layout fits is decoded as a dict, once, and gives a new layout.

Ids go to names in the order kernels first show them (sorted among those one kernel shows
first), counting every kernel result the fold applied, in the order applied, whether or not
its rows are kept: a replay, whatever its batches, gives every name the same id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import duckdb
import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from cascade_core import nonfinite
from projections.rows import KernelRow, StatNameRow

Value = float | str | None

_any_map = msgspec.json.Decoder(dict[str, Any])
_json = msgspec.json.Encoder()

NO_STATS = "{}"  # a kernel result's map when it has none (`events.KernelFinished.stats`)
MAX_LAYOUTS = 64  # about 9,000 names each for SM7_QV100 maps: a few MB in all
MAX_KERNELS = 10_000


class Layout:
    """A set of stat names, in the order of the first map that had them, and which of them
    have held text; `decode` reads a map with exactly these names, or raises."""

    def __init__(self, names: tuple[str, ...], texts: frozenset[int]) -> None:
        self.names = names
        self.texts = texts
        fields = [(f"f{i}", str | float if i in texts else float) for i in range(len(names))]
        struct = msgspec.defstruct(
            "StatsMap", fields, rename={f"f{i}": name for i, name in enumerate(names)}, forbid_unknown_fields=True, gc=False
        )
        # Not strict: a number field takes "NaN", "Infinity" and "-Infinity" as the floats.
        self._decoder = msgspec.json.Decoder(struct, strict=False)
        self.maybe_text = sorted(texts)

    def decode(self, raw: str) -> list[Value]:
        values: list[Value] = list(msgspec.structs.astuple(self._decoder.decode(raw)))
        # A field that may hold text reads "NaN" as that text: it is the number.
        for i in self.maybe_text:
            value = values[i]
            if isinstance(value, str):
                values[i] = nonfinite.VALUES.get(value, value)
        return values


_recent: list[Layout] = []  # most recently used first
_by_names: dict[tuple[str, ...], Layout] = {}
_by_kernel: dict[str, list[Layout]] = {}  # the layouts kernels of a name had, most recent first
_EMPTY = Layout((), frozenset())


def decode(raw: str, kernel: str) -> tuple[Layout, list[Value]]:
    """The map's layout and its values in the layout's order, each a float (nan and
    infinities as floats), a text, or None (a JSON null). The text is decoded as it is:
    msgspec reads a str's own bytes, where encoding it first copied every map once more.
    Trying a layout that does not fit can cost as much as one that does, so the layouts
    kernels of the same name had are tried first: they print the same lines, but for a few
    that depend on what ran before.)"""
    mine = _by_kernel.setdefault(kernel, [])
    for layout in [*mine, *(other for other in _recent if other not in mine)]:
        try:
            values = layout.decode(raw)
        except msgspec.ValidationError:
            continue
        _first(_recent, layout)
        _first(mine, layout)
        return layout, values
    try:
        stats = _any_map.decode(raw)
    except msgspec.DecodeError:
        return _EMPTY, []  # not a JSON object: nothing to store
    values = [_value(v) for v in stats.values()]
    names = tuple(stats)
    texts = frozenset(i for i, v in enumerate(values) if isinstance(v, str))
    known = _by_names.pop(names, None)
    if known is not None:  # these names again, now with text where there was none
        texts |= known.texts
        for layouts in (_recent, *_by_kernel.values()):
            if known in layouts:
                layouts.remove(known)
    layout = _by_names[names] = Layout(names, texts)
    _first(_recent, layout)
    for old in _recent[MAX_LAYOUTS:]:
        del _by_names[old.names]
    del _recent[MAX_LAYOUTS:]
    if len(_by_kernel) > MAX_KERNELS:
        _by_kernel.clear()
    _first(_by_kernel.setdefault(kernel, []), layout)
    return layout, values


def _first(layouts: list[Layout], layout: Layout, keep: int = MAX_LAYOUTS) -> None:
    """`layout` first in `layouts`, and no more than `keep` of them."""
    if layouts and layouts[0] is layout:
        return
    if layout in layouts:
        layouts.remove(layout)
    layouts.insert(0, layout)
    del layouts[keep:]


def _value(value: Any) -> Value:
    if isinstance(value, str):
        return nonfinite.VALUES.get(value, value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None if value is None else _json.encode(value).decode()


class StatNames:
    """The `stat_names` of one read model as the projector last committed it, and the
    names the batch being written adds."""

    def __init__(self) -> None:
        self._ids: dict[str, int] | None = None  # None: read from DuckDB when next needed
        self._layouts: dict[Layout, pa.Array] = {}
        self.added: list[StatNameRow] = []

    def _loaded(self, con: duckdb.DuckDBPyConnection) -> dict[str, int]:
        if self._ids is None:
            self._ids = dict(con.execute("SELECT name, id FROM stat_names").fetchall())
            self._layouts.clear()
            self.added.clear()
        return self._ids

    def ids(self, con: duckdb.DuckDBPyConnection, layout: Layout) -> pa.Array:
        """The ids of the layout's names, in its order; names without one get one."""
        known = self._layouts.get(layout)
        if known is not None:
            return known
        ids = self._loaded(con)
        for name in sorted(n for n in layout.names if n not in ids):
            ids[name] = len(ids) + 1
            self.added.append(StatNameRow(id=ids[name], name=name))
        if len(self._layouts) >= MAX_LAYOUTS:
            self._layouts.clear()
        known = self._layouts[layout] = pa.array([ids[name] for name in layout.names], pa.int32())
        return known

    def committed(self) -> None:
        self.added = []

    def forget(self) -> None:
        """What DuckDB holds is not known any more (a transaction failed)."""
        self._ids = None


_SCHEMA = pa.schema([("seq", pa.int64()), ("stat", pa.int32()), ("value", pa.float64()), ("text", pa.string())])


def rows(con: duckdb.DuckDBPyConnection, applied: Iterable[KernelRow], kept: set[int], names: StatNames) -> pa.Table:
    """The `kernel_stats` rows of the maps of the kernels `kept` (by seq), out of every
    kernel result `applied`, in order, whose names all get ids. A map's rows are in its
    order, which a read of them gives back."""
    seqs: list[int] = []
    ends: list[int] = []  # where each kept kernel's rows end
    stats: list[pa.Array] = []
    values: list[pa.Array] = []
    texts: list[pa.Array] = []
    for kernel in applied:
        if kernel.stats == NO_STATS:
            continue  # a result without a map (older events, or none printed): no names, no rows
        layout, decoded = decode(kernel.stats, kernel.name)
        ids = names.ids(con, layout)
        if kernel.seq not in kept or not layout.names:
            continue
        text: list[str | None] | None = None
        for i in layout.maybe_text:
            if isinstance(value := decoded[i], str):
                text = text or [None] * len(decoded)
                text[i], decoded[i] = value, None
        stats.append(ids)
        values.append(pa.array(decoded, pa.float64()))
        texts.append(pa.nulls(len(decoded), pa.string()) if text is None else pa.array(text, pa.string()))
        seqs.append(kernel.seq)
        ends.append((ends[-1] if ends else 0) + len(decoded))
    if not seqs:
        return _SCHEMA.empty_table()
    # Each kernel's seq on each of its rows, made in Arrow rather than a list of them all.
    seq = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(pa.array(ends, pa.int32()), pa.array(seqs, pa.int64())))
    columns = [seq, pa.concat_arrays(stats), pa.concat_arrays(values), pa.concat_arrays(texts)]
    return pa.Table.from_arrays(columns, schema=_SCHEMA)
