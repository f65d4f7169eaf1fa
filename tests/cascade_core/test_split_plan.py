"""Cutting a sim into chunks, pure: the plan covers every launch once, a chunk's kernelslist is
the lines the real simulator was measured on (the research's own lists, which it ran), and
a chunk's local uids map onto the sim's launches."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cascade_core import split
from cascade_core.events import Split

RECORDED = Path(__file__).parents[1] / "fake_accelsim" / "recorded"
KERNELSLISTS = RECORDED / "kernelslists"  # what the recorded chunks ran


@given(st.integers(1, 500), st.integers(1, 60), st.integers(0, 8))
def test_the_chunks_measure_every_launch_once_in_order(kernels: int, k: int, w: int) -> None:
    chunks = split.plan(kernels, Split(k, w))
    assert [uid for c in chunks for uid in range(c.first, c.last + 1)] == list(range(1, kernels + 1))
    assert all(c.count == len(chunks) and c.index == i for i, c in enumerate(chunks))
    assert all(c.warmup == min(w, c.first - 1) and c.last - c.first < k for c in chunks)
    # The simulator's uids 1.. in a chunk's run: its warm-up first, then its own launches.
    for c in chunks:
        local = range(1, c.warmup + c.last - c.first + 2)
        assert [c.global_uid(u) for u in local if c.measures(u)] == list(range(c.first, c.last + 1))
        assert [c.global_uid(u) for u in local if not c.measures(u)] == list(range(c.first - c.warmup, c.first))


def kernelslist(launches: list[int]) -> list[str]:
    """A kernelslist: before each launch, as many memcpys as `launches` says; then a stray line."""
    lines = []
    for n, memcpys in enumerate(launches, 1):
        lines += [f"MemcpyHtoD,0x{n:04x}{m:02x},4096" for m in range(memcpys)] + [f"kernel-{n}.traceg"]
    return [*lines, "# a line that is neither"]


@given(st.lists(st.integers(0, 3), min_size=1, max_size=40), st.integers(1, 12), st.integers(0, 4))
def test_a_chunks_kernelslist_holds_its_launches_after_its_warm_up_with_the_memcpys_before_each(
    launches: list[int], k: int, w: int
) -> None:
    lines = kernelslist(launches)
    for c in split.plan(len(launches), Split(k, w)):
        before_the_stray_line = kernelslist(launches[: c.last])[:-1]
        expected = [line for line in before_the_stray_line if _launch(line) >= c.first - c.warmup]
        assert split.kernelslist_of(lines, c) == expected


def _launch(line: str) -> int:
    """Which launch a line of `kernelslist` belongs to (a memcpy: the launch it comes before)."""
    if line.startswith("kernel-"):
        return int(line.removeprefix("kernel-").split(".")[0])
    return int(line.split(",")[1][2:6], 16)


@pytest.mark.parametrize(("trace", "kernels", "k"), [("combo-vec-mm-xz", 3, 1), ("matrixmul-x40", 40, 10)])
def test_the_chunks_are_the_kernelslists_the_real_simulator_was_measured_on(trace: str, kernels: int, k: int) -> None:
    lines = (KERNELSLISTS / trace / "kernelslist.g").read_text().splitlines()
    for w in (0, 1, 2):
        for c in split.plan(kernels, Split(k, w)):
            recorded = KERNELSLISTS / trace / c.kernelslist
            if recorded.is_file():
                assert split.kernelslist_of(lines, c) == recorded.read_text().splitlines(), c.name
            else:
                assert (trace, w) == ("matrixmul-x40", 2), c.name  # the only ones not recorded


def test_every_chunk_the_fake_replays_was_recorded_from_the_real_simulator() -> None:
    names = {p.name for p in RECORDED.glob("*.log.gz")}
    for w in (0, 1, 2):
        for c in split.plan(3, Split(1, w)):
            assert f"combo-vec-mm-xz__SM61_TITANX__{c.name}.log.gz" in names
    for w in (0, 1):
        for c in split.plan(40, Split(10, w)):
            assert f"matrixmul-x40__SM61_TITANX__{c.name}.log.gz" in names


def test_auto_spreads_the_launches_over_the_free_slots_with_the_measured_warm_up() -> None:
    assert split.auto(40, 2) == Split(20, 2)
    assert split.auto(40, 8) == Split(10, 2)  # at least 5 warm-ups' worth a chunk
    assert split.auto(1000, 0) is None  # no free slot: one chunk, the sim whole
    assert split.auto(3, 4) is None  # too short for two chunks of 10
    assert split.auto(10_000, 3) == Split(3334, 2)


def test_a_split_sims_state_follows_from_its_chunks() -> None:
    assert split.sim_state(["pending", "pending"]) == "pending"
    assert split.sim_state(["launching", "pending"]) == "launching"
    assert split.sim_state(["succeeded", "pending"]) == "running"
    assert split.sim_state(["succeeded", "succeeded"]) == "succeeded"
    assert split.sim_state(["succeeded", "cancelled"]) == "cancelled"
    assert split.sim_state(["cancelled", "failed"]) == "failed"


@given(st.integers(1, 200), st.integers(1, 40), st.integers(0, 8), st.data())
def test_a_resume_carries_on_at_the_first_unrecorded_launch_of_its_chunk(kernels: int, k: int, w: int, data: st.DataObject) -> None:
    chunks = [split.whole(kernels), *split.plan(kernels, Split(k, w))]
    chunk = data.draw(st.sampled_from(chunks))
    size = chunk.last - chunk.first + 1
    done = data.draw(st.integers(-1, size + 1))
    resume = split.resume_at(chunk, done)
    if done <= 0 or done >= size:  # nothing recorded, or all: its end was not, and it runs again
        assert resume is None
        return
    assert resume is not None and resume.first == chunk.first + done and resume.warmup == min(split.DEFAULT_WARMUP, resume.first - 1)
    resumed = split.resumed(chunk, resume)
    assert (resumed.index, resumed.count, resumed.last) == (chunk.index, chunk.count, chunk.last)
    # The simulator's uids of the resumed run: its warm-up, then the launches left, as global launches.
    local = range(1, resumed.warmup + resumed.last - resumed.first + 2)
    assert [resumed.global_uid(u) for u in local if resumed.measures(u)] == list(range(chunk.first + done, chunk.last + 1))
    assert resumed.kernelslist == f"kernelslist.{'w%d_' % resume.warmup if resume.warmup else ''}k{resume.first}-{chunk.last}.g"
