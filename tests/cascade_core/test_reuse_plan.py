"""Reuse of repeated kernels, pure: each kernel file's first two launches are simulated and
every later one takes the second's result; a launch is told by its file's stored digest; the
kernelslist simulated is the one the real simulator was recorded on."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cascade_core import reuse, split
from cascade_core.events import Split

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
    assert all(plan.source(uid) < uid for uid in given_after)
    assert plan.sources_reused() == {plan.source(uid) for uid in given_after}
    # Its kernelslist: the simulated launches, each with the memcpy before it.
    lines = kernelslist(files)
    assert split.kernelslist_of(lines, plan) == [line for uid in plan.simulated for line in lines[2 * uid - 2 : 2 * uid]]


@given(st.lists(st.integers(1, 3), min_size=1, max_size=40), st.integers(1, 12), st.integers(0, 3))
def test_in_a_chunk_its_warm_up_is_simulated_and_its_own_launches_reuse_each_others(files: list[int], k: int, w: int) -> None:
    lines = kernelslist(files)
    for chunk in split.plan(len(files), Split(k, w)):
        plan = reuse.plan(lines, {}, chunk)
        own = files[chunk.first - 1 : chunk.last]
        alone = reuse.plan(kernelslist(own), {})  # the chunk's own launches as a trace of their own
        if alone is None:
            assert plan is None
            continue
        assert plan is not None and plan.kernelslist == f"kernelslist.{chunk.name}.reuse.g"
        warm_up = list(range(chunk.first - chunk.warmup, chunk.first))
        assert list(plan.simulated) == warm_up + [uid + chunk.first - 1 for uid in alone.simulated]
        assert [plan.source(uid) for uid in range(chunk.first, chunk.last + 1)] == [s + chunk.first - 1 for s in alone.sources]
        # The simulator's first `warmup` results are the warm-up, which the chunk discards.
        assert [plan.global_uid(u) for u in range(1, chunk.warmup + 1)] == warm_up
        assert not plan.simulates(chunk.first - chunk.warmup - 1) and not plan.simulates(chunk.last + 1)


def test_launches_of_different_files_stored_with_the_same_digest_are_one_kernel() -> None:
    lines = ["kernel-1.traceg", "kernel-2.traceg", "kernel-3.traceg", "kernel-4.traceg"]
    plan = reuse.plan(lines, {"kernel-1.traceg": "SHA-256=a", "kernel-2.traceg": "SHA-256=a", "kernel-3.traceg": "SHA-256=a"})
    assert plan is not None and plan.sources == (1, 2, 2, 4)
    assert reuse.plan(lines, {}) is None  # by path alone, no file repeats


@pytest.mark.parametrize(
    ("trace", "chunking", "simulated"),
    [
        ("matrixmul-x40", None, [[1, 2]]),
        ("combo-repeat", None, [[1, 2, 3, 5]]),
        ("matrixmul-x40", Split(20, 2), [[1, 2], [19, 20, 21, 22]]),
        ("combo-repeat", Split(5, 2), [[1, 2, 3, 5], [4, 5, 6, 7, 8]]),
    ],
)
def test_the_kernelslist_simulated_is_the_one_the_real_simulator_was_recorded_on(
    trace: str, chunking: Split | None, simulated: list[list[int]]
) -> None:
    lines = (KERNELSLISTS / trace / "kernelslist.g").read_text().splitlines()
    chunks = [None] if chunking is None else split.plan(sum(map(split.is_kernel, lines)), chunking)
    for chunk, uids in zip(chunks, simulated, strict=True):
        plan = reuse.plan(lines, {}, chunk)
        assert plan is not None and list(plan.simulated) == uids
        assert split.kernelslist_of(lines, plan) == (KERNELSLISTS / trace / plan.kernelslist).read_text().splitlines()


def test_launches_are_written_as_runs() -> None:
    assert reuse.ranges([1, 2, 3, 5, 7, 8]) == "1-3, 5, 7-8"
    assert reuse.ranges([4]) == "4"
