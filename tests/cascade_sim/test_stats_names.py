"""The stats naming rule (docs/stats-naming.md) over every stats block of every shared log:
completeness proven with a tokenizer of the test's own, names and values checked by hand
against the log, the doc's examples, stability across kernels and runs, and the JSON form."""

from __future__ import annotations

import msgspec

import math
import re
import struct
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import pytest

from cascade_core import events as ev
from cascade_core import packed_stats
from cascade_core.gpu_configs import GpuConfig
from cascade_nats import deflated
from cascade_nats.store import MAX_EVENT_BYTES
from cascade_sim import sim_report
from cascade_sim.install import AccelSimOutput
from cascade_sim.logparse import STATS_NAMING, KernelBlock, LogParser, Stats, StatValue, parse_stats
from tests.support import LOGS, same_map, stats_blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "stats-naming.md"


@cache
def blocks(name: str) -> list[str]:
    return stats_blocks((LOGS / name).read_text())


WITH_BLOCKS = sorted(
    str(p.relative_to(LOGS)) for p in LOGS.rglob("*") if p.suffix in (".log", ".stdout") and blocks(str(p.relative_to(LOGS)))
)
CASES = [(name, i) for name in WITH_BLOCKS for i in range(len(blocks(name)))]


def test_the_shared_logs_are_all_here() -> None:
    # 3 configs, the liveness log, and the failures with a block (max-cycle's is cut).
    assert {n: len(blocks(n)) for n in WITH_BLOCKS} == {
        "combo-vec-mm-xz__SM61_TITANX.log": 3,
        "combo-vec-mm-xz__SM7_QV100.log": 3,
        "failures/max-cycle.stdout": 1,
        "failures/sigterm.stdout": 1,
        "liveness-progress__SM61_TITANX.log": 1,
        "vectoradd-100-32__SM61_TITANX.log": 1,
        "vectoradd-100-32__SM7_QV100.log": 1,
        "vectoradd-100-32__SM86_RTX3070.log": 1,
    }


@cache
def stats_of(name: str, index: int) -> dict[str, StatValue]:
    return parse_stats(blocks(name)[index])


# --- completeness: a tokenizer of the test's own ------------------------------------------

# Every number on a line, digits inside words too, and nan / inf as words.
NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|(?<![A-Za-z0-9_])[-+]?(?:nan|inf)(?![A-Za-z0-9_])")
SENTINEL = 10**9


def excluded(lines: list[str], row: int, match: re.Match[str]) -> str | None:
    """Why a number found on a line is part of a name rather than a value: the exclusion list
    of docs/stats-naming.md, "Numbers that are not values". None for a value."""
    line, start, end = lines[row], match.start(), match.end()
    before, after = line[:start], line[end:]
    if row == 0:
        return "the kernel's name"
    if before[-1:].isalnum() or before.endswith("_"):
        return "digits inside a word"
    if before.endswith("[") and after.startswith("]"):
        return "an index in brackets"
    if after.startswith(":") and before.rfind("{") > before.rfind("}"):
        return "a histogram size"
    stripped = line.strip()
    if stripped.startswith(("==", "--")) or (stripped.endswith(":") and after.strip() == ":"):
        return "the number of a unit's title or banner"
    if row and lines[row - 1].strip() in ("warp_id:", "dynamic_warp_id:"):
        return "the warp_id row"
    return None


def tokens(block: str) -> tuple[list[tuple[int, int, str]], dict[str, list[str]]]:
    """The values of a block as (line, column, text), and the excluded numbers by reason."""
    lines = block.split("\n")
    values: list[tuple[int, int, str]] = []
    skipped: dict[str, list[str]] = {}
    for row, line in enumerate(lines):
        for match in NUMBER.finditer(line):
            reason = excluded(lines, row, match)
            if reason is None:
                values.append((row, match.start(), match[0]))
            else:
                skipped.setdefault(reason, []).append(match[0])
    return values, skipped


def with_sentinels(block: str, values: list[tuple[int, int, str]]) -> str:
    """The block with its k-th value replaced by the number SENTINEL + k."""
    lines = block.split("\n")
    for k in reversed(range(len(values))):
        row, col, text = values[k]
        lines[row] = lines[row][:col] + str(SENTINEL + k) + lines[row][col + len(text) :]
    return "\n".join(lines)


def isnan(value: StatValue) -> bool:
    return isinstance(value, float) and math.isnan(value)


def same(parsed: StatValue, text: str) -> bool:
    number = float(text)
    return isinstance(parsed, float) and (parsed == number or (math.isnan(parsed) and math.isnan(number)))


@pytest.mark.parametrize(("name", "index"), CASES)
def test_every_number_is_extracted_exactly_once(name: str, index: int) -> None:
    block = blocks(name)[index]
    values, skipped = tokens(block)
    stats = parse_stats(block)
    marked = parse_stats(with_sentinels(block, values))
    # Names do not depend on values: the same names, in the same order.
    assert list(marked) == list(stats)
    found: dict[int, str] = {}
    for stat, value in marked.items():
        if isinstance(value, str):
            assert stat == "kernel_name" or value == "none", (stat, value)
            continue
        k = int(value) - SENTINEL
        assert value == SENTINEL + k and 0 <= k < len(values), f"{stat} = {value} is no number of the block"
        assert k not in found, f"the number at {values[k][:2]} is both {found[k]} and {stat}"
        found[k] = stat
    missing = [values[k] for k in range(len(values)) if k not in found]
    assert not missing, f"numbers (line, column, text) no stat holds: {missing[:10]}"
    # And each holds the value the log printed there.
    wrong = [(found[k], stats[found[k]], text) for k, (_, _, text) in enumerate(values) if not same(stats[found[k]], text)]
    assert not wrong, wrong[:10]
    # The exclusions are the documented ones; the warp_id row holds exactly the indices.
    assert set(skipped) <= {
        "the kernel's name",
        "digits inside a word",
        "an index in brackets",
        "a histogram size",
        "the number of a unit's title or banner",
        "the warp_id row",
    }
    warp_ids = skipped.get("the warp_id row", [])
    assert warp_ids == [str(i) for i in range(len(warp_ids))]
    assert len([s for s in stats if s.startswith("distro[")]) == len(warp_ids)


@pytest.mark.parametrize(("name", "index"), CASES)
def test_names_are_unique_without_numbering(name: str, index: int) -> None:
    names = list(stats_of(name, index))
    assert not [n for n in names if "#" in n]
    assert all(n == n.strip() and n for n in names)


# --- values checked by hand against the logs ----------------------------------------------


def test_sm61_vectoradd_by_hand() -> None:
    s = stats_of("vectoradd-100-32__SM61_TITANX.log", 0)
    assert s["kernel_name"] == "_Z6vecAddIfEvPT_S1_S1_i"  # line 315
    assert s["gpu_sim_cycle"] == 5534  # line 318: gpu_sim_cycle = 5534
    assert isnan(s["gpu_occupancy"])  # line 325: gpu_occupancy = -nan%
    assert s["L2_BW"] == 0.3196  # line 334: L2_BW  =       0.3196 GB/Sec
    assert isnan(s["L1D_cache_core[1].Miss_rate"])  # line 346: ... Miss_rate = -nan, ...
    # line 394-397: warp_id: 0, 1, ... then distro: 26, 26, 26, 26, 9, ...
    assert [s[f"distro[{i}]"] for i in range(5)] == [26, 26, 26, 26, 9]
    assert s["ctas_completed"] == 1 and s["Shader"] == 0  # line 393
    # line 425: Stall:47	W0_Idle:599	W0_Scoreboard:1157	W1:0 ... W4:14 ... W32:326
    assert s["Warp Occupancy Distribution.Stall"] == 47
    assert s["Warp Occupancy Distribution.W0_Scoreboard"] == 1157
    assert s["Warp Occupancy Distribution.W4"] == 14
    assert s["Warp Occupancy Distribution.W32"] == 326
    assert s["single_issue_nums.WS3"] == 80 and s["dual_issue_nums.WS0"] == 3  # lines 426-427
    # line 428: traffic_breakdown_coretomem[GLOBAL_ACC_R] = 208 {8:26,}
    assert s["traffic_breakdown_coretomem[GLOBAL_ACC_R]"] == 208
    assert s["traffic_breakdown_coretomem[GLOBAL_ACC_R]{8}"] == 26
    # line 440: mrq_lat_table:10 	1 	0 	15 	0 ...
    assert [s[f"mrq_lat_table[{i}]"] for i in range(5)] == [10, 1, 0, 15, 0]
    assert "mrq_lat_table[32]" not in s and s["mrq_lat_table[31]"] == 0
    # line 485: average row locality = 26/7 = 3.714286
    assert s["average row accesses per activate.average row locality"] == 3.714286
    assert s["average row accesses per activate.average row locality.numerator"] == 26
    assert s["average row accesses per activate.average row locality.denominator"] == 7
    # line 711, in Memory Partition 2 (line 700): ... bk11: 1a 9746i ...
    assert (s["Memory Partition 2.bk11.a"], s["Memory Partition 2.bk11.i"]) == (1, 9746)
    # line 1399, in Memory Partition 11 (line 1330): mrqq: max=3 avg=0.00532678
    assert s["Memory Partition 11.mrqq.avg"] == 0.00532678
    # line 1404: L2_cache_bank[2]: Access = 4, Miss = 4, Miss_rate = 1.000, ...
    assert (s["L2_cache_bank[2].Access"], s["L2_cache_bank[2].Miss_rate"]) == (4, 1.0)
    # lines 1524-1526: Injected packet rate average = 0.000271052 / minimum = 0 (at node 1)
    assert s["Class 0.Injected packet rate average.minimum"] == 0
    assert s["Class 0.Injected packet rate average.minimum (at node)"] == 1
    assert s["Class 0.Injected packet rate average.maximum"] == 0.00704734
    assert s["Traffic class 0.Packet latency average (samples)"] == 1  # line 1541
    # lines 1572-1573: gpgpu_simulation_rate = 10516 (inst/sec), = 5534 (cycle/sec)
    assert s["gpgpu_simulation_rate (inst/sec)"] == 10516
    assert s["gpgpu_simulation_rate (cycle/sec)"] == 5534
    assert "gpgpu_simulation_rate" not in s


def test_sm7_vectoradd_by_hand() -> None:
    s = stats_of("vectoradd-100-32__SM7_QV100.log", 0)
    # line 326: L1D_cache_core[0]: Access = 39, Miss = 39, Miss_rate = 1.000, ..., Reservation_fails = 8
    assert s["L1D_cache_core[0].Access"] == 39 and s["L1D_cache_core[0].Reservation_fails"] == 8
    # line 611, under "maximum service time to same row:" (line 582): dram[28]:      5442 ...
    assert s["maximum service time to same row.dram[28][0]"] == 5442
    assert s["maximum service time to same row.dram[28][15]"] == 0
    assert "maximum service time to same row.dram[28][16]" not in s
    # line 786, under "average mf latency per bank:" (line 757): dram[28]:        334    none ...
    assert s["average mf latency per bank.dram[28][0]"] == 334
    assert s["average mf latency per bank.dram[28][1]"] == "none"
    assert s["Memory Partition 31.DRAM[31].bks"] == 16


def test_combo_sm61_by_hand() -> None:
    # The third kernel (line 2875); line 3992: L2_cache_stats_breakdown[GLOBAL_ACC_R][HIT] = 26
    assert stats_of("combo-vec-mm-xz__SM61_TITANX.log", 2)["L2_cache_stats_breakdown[GLOBAL_ACC_R][HIT]"] == 26
    # The second kernel (line 1596); line 1798, under "number of total read accesses:": chip skew: 61/4 = 15.25
    s = stats_of("combo-vec-mm-xz__SM61_TITANX.log", 1)
    assert s["number of total read accesses.chip skew"] == 15.25
    assert s["number of total read accesses.chip skew.numerator"] == 61
    assert s["number of total read accesses.chip skew.denominator"] == 4


def test_max_cycle_block() -> None:
    s = stats_of("failures/max-cycle.stdout", 0)
    assert s["kernel_name"] == "" and "kernel_launch_uid" not in s  # "kernel_name = ", "kernel_launch_uid = "
    assert isnan(s["Class 0.Packet latency average.minimum"])  # "\tminimum = nan"
    assert not [n for n in s if n.startswith("distro")]  # warp_id: and distro: with empty rows


# --- stable names -------------------------------------------------------------------------


def test_the_same_kernel_has_the_same_names_in_every_run() -> None:
    # The vector add of the vectoradd logs, the first and third kernels of the combo logs,
    # the liveness log and the first kernel of the SIGTERM'd run.
    sm61 = [stats_of(n, i) for n, i in [("vectoradd-100-32__SM61_TITANX.log", 0), ("combo-vec-mm-xz__SM61_TITANX.log", 0),
                                        ("combo-vec-mm-xz__SM61_TITANX.log", 2), ("liveness-progress__SM61_TITANX.log", 0)]]
    sm7 = [stats_of(n, i) for n, i in [("vectoradd-100-32__SM7_QV100.log", 0), ("combo-vec-mm-xz__SM7_QV100.log", 0),
                                       ("failures/sigterm.stdout", 0)]]
    for same_config in (sm61, sm7):
        first = list(same_config[0])
        for other in same_config[1:]:
            # Lines printed only once something happened (L2_total_cache_miss_rate, the
            # averages of mf latency, a fail breakdown) may come and go; the rest are equal.
            assert [n for n in other if n in first] == [n for n in first if n in other]
            assert len(set(first) ^ set(other)) <= 4, set(first) ^ set(other)


def test_names_across_configs() -> None:
    configs = [stats_of(n, 0) for n in ("vectoradd-100-32__SM61_TITANX.log", "vectoradd-100-32__SM7_QV100.log",
                                        "vectoradd-100-32__SM86_RTX3070.log")]
    for s in configs:
        for name in ("kernel_name", "kernel_launch_uid", "gpu_sim_cycle", "gpu_sim_insn", "gpu_ipc", "gpu_tot_sim_cycle",
                     "gpu_tot_sim_insn", "gpu_tot_ipc", "L2_BW", "L2_total_cache_accesses", "Memory Partition 0.n_cmd",
                     "Warp Occupancy Distribution.W0_Idle", "maximum mf latency per bank.dram[0][0]", "gpgpu_silicon_slowdown"):
            assert name in s
    # Per unit: 12, 32 and 16 DRAM channels, 28, 80 and 46 cores.
    assert [sum(n.endswith(".n_cmd") for n in s) for s in configs] == [12, 32, 16]
    assert [sum(n.endswith("].Access") and n.startswith("L1D") for n in s) for s in configs] == [28, 80, 46]


# --- the doc's examples -------------------------------------------------------------------


def doc_examples() -> list[tuple[str, str]]:
    found = re.findall(r"```log\n(.*?)\n```\n\n```names\n(.*?)\n```", DOC.read_text(), re.S)
    assert len(found) >= 14
    return found


@pytest.mark.parametrize(("lines", "expected"), doc_examples())
def test_the_doc_examples(lines: str, expected: str) -> None:
    stats = parse_stats(f"kernel_name = k \n{lines}\n\ngpgpu_silicon_slowdown = 1x")
    got = [(n, v) for n, v in stats.items() if n != "kernel_name" and not n.endswith("gpgpu_silicon_slowdown")]
    want = [tuple(line.split(" = ")) for line in expected.split("\n")]
    assert [n for n, _ in got] == [n for n, _ in want]
    for (name, value), (_, text) in zip(got, want, strict=True):
        assert value == text if text == "none" else same(value, text), (name, value, text)


# --- shapes the shared logs do not show -----------------------------------------------------


def test_histogram_of_several_sizes_and_infinities() -> None:
    # traffic_breakdown.cc prints "%u:%u," per packet size; `inf` is what printf writes for
    # a count divided by zero.
    stats = parse_stats(
        "kernel_name = k \ntraffic_breakdown_memtocore[GLOBAL_ACC_R] = 1248 {8:26,40:26,}\n"
        "Row_Buffer_Locality = inf\nBank_Level_Parallism = -inf\ngpgpu_silicon_slowdown = 1x"
    )
    assert stats["traffic_breakdown_memtocore[GLOBAL_ACC_R]{8}"] == 26
    assert stats["traffic_breakdown_memtocore[GLOBAL_ACC_R]{40}"] == 26
    assert stats["Row_Buffer_Locality"] == math.inf and stats["Bank_Level_Parallism"] == -math.inf


def test_a_name_the_rule_gives_twice_is_numbered() -> None:
    stats = parse_stats("kernel_name = k \nx = 1\nx = 2\ngpgpu_silicon_slowdown = 1x")
    assert (stats["x"], stats["x#2"]) == (1, 2)


# --- as events carry them --------------------------------------------------------------


def test_a_packed_map_gives_back_every_value_as_parsed() -> None:
    stats = stats_of("vectoradd-100-32__SM61_TITANX.log", 0)
    (kernel,) = [o for o in LogParser().feed((LOGS / "vectoradd-100-32__SM61_TITANX.log").read_text()) if isinstance(o, KernelBlock)]
    packed = sim_report.packed(kernel.stats)
    assert same_map(deflated.stats_map(packed), dict(stats))
    assert isnan(stats["gpu_occupancy"]) and packed.texts[0] == stats["kernel_name"]
    assert "none" not in packed.texts.values() and stats["average mf latency per bank.dram[0][0]"] == "none"  # a nan of its own
    infinite = Stats(("kernel_name", "a", "b", "c"), struct.pack("=4d", math.nan, math.inf, -math.inf, -math.nan), {0: "k"})
    back = deflated.stats_map(sim_report.packed(infinite))
    assert same_map(back, infinite.as_dict()) and math.copysign(1, back["b"]) == -1  # type: ignore[arg-type]  # b is a float
    assert math.copysign(1, back["c"]) == -1  # type: ignore[arg-type]  # c is a float
    assert ev.decode(ev.encode(reported_kernel("vectoradd-100-32__SM61_TITANX.log", TITANX))) == reported_kernel("vectoradd-100-32__SM61_TITANX.log", TITANX)


TITANX = GpuConfig(name="SM61_TITANX", arch="sm_61", core_clock_mhz=1417.0)


def reported_kernel(log: str, config: GpuConfig) -> ev.KernelFinished:
    """The events.KernelFinished the runner's SimReport makes of a one-kernel log."""
    sent: list[ev.Event] = []
    job = sim_report.Job(run_id="run-1", sim_id="sim-1", attempt=1, trace_id="trace-1", gpu_config=config, kernels_total=1)
    sim = sim_report.SimReport(
        job=job, emit=sent.append, next_id=lambda: f"e-{len(sent)}", now=lambda: datetime(2026, 12, 1, tzinfo=UTC), reader=AccelSimOutput()
    )
    sim.stdout((LOGS / log).read_text())
    sim.end_of_output()
    (kernel,) = [e for e in sent if isinstance(e, ev.KernelFinished)]
    return kernel


def test_kernel_finished_events_carry_the_naming() -> None:
    kernel = reported_kernel("vectoradd-100-32__SM61_TITANX.log", TITANX)
    assert kernel.stats_naming == STATS_NAMING == 2 and kernel.stats is not None
    data = ev.encode(kernel)
    assert b'"stats_naming":2' in data
    assert same_map(deflated.stats_map(kernel.stats), dict(stats_of("vectoradd-100-32__SM61_TITANX.log", 0)))
    # An event written before the field existed reads as naming 1.
    old = ev.decode(data.replace(b',"stats_naming":2', b""))
    assert isinstance(old, ev.KernelFinished) and old.stats_naming == 1


def test_the_largest_tested_config_fits_in_an_event() -> None:
    # SM7_QV100 (80 cores, 32 DRAM channels) is the largest of Accel-Sim's tested configs;
    # its map is about 420 KB as JSON, and events are refused past MAX_EVENT_BYTES (512 KB):
    # packed, its event is a twenty-fifth of that with its names, and as it is sent (the set of
    # names stored once, as its own event) a hundredth.
    kernel = reported_kernel("vectoradd-100-32__SM7_QV100.log", GpuConfig(name="SM7_QV100", arch="sm_70", core_clock_mhz=1132.0))
    assert kernel.stats is not None and len(packed_stats.names_of(kernel.stats)) > 9_000
    assert 10_000 < len(ev.encode(kernel)) < MAX_EVENT_BYTES // 25
    sent = msgspec.structs.replace(kernel, stats=packed_stats.without_names(kernel.stats))
    assert len(ev.encode(sent)) < MAX_EVENT_BYTES // 100
