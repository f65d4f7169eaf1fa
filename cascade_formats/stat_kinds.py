"""What kind of number each stat of a kernel's stats block is (docs/stats-naming.md, Kinds).

GPGPU-Sim clears only a few counters when a kernel ends (`gpgpu_sim::update_stats`, called
by Accel-Sim's main loop after each kernel's stats); `gpgpu_sim::init` and every other
constructor run once, when the simulation starts. So most of a block is counted since the
simulation started, and a kernel's own value is the difference from the launch before:

- `per_kernel`: cleared at each kernel's start, or a property of the kernel itself;
- `running_total`: accumulated since the simulation started; difference it;
- `snapshot`: a rate, an average, a maximum or minimum so far, a setting, a state: it can be
  neither differenced nor summed;
- `ratio_of_totals`: a ratio of two running totals printed in the same map
  (`ratio_parts`), recomputed per kernel from the differenced parts;
- `undecided`: the printing code does not say, and no log shows it; never guessed.

`RULES` is the one table: a name's kind is the kind of the one rule whose pattern matches it
whole. In a pattern `*` stands for one index, unit number or word of a name (no `.`, `[`,
`]`, `{` or `}`). `tests/cascade_formats/test_stat_kinds.py` checks every rule against the
shared logs and that docs/stats-naming.md lists the same table.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

import msgspec

StatKind = Literal["per_kernel", "running_total", "snapshot", "ratio_of_totals", "undecided"]

KINDS: tuple[StatKind, ...] = ("per_kernel", "running_total", "snapshot", "ratio_of_totals", "undecided")


class Rule(msgspec.Struct, frozen=True, kw_only=True):
    """Names matching `pattern` are of `kind`, because of `why` (the printing code's own
    words: where the counter is cleared or accumulated). A `ratio_of_totals` rule names its
    parts by `numerator` and `denominator`, patterns whose `*` take the name's own."""

    pattern: str
    kind: StatKind
    why: str
    numerator: str = ""
    denominator: str = ""


# Where the printing code lives, cited in `why` (gpgpu-sim_distribution, src/gpgpu-sim/).
_UPDATE = "cleared in gpgpu_sim::update_stats after each kernel (gpu-sim.cc)"
_START = "cleared only when the simulation starts"
_CACHE = "cache_stats of each cache, never cleared (gpu-cache.cc); summed over caches at each print"
_SHADER = "shader_core_stats member, set to 0 in its constructor only (shader.h; new_grid() is empty)"
_MEMLAT = "memory_stats_t member, set to 0 in its constructor only (mem_latency_stat.cc)"
_DRAM = "dram_t member, set to 0 in its constructor only (dram.cc)"
_ICNT = "intersim2 traffic manager stats, cleared by Init() only, from icnt_init() in gpgpu_sim::init (once)"
_XBAR = "xbar_router member, set to 0 in its constructor only (local_interconnect.cc)"

RULES: tuple[Rule, ...] = (
    # --- the kernel itself and the whole GPU (gpu_print_stat in gpu-sim.cc) ---------------
    Rule(pattern="kernel_name", kind="per_kernel", why="the kernel's own name"),
    Rule(pattern="kernel_launch_uid", kind="per_kernel", why="the kernel's own launch number"),
    Rule(pattern="kernel_stream_id", kind="per_kernel", why="the kernel's own stream"),
    Rule(pattern="gpu_sim_cycle", kind="per_kernel", why=_UPDATE),
    Rule(pattern="gpu_sim_insn", kind="per_kernel", why=_UPDATE),
    Rule(pattern="gpu_ipc", kind="per_kernel", why="gpu_sim_insn / gpu_sim_cycle, both " + _UPDATE),
    Rule(pattern="gpu_occupancy", kind="per_kernel", why="gpu_occupancy = occupancy_stats(), a new one, in update_stats"),
    Rule(
        pattern="partiton_level_parallism",
        kind="per_kernel",
        why="partiton_reqs_in_parallel / gpu_sim_cycle, both " + _UPDATE,
    ),
    Rule(
        pattern="partiton_level_parallism_util",
        kind="per_kernel",
        why="partiton_reqs_in_parallel_util / gpu_sim_cycle_parition_util, both " + _UPDATE,
    ),
    Rule(pattern="L2_BW", kind="per_kernel", why="partiton_replys_in_parallel / gpu_sim_cycle, both " + _UPDATE),
    Rule(pattern="gpu_tot_sim_cycle", kind="running_total", why="gpu_tot_sim_cycle += gpu_sim_cycle in update_stats"),
    Rule(pattern="gpu_tot_sim_insn", kind="running_total", why="gpu_tot_sim_insn += gpu_sim_insn in update_stats"),
    Rule(
        pattern="gpu_tot_issued_cta",
        kind="running_total",
        why="gpu_tot_issued_cta += m_total_cta_launched in update_stats",
    ),
    Rule(
        pattern="gpu_stall_dramfull",
        kind="running_total",
        why="counted by the memory partitions, " + _START + " (gpgpu_sim constructor)",
    ),
    Rule(
        pattern="gpu_stall_icnt2sh",
        kind="running_total",
        why="counted by the clusters, " + _START + " (gpgpu_sim constructor)",
    ),
    Rule(
        pattern="gpu_tot_ipc",
        kind="snapshot",
        why="the rate since the start (Accel-Sim's collect_rates); its per-kernel counterpart is gpu_ipc",
    ),
    Rule(pattern="gpu_tot_occupancy", kind="snapshot", why="the occupancy since the start; per kernel: gpu_occupancy"),
    Rule(pattern="partiton_level_parallism_total", kind="snapshot", why="an average since the start; parts not printed"),
    Rule(
        pattern="partiton_level_parallism_util_total",
        kind="snapshot",
        why="an average since the start; parts not printed",
    ),
    Rule(pattern="L2_BW_total", kind="snapshot", why="a bandwidth since the start; per kernel: L2_BW"),
    Rule(pattern="gpu_total_sim_rate", kind="snapshot", why="instructions since the start / wall-clock seconds"),
    Rule(pattern="max_total_param_size", kind="snapshot", why="g_max_total_param_size, a maximum so far"),
    # --- wall clock (print_simulation_time, after update_stats) ---------------------------
    Rule(
        pattern="gpgpu_simulation_time (sec)",
        kind="running_total",
        why="wall-clock seconds since the simulation started (Accel-Sim's collect_aggregate)",
    ),
    Rule(
        pattern="gpgpu_simulation_time.*",
        kind="snapshot",
        why="days/hrs/min/sec of the time since the start: each part wraps, so only the whole differences",
    ),
    Rule(pattern="gpgpu_simulation_rate (inst/sec)", kind="snapshot", why="a rate since the start (collect_rates)"),
    Rule(pattern="gpgpu_simulation_rate (cycle/sec)", kind="snapshot", why="a rate since the start (collect_rates)"),
    Rule(pattern="gpgpu_silicon_slowdown", kind="snapshot", why="a ratio of rates since the start (collect_rates)"),
)


_WILDCARD = r"([^.\[\]{}]+)"


def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(_WILDCARD.join(re.escape(part) for part in pattern.split("*")))


_COMPILED = tuple((_regex(rule.pattern), rule) for rule in RULES)


@cache
def rule_of(name: str) -> Rule | None:
    """The rule that decides `name` (a key of a kernel's stats map, naming 2), or None."""
    for regex, rule in _COMPILED:
        if regex.fullmatch(name):
            return rule
    return None


def kind_of(name: str) -> StatKind:
    """What kind of number the stat `name` is; `undecided` for a name no rule decides."""
    rule = rule_of(name)
    return "undecided" if rule is None else rule.kind


def _fill(template: str, words: tuple[str, ...]) -> str:
    parts = template.split("*")
    return "".join(part + word for part, word in zip(parts, words, strict=False)) + parts[-1]


@cache
def ratio_parts(name: str) -> tuple[str, str] | None:
    """For a `ratio_of_totals` name, its (numerator, denominator) names: running totals of
    the same map, so the kernel's own ratio is diff(numerator) / diff(denominator). None
    for any other name."""
    for regex, rule in _COMPILED:
        match = regex.fullmatch(name)
        if match is not None:
            if rule.kind != "ratio_of_totals":
                return None
            return _fill(rule.numerator, match.groups()), _fill(rule.denominator, match.groups())
    return None
