"""Reuse of repeated kernels, pure: each kernel file's first two launches are simulated and
every later one takes the second's result; a launch is told by its file's stored digest; the
kernelslist simulated is the one the real simulator was recorded on."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cascade_core import reuse, split

KERNELSLISTS = Path(__file__).parents[1] / "fake_accelsim" / "recorded" / "kernelslists"


def kernelslist(files: list[int]) -> list[str]:
    """A kernelslist launching these kernel files in order, each after a memcpy of its own."""
    return [line for n, f in enumerate(files, 1) for line in (f"MemcpyHtoD,0x{n:04x}00,4096", f"kernel-{f}.traceg")]


@given(st.lists(st.integers(1, 4), min_size=1, max_size=60))
def test_each_kernels_first_two_launches_are_simulated_and_the_later_ones_take_the_second(files: list[int]) -> None:
    plan = reuse.plan(kernelslist(files), {})
    occurrences: dict[int, list[int]] = {}
    for uid, f in enumerate(files, 1):
        occurrences.setdefault(f, []).append(uid)
    expected = [uid if uid in occurrences[f][:2] else occurrences[f][1] for uid, f in enumerate(files, 1)]
    if expected == list(range(1, len(files) + 1)):
        assert plan is None  # nothing to reuse: the sim runs whole
        return
    assert plan is not None and list(plan.sources) == expected
    assert list(plan.simulated) == [uid for uid in range(1, len(files) + 1) if plan.simulates(uid)]
    assert [plan.global_uid(u) for u in range(1, len(plan.simulated) + 1)] == list(plan.simulated)
    # Every reused launch is given right after the simulated one before it, once, in order.
    given_after = [later for uid in plan.simulated for later in plan.reused_after(uid)]
    assert given_after == [uid for uid in range(1, len(files) + 1) if not plan.simulates(uid)]
    assert all(plan.sources[uid - 1] < uid for uid in given_after)
    assert plan.sources_reused() == {plan.sources[uid - 1] for uid in given_after}
    # Its kernelslist: the simulated launches, each with the memcpy before it.
    lines = kernelslist(files)
    assert split.kernelslist_of(lines, plan) == [line for uid in plan.simulated for line in lines[2 * uid - 2 : 2 * uid]]


def test_launches_of_different_files_stored_with_the_same_digest_are_one_kernel() -> None:
    lines = ["kernel-1.traceg", "kernel-2.traceg", "kernel-3.traceg", "kernel-4.traceg"]
    plan = reuse.plan(lines, {"kernel-1.traceg": "SHA-256=a", "kernel-2.traceg": "SHA-256=a", "kernel-3.traceg": "SHA-256=a"})
    assert plan is not None and plan.sources == (1, 2, 2, 4)
    assert reuse.plan(lines, {}) is None  # by path alone, no file repeats


@pytest.mark.parametrize(("trace", "repeat", "simulated"), [("matrixmul-x40", 1, [1, 2]), ("combo-repeat", 3, [1, 2, 3, 5])])
def test_the_kernelslist_simulated_is_the_one_the_real_simulator_was_recorded_on(trace: str, repeat: int, simulated: list[int]) -> None:
    lines = (KERNELSLISTS / trace / "kernelslist.g").read_text().splitlines()
    plan = reuse.plan(lines, {})
    assert plan is not None and list(plan.simulated) == simulated and plan.kernelslist == "kernelslist.reuse.g"
    assert split.kernelslist_of(lines, plan) == (KERNELSLISTS / trace / plan.kernelslist).read_text().splitlines()


def test_launches_are_written_as_runs() -> None:
    assert reuse.ranges([1, 2, 3, 5, 7, 8]) == "1-3, 5, 7-8"
    assert reuse.ranges([4]) == "4"
