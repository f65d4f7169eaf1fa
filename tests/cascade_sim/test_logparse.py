"""The Accel-Sim stdout parser against every real log: kernels, totals and builds from the
stream, random cuts, and the failure cases. The stats names: test_stats_names.py."""

from __future__ import annotations

import math
import re
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_core.events import PartialKernel
from cascade_sim.logparse import (
    Build,
    ExitDetected,
    KernelBlock,
    KernelLaunched,
    LogParser,
    Outcome,
    Output,
    SimError,
    Stopped,
    Totals,
    error_line,
    reached,
    outcome,
    parse_stats,
)
from tests.support import LOGS, stats_blocks

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


def nan_free(stats: dict[str, float | str]) -> dict[str, float | str]:
    """Stats that compare equal when they say the same: nan is not equal to itself."""
    return {k: "nan" if v != v else v for k, v in stats.items()}


def finished(name: str) -> list[KernelBlock]:
    return [o for o in parsed(name) if isinstance(o, KernelBlock)]


# --- stats blocks (their names and values: test_stats_names.py) ----------------------------


@pytest.mark.parametrize("name", sorted(KERNELS_FINISHED))
def test_every_block_of_every_log(name: str) -> None:
    # The stream hands each finished block whole to parse_stats, wherever the text is cut.
    kernels = finished(name)
    assert len(kernels) == KERNELS_FINISHED[name]
    blocks = [b for b in stats_blocks(log(name)) if b.split("\n")[0].strip() != "kernel_name ="]
    assert [list(k.stats.as_dict()) for k in kernels] == [list(parse_stats(b)) for b in blocks]
    assert [nan_free(k.stats.as_dict()) for k in kernels] == [nan_free(parse_stats(b)) for b in blocks]


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
    stats = finished("vectoradd-100-32__SM61_TITANX.log")[0].stats.as_dict()
    assert stats["kernel_name"] == VECADD
    assert (stats["kernel_launch_uid"], stats["gpu_sim_cycle"], stats["gpu_ipc"]) == (1.0, 5534.0, 1.9003)
    # Both rate lines, by their units.
    assert stats["gpgpu_simulation_rate (inst/sec)"] == 10516.0
    assert stats["gpgpu_simulation_rate (cycle/sec)"] == 5534.0
    # Not finite numbers are floats; units and marks after a number are not part of it.
    assert isinstance(stats["gpu_occupancy"], float) and math.isnan(stats["gpu_occupancy"])
    assert stats["L2_BW"] == 0.3196
    assert stats["gpgpu_silicon_slowdown"] == 256053.0


def test_a_packed_map_reads_as_the_map_and_takes_a_value_as_a_dict_does() -> None:
    stats = finished("vectoradd-100-32__SM61_TITANX.log")[0].stats
    as_dict = stats.as_dict()
    assert list(as_dict) == list(stats.names) and as_dict["kernel_name"] == stats.at(0) == VECADD
    assert stats.at(stats.names.index("gpu_sim_cycle")) == 5534.0
    marked = stats.with_value("reused_from", 3.0).as_dict()
    assert list(marked) == [*as_dict, "reused_from"] and marked["reused_from"] == 3.0
    again = stats.with_value("kernel_name", 1.0).as_dict()
    assert list(again) == list(as_dict) and again["kernel_name"] == 1.0


def test_totals() -> None:
    totals = [o for o in parsed("combo-vec-mm-xz__SM61_TITANX.log") if isinstance(o, Totals)]
    assert totals[-1] == Totals(gpu_tot_sim_cycle=18448, gpu_tot_sim_insn=160296, gpu_tot_ipc=8.6891, sim_rate_ips=160296)
    assert [t.gpu_tot_sim_cycle for t in totals] == [5534, 5534 + 7506, 18448]


def test_liveness_lines_update_totals() -> None:
    totals = [o for o in parsed("liveness-progress__SM61_TITANX.log") if isinstance(o, Totals)]
    assert totals[0] == Totals(gpu_tot_sim_cycle=500, gpu_tot_sim_insn=0, gpu_tot_ipc=0.0, sim_rate_ips=0)
    assert Totals(gpu_tot_sim_cycle=5500, gpu_tot_sim_insn=10516, gpu_tot_ipc=10516 / 5500, sim_rate_ips=10516) in totals
    assert totals[-1] == Totals(gpu_tot_sim_cycle=5534, gpu_tot_sim_insn=10516, gpu_tot_ipc=1.9003, sim_rate_ips=10516)  # the stats block
    assert len(totals) == 12  # 11 "uArch: inst.:" lines and the block


def test_build() -> None:
    assert parsed("vectoradd-100-32__SM61_TITANX.log")[0] == Build(
        "accelsim-commit-73f9fac_modified_0.0_26-11-29-18-45-08", "gpgpu-sim_git-commit-667834cf_modified_0.0", "4.2.0"
    )


def test_build_without_gpgpu_sim_line() -> None:
    out, _ = parse(["Accel-Sim [build x-y]\n"])
    assert out == [Build("x-y", None, None)]


# --- pieces -------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(KERNELS_FINISHED)), cuts=st.lists(st.integers(min_value=0), max_size=60))
def test_where_the_text_is_cut_does_not_matter(name: str, cuts: list[int]) -> None:
    text = log(name)
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]
    assert parse(pieces)[0] == parsed(name)  # the maps' floats compared bit for bit: a nan equals itself


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_small_pieces(size: int) -> None:
    text = log("combo-vec-mm-xz__SM61_TITANX.log")
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    assert parse(pieces)[0] == parsed("combo-vec-mm-xz__SM61_TITANX.log")


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


def test_a_failed_assertion_is_the_error_of_its_abort() -> None:
    # What the real binary (accel-sim-framework 73f9fac) printed, config SM6_TITANX with
    # `-gpgpu_cache:dl2 S:128:...`: the L2's IPOLY set hashing takes only 16, 32 or 64 sets.
    assertion = (
        "accel-sim.out: hashing.cc:88: unsigned int ipoly_hash_function(new_addr_type, unsigned int, unsigned int): "
        "Assertion `\"\\nmemory_partition_indexing error: The number of \" \"channels should be \" \"16, 32 or 64 for the "
        "hashing IPOLY index function. other banks \" \"numbers are not supported. Generate it by yourself! \\n\" && 0' failed."
    )
    stdout = "GPGPU-Sim uArch: performance model initialization complete.\nlaunching memcpy command : MemcpyHtoD,0x00007f2b2d500000,400\n"
    _, parser = parse([stdout])
    assert outcome(None, 6, parser.exit_detected, parser.error, [assertion, ""]) == Outcome(
        False, 134, f"killed by signal 6 (SIGABRT): {assertion}"
    )


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
    assert [type(o) for o in out if not isinstance(o, Build)] == [KernelLaunched, Totals, Stopped, ExitDetected]
    stopped = next(o for o in out if isinstance(o, Stopped))
    # The limit from the option dump at the top; the cut launch from its empty-named block.
    assert (stopped.limit, stopped.value) == ("-gpgpu_max_cycle", 1000)
    assert stopped.partial == PartialKernel(uid=1, name="_Z6vecAddIfEvPT_S1_S1_i", gpu_sim_cycle=1000, gpu_sim_insn=0)


def test_the_limit_reached_is_the_one_whose_count_reached_it_else_the_only_one_set() -> None:
    limits = {"gpgpu_max_cycle": 1000, "gpgpu_max_insn": 500, "gpgpu_max_cta": 0}
    assert reached(limits, {"gpgpu_max_cycle": 900, "gpgpu_max_insn": 500}) == ("-gpgpu_max_insn", 500)
    assert reached(limits, {}) == (None, None), "two limits set, neither count printed: not told"
    assert reached({"gpgpu_max_completed_cta": 8, "gpgpu_max_cycle": 0}, {}) == ("-gpgpu_max_completed_cta", 8)


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
