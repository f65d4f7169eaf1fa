"""The reads that scan a whole run's `kernel_stats` (the export, `replay --verify`, a stat's
values by name) answer within a memory budget small beside the run: serve's default budget
against an LLM's tens of thousands of kernels, played here by a few MiB against a run of two
sims of real stats maps (3,815 values a kernel)."""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow.parquet
import pytest

from cascade_core import events as ev
from cascade_nats.store import EventStore
from projections import export
from projections.projector import Memory, connect
from projections.queries import runs as q
from projections.queries import stats
from projections.replay import replay, verify
from tests.cascade_http import runs_world as w
from tests.cascade_http.stats_world import real_maps

pytestmark = pytest.mark.anyio

RUN, TRACE, KERNELS = "run-bounded", "bounded", 30
SIMS = [("sim-bounded-0", "SM61_TITANX", 0), ("sim-bounded-1", "SM61_TITANX", 1)]
# What the reads ran out of on this run before they went part by part (DuckDB's
# OutOfMemoryException), and what the read model is given here.
BUDGET = Memory(24 << 20)


def events() -> list[ev.Event]:
    """The trace and the run, each sim's kernels the log's three blocks over and over."""
    at = datetime(2026, 12, 4, 9, tzinfo=UTC)
    out: list[ev.Event] = [
        *w.trace_events(TRACE, arch="sm_61", kernel_count=KERNELS, step_timeline=False),
        w.run_created(RUN, SIMS, trace_id=TRACE, kernels_total=KERNELS),
    ]
    maps = real_maps("SM61_TITANX")
    for sim_id, _, replica in SIMS:
        sim_maps = [{**maps[i % 3], "gpu_sim_cycle": maps[i % 3]["gpu_sim_cycle"] + replica} for i in range(KERNELS)]
        out += w.finished_sim(RUN, sim_id, [(m["kernel_name"], int(m["gpu_sim_cycle"])) for m in sim_maps], 1417.0, at, stats=sim_maps)
    return out


@pytest.fixture
async def read_model(store: EventStore, tmp_path: Path) -> Path:
    await store.append_facts(events(), timeout=60)
    (tmp_path / "out").mkdir()
    db = tmp_path / "out" / "readmodel.duckdb"
    await replay(store, db)
    return db


@contextlib.contextmanager
def budgeted(read_model: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The read model within BUDGET (a process opens a database once: this one closed first)."""
    con = connect(read_model, BUDGET)
    try:
        yield con
    finally:
        con.close()


async def test_the_export_of_a_run_many_times_the_budget_holds_every_value_in_order(read_model: Path) -> None:
    with connect(read_model) as whole:  # the default budget: the run is small beside it
        expected = whole.sql(
            """SELECT k.sim_id, k.kernel_index, n.name AS stat, v.value, v.text, v.printed_total
            FROM kernel_stats_placed v JOIN kernels k ON k.seq = v.seq JOIN stat_names n ON n.id = v.stat
            ORDER BY k.sim_id, k.kernel_index, v.place"""  # a kernel's values in its map's order
        ).to_arrow_table()
    # Three times: a scan's two threads gave a kernel's rows across two row groups in either order.
    for _ in range(3):
        with budgeted(read_model) as con:
            archive = zipfile.ZipFile(io.BytesIO(b"".join(export.zip_pieces(con.cursor(), RUN, datetime(2026, 12, 4, tzinfo=UTC)))))
        exported = pyarrow.parquet.read_table(archive.open("kernel_stats.parquet"))
        assert exported.num_rows == expected.num_rows > len(SIMS) * KERNELS * 3000
        assert exported.to_pandas().equals(expected.to_pandas())  # NaN as NaN
        assert pyarrow.parquet.read_table(archive.open("kernels.parquet")).num_rows == len(SIMS) * KERNELS


async def test_verify_compares_a_run_many_times_the_budget_and_counts_each_row_that_differs(store: EventStore, read_model: Path) -> None:
    with budgeted(read_model) as con:
        verified = await verify(store, con.cursor())
        assert verified.equal, verified
        number = "(SELECT min(stat) FROM kernel_stats WHERE value IS NOT NULL)"  # a stat with a number, not a text
        con.execute(f"UPDATE kernel_stats_hot SET value = value + 1 WHERE seq = (SELECT max(seq) FROM kernel_stats_hot) AND stat = {number}")
        con.execute("DELETE FROM kernel_stats_hot WHERE seq = (SELECT min(seq) FROM kernel_stats_hot) AND stat = 2")
        differs = await verify(store, con.cursor())
    checks = {c.table: (c.rows, c.replayed_rows, c.only_in_live, c.only_in_replay) for c in differs.tables}
    rows = checks["kernel_stats"][1]
    assert not differs.equal
    assert checks["kernel_stats"] == (rows - 1, rows, 1, 2)
    assert all(check[2:] == (0, 0) for table, check in checks.items() if table != "kernel_stats")


async def test_a_stat_read_a_part_of_its_kernels_at_a_time_gives_the_answer_read_at_once(read_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A median's state cannot spill: at 4 x 10k kernels, one query of the 50,000 rows an
    # answer holds ran out of serve's 64 MiB (bench/README.md). Parts of two kernels here.
    name = "L2_cache_bank[*].Miss_rate"
    with connect(read_model) as con:
        run = q.run_summary(con, RUN)
        assert run is not None
        whole = stats.stat_values(con, run, name)
        monkeypatch.setattr(stats, "GROUPS_AT_ONCE", 2 * len(whole.stats))
        assert stats.stat_values(con, run, name) == whole
        monkeypatch.setattr(stats, "VALUES_LIMIT", 101)  # full within a part, past a part's end
        cut = stats.stat_values(con, run, name)
    assert cut.truncated and cut.rows == whole.rows[:101] and cut.stats == whole.stats


async def test_a_stat_per_unit_over_a_run_many_times_the_budget(read_model: Path) -> None:
    name = "L2_cache_bank[*].Miss_rate"
    with connect(read_model) as whole:
        run = q.run_summary(whole, RUN)
        assert run is not None
        expected = stats.stat_values(whole, run, name)
    with budgeted(read_model) as con:
        assert stats.stat_values(con, run, name) == expected
    assert len(expected.rows) == KERNELS * len(expected.stats) > 0


LONG_RUN, LONG_KERNELS = "run-long", 3000
# Of that run, what a stat's values read: they took more than BUDGET on it while each part
# held a window over every row up to its last kernel, as they did at 4 x 10k kernels.
LONG_BUDGET = Memory(16 << 20)


async def test_a_stat_per_unit_over_a_long_run_takes_no_more_memory_than_over_a_short_one(store: EventStore, tmp_path: Path) -> None:
    name = "L2_cache_bank[*].Miss_rate"
    at = datetime(2026, 12, 4, 9, tzinfo=UTC)
    # Only the L2 banks' stats of each map: many kernels, few rows.
    maps = [{n: v for n, v in m.items() if n.startswith("L2_cache_bank") or n in ("kernel_name", "gpu_sim_cycle")} for m in real_maps("SM61_TITANX")]
    sims = [("sim-long-0", "SM61_TITANX", 0), ("sim-long-1", "SM61_TITANX", 1)]
    events = [*w.trace_events("long", arch="sm_61", kernel_count=LONG_KERNELS, step_timeline=False), w.run_created(LONG_RUN, sims, trace_id="long", kernels_total=LONG_KERNELS)]
    for sim_id, _, replica in sims:
        sim_maps = [{**maps[i % 3], "gpu_sim_cycle": maps[i % 3]["gpu_sim_cycle"] + replica + i} for i in range(LONG_KERNELS)]
        events += w.finished_sim(LONG_RUN, sim_id, [(m["kernel_name"], int(m["gpu_sim_cycle"])) for m in sim_maps], 1417.0, at, stats=sim_maps)
    await store.append_facts(events, timeout=120)
    db = tmp_path / "readmodel.duckdb"
    await replay(store, db)
    with connect(db) as whole:
        run = q.run_summary(whole, LONG_RUN)
        assert run is not None
        expected = stats.stat_values(whole, run, name)
    with connect(db, LONG_BUDGET) as con:
        assert stats.stat_values(con, run, name) == expected
    assert expected.truncated and len(expected.rows) == stats.VALUES_LIMIT
    assert len(expected.stats) == sum(n.startswith("L2_cache_bank") and n.endswith(".Miss_rate") for n in maps[0])
