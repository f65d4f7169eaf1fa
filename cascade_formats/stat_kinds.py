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
- `undecided`: a name no rule matches, never guessed: lines no shared log prints (the power
  model's, the instruction classification's) and the names of naming 1, which do not say
  which unit they belong to.

`RULES` is the one table: a name's kind is the kind of the one rule whose pattern matches it
whole. In a pattern `*` stands for one index, unit number or word of a name (no `.`, brackets,
braces or parentheses). `tests/cascade_formats/test_stat_kinds.py` checks every rule against the
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

# The sections of memlatstat_print's per-bank access tables, and the counter each prints.
_ACCESSES = (
    ("number of total memory accesses made", "totalbankaccesses"),
    ("number of total read accesses", "totalbankreads"),
    ("number of total write accesses", "totalbankwrites"),
)

RULES: tuple[Rule, ...] = (
    # --- the kernel itself and the whole GPU (gpu_print_stat in gpu-sim.cc) ---------------
    Rule(pattern="kernel_name", kind="per_kernel", why="the kernel's own name"),
    Rule(pattern="kernel_launch_uid", kind="per_kernel", why="the kernel's own launch number"),
    Rule(pattern="kernel_stream_id", kind="per_kernel", why="the kernel's own stream"),
    Rule(
        pattern="reused_from",
        kind="per_kernel",
        why="Cascade's own: the launch whose result a reusing sim took for this one (cascade_sim/sim_report.py)",
    ),
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
    # --- caches: shader_print_cache_stats (shader.cc), the L2 in gpu_print_stat -----------
    Rule(pattern="L1D_cache_core[*].Access", kind="running_total", why=_CACHE),
    Rule(pattern="L1D_cache_core[*].Miss", kind="running_total", why=_CACHE),
    Rule(pattern="L1D_cache_core[*].Pending_hits", kind="running_total", why=_CACHE),
    Rule(pattern="L1D_cache_core[*].Reservation_fails", kind="running_total", why=_CACHE),
    Rule(
        pattern="L1D_cache_core[*].Miss_rate",
        kind="ratio_of_totals",
        why="css.misses / css.accesses, both printed beside it",
        numerator="L1D_cache_core[*].Miss",
        denominator="L1D_cache_core[*].Access",
    ),
    Rule(pattern="L2_cache_bank[*].Access", kind="running_total", why=_CACHE),
    Rule(pattern="L2_cache_bank[*].Miss", kind="running_total", why=_CACHE),
    Rule(pattern="L2_cache_bank[*].Pending_hits", kind="running_total", why=_CACHE),
    Rule(pattern="L2_cache_bank[*].Reservation_fails", kind="running_total", why=_CACHE),
    Rule(
        pattern="L2_cache_bank[*].Miss_rate",
        kind="ratio_of_totals",
        why="l2_css.misses / l2_css.accesses, both printed beside it",
        numerator="L2_cache_bank[*].Miss",
        denominator="L2_cache_bank[*].Access",
    ),
    Rule(pattern="*_total_cache_accesses", kind="running_total", why=_CACHE),
    Rule(pattern="*_total_cache_misses", kind="running_total", why=_CACHE),
    Rule(pattern="*_total_cache_pending_hits", kind="running_total", why=_CACHE),
    Rule(pattern="*_total_cache_reservation_fails", kind="running_total", why=_CACHE),
    Rule(
        pattern="*_total_cache_miss_rate",
        kind="ratio_of_totals",
        why="total_css.misses / total_css.accesses, both printed above it (only when accesses > 0)",
        numerator="*_total_cache_misses",
        denominator="*_total_cache_accesses",
    ),
    Rule(
        pattern="*_cache_data_port_util",
        kind="snapshot",
        why="data_port_busy_cycles / port_available_cycles since the start (print_port_stats); parts not printed",
    ),
    Rule(
        pattern="*_cache_fill_port_util",
        kind="snapshot",
        why="fill_port_busy_cycles / port_available_cycles since the start (print_port_stats); parts not printed",
    ),
    Rule(pattern="L2_cache_stats_breakdown[*][*]", kind="running_total", why=_CACHE + " (collect_aggregate)"),
    Rule(pattern="L2_cache_stats_fail_breakdown[*][*]", kind="running_total", why=_CACHE),
    Rule(pattern="Total_core_cache_stats_breakdown[*][*]", kind="running_total", why=_CACHE + " (collect_aggregate)"),
    Rule(pattern="Total_core_cache_fail_stats_breakdown[*][*]", kind="running_total", why=_CACHE),
    # --- shader cores: shader_print_scheduler_stat, shader_core_stats::print (shader.cc) ----
    Rule(
        pattern="ctas_completed",
        kind="running_total",
        why="shader_core_stats::ctas_completed, set to 0 in its constructor and by visualizer_print only",
    ),
    Rule(pattern="Shader", kind="snapshot", why="the sampled core's number, a setting (gpgpu_warp_issue_shader)"),
    Rule(
        pattern="distro[*]",
        kind="running_total",
        why="m_shader_warp_slot_issue_distro of the sampled core, only ever incremented (event_warp_issued)",
    ),
    Rule(pattern="gpgpu_n_*", kind="running_total", why=_SHADER + " (gpgpu_n_tot_w_icount: collect_aggregate)"),
    Rule(pattern="gpgpu_stall_shd_mem[*][*]", kind="running_total", why=_SHADER),
    Rule(pattern="gpu_reg_bank_conflict_stalls", kind="running_total", why=_SHADER),
    Rule(pattern="Warp Occupancy Distribution.*", kind="running_total", why="shader_cycle_distro, " + _SHADER),
    Rule(pattern="single_issue_nums.*", kind="running_total", why=_SHADER),
    Rule(pattern="dual_issue_nums.*", kind="running_total", why=_SHADER),
    Rule(
        pattern="traffic_breakdown_*[*]",
        kind="running_total",
        why="traffic_breakdown of the shader stats, only ever added to",
    ),
    Rule(
        pattern="traffic_breakdown_*[*]{*}",
        kind="running_total",
        why="traffic_breakdown of the shader stats, only ever added to",
    ),
    Rule(pattern="icnt_total_pkts_*", kind="running_total", why="n_simt_to_mem / n_mem_to_simt, " + _SHADER),
    Rule(
        pattern="LD_mem_lat_dist[*]",
        kind="snapshot",
        why="overal_ld_time_dist, a running average over every finished load (time_vector_print, visualizer.cc)",
    ),
    Rule(
        pattern="ST_mem_lat_dist[*]",
        kind="snapshot",
        why="overal_st_time_dist, a running average over every finished store (time_vector_print, visualizer.cc)",
    ),
    # --- memory latency: memory_stats_t::memlatstat_print (mem_latency_stat.cc) ------------
    Rule(pattern="maxmflatency", kind="snapshot", why="a maximum so far, " + _MEMLAT),
    Rule(pattern="max_icnt2mem_latency", kind="snapshot", why="a maximum so far, " + _MEMLAT),
    Rule(pattern="maxmrqlatency", kind="snapshot", why="a maximum so far, " + _MEMLAT),
    Rule(pattern="max_icnt2sh_latency", kind="snapshot", why="a maximum so far, " + _MEMLAT),
    Rule(pattern="averagemflatency", kind="snapshot", why="mf_total_lat / num_mfs since the start; parts not printed"),
    Rule(
        pattern="avg_icnt2mem_latency",
        kind="snapshot",
        why="tot_icnt2mem_latency / num_mfs since the start; parts not printed",
    ),
    Rule(pattern="avg_mrq_latency", kind="snapshot", why="tot_mrq_latency / tot_mrq_num since the start; parts not printed"),
    Rule(
        pattern="avg_icnt2sh_latency",
        kind="snapshot",
        why="tot_icnt2sh_latency / num_mfs since the start; parts not printed",
    ),
    Rule(pattern="*_lat_table[*]", kind="running_total", why="a latency histogram, " + _MEMLAT),
    Rule(
        pattern="mf_lat_pw_table[*]",
        kind="running_total",
        why="a histogram of each window's average latency, one more per window (memlatstat_lat_pw), " + _MEMLAT,
    ),
    Rule(
        pattern="maximum concurrent accesses to same row.dram[*][*]",
        kind="snapshot",
        why="max_conc_access2samerow, a maximum so far",
    ),
    Rule(
        pattern="maximum service time to same row.dram[*][*]",
        kind="snapshot",
        why="max_servicetime2samerow, a maximum so far",
    ),
    Rule(
        pattern="average row accesses per activate.dram[*][*]",
        kind="snapshot",
        why="row_access / num_activates of one bank since the start; parts not printed",
    ),
    Rule(
        pattern="average row accesses per activate.average row locality",
        kind="ratio_of_totals",
        why="total_row_accesses / total_num_activates, printed as its numerator and denominator",
        numerator="average row accesses per activate.average row locality.numerator",
        denominator="average row accesses per activate.average row locality.denominator",
    ),
    Rule(
        pattern="average row accesses per activate.average row locality.*",
        kind="running_total",
        why="row_access and num_activates summed over banks, " + _MEMLAT,
    ),
    *(
        Rule(pattern=f"{section}.dram[*][*]", kind="running_total", why=f"{counter} of one bank, " + _MEMLAT)
        for section, counter in _ACCESSES
    ),
    Rule(pattern="number of total memory accesses made.total accesses", kind="running_total", why="the banks' sum, " + _MEMLAT),
    Rule(pattern="number of total read accesses.total dram reads", kind="running_total", why="the banks' sum, " + _MEMLAT + " (collect_aggregate)"),
    Rule(pattern="number of total write accesses.total dram writes", kind="running_total", why="the banks' sum, " + _MEMLAT + " (collect_aggregate)"),
    *(
        Rule(pattern=f"{section}.{skew}", kind="snapshot", why=why)
        for section, _ in _ACCESSES
        for skew, why in (
            ("min_*_accesses", "printed as 0 when the least used bank or chip has no access so far"),
            ("* skew", "most / least accesses of a bank or chip so far: a maximum over a minimum"),
            ("* skew.*", "the most or least accesses of a bank or chip so far"),
        )
    ),
    Rule(
        pattern="average mf latency per bank.dram[*][*]",
        kind="snapshot",
        why="mf_total_lat_table / num_mfs of one bank since the start; parts not printed",
    ),
    Rule(pattern="maximum mf latency per bank.dram[*][*]", kind="snapshot", why="mf_max_lat_table, a maximum so far"),
    # --- memory partitions: memory_partition_unit::print (l2cache.cc), dram_t::print -------
    Rule(
        pattern="Memory Partition *.In Dram Latency Queue (total)",
        kind="snapshot",
        why="m_dram_latency_queue.size(), the queue's length now",
    ),
    Rule(pattern="Memory Partition *.DRAM[*].*", kind="snapshot", why="the DRAM's timing settings (m_config)"),
    *(
        Rule(pattern=f"Memory Partition *.{counter}", kind="running_total", why=_DRAM)
        for counter in (
            "n_cmd", "n_nop", "n_act", "n_pre", "n_ref_event", "n_req", "n_rd", "n_rd_L2_A", "n_write",
            "n_wr_bk", "n_activity", "bk*.a", "bk*.i",
            "BW Util details.total_CMD", "BW Util details.util_bw", "BW Util details.Wasted_Col",
            "BW Util details.Wasted_Row", "BW Util details.Idle",
            "BW Util Bottlenecks.*", "Commands details.*",
            "Dual Bus Interface Util.issued_total_row", "Dual Bus Interface Util.issued_total_col",
            "dram_util_bins[*]", "dram_eff_bins[*]",
        )
    ),
    *(
        Rule(pattern=f"Memory Partition *.{ratio}", kind="snapshot", why=f"{parts} since the start; {missing} not printed")
        for ratio, parts, missing in (
            ("bw_util", "bwutil / n_cmd", "bwutil"),
            ("BW Util details.bwutil", "bwutil / n_cmd", "bwutil"),
            ("dram_eff", "bwutil / n_activity", "bwutil"),
            ("Row_Buffer_Locality", "hits_num / access_num", "neither part"),
            ("Row_Buffer_Locality_read", "hits_read_num / read_num", "neither part"),
            ("Row_Buffer_Locality_write", "hits_write_num / write_num", "neither part"),
            ("Bank_Level_Parallism", "banks_1time / banks_acess_total", "neither part"),
            ("Bank_Level_Parallism_Col", "banks_time_rw / banks_access_rw_total", "neither part"),
            ("Bank_Level_Parallism_Ready", "banks_time_ready / banks_access_ready_total", "neither part"),
            ("write_to_read_ratio_blp_rw_average", "write_to_read_ratio_blp_rw_average / banks_access_rw_total", "neither part"),
            ("GrpLevelPara", "bkgrp_parallsim_rw / banks_access_rw_total", "neither part"),
            ("Dual Bus Interface Util.Either_Row_CoL_Bus_Util", "issued_total / n_cmd", "issued_total"),
            ("Dual Bus Interface Util.Issued_on_Two_Bus_Simul_Util", "issued_two / n_cmd", "issued_two"),
            ("Dual Bus Interface Util.issued_two_Eff", "issued_two / issued_total", "neither part"),
            ("Dual Bus Interface Util.queue_avg", "ave_mrqs / n_cmd", "ave_mrqs"),
            ("mrqq.avg", "ave_mrqs / n_cmd", "ave_mrqs"),
        )
    ),
    Rule(
        pattern="Memory Partition *.Dual Bus Interface Util.Row_Bus_Util",
        kind="ratio_of_totals",
        why="issued_total_row / n_cmd, both printed in the same partition",
        numerator="Memory Partition *.Dual Bus Interface Util.issued_total_row",
        denominator="Memory Partition *.n_cmd",
    ),
    Rule(
        pattern="Memory Partition *.Dual Bus Interface Util.CoL_Bus_Util",
        kind="ratio_of_totals",
        why="issued_total_col / n_cmd, both printed in the same partition",
        numerator="Memory Partition *.Dual Bus Interface Util.issued_total_col",
        denominator="Memory Partition *.n_cmd",
    ),
    Rule(pattern="Memory Partition *.mrqq.max", kind="snapshot", why="max_mrqs, a maximum so far"),
    # --- interconnect: intersim2 (icnt_display_stats, icnt_display_overall_stats) ---------
    Rule(pattern="Class *.*", kind="snapshot", why="an average, a rate or an extreme since the start; " + _ICNT),
    Rule(pattern="Class *.*.*", kind="snapshot", why="an average, a rate or an extreme since the start; " + _ICNT),
    Rule(pattern="Class *.*.* (at node)", kind="snapshot", why="the node where an extreme was seen; " + _ICNT),
    Rule(pattern="Class *.Total in-flight flits (measured)", kind="snapshot", why="flits in the network now"),
    Rule(
        pattern="Traffic class *.* (samples)",
        kind="running_total",
        why="_total_sims, one more at each kernel's print (interconnect_interface.cpp)",
    ),
    Rule(
        pattern="Traffic class *.*.* (samples)",
        kind="running_total",
        why="_total_sims, one more at each kernel's print (interconnect_interface.cpp)",
    ),
    Rule(pattern="Traffic class *.*", kind="snapshot", why="an average over the kernels so far; " + _ICNT),
    Rule(pattern="Traffic class *.*.*", kind="snapshot", why="an average over the kernels so far; " + _ICNT),
    # --- interconnect: the local crossbar, LocalInterconnect::DisplayStats ------------------
    Rule(pattern="*_Network_injected_packets_num", kind="running_total", why="packets_num, " + _XBAR),
    Rule(pattern="*_Network_cycles", kind="running_total", why="cycles, " + _XBAR),
    Rule(
        pattern="*_Network_injected_packets_per_cycle",
        kind="ratio_of_totals",
        why="packets_num / cycles, both printed above it",
        numerator="*_Network_injected_packets_num",
        denominator="*_Network_cycles",
    ),
    *(
        Rule(pattern=pattern, kind="snapshot", why=f"{parts} since the start; parts not printed")
        for pattern, parts in (
            ("*_Network_conflicts_per_cycle", "conflicts / cycles"),
            ("*_Network_conflicts_per_cycle_util", "conflicts_util / cycles_util"),
            ("*_Bank_Level_Parallism", "reqs_util / cycles_util"),
            ("*_Network_in_buffer_full_per_cycle", "in_buffer_full / cycles"),
            ("*_Network_in_buffer_avg_util", "in_buffer_util / cycles / active_in_buffers"),
            ("*_Network_out_buffer_full_per_cycle", "out_buffer_full / cycles"),
            ("*_Network_out_buffer_avg_util", "out_buffer_util / cycles / active_out_buffers"),
        )
    ),
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


_WILDCARD = r"([^.\[\]{}()]+)"


def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(_WILDCARD.join(re.escape(part) for part in pattern.split("*")))


_REGEX = {rule: _regex(rule.pattern) for rule in RULES}


def matches(rule: Rule, name: str) -> bool:
    return _REGEX[rule].fullmatch(name) is not None


@cache
def rule_of(name: str) -> Rule | None:
    """The rule that decides `name` (a key of a kernel's stats map, naming 2), or None.
    The rules' patterns never match the same name (the test checks every shared log's)."""
    for rule in RULES:
        if matches(rule, name):
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
    rule = rule_of(name)
    if rule is None or rule.kind != "ratio_of_totals":
        return None
    match = _REGEX[rule].fullmatch(name)
    assert match is not None  # rule_of found it so
    return _fill(rule.numerator, match.groups()), _fill(rule.denominator, match.groups())
