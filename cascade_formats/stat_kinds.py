"""What kind of number each stat of a stats block is (docs/stats-naming.md's names): a
kernel's own, a running total since the simulator process started, a snapshot (a rate, a
maximum so far), or a ratio of two running totals. A name whose kind is not decided is
`undecided`, never guessed.

Provisional: the few names the per-kernel values were built and tested on; the full table
replaces it. A kind changed changes `kernel_stats` rows: bump `projections/fold.py`'s VERSION.
"""

from __future__ import annotations

import re
from typing import Literal

StatKind = Literal["per_kernel", "running_total", "snapshot", "ratio_of_totals", "undecided"]

_KINDS: dict[str, StatKind] = {
    "gpu_sim_cycle": "per_kernel",
    "gpu_sim_insn": "per_kernel",
    "gpu_ipc": "per_kernel",
    "gpu_tot_sim_cycle": "running_total",
    "gpu_tot_sim_insn": "running_total",
    "gpu_tot_ipc": "snapshot",
    "L2_total_cache_accesses": "running_total",
    "L2_total_cache_misses": "running_total",
    "L2_total_cache_pending_hits": "running_total",
    "L2_total_cache_reservation_fails": "running_total",
    "L2_total_cache_miss_rate": "ratio_of_totals",
}
# A warp's state per cycle, summed over the cycles since the simulator started.
_RUNNING_PATTERNS = (re.compile(r"Warp Occupancy Distribution\.(Stall|W0_Idle|W0_Scoreboard|W[0-9]+)"),)
_RATIOS = {"L2_total_cache_miss_rate": ("L2_total_cache_misses", "L2_total_cache_accesses")}


def kind_of(name: str) -> StatKind:
    kind = _KINDS.get(name)
    if kind is not None:
        return kind
    if any(p.fullmatch(name) for p in _RUNNING_PATTERNS):
        return "running_total"
    return "undecided"


def ratio_parts(name: str) -> tuple[str, str] | None:
    """The running totals (numerator, denominator) a ratio_of_totals is of; None for another kind."""
    return _RATIOS.get(name)
