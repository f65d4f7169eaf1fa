"""The comparison of a fast sim with its reference, on made-up kernels whose errors are not 0."""

from __future__ import annotations

import pytest

from cascade_core.reference import KernelResult, error_pct, kernels, speedup, totals


def test_each_launch_is_matched_by_uid_and_its_errors_are_signed() -> None:
    fast = [
        KernelResult(uid=2, name="mm", gpu_sim_cycle=1010, gpu_sim_insn=500),
        KernelResult(uid=1, name="va", gpu_sim_cycle=990, gpu_sim_insn=100),
        KernelResult(uid=3, name="mm", gpu_sim_cycle=1010, gpu_sim_insn=500, reused_from=2),
    ]
    reference = [
        KernelResult(uid=1, name="va", gpu_sim_cycle=1000, gpu_sim_insn=100),
        KernelResult(uid=2, name="mm", gpu_sim_cycle=1000, gpu_sim_insn=500),
        KernelResult(uid=3, name="mm", gpu_sim_cycle=1000, gpu_sim_insn=400),
        KernelResult(uid=4, name="va", gpu_sim_cycle=7, gpu_sim_insn=1),
    ]
    rows = kernels(fast, reference, str.upper)
    assert [(r.kernel_launch_uid, r.kernel_name, r.gpu_sim_cycle, r.reference_gpu_sim_cycle, r.reused_from) for r in rows] == [
        (1, "va", 990, 1000, None), (2, "mm", 1010, 1000, None), (3, "mm", 1010, 1000, 2), (4, "va", None, 7, None)
    ]
    assert [r.kernel_short_name for r in rows] == ["VA", "MM", "MM", "VA"]  # as the caller's short_name gives it
    assert [r.cycle_error_pct for r in rows] == [pytest.approx(-1.0), pytest.approx(1.0), pytest.approx(1.0), None]
    assert [r.insn_error_pct for r in rows] == [0.0, 0.0, pytest.approx(25.0), None]

    t = totals(rows)  # over launches 1 to 3, which both have
    assert (t.kernels, t.gpu_sim_cycle, t.reference_gpu_sim_cycle, t.gpu_sim_insn, t.reference_gpu_sim_insn, t.exact) == (3, 3010, 3000, 1100, 1000, 0)
    assert t.cycle_error_pct == pytest.approx(10 / 3000 * 100) and t.insn_error_pct == pytest.approx(10.0)
    # Ties in size go to the first launch.
    assert (t.worst_cycle_error_pct, t.worst_kernel_launch_uid) == (pytest.approx(-1.0), 1)


def test_nothing_in_common_yet_has_no_errors() -> None:
    t = totals(kernels([KernelResult(uid=1, name="va", gpu_sim_cycle=990, gpu_sim_insn=100)], [], str))
    assert (t.kernels, t.gpu_sim_cycle, t.reference_gpu_sim_cycle, t.cycle_error_pct, t.insn_error_pct, t.exact) == (0, None, None, None, None, 0)
    assert (t.worst_cycle_error_pct, t.worst_kernel_launch_uid) == (None, None)


def test_an_error_against_0_or_unknown_is_none_and_so_is_a_speedup_before_both_ended() -> None:
    assert error_pct(5, 0) is None and error_pct(None, 3) is None and error_pct(3, None) is None
    assert speedup(2.0, 7.0) == 3.5 and speedup(None, 7.0) is None and speedup(2.0, None) is None and speedup(0.0, 1.0) is None
