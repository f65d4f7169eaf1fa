"""Hardware counters paired with the simulator's stats, as Accel-Sim's
`util/plotting/correl_mappings.py` pairs them for Nsight Compute (Volta and later metric
names): a real-timing file from `ncu --csv` may carry these metrics beside the time, and the
comparison scores each against its stat as it scores time (`correlation.correlate`).

The simulator's side is each kernel's own value (`kernel_stats.value`): every stat here is a
running total differenced per kernel, or per kernel as printed (`gpu_occupancy`), never the
log's running total. A counter of several stats is their sum, as correl_mappings.py adds
L1D read hits and hits on a pending miss (MSHR_HIT).
"""

from __future__ import annotations

import msgspec

__all__ = ["COUNTERS", "Counter", "by_metric"]


class Counter(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # stable, for the API and the command line
    label: str  # correl_mappings.py's chart name
    metric: str  # ncu's metric
    unit: str  # the metric's base unit as ncu prints it; "%" for a percentage
    stats: tuple[str, ...]  # the simulator's stats (docs/stats-naming.md), summed


def _breakdown(cache: str, access: str, outcome: str) -> str:
    return f"{cache}_stats_breakdown[GLOBAL_ACC_{access}][{outcome}]"


_L1, _L2 = "Total_core_cache", "L2_cache"
_L1TEX = "l1tex__t_sectors_pipe_lsu_mem_global_op"  # L1D's sectors of global loads (ld) and stores (st)
_LTS = "lts__t_sectors_srcunit_tex_op"  # L2's sectors asked for by the SMs (tex units)

COUNTERS: tuple[Counter, ...] = (
    Counter(name="warp_instructions", label="Warp Instructions", metric="smsp__inst_executed.sum", unit="inst", stats=("gpgpu_n_tot_w_icount",)),
    Counter(name="l2_reads", label="L2 Reads", metric=f"{_LTS}_read.sum", unit="sector", stats=(_breakdown(_L2, "R", "TOTAL_ACCESS"),)),
    Counter(name="l2_read_hits", label="L2 Read Hits", metric=f"{_LTS}_read_lookup_hit.sum", unit="sector", stats=(_breakdown(_L2, "R", "HIT"),)),
    Counter(name="l2_writes", label="L2 Writes", metric=f"{_LTS}_write.sum", unit="sector", stats=(_breakdown(_L2, "W", "TOTAL_ACCESS"),)),
    Counter(name="l2_write_hits", label="L2 Write Hits", metric=f"{_LTS}_write_lookup_hit.sum", unit="sector", stats=(_breakdown(_L2, "W", "HIT"),)),
    Counter(name="l1d_reads", label="L1D Read Access", metric=f"{_L1TEX}_ld.sum", unit="sector", stats=(_breakdown(_L1, "R", "TOTAL_ACCESS"),)),
    Counter(
        name="l1d_read_hits", label="L1D Read Hits", metric=f"{_L1TEX}_ld_lookup_hit.sum", unit="sector",
        stats=(_breakdown(_L1, "R", "HIT"), _breakdown(_L1, "R", "MSHR_HIT")),
    ),
    Counter(name="l1d_writes", label="L1D Write Access", metric=f"{_L1TEX}_st.sum", unit="sector", stats=(_breakdown(_L1, "W", "TOTAL_ACCESS"),)),
    Counter(name="l1d_write_hits", label="L1D Write Hits", metric=f"{_L1TEX}_st_lookup_hit.sum", unit="sector", stats=(_breakdown(_L1, "W", "HIT"),)),
    Counter(name="dram_reads", label="DRAM Reads", metric="dram__sectors_read.sum", unit="sector", stats=("number of total read accesses.total dram reads",)),
    Counter(
        name="dram_writes", label="DRAM Writes", metric="dram__sectors_write.sum", unit="sector",
        stats=("number of total write accesses.total dram writes",),
    ),
    Counter(name="occupancy", label="Occupancy", metric="sm__warps_active.avg.pct_of_peak_sustained_active", unit="%", stats=("gpu_occupancy",)),
)


def by_metric() -> dict[str, Counter]:
    return {c.metric: c for c in COUNTERS}
