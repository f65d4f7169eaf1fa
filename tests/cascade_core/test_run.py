"""A run's domain state: its sims counted by state as they move, its state following from
the counts, its entries as asked (`cascade_core/run.py`)."""

from __future__ import annotations

from datetime import UTC, datetime

from cascade_core import events as ev
from cascade_core.run import SimMoved, evolve, new

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
ENTRY = ev.ConfigCount(gpu_config="SM7_QV100", count=2)


def sims(*ids: str) -> list[ev.SimSpec]:
    return [ev.SimSpec(sim_id=i, gpu_config="SM7_QV100", replica=n) for n, i in enumerate(ids)]


def test_a_run_counts_its_sims_by_state_and_ends_with_them() -> None:
    run = new(ev.RunCreated(id="c", at=T0, run_id="run-1", trace_id="tr", entries=[ENTRY], sims=sims("a", "b"), kernels_total=3))
    assert (run.state, run.sim_counts) == ("active", {"pending": 2})
    for was, now in [("pending", "launching"), ("launching", "running"), ("pending", "cancelled"), ("running", "succeeded")]:
        run = evolve(run, SimMoved(was, now))
    assert (run.state, run.sim_counts) == ("cancelled", {"succeeded": 1, "cancelled": 1})
    assert evolve(run, SimMoved("failed", "failed")) is run


def test_a_top_up_makes_a_finished_run_active_again_with_its_entries() -> None:
    run = new(ev.RunCreated(id="c", at=T0, run_id="run-1", trace_id="tr", entries=[ENTRY], sims=sims("a"), kernels_total=3))
    run = evolve(run, SimMoved("pending", "succeeded"))
    assert run.state == "succeeded"
    more = ev.ConfigCount(gpu_config="SM61_TITANX", count=1)
    added = ev.RunEntriesAdded(id="t", at=T0, run_id="run-1", trace_id="tr", kernels_total=3, entries=[more], sims=sims("b"))
    run = evolve(run, added)
    assert (run.state, run.sim_counts, run.entries) == ("active", {"pending": 1, "succeeded": 1}, [ENTRY, more])


def test_a_run_counts_its_sims_cut_short_apart_from_their_state() -> None:
    run = new(ev.RunCreated(id="c", at=T0, run_id="run-1", trace_id="tr", entries=[ENTRY], sims=sims("a", "b"), kernels_total=3))
    run = evolve(evolve(run, SimMoved("pending", "succeeded", cut_short=True)), SimMoved("pending", "succeeded"))
    assert (run.state, run.sim_counts, run.cut_short) == ("succeeded", {"succeeded": 2}, 1)
