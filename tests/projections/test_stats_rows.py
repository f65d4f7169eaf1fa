"""A kernel's stats map as rows of `kernel_stats`, and back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from cascade_core import packed_stats
from cascade_sim import sim_report
from projections import projector, stats_rows
from projections.queries import stats_maps
from projections.rows import KernelRow
from tests.cascade_http import runs_world


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
    con.execute("INSERT INTO kernel_stats_hot SELECT * FROM incoming")
    back = stats_maps.kernel_maps(con, range(1, 5), stats_maps.Names())
    assert [back[seq] for seq in range(1, 5)] == [msgspec.json.encode(stats) for stats in maps]


def test_differences_carried_with_the_values_or_apart_make_the_same_rows(tmp_path: Path) -> None:
    # Two blocks of a sim: running totals (their own value the difference), a ratio of two
    # (the ratio of the differences), a value of the kernel's own, a text and `none`.
    maps = [
        {"kernel_name": "_Z1kv", "gpu_sim_cycle": 100.0, "gpu_tot_sim_cycle": 100.0, "L2_total_cache_accesses": 40.0,
         "L2_total_cache_misses": 10.0, "L2_total_cache_miss_rate": 0.25, "bank": "none"},
        {"kernel_name": "_Z2kv", "gpu_sim_cycle": 50.0, "gpu_tot_sim_cycle": 150.0, "L2_total_cache_accesses": 60.0,
         "L2_total_cache_misses": 20.0, "L2_total_cache_miss_rate": 0.3333, "bank": "none"},
    ]
    blocks = [runs_world.block_of(packed) for packed in map(packed_stats.from_mapping, maps)]
    apart = [
        msgspec.structs.replace(_kernel(seq, stats), per_kernel=packed_stats.packed_floats(sim_report.differences(block, before)))
        for seq, stats, block, before in zip((1, 2), maps, blocks, (None, blocks[0]))
    ]
    together = [
        msgspec.structs.replace(kernel, stats=sim_report.packed(block, sim_report.differences(block, before)), per_kernel=None)
        for kernel, block, before in zip(apart, blocks, (None, blocks[0]))
    ]
    assert all(k.stats is not None and k.stats.with_differences for k in together)
    con = projector.connect(tmp_path / "r.duckdb")
    made = [stats_rows.rows(con, kernels, {1, 2}, stats_rows.StatNames()) for kernels in (apart, together)]
    assert made[0].equals(made[1])
    own = dict(zip(made[1].column("stat").to_pylist()[7:], made[1].column("value").to_pylist()[7:]))
    assert [own[i] for i in (2, 3, 4, 5, 6)] == [50.0, 50.0, 20.0, 10.0, 0.5]  # the second kernel's own values
    assert made[1].column("text").to_pylist()[7:] == ["_Z2kv", None, None, None, None, None, "none"]
