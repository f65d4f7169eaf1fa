"""A run's comparison kept up to date from the kernels added since equals one computed whole."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cascade_core import events as ev
from projections.projector import apply, connect
from projections.queries import runs as q

T0 = datetime(2026, 11, 8, tzinfo=UTC)


def test_incremental_comparison_equals_a_whole_one() -> None:
    con = connect(":memory:")
    entries = [ev.ConfigCount(gpu_config="A", count=2), ev.ConfigCount(gpu_config="B", count=1)]
    sims = [
        ev.SimSpec(sim_id="a0", gpu_config="A", replica=0),
        ev.SimSpec(sim_id="a1", gpu_config="A", replica=1),
        ev.SimSpec(sim_id="b0", gpu_config="B", replica=0),
    ]
    n = iter(range(1, 10**6))
    at = lambda: T0 + timedelta(seconds=next(n))  # noqa: E731
    events: list[ev.Event] = [
        ev.TraceUploadStarted(id="t", at=at(), trace_id="tr", content_type="x"),
        ev.RunCreated(id="r", at=at(), run_id="run", trace_id="tr", entries=entries, sims=sims, kernels_total=9),
        *[ev.SimClaimed(id=f"c{s.sim_id}", at=at(), run_id="run", sim_id=s.sim_id, attempt=1, runner_id="r", host="h") for s in sims],
    ]
    seqs = iter(range(1, 10**6))

    def feed(batch: list[ev.Event]) -> None:
        apply(con, [(next(seqs), e) for e in batch])

    feed(events)
    cache: dict[object, object] = {}
    run = q.run_summary(con.cursor(), "run")
    assert run is not None
    for step in range(6):
        batch = []
        for i, spec in enumerate(sims):
            if step < 3 or i != 2:  # b0 stops early; the A replicas go on
                batch.append(
                    ev.KernelFinished(
                        id=f"k{spec.sim_id}{step}", at=at(), run_id="run", sim_id=spec.sim_id, attempt=1, kernel_index=step,
                        uid=step + 1, name=f"kern{step}", gpu_sim_cycle=100 + step * 10 + i, gpu_sim_insn=1, gpu_ipc=1.0,
                        sim_time_ns=float(100 + step * 10 + i),
                    )
                )
        feed(batch)
        cursor = con.cursor()
        assert q.run_comparison(cursor, run, cache) == q.comparison(cursor, run, False)  # type: ignore[arg-type]
    rows = q.comparison(con.cursor(), run, False).rows
    assert [r.sim_ns for r in rows[-1:]] == [{"A": 150.5, "B": None}]
