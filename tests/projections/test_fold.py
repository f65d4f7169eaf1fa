from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import duckdb
import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cascade_core import events as ev
from cascade_core import sims
from cascade_nats import deflated
from projections import tables
from cascade_core.run import run_state
from projections.fold import Rows, fold
from projections.projector import RowCache, apply, connect
from tests.projections.histories import histories, lifecycle, trace_history


_DATABASES = [connect(":memory:") for _ in range(2)]


def fresh(slot: int) -> duckdb.DuckDBPyConnection:
    """An empty read model; creating one costs more than emptying one, and hypothesis asks often."""
    con = _DATABASES[slot]
    for table in tables.ROW_TYPES:
        con.execute(f"DELETE FROM {tables.STORED_AS.get(table, table)}")
    con.execute("UPDATE checkpoint SET seq = 0")
    return con


def project(items: Sequence[tuple[int, ev.Event]], *, slot: int = 0) -> duckdb.DuckDBPyConnection:
    con = fresh(slot)
    apply(con, items)
    return con


def dump(con: duckdb.DuckDBPyConnection, *, with_checkpoint: bool = True) -> dict[str, list[tuple[object, ...]]]:
    names = [*tables.ROW_TYPES, "checkpoint"] if with_checkpoint else list(tables.ROW_TYPES)
    return {t: sorted(map(_comparable, con.execute(f"SELECT {tables.compared_columns(t)} FROM {t}").fetchall()), key=repr) for t in names}


def _comparable(row: tuple[object, ...]) -> tuple[object, ...]:
    """A row that equals the same row read again: nan is not equal to itself."""
    return tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in row)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), cuts=st.lists(st.integers(min_value=0), max_size=6), data=st.data())
def test_batch_boundaries_do_not_matter(history: list[ev.Event], cuts: list[int], data: st.DataObject) -> None:
    # Batches change neither the tables nor the changes live streams show: a resumed run
    # event stream folds the run's history from the log in batches of its own
    # (cascade_http/run_events.py), so each change, numbered within its event, must be the
    # one the projector published, whether its batch's rows came from the cache or DuckDB.
    items = list(enumerate(history, 1))
    con, cache = fresh(0), RowCache()
    changes = []
    bounds = sorted({0, *[c % (len(items) + 1) for c in cuts], len(items)})
    for start, end in zip(bounds, bounds[1:]):
        if not data.draw(st.booleans(), label="cache kept"):
            cache.clear()
        changes += apply(con, items[start:end], cache=cache).changes
    assert dump(con) == dump(project(items, slot=1))
    assert changes == fold(Rows(), items).changes


@settings(max_examples=100, deadline=None)
@given(history=histories())
def test_a_fold_without_changes_makes_the_same_rows(history: list[ev.Event]) -> None:
    # As a replay folds: the same rows to write, and no change for live streams.
    items = list(enumerate(history, 1))
    shown, replayed = fold(Rows(), items), fold(Rows(), items, changes=False)  # type: ignore[arg-type]
    assert replayed.changes == []
    assert msgspec.structs.replace(replayed, changes=shown.changes) == shown


@settings(max_examples=100, deadline=None)
@given(history=histories(), cut=st.integers(min_value=0))
def test_a_fold_without_changes_leaves_the_rows_it_was_given_as_they_were(history: list[ev.Event], cut: int) -> None:
    # It changes in place only the sims' rows it made itself (`_Batch.advance_sim`): the rows
    # it is given are the projector's cache, which the next batch starts from.
    items = list(enumerate(history, 1))
    cut %= len(items) + 1
    given = fold(Rows(), items[:cut], changes=False).rows
    before = msgspec.json.encode(given)
    replayed, shown = fold(given, items[cut:], changes=False), fold(given, items[cut:])  # type: ignore[arg-type]
    assert msgspec.json.encode(given) == before
    assert replayed.rows == shown.rows


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), data=st.data())
def test_an_event_applied_again_later_changes_nothing(history: list[ev.Event], data: st.DataObject) -> None:
    # JetStream deduplicates only within its window: a retry days later is stored again.
    # But a deleted run's creation: the store appends a creation only to a run's empty
    # subject (`cascade_app/runs.py`), so it never comes again once the run has events.
    deleted = {e.run_id for e in history if isinstance(e, ev.RunDeleted)}
    repeats = data.draw(st.lists(st.sampled_from([e for e in history if not (isinstance(e, ev.RunCreated) and e.run_id in deleted)]), max_size=5))
    items = list(enumerate(history, 1))
    with_repeats = items + list(enumerate(repeats, len(items) + 1))
    assert dump(project(with_repeats), with_checkpoint=False) == dump(project(items, slot=1), with_checkpoint=False)


@settings(max_examples=100, deadline=None)
@given(history=histories())
def test_a_sims_row_is_in_the_state_the_decider_evolves(history: list[ev.Event]) -> None:
    rows = fold(Rows(), enumerate(history, 1)).rows.sims  # type: ignore[arg-type]
    for row in rows.values():
        sim = sims.SimLife(run_id=row.run_id, sim_id=row.id)
        for e in history:
            if isinstance(e, ev.SimEvent) and e.sim_id == row.id or isinstance(e, ev.RunCancelRequested) and e.run_id == row.run_id:
                sim = sims.evolve(sim, e)  # type: ignore[arg-type]
        assert (row.state, row.attempt, row.runner_id, row.host) == (sim.state, sim.attempt, sim.runner_id, sim.host)


def test_run_state_rules() -> None:
    assert run_state({"pending": 1, "succeeded": 3}) == "active"
    assert run_state({"succeeded": 2, "failed": 1, "cancelled": 1}) == "cancelled"
    assert run_state({"succeeded": 2, "failed": 1}) == "failed"
    assert run_state({"succeeded": 2}) == "succeeded"


def test_real_timing_is_attached_only_in_place_of_the_timing_it_names() -> None:
    def trace(*steps: str) -> list[ev.Event]:
        return trace_history("tr", ["started", "files", "kernels", "ready", *steps])

    def in_use(history: list[ev.Event]) -> list[tuple[object, ...]]:
        con = project(list(enumerate(history, 1)))
        return con.execute("SELECT real_timing, has_real_timing FROM traces").fetchall()

    assert in_use(trace()) == [(None, False)]
    assert in_use(trace("rows t1")) == [(None, False)]  # listed, never attached
    assert in_use(trace("rows t1", "attach t1 -")) == [("t1", True)]
    assert in_use(trace("rows t1", "attach t1 -", "rows t2", "attach t2 t1")) == [("t2", True)]
    assert in_use(trace("rows t1", "rows t2", "attach t2 -", "attach t1 -")) == [("t2", True)]  # the later one lost its race
    assert in_use(trace("rows t1", "deleted", "attach t1 -")) == [(None, False)]


def test_a_split_sims_chunk_retried_after_a_lost_runner_keeps_each_kernel_once() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    split = ev.Split(kernels_per_chunk=1, warmup=0)
    created = ev.RunCreated(
        id="r", at=at, run_id="run-1", trace_id="t", entries=[ev.ConfigCount(gpu_config="C", count=1, split=split)],
        sims=[ev.SimSpec(sim_id="sim-1", gpu_config="C", replica=0, split=split)], kernels_total=2,
    )
    ids = iter(range(10**6))

    def common(chunk: int, attempt: int) -> dict[str, Any]:
        return {"id": f"e{next(ids)}", "at": at, "run_id": "run-1", "sim_id": "sim-1", "chunk": chunk, "attempt": attempt}

    def kernel(chunk: int, attempt: int) -> ev.KernelFinished:
        return ev.KernelFinished(
            **common(chunk, attempt), kernel_index=chunk, uid=chunk + 1, name="k", gpu_sim_cycle=100 + chunk, gpu_sim_insn=10,
            gpu_ipc=0.1, sim_time_ns=1.0,
        )

    def beat(chunk: int, attempt: int, cycles: float) -> ev.SimHeartbeat:
        return ev.SimHeartbeat(
            **common(chunk, attempt), kernels_done=1, current_kernel="k", latest=ev.SimMetrics(gpu_tot_sim_cycle=cycles, gpu_tot_sim_insn=10.0),
            first_line_seq=((chunk + 1) << 40) + ((attempt - 1) << 32) + 1, log=f"chunk {chunk} attempt {attempt}",
        )

    def claim(chunk: int, attempt: int) -> ev.SimClaimed:
        return ev.SimClaimed(**common(chunk, attempt), runner_id=f"r{attempt}", host="h")

    def finished(chunk: int, attempt: int) -> ev.SimFinished:
        return ev.SimFinished(**common(chunk, attempt), outcome="succeeded", exit_code=0)

    history: list[ev.Event] = [
        created, claim(0, 1), kernel(0, 1), beat(0, 1, 100), claim(1, 1),  # chunk 0's runner is lost here
        claim(0, 2), kernel(0, 2), beat(0, 2, 100), finished(0, 2), kernel(1, 1), beat(1, 1, 101), finished(1, 1),
        kernel(0, 1), finished(0, 1),  # the lost runner, late: its attempt is no longer the chunk's
    ]
    con = project(list(enumerate(history, 1)))
    assert con.execute("SELECT uid, gpu_sim_cycle, attempt FROM kernels ORDER BY uid").fetchall() == [(1, 100, 1), (2, 101, 1)]
    state, attempt, done, cycles, split = con.execute(
        "SELECT state, attempt, kernels_done, gpu_tot_sim_cycle, split FROM sims"
    ).fetchone()  # type: ignore[misc]
    assert (state, attempt, done, cycles) == ("succeeded", 1, 2, 201.0)
    assert [(c["state"], c["attempt"]) for c in split["chunks"]] == [("succeeded", 2), ("succeeded", 1)]
    beats = con.execute("SELECT seq FROM sim_log ORDER BY first_line_seq").fetchall()
    log = [deflated.log_text(history[seq - 1]) for (seq,) in beats]  # type: ignore[arg-type]  # each row's seq is a heartbeat's
    assert log == ["chunk 0 attempt 1", "chunk 0 attempt 2", "chunk 1 attempt 1"]
    assert con.execute("SELECT log_tail FROM sims").fetchone() == ("".join(f"{line}\n" for line in log),)  # type: ignore[comparison-overlap]
    # Every event applied again, later (JetStream deduplicates only within its window): nothing changes.
    items = list(enumerate(history, 1))
    again = project(items + list(enumerate(history, len(items) + 1)), slot=1)
    assert dump(again, with_checkpoint=False) == dump(con, with_checkpoint=False)


def test_a_deleted_run_leaves_no_row_behind_wherever_batches_begin() -> None:
    # Its sims' late facts (a runner's last heartbeat) find no sim and add nothing.
    life = lifecycle()
    at = life[-1].at
    late = next(e for e in life if isinstance(e, ev.SimHeartbeat) and e.sim_id == "sim-a0")
    history: list[ev.Event] = [
        *life,
        ev.CampaignCreated(id="c1", at=at, campaign_id="camp-1", name="sweep"),
        ev.CampaignRunsAdded(id="c2", at=at, campaign_id="camp-1", name="sweep", runs=[ev.CampaignRun(run_id="run-a", trace_id="demo")]),
        ev.RunDeleted(id="d1", at=at, run_id="run-a"),
        msgspec.structs.replace(late, id="late", first_line_seq=10**6),
    ]
    items = list(enumerate(history, 1))
    kept = project(items[:-2])
    assert [t for t in RUNS_TABLES if not _count(kept, t)] == []  # before the delete, the run has rows in each
    expected = dump(project(items), with_checkpoint=False)
    assert {t: expected[t] for t in RUNS_TABLES} == {t: [] for t in RUNS_TABLES}
    assert len(expected["traces"]) == 2 and len(expected["campaigns"]) == 1  # what is not the run's stays
    for cut in range(len(items) + 1):
        con, cache = fresh(1), RowCache()
        for batch in (items[:cut], items[cut:]):
            if batch:
                apply(con, batch, cache=cache)
        assert dump(con, with_checkpoint=False) == expected, cut


RUNS_TABLES = ("runs", "sims", "kernels", "kernel_stats", "sim_log", "sim_files", "campaign_runs")  # every table of runs


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    (n,) = con.execute(f"SELECT count(*) FROM {table}").fetchone()  # type: ignore[misc]
    return int(n)
