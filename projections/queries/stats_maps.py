"""Kernels' stats maps, made again from their rows of `kernel_stats` as the JSON object the
event carried: the same names in the same order, numbers as JSON numbers, nan and the
infinities as the strings "NaN", "Infinity" and "-Infinity", texts as strings.

The maps are not kept as text beside their rows (bench/README.md: DuckDB compresses a column
of 100 KB texts in blocks, so reading one map back decompresses a block of them, 100 to 400
ms, where its rows come back in about a millisecond; and the projector writes the rows for
about what storing the text cost). A read model's stat names are kept by `Names`, read as
ids past those known turn up.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import cast

import duckdb
import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from cascade_core import nonfinite
from projections import stats_parts

_encoder = msgspec.json.Encoder()
KERNELS_AT_ONCE = 256  # kernels whose rows one query reads: about a million rows


class Names:
    """The stat names of one read model by id (ids count from 1 with no gaps, and never
    change): what one read needs, read once for all. One per read model."""

    def __init__(self) -> None:
        self._names = [""]
        self._lock = threading.Lock()

    def upto(self, con: duckdb.DuckDBPyConnection, top: int) -> list[str]:
        """The names, `top` among their ids."""
        if top >= len(self._names):
            with self._lock:
                if top >= len(self._names):
                    found = con.execute("SELECT name FROM stat_names WHERE id >= ? ORDER BY id", [len(self._names)]).fetchall()
                    self._names.extend(name for (name,) in found)
        return self._names


def _maps(
    con: duckdb.DuckDBPyConnection, rows: pa.Table, names: Names, replaced: Mapping[int, Mapping[str, float]]
) -> Iterator[tuple[int, bytes]]:
    """Each kernel's map from its rows (`seq, stat, value, text`, a kernel's together and in
    order), by seq; with the values `replaced` gives its seq in place of those it has."""
    if not rows.num_rows:
        return
    seq, stat, value, text = (rows.column(i).combine_chunks() for i in range(4))
    by_id = names.upto(con, pc.max(stat).as_py())
    keys = list(map(by_id.__getitem__, stat.to_pylist()))
    # Most values are finite numbers: the others are put in their places.
    merged: list[float | str | None] = value.to_pylist()
    for i in pc.indices_nonzero(pc.invert(pc.is_finite(value))).to_pylist():
        merged[i] = nonfinite.text(cast(float, merged[i]))
    for i, words in zip(pc.indices_nonzero(pc.is_valid(text)).to_pylist(), pc.drop_null(text).to_pylist()):
        merged[i] = words
    runs = pc.run_end_encode(seq)
    start = 0
    for kernel, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist()):
        stats = dict(zip(keys[start:end], merged[start:end]))
        for name, new in replaced.get(kernel, {}).items():
            if name in stats:
                stats[name] = new
        yield kernel, _encoder.encode(stats)
        start = end


def kernel_map(con: duckdb.DuckDBPyConnection, seq: int, names: Names) -> bytes:
    """The map of the kernel whose kernels row has `seq`; `{}` if it has none."""
    placed = stats_parts.placed_between(con, seq, seq)
    rows = con.sql(f"SELECT seq, stat, coalesce(printed_total, value), text FROM {placed} WHERE seq = $seq ORDER BY place", params={"seq": seq}).to_arrow_table()
    return next((m for _, m in _maps(con, rows, names, {})), b"{}")


def kernel_maps(
    con: duckdb.DuckDBPyConnection,
    seqs: Iterable[int],
    names: Names,
    replaced: Mapping[int, Mapping[str, float]] | None = None,
    only: Sequence[str] | None = None,
) -> dict[int, bytes]:
    """The maps of the kernels whose kernels rows have these seqs, by seq; a kernel without
    one has none here. A value `replaced` gives a kernel's seq stands in for the one of its
    name in its map, in the same place. With `only`, each map holds just those of its names."""
    found: dict[int, bytes] = {}
    wanted = list(seqs)
    among = "" if only is None else " AND stat IN (SELECT id FROM stat_names WHERE name IN (SELECT unnest($only)))"
    for i in range(0, len(wanted), KERNELS_AT_ONCE):
        some = wanted[i : i + KERNELS_AT_ONCE]
        params: dict[str, object] = {"seqs": some, "first": min(some), "last": max(some)}
        if only is not None:
            params["only"] = list(only)
        # The range lets DuckDB skip the row groups outside it (rows are stored in seq order),
        # which it does not for the list alone: without it every part reads the whole table.
        rows = con.sql(
            f"SELECT seq, stat, coalesce(printed_total, value), text FROM {stats_parts.placed_between(con, min(some), max(some))} "
            f"WHERE seq BETWEEN $first AND $last AND seq IN (SELECT unnest($seqs)){among} ORDER BY seq, place",
            params=params,
        ).to_arrow_table()
        found.update(_maps(con, rows, names, replaced or {}))
    return found
