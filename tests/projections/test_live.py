"""Live changes: a subscriber that stops taking them is let go, not buffered for forever."""

from __future__ import annotations

import pytest

from projections import live as live_module
from projections.fold import Change
from projections.live import LAGGED, Live
from projections.rows import KernelRow

pytestmark = pytest.mark.anyio


def kernels(run_id: str, count: int, stats_bytes: int) -> list[Change]:
    stats = '{"x": "' + "s" * stats_bytes + '"}'
    # Sequences as JetStream numbers them, from 1: none is before every read model's start.
    return [Change(seq=i, k=0, run_id=run_id, kind="kernel", row=kernel(i, stats)) for i in range(1, count + 1)]


def kernel(seq: int, stats: str) -> KernelRow:
    return KernelRow(
        sim_id="sim", attempt=1, kernel_index=seq, uid=seq, name="k", gpu_sim_cycle=1, gpu_sim_insn=1, gpu_ipc=1.0, sim_time_ns=1.0,
        stats=stats, seq=seq,
    )


async def test_a_subscriber_that_stops_taking_is_let_go_and_one_that_takes_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_module, "MAX_BEHIND_BYTES", 100_000)
    live = Live()
    with live.subscribe("run-a") as stalled, live.subscribe("run-a") as reading, live.subscribe("run-b") as other:
        live.publish(kernels("run-a", 8, 50_000))  # over the bound alone: a burst, queued whole
        assert len(await reading.get()) == 8
        assert stalled.behind > 400_000
        for _ in range(5):
            live.publish(kernels("run-a", 1, 40_000))
            assert len(await reading.get()) == 1, "the one that reads gets every batch"
        assert stalled.behind == 0 and await stalled.get() is LAGGED, "what it had waiting is dropped"
        assert stalled._queue.empty(), "let go: nothing more for it"
        assert other.behind == 0, "another run's subscriber is not concerned"


def test_a_change_weighs_about_its_texts() -> None:
    assert 2 * 1000 < live_module.weight(kernels("r", 2, 1000)) < 2 * 2000
    assert live_module.weight([]) == 0
