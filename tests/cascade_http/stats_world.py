"""A run whose kernels carry the stats maps of real Accel-Sim blocks: combo-vec-mm-xz's three
kernels on SM61_TITANX, two replicas, and on SM7_QV100, one. The second TITAN X replica's
cycles and one DRAM cell differ, so its medians are means and its spread is not 0; its first
kernel lacks one stat (`MISSING`), which the kernel index still has through the first replica."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

import msgspec

from cascade_core import events as ev
from cascade_sim.logparse import parse_stats
from tests.cascade_http import runs_world as w
from tests.support import LOGS, stats_blocks, stats_json

TRACE = "stats-demo"
SIMS = [("sim-stats-titanx0", "SM61_TITANX", 0), ("sim-stats-titanx1", "SM61_TITANX", 1), ("sim-stats-qv100", "SM7_QV100", 0)]
CLOCKS = {"SM61_TITANX": 1417.0, "SM7_QV100": 1132.0}
CELL = "maximum service time to same row.dram[2][11]"  # a DRAM bank cell the replicas disagree on
MISSING = "L2_cache_bank[0].Miss_rate"


@functools.cache
def real_maps(config: str) -> list[dict[str, Any]]:
    """The stats maps of combo-vec-mm-xz's three kernels on `config`, as events carry them."""
    return [msgspec.json.decode(stats_json(parse_stats(b))) for b in stats_blocks((LOGS / f"combo-vec-mm-xz__{config}.log").read_text())]


def replica_one(stats: dict[str, Any], index: int) -> dict[str, Any]:
    return {n: v for n, v in {**stats, "gpu_sim_cycle": stats["gpu_sim_cycle"] + 100, CELL: stats[CELL] + 50}.items() if index or n != MISSING}


@functools.cache
def maps() -> dict[str, list[dict[str, Any]]]:
    """Each sim's maps, by sim id."""
    titanx, qv100 = real_maps("SM61_TITANX"), real_maps("SM7_QV100")
    return {SIMS[0][0]: titanx, SIMS[1][0]: [replica_one(m, i) for i, m in enumerate(titanx)], SIMS[2][0]: qv100}


def config_maps(config: str) -> list[list[dict[str, Any]]]:
    """The maps of each of a config's replicas."""
    return [maps()[sim_id] for sim_id, c, _ in SIMS if c == config]


def events(run_id: str) -> list[ev.Event]:
    """The trace (sm_61, three kernels) and the run, every sim succeeded."""
    at = datetime(2026, 11, 8, 9, tzinfo=UTC)
    out: list[ev.Event] = [
        *w.trace_events(TRACE, arch="sm_61", kernel_count=3, step_timeline=False),
        w.run_created(run_id, SIMS, trace_id=TRACE, kernels_total=3, sample=True),
    ]
    for sim_id, config, _ in SIMS:
        sim_maps = maps()[sim_id]
        kernels = [(m["kernel_name"], int(m["gpu_sim_cycle"])) for m in sim_maps]
        out += w.finished_sim(run_id, sim_id, kernels, CLOCKS[config], at, stats=sim_maps)
    return out
