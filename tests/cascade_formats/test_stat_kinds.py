"""Every stat's kind (cascade_formats/stat_kinds.py) checked against the real simulator: the
combo logs run vecAdd at launches 1 and 3 and matmul at 2, so a running total shows what
came before it, and a kernel's own value shows again at launch 3."""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from cascade_formats import stat_kinds
from cascade_formats.stat_kinds import KINDS, RULES, Rule, kind_of, ratio_parts, rule_of
from cascade_sim.logparse import parse_stats
from cascade_core.packed_stats import StatValue
from tests.support import LOGS, stats_blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "stats-naming.md"
COMBO = ["combo-vec-mm-xz__SM61_TITANX.log", "combo-vec-mm-xz__SM7_QV100.log"]
EVERY_LOG = sorted(str(p.relative_to(LOGS)) for p in LOGS.rglob("*") if p.suffix in (".log", ".stdout"))


@cache
def maps(log: str) -> list[dict[str, StatValue]]:
    """The stats map of each kernel of a shared log, in order, as the project parses them."""
    return [parse_stats(block) for block in stats_blocks((LOGS / log).read_text())]


def every_name() -> set[str]:
    return {name for log in EVERY_LOG for stats in maps(log) for name in stats}


def float_of(stats: dict[str, StatValue], name: str) -> float:
    value = stats[name]
    assert isinstance(value, float), (name, value)
    return value


def test_the_combo_logs_run_vecadd_matmul_vecadd() -> None:
    for log in COMBO:
        assert [m["kernel_name"] for m in maps(log)] == ["_Z6vecAddIfEvPT_S1_S1_i", "_Z8mult_gpuIfEvPT_S1_S1_ii", "_Z6vecAddIfEvPT_S1_S1_i"]


def test_every_name_of_the_shared_logs_is_decided_by_exactly_one_rule() -> None:
    # None is undecided: a name no rule matches would be (the power model's and the
    # instruction classification's lines, which no shared log prints).
    names = every_name()
    assert [n for n in names if kind_of(n) == "undecided"] == []
    for name in names:
        matching = [rule.pattern for rule in RULES if stat_kinds.matches(rule, name)]
        assert len(matching) == 1, (name, matching)
    assert kind_of("gpu_avg_power_of_a_model_nobody_ran") == "undecided"


def test_every_rule_decides_a_name_of_the_shared_logs_but_those_taken_from_the_code_alone() -> None:
    # Printed only when a counter is non-zero or a minimum is not: no shared log has them;
    # and Cascade's own mark of a reused kernel.
    from_code_alone = {
        "reused_from",
        "L2_cache_stats_fail_breakdown[*][*]",
        "number of total memory accesses made.* skew",
        "number of total memory accesses made.* skew.*",
        "number of total write accesses.* skew",
        "number of total write accesses.* skew.*",
    }
    names = every_name()
    unused = {rule.pattern for rule in RULES if not any(stat_kinds.matches(rule, n) for n in names)}
    assert unused == from_code_alone


@pytest.mark.parametrize("log", COMBO)
def test_running_totals_never_decrease(log: str) -> None:
    first, second, third = maps(log)
    totals = [n for n in first if kind_of(n) == "running_total"]
    assert len(totals) > 1000
    for name in totals:
        values = [float_of(m, name) for m in (first, second, third)]
        assert values[0] <= values[1] <= values[2], (name, values)


# Running totals whose second vecAdd differs from the first: it finds the L2 warm (hits where
# launch 1 missed, so no DRAM traffic), takes fewer cycles, and runs its CTA on another core.
DEPENDS_ON_STATE = re.compile(
    r"gpu_tot_sim_cycle|gpgpu_simulation_time \(sec\)|\w+_Network_cycles"  # time
    r"|Warp Occupancy Distribution\.W0_(Idle|Scoreboard)|\w*lat(_pw)?_table\[\d+\]"  # stalls and latencies
    r"|distro\[\d+\]|L1D_cache_core\[\d+\]\..*"  # which core ran the CTA
    r"|L2_cache_bank\[\d+\]\.Miss|L2_total_cache_misses|L2_cache_stats_breakdown\[GLOBAL_ACC_[RW]\]\[(HIT|MISS|SECTOR_MISS)\]"
    r"|Memory Partition \d+\..*|number of total read accesses\..*|average row accesses per activate\..*"  # the L2's misses
)


@pytest.mark.parametrize("log", COMBO)
def test_a_running_total_grows_at_launch_3_by_what_launch_1_counted_unless_it_depends_on_the_caches_or_time(log: str) -> None:
    first, second, third = maps(log)
    totals = [n for n in first if kind_of(n) == "running_total"]
    same = [n for n in totals if float_of(third, n) - float_of(second, n) == float_of(first, n)]
    assert sorted(set(totals) - set(same)) == sorted(n for n in totals if DEPENDS_ON_STATE.fullmatch(n) and n not in same)
    # Instruction counts, the L2's accesses and the CTAs count alike in both vecAdds.
    for name in ["gpu_tot_sim_insn", "gpgpu_n_tot_thrd_icount", "gpgpu_n_tot_w_icount", "gpgpu_n_load_insn", "gpu_tot_issued_cta",
                 "ctas_completed", "L2_total_cache_accesses", "icnt_total_pkts_simt_to_mem", "Traffic class 0.Hops average (samples)"]:  # fmt: skip
        assert name in same or name not in first


@pytest.mark.parametrize("log", COMBO)
def test_a_per_kernel_stat_starts_again_at_each_kernel(log: str) -> None:
    first, second, third = maps(log)
    # An identifier, or a value these logs do not vary (occupancy is nan, the utilisation 1).
    not_shown = {"kernel_name", "kernel_launch_uid", "kernel_stream_id", "gpu_occupancy", "partiton_level_parallism_util"}
    per_kernel = [n for n in first if kind_of(n) == "per_kernel"]
    assert set(per_kernel) >= {"gpu_sim_cycle", "gpu_sim_insn", "gpu_ipc", "L2_BW"}
    for name in set(per_kernel) - not_shown:
        assert float_of(third, name) < float_of(second, name), name
    assert third["gpu_sim_insn"] == first["gpu_sim_insn"]
    assert [m["kernel_launch_uid"] for m in (first, second, third)] == [1.0, 2.0, 3.0]


def test_ratios_of_totals_are_their_parts_ratio_in_every_block_of_every_log() -> None:
    checked = Counter[str]()
    for log in EVERY_LOG:
        for stats in maps(log):
            for name, value in stats.items():
                parts = ratio_parts(name)
                if kind_of(name) != "ratio_of_totals":
                    assert parts is None, name
                    continue
                assert parts is not None
                numerator, denominator = (stats[p] for p in parts)
                assert kind_of(parts[0]) == kind_of(parts[1]) == "running_total", (name, parts)
                assert isinstance(numerator, float) and isinstance(denominator, float) and isinstance(value, float)
                if denominator == 0:
                    assert math.isnan(value), (log, name)
                else:
                    # As printed: with 3 to 6 decimals, some of it in C floats.
                    assert math.isclose(value, numerator / denominator, rel_tol=1e-3, abs_tol=5e-4), (log, name, value, parts)
                rule = rule_of(name)
                assert rule is not None
                checked[rule.pattern] += 1
    assert set(checked) == {rule.pattern for rule in RULES if rule.kind == "ratio_of_totals"}


def per_kernel_values(log: str, name: str) -> list[float]:
    """The kernels' own values of a stat, from its kind, as issue 24 asks for them."""
    launches = maps(log)

    def own(index: int, stat: str) -> float:
        value = float_of(launches[index], stat)
        if kind_of(stat) != "running_total" or index == 0:
            return value
        return value - float_of(launches[index - 1], stat)

    parts = ratio_parts(name)
    if parts is None:
        return [own(i, name) for i in range(len(launches))]
    return [own(i, parts[0]) / own(i, parts[1]) for i in range(len(launches))]


def test_the_l2_of_the_second_vecadd_hits_where_the_first_missed() -> None:
    log = COMBO[0]
    assert [maps(log)[i]["L2_total_cache_accesses"] for i in range(3)] == [39.0, 423.0, 462.0]  # as printed
    assert per_kernel_values(log, "L2_total_cache_accesses") == [39.0, 384.0, 39.0]
    assert per_kernel_values(log, "L2_total_cache_misses") == [39.0, 384.0, 0.0]
    assert per_kernel_values(log, "L2_total_cache_miss_rate") == [1.0, 1.0, 0.0]
    assert ratio_parts("L2_cache_bank[3].Miss_rate") == ("L2_cache_bank[3].Miss", "L2_cache_bank[3].Access")
    assert ratio_parts("Memory Partition 11.Dual Bus Interface Util.CoL_Bus_Util") == (
        "Memory Partition 11.Dual Bus Interface Util.issued_total_col",
        "Memory Partition 11.n_cmd",
    )
    assert ratio_parts("gpu_tot_sim_insn") is None


# --- docs/stats-naming.md, Kinds: the same table ---------------------------------------------

ROW = re.compile(r"^\| `(?P<pattern>[^`]+)` \| (?P<kind>\w+) \| (?P<why>.*) \|$")


def documented() -> list[tuple[str, str, str]]:
    text = DOC.read_text().split("\n## Kinds\n", 1)[1].split("\n## ", 1)[0]
    return [(m["pattern"], m["kind"], m["why"]) for line in text.splitlines() if (m := ROW.match(line))]


def doc_row(rule: Rule) -> tuple[str, str, str]:
    """A rule as the doc's table shows it: a ratio's parts after the reason."""
    parts = f" (`{rule.numerator}` / `{rule.denominator}`)" if rule.kind == "ratio_of_totals" else ""
    return rule.pattern, rule.kind, rule.why + parts


def test_the_doc_lists_every_rule_with_its_kind_and_reason() -> None:
    assert documented() == [doc_row(rule) for rule in RULES]


def test_the_doc_gives_the_counts_per_kind() -> None:
    text = DOC.read_text().split("\n## Kinds\n", 1)[1].split("\n## ", 1)[0]
    rules = Counter(rule.kind for rule in RULES)
    assert f"Rules: {', '.join(f'{rules[k]} {k}' for k in KINDS)}." in " ".join(text.split())
    for log in COMBO:
        names = Counter(kind_of(n) for n in maps(log)[-1])
        config = log.removeprefix("combo-vec-mm-xz__").removesuffix(".log")
        assert f"{config}: {', '.join(f'{names[k]:,} {k}' for k in KINDS)}." in " ".join(text.split())
