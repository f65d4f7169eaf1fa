"""A kernel's stats map as rows of `kernel_stats`, and back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from cascade_core import packed_stats
from projections import projector, stats_rows
from projections.queries import stats_maps
from projections.rows import KernelRow


def _kernel(seq: int, stats: dict[str, Any]) -> KernelRow:
    return KernelRow(
        sim_id="s", attempt=1, kernel_index=seq, uid=seq, name="k", gpu_sim_cycle=1, gpu_sim_insn=1, gpu_ipc=1.0, sim_time_ns=1.0,
        stats=packed_stats.from_mapping(stats), seq=seq,
    )


def test_maps_whose_texts_share_their_places_keep_each_their_own_texts(tmp_path: Path) -> None:
    # The same names with texts in the same places (a layout worked out once), but other texts.
    maps = [{"kernel_name": name, "a": 1.5, "b": "none", "c": None, "d": float(seq)} for seq, name in enumerate(["_Z1kv", "_Z2kv", "_Z1kv"], 1)]
    maps.append({"kernel_name": "_Z1kv", "a": "none", "b": 2.0, "c": 3.0, "d": 4.0})  # the same names, texts elsewhere
    con = projector.connect(tmp_path / "r.duckdb")
    names = stats_rows.StatNames()
    kernels = [_kernel(seq, stats) for seq, stats in enumerate(maps, 1)]
    for kernel in kernels:  # a batch each, and all in one: the layouts are known the second time
        rows = stats_rows.rows(con, [kernel], {kernel.seq}, names)
        assert rows.column("text").to_pylist() == [v if isinstance(v, str) else None for v in maps[kernel.seq - 1].values()]
        assert rows.column("value").to_pylist() == [v if isinstance(v, float) else None for v in maps[kernel.seq - 1].values()]
    again = stats_rows.rows(con, kernels, {k.seq for k in kernels}, names)
    for name in names.added:
        con.execute("INSERT INTO stat_names VALUES (?, ?, ?)", [name.id, name.name, name.kind])
    con.register("incoming", again)
    con.execute("INSERT INTO kernel_stats SELECT * FROM incoming")
    back = stats_maps.kernel_maps(con, range(1, 5), stats_maps.Names())
    assert [back[seq] for seq in range(1, 5)] == [msgspec.json.encode(stats) for stats in maps]
