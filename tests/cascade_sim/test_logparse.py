"""The Accel-Sim stdout parser against every real log, a slow reference reading of the stats
grammar, random chunkings, and the failure cases."""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_sim.logparse import (
    BreakMaxCycles,
    Build,
    ExitDetected,
    KernelBlock,
    KernelLaunched,
    LogParser,
    Outcome,
    Output,
    SimError,
    Totals,
    error_line,
    outcome,
)

LOGS = Path("/work/shared/accelsim/logs")
VECADD = "_Z6vecAddIfEvPT_S1_S1_i"
MATMUL = "_Z8mult_gpuIfEvPT_S1_S1_ii"

# Every stdout in the shared logs, and the kernels that finished in it.
KERNELS_FINISHED = {
    "vectoradd-100-32__SM61_TITANX.log": 1,
    "vectoradd-100-32__SM7_QV100.log": 1,
    "vectoradd-100-32__SM86_RTX3070.log": 1,
    "combo-vec-mm-xz__SM61_TITANX.log": 3,
    "combo-vec-mm-xz__SM7_QV100.log": 3,
    "liveness-progress__SM61_TITANX.log": 1,
    "failures/max-cycle.stdout": 0,
    "failures/sigterm.stdout": 1,
    "failures/missing-icnt.stdout": 0,
    "failures/missing-traceg.stdout": 0,
    "failures/undefined-instruction.stdout": 0,
    "failures/unknown-option.stdout": 0,
    "failures/unsupported-binary-version.stdout": 0,
}


@cache
def log(name: str) -> str:
    return (LOGS / name).read_text()


def parse(pieces: list[str]) -> tuple[list[Output], LogParser]:
    parser = LogParser()
    out: list[Output] = []
    for piece in pieces:
        out += parser.feed(piece)
    out += parser.finish()
    return out, parser


@cache
def parsed(name: str) -> list[Output]:
    return parse([log(name)])[0]


def finished(name: str) -> list[KernelBlock]:
    return [o for o in parsed(name) if isinstance(o, KernelBlock)]


# --- a slow reference reading of the grammar in cascade_sim.logparse's module doc ---------


def reference_blocks(text: str) -> list[str]:
    blocks, lines = [], None
    for line in text.split("\n"):
        if lines is None and line.startswith("kernel_name = "):
            lines = []
        if lines is not None:
            lines.append(line)
            if line.startswith("gpgpu_silicon_slowdown = "):
                blocks.append("\n".join(lines))
                lines = None
    return blocks


def reference_pairs(block: str) -> list[tuple[str, str]]:
    pairs: list[list[str]] = []
    for line in block.split("\n"):
        line = line.replace("chip skew: ", "chip skew = ")
        value_end = 0
        for i, char in enumerate(line):
            if char != "=" or line[i - 1 : i] == "=" or line[i + 1 : i + 2] == "=":
                continue
            name = re.split(r",|: ", line[value_end:i])[-1].strip()
            start = i + 1
            while start < len(line) and line[start] in " \t":
                start += 1
            end = start
            while end < len(line) and not line[end].isspace() and line[end] not in ",=":
                end += 1
            value_end = end
            if name:
                pairs.append([name, line[start:end]])
            elif pairs:
                pairs[-1][1] = line[start:end]
    return [(name, value) for name, value in pairs]


def reference_value(text: str) -> float | str:
    match = re.match(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text)
    if match and math.isfinite(float(match.group())):
        return float(match.group())
    return text


def reference_stats(block: str) -> dict[str, float | str]:
    stats: dict[str, float | str] = {}
    seen: Counter[str] = Counter()
    for name, value in reference_pairs(block):
        seen[name] += 1
        stats[name if seen[name] == 1 else f"{name}#{seen[name]}"] = reference_value(value)
    return stats


# --- stats blocks -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(KERNELS_FINISHED))
def test_every_stat_of_every_kernel(name: str) -> None:
    text = log(name)
    kernels = finished(name)
    assert len(kernels) == KERNELS_FINISHED[name]
    blocks = [b for b in reference_blocks(text) if b.split("\n")[0].strip() != "kernel_name ="]
    assert len(blocks) == len(kernels)
    for kernel, block in zip(kernels, blocks):
        assert kernel.stats == reference_stats(block)
        assert len(kernel.stats) == len(reference_pairs(block))
        # Every plain "name = value" line is there, under its name or a numbered one.
        for line_name in re.findall(r"^\t?([A-Za-z_][\w\[\]]*) = \S", block, re.M):
            assert line_name in kernel.stats


@pytest.mark.parametrize("name", [n for n, k in KERNELS_FINISHED.items() if k])
def test_kernel_fields_are_what_the_log_says(name: str) -> None:
    text = log(name)
    kernels = finished(name)
    assert [k.name for k in kernels] == re.findall(r"^kernel_name = (\S+) $", text, re.M)
    assert [k.uid for k in kernels] == [int(u) for u in re.findall(r"^kernel_launch_uid = (\d+) $", text, re.M)]
    assert [k.gpu_sim_cycle for k in kernels] == [int(c) for c in re.findall(r"^gpu_sim_cycle = (\d+)$", text, re.M)]
    assert [k.gpu_sim_insn for k in kernels] == [int(c) for c in re.findall(r"^gpu_sim_insn = (\d+)$", text, re.M)]
    assert [k.gpu_ipc for k in kernels] == [float(c) for c in re.findall(r"^gpu_ipc = +(\S+)$", text, re.M)]


def test_combo_kernels_in_launch_order() -> None:
    kernels = finished("combo-vec-mm-xz__SM61_TITANX.log")
    assert [(k.uid, k.name, k.gpu_sim_cycle, k.gpu_sim_insn) for k in kernels] == [
        (1, VECADD, 5534, 10516),
        (2, MATMUL, 7506, 139264),
        (3, VECADD, 5408, 10516),
    ]
    launched = [o for o in parsed("combo-vec-mm-xz__SM61_TITANX.log") if isinstance(o, KernelLaunched)]
    assert launched == [KernelLaunched(VECADD, 1), KernelLaunched(MATMUL, 2), KernelLaunched(VECADD, 3)]


def test_stat_values() -> None:
    stats = finished("vectoradd-100-32__SM61_TITANX.log")[0].stats
    assert stats["kernel_name"] == VECADD
    assert stats["kernel_launch_uid"] == 1.0
    assert stats["gpu_sim_cycle"] == 5534.0
    assert stats["gpu_ipc"] == 1.9003
    # Both rate lines, in order.
    assert stats["gpgpu_simulation_rate"] == 10516.0  # (inst/sec)
    assert stats["gpgpu_simulation_rate#2"] == 5534.0  # (cycle/sec)
    assert "gpgpu_simulation_rate#3" not in stats
    # Not finite numbers stay text.
    assert stats["gpu_occupancy"] == "-nan%"
    assert stats["Miss_rate"] == "-nan"
    assert stats["Bank_Level_Parallism"] == "-nan"
    # Units and marks after a number.
    assert stats["L2_BW"] == 0.3196
    assert stats["gpgpu_silicon_slowdown"] == 256053.0
    assert stats["min_bank_accesses"] == 0.0
    assert stats["Packet latency average"] == 5.51282
    # key=value forms, several to a line, tab-indented lines.
    assert stats["gpu_total_sim_rate"] == 10516.0
    assert stats["icnt_total_pkts_mem_to_simt"] == 39.0
    assert stats["n_cmd"] == 9762.0
    assert stats["bw_util"] == 0.0
    assert stats["busW"] == 4.0 and stats["CL"] == 16.0 and stats["tRRD"] == 8.0
    assert stats["max"] == 0.0 and stats["avg"] == 0.0
    assert stats["L2_cache_stats_breakdown[GLOBAL_ACC_R][MISS]"] == 8.0
    assert stats["L1D_total_cache_accesses"] == 0.0
    assert stats["Accepted flit rate average"] == 0.000271052
    # The ratio line takes its ratio.
    assert stats["average row locality"] == 3.714286


def test_repeated_names_are_numbered_in_order() -> None:
    stats = finished("vectoradd-100-32__SM61_TITANX.log")[0].stats
    # 12 DRAM channels: n_nop is printed twice per channel, as n_nop=... and n_nop = ...
    assert [k for k in stats if k.split("#")[0] == "n_nop"] == ["n_nop"] + [f"n_nop#{i}" for i in range(2, 25)]
    # 28 cores then 24 L2 banks print Access = ..., Miss = ...
    assert "Access#52" in stats and "Access#53" not in stats
    assert stats["Miss_rate#31"] == 1.0  # L2 bank 2: Access = 4, Miss = 4, Miss_rate = 1.000
    assert stats["Access#31"] == 4.0


def test_chip_skew_ratio() -> None:
    stats = finished("combo-vec-mm-xz__SM61_TITANX.log")[1].stats
    assert stats["chip skew"] == 15.25
    assert stats["average row locality"] == 10.071428


def test_totals() -> None:
    totals = [o for o in parsed("combo-vec-mm-xz__SM61_TITANX.log") if isinstance(o, Totals)]
    assert totals[-1] == Totals(18448, 160296, 8.6891, 160296)
    assert [t.gpu_tot_sim_cycle for t in totals] == [5534, 5534 + 7506, 18448]


def test_liveness_lines_update_totals() -> None:
    totals = [o for o in parsed("liveness-progress__SM61_TITANX.log") if isinstance(o, Totals)]
    assert totals[0] == Totals(500, 0, 0.0, 0)
    assert Totals(5500, 10516, 10516 / 5500, 10516) in totals
    assert totals[-1] == Totals(5534, 10516, 1.9003, 10516)  # the stats block
    assert len(totals) == 12  # 11 "uArch: inst.:" lines and the block


def test_build() -> None:
    assert parsed("vectoradd-100-32__SM61_TITANX.log")[0] == Build(
        "accelsim-commit-73f9fac_modified_0.0_26-11-29-18-45-08", "gpgpu-sim_git-commit-667834cf_modified_0.0", "4.2.0"
    )


def test_build_without_gpgpu_sim_line() -> None:
    out, _ = parse(["Accel-Sim [build x-y]\n"])
    assert out == [Build("x-y", None, None)]


# --- chunks -------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(KERNELS_FINISHED)), cuts=st.lists(st.integers(min_value=0), max_size=60))
def test_chunk_boundaries_do_not_matter(name: str, cuts: list[int]) -> None:
    text = log(name)
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]
    assert parse(pieces)[0] == parsed(name)


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_small_chunks(size: int) -> None:
    text = log("combo-vec-mm-xz__SM61_TITANX.log")
    assert parse([text[i : i + size] for i in range(0, len(text), size)])[0] == parsed("combo-vec-mm-xz__SM61_TITANX.log")


def test_last_line_without_line_break() -> None:
    out, parser = parse(["GPGPU-Sim: *** exit detected ***"])
    assert out == [ExitDetected()] and parser.exit_detected


def test_unfinished_block_is_dropped() -> None:
    text = log("vectoradd-100-32__SM61_TITANX.log")
    cut = text[: text.index("gpgpu_simulation_rate")]
    out, _ = parse([cut])
    assert not [o for o in out if isinstance(o, (KernelBlock, Totals))]
    assert out[-1] == KernelLaunched(VECADD, 1)


def test_carry_over_stays_small() -> None:
    # Outside a block only the last incomplete line is kept; inside, only the block so far.
    parser = LogParser()
    text = log("combo-vec-mm-xz__SM7_QV100.log")
    for i in range(0, len(text), 65536):
        parser.feed(text[i : i + 65536])
        held = len(parser._buf) + parser._pending_size
        assert held <= 140_000  # the largest block here is about 130 KB


# --- outcomes -----------------------------------------------------------------------------


def failure(name: str) -> tuple[LogParser, list[str]]:
    stderr = LOGS / f"failures/{name}.stderr"
    _, parser = parse([log(f"failures/{name}.stdout")])
    return parser, stderr.read_text().splitlines() if stderr.exists() else []


def run_outcome(name: str, exit_code: int | None, signal: int | None = None) -> Outcome:
    parser, stderr = failure(name)
    return outcome(exit_code, signal, parser.exit_detected, parser.error, stderr)


def test_success_outcomes() -> None:
    for name in [n for n in KERNELS_FINISHED if n.endswith(".log")]:
        _, parser = parse([log(name)])
        assert outcome(0, None, parser.exit_detected, parser.error, []) == Outcome(True, 0, None)


def test_missing_traceg() -> None:
    assert run_outcome("missing-traceg", 0) == Outcome(
        False, 0, "unsupported binary version: 0 (cat: /srv/traces/bad/kernel-9.traceg: No such file or directory)"
    )


def test_unsupported_binary_version() -> None:
    assert run_outcome("unsupported-binary-version", 0) == Outcome(False, 0, "unsupported binary version: 90")


def test_undefined_instruction_abort() -> None:
    expected = Outcome(False, 134, "ERROR:  undefined instruction : XMAD.MRG Opcode: XMAD")
    assert run_outcome("undefined-instruction", None, 6) == expected
    assert run_outcome("undefined-instruction", 134) == expected


def test_missing_icnt() -> None:
    assert run_outcome("missing-icnt", 255) == Outcome(False, 255, "Could not open configuration file config_pascal_islip.icnt")


def test_unknown_option() -> None:
    assert run_outcome("unknown-option", 1) == Outcome(False, 1, "GPGPU-Sim ** ERROR: Unknown Option: '-no_such_option'")


def test_sigterm() -> None:
    _, parser = parse([log("failures/sigterm.stdout")])
    assert outcome(None, 15, parser.exit_detected, parser.error, []) == Outcome(False, 143, "killed by signal 15 (SIGTERM)")


def test_max_cycle_succeeds_without_the_cut_kernel() -> None:
    out, parser = parse([log("failures/max-cycle.stdout")])
    assert outcome(0, None, parser.exit_detected, parser.error, []) == Outcome(True, 0, None)
    assert [type(o) for o in out if not isinstance(o, Build)] == [KernelLaunched, Totals, BreakMaxCycles, ExitDetected]


def test_exit_zero_without_exit_line() -> None:
    text = log("vectoradd-100-32__SM61_TITANX.log")
    _, parser = parse([text[: text.index("GPGPU-Sim: *** exit detected")]])
    assert outcome(0, None, parser.exit_detected, parser.error, []) == Outcome(
        False, 0, "simulator exited 0 without printing 'GPGPU-Sim: *** exit detected ***'"
    )


def test_other_exit_codes() -> None:
    assert outcome(2, None, False, None, ["", "boom", ""]) == Outcome(False, 2, "simulator exited with code 2: boom")
    assert outcome(None, 9, False, None, []) == Outcome(False, 137, "killed by signal 9 (SIGKILL)")
    assert outcome(0, None, True, None, []).succeeded
    assert not outcome(None, 15, True, None, []).succeeded


def test_error_lines() -> None:
    assert error_line("GPGPU-Sim uArch: ERROR ** deadlock detected: last writeback core 0 @ gpu_sim_cycle 5") is not None
    assert error_line("-gpgpu_deadlock_detect                  1 # Stop the simulation at deadlock") is None
    assert error_line("accel-sim.out: trace_driven.cc:209: ... Assertion `0' failed.") is None
    errors = [o for name in KERNELS_FINISHED for o in parsed(name) if isinstance(o, SimError)]
    assert [e.message for e in errors] == [
        "unsupported binary version: 0",
        "ERROR:  undefined instruction : XMAD.MRG Opcode: XMAD",
        "unsupported binary version: 90",
    ]
