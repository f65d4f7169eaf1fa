"""Reuse of repeated kernels, pure: each kernel's first two launches are simulated and every
later one takes the second's result; a launch is told by its file's launch digest (its
content but its `-kernel id` line); the kernelslist simulated is the one the real simulator
was recorded on."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cascade_core import reuse, split
from cascade_core.events import Split
from tests.support import TRACES

KERNELSLISTS = Path(__file__).parents[1] / "fake_accelsim" / "recorded" / "kernelslists"
# A real kernel file (the tracer's header, then its instructions), launch 1 of its trace.
MATMUL = (TRACES / "matrixmul-32-32" / "kernel-1.traceg").read_bytes()


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


def test_launches_of_different_files_with_the_same_launch_digest_are_one_kernel() -> None:
    lines = ["kernel-1.traceg", "kernel-2.traceg", "kernel-3.traceg", "kernel-4.traceg"]
    plan = reuse.plan(lines, {"kernel-1.traceg": "a", "kernel-2.traceg": "a", "kernel-3.traceg": "a"})
    assert plan is not None and plan.sources == (1, 2, 2, 4)
    assert reuse.plan(lines, {}) is None  # by path alone, no file repeats


def test_the_launches_a_plan_looks_at_are_a_chunks_warm_up_and_its_own() -> None:
    lines = kernelslist([1, 2, 3, 1, 2, 3])
    assert list(reuse.launches(lines)) == [(uid, f"kernel-{f}.traceg") for uid, f in enumerate([1, 2, 3, 1, 2, 3], 1)]
    chunk = split.plan(6, Split(2, 1))[1]  # launches 3-4, warmed up by 2
    assert list(reuse.launches(lines, chunk)) == [(2, "kernel-2.traceg"), (3, "kernel-3.traceg"), (4, "kernel-1.traceg")]


def digest(content: bytes) -> str:
    return reuse.launch_digest([content])


@given(st.lists(st.integers(0, len(MATMUL)), max_size=8))
def test_a_launch_digest_is_its_files_content_but_its_kernel_id_line_however_it_is_read(cuts: list[int]) -> None:
    relabelled = MATMUL.replace(b"-kernel id = 1\n", b"-kernel id = 7\n", 1)
    ends = [0, *sorted(cuts), len(relabelled)]
    pieces = [relabelled[a:b] for a, b in zip(ends, ends[1:])]
    assert reuse.launch_digest(pieces) == digest(MATMUL) == hashlib.sha256(MATMUL.replace(b"-kernel id = 1\n", b"", 1)).hexdigest()


@pytest.mark.parametrize("line", [line for line in MATMUL.split(b"\n\n")[0].split(b"\n") if not line.startswith(b"-kernel id")])
def test_a_launch_digest_tells_apart_files_that_differ_in_any_other_header_line(line: bytes) -> None:
    # The simulator reads each of them (name, grid, block, shmem, nregs, stream, memory bases, ...).
    assert digest(MATMUL.replace(line + b"\n", line + b"0\n", 1)) != digest(MATMUL)


@pytest.mark.parametrize(
    ("text", "other"),
    [
        (b"0x7fb02d700000", b"0x7fb02d900000"),  # an instruction's address
        (b"#BEGIN_TB\n-kernel id = 1\n", b"#BEGIN_TB\n-kernel id = 2\n"),  # a line after the header that looks like one of it
        (b"-kernel id = 1\n", b"-kernel id = 1 \n"),  # a kernel id not as the tracer writes it: only its numbering is ignored
    ],
)
def test_a_launch_digest_tells_apart_files_that_differ_in_anything_else(text: bytes, other: bytes) -> None:
    matmul = MATMUL.replace(b"#BEGIN_TB\n", text, 1) if text.startswith(b"#BEGIN_TB") else MATMUL
    assert text in matmul
    assert digest(matmul.replace(text, other, 1)) != digest(matmul)


def test_a_launch_digest_of_a_file_that_is_all_header_leaves_out_its_kernel_id_line_too() -> None:
    header = b"-kernel name = k\n-grid dim = (1,1,1)\n"
    assert digest(header + b"-kernel id = 3") == digest(header + b"-kernel id = 4\n") == hashlib.sha256(header).hexdigest()


@pytest.mark.parametrize("piece", [1000, 4096, reuse.LONGEST_HEADER_LINE, reuse.LONGEST_HEADER_LINE + 20, 1 << 20])
def test_a_header_line_longer_than_any_tracers_ends_the_header_however_the_file_is_read(piece: int) -> None:
    long = b"-kernel name = " + b"k" * reuse.LONGEST_HEADER_LINE + b"\n-kernel id = 3\n"
    content = long + MATMUL
    assert reuse.launch_digest(content[i : i + piece] for i in range(0, len(content), piece)) == hashlib.sha256(content).hexdigest()
