"""`kernel_stats` kept as Parquet parts (`projections/stats_parts.py`) reads as the one table it
was: every row, each kernel's in its map's order, through the view, a map read back, a copy's
SQL and verify; and a run deleted or an attempt replaced takes its rows out of the parts too.
A read model in a budget of a few MiB makes parts of a few dozen of these kernels."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import msgspec
import pyarrow as pa
import pytest

from cascade_core import events as ev
from cascade_nats import subjects
from cascade_nats.store import EventStore
from projections import rebuild, stats_parts
from projections.database import open_database
from projections.projector import DEFAULT_MEMORY, Memory, RowCache, apply_frames, connect
from projections.queries import runs as q
from projections.queries import stats, stats_maps
from projections.rebuild import ReadModel
from projections.replay import move_onto, replay, verify
from tests.cascade_http import runs_world as w
from tests.cascade_http.stats_world import real_maps
from tests.projections.test_bounded_reads import events

pytestmark = pytest.mark.anyio

SMALL = Memory(16 << 20)  # parts of 524,288 rows: 137 kernels of these maps
LOST = 120  # kernels of the other run's first attempt
OTHER_RUN, OTHER_SIM = "run-other", "sim-other-0"


def other_run() -> list[ev.Event]:
    """A second run of the same trace, whose one sim's first attempt is lost after LOST
    kernels and whose second finishes 5."""
    maps = real_maps("SM61_TITANX")
    at = datetime(2026, 12, 4, 10, tzinfo=UTC)
    out: list[ev.Event] = [w.run_created(OTHER_RUN, [(OTHER_SIM, "SM61_TITANX", 0)], trace_id="bounded", kernels_total=LOST)]
    first = w.finished_sim(
        OTHER_RUN, OTHER_SIM, [(maps[i % 3]["kernel_name"], 1000 + i) for i in range(LOST)], 1417.0, at, stats=[maps[i % 3] for i in range(LOST)]
    )
    second = w.finished_sim(OTHER_RUN, OTHER_SIM, [(maps[i % 3]["kernel_name"], 2000 + i) for i in range(5)], 1417.0, at, stats=[maps[i % 3] for i in range(5)])
    again = [msgspec.structs.replace(e, id=w.event_id(), attempt=2) for e in second]
    return [*out, *first[:-2], *again]


def rows(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """Every row of kernel_stats, each kernel's in its map's order, its numbers as the text of
    the shortest double that reads back the same; a NaN as NaN, whatever its sign bit, which a
    part does not keep and nothing shows (`cascade_core/nonfinite.py`)."""
    numbers = "if(isnan(value), 'NaN', value::VARCHAR) AS value, text, if(isnan(printed_total), 'NaN', printed_total::VARCHAR) AS printed_total"
    return con.sql(f"SELECT seq, stat, {numbers}, sample FROM kernel_stats_placed ORDER BY seq, place").to_arrow_table()


def parts(con: duckdb.DuckDBPyConnection) -> int:
    ((count,),) = con.execute("SELECT count(*) FROM stats_parts").fetchall()
    return int(count)


def maps(con: duckdb.DuckDBPyConnection) -> dict[int, bytes]:
    seqs = [s for (s,) in con.execute("SELECT seq FROM kernels ORDER BY seq").fetchall()]
    return stats_maps.kernel_maps(con, seqs, stats_maps.Names())


async def a_few_at_a_time(store: EventStore, db: Path, until_seq: int, memory: Memory = SMALL) -> None:
    """The log up to `until_seq` applied 8 events a batch, as the live projector applies them
    when it keeps up: each batch's rows go to the table, and move to a part once it is full
    (within SMALL; never, within the default budget)."""
    con = connect(db, memory)
    try:
        cache = RowCache()
        async with contextlib.aclosing(store.raw(subjects.ALL, 1, until_caught_up=True)) as batches:
            async for frames in batches:
                mine = [f for f in frames if f[0] <= until_seq]
                for at in range(0, len(mine), 8):
                    _, rest = apply_frames(con, mine[at : at + 8], None, cache)
                    assert rest is None
    finally:
        con.close()


async def replayed(store: EventStore, db: Path, until_seq: int) -> None:
    """A replay within SMALL, whose batches are large enough each to be a part of its own."""
    await replay(store, db, until_seq=until_seq, memory=SMALL)


@pytest.mark.parametrize("build", [a_few_at_a_time, replayed])
async def test_parts_read_as_the_table_they_came_from_through_a_deleted_run_and_a_replaced_attempt(
    store: EventStore, tmp_path: Path, build: Callable[[EventStore, Path, int], Awaitable[None]]
) -> None:
    await store.append_facts([*events(), *other_run()], timeout=60)
    last = (await store.append_facts([ev.RunDeleted(id=w.event_id(), at=datetime(2026, 12, 4, 11, tzinfo=UTC), run_id="run-bounded")], timeout=60))[-1]
    before_delete = last - 1
    for until, kernels in ((before_delete, 60 + 5), (last, 5)):
        whole, parted = tmp_path / f"whole-{until}.duckdb", tmp_path / f"parted-{until}.duckdb"
        await a_few_at_a_time(store, whole, until, DEFAULT_MEMORY)
        await build(store, parted, until)
        with connect(whole) as table, connect(parted) as parted_con:
            assert parts(table) == 0
            assert parts(parted_con) >= (1 if until == before_delete else 0)
            expected = rows(table)
            assert len(set(expected.column("seq").to_pylist())) == kernels  # the lost attempt's are gone
            assert rows(parted_con).equals(expected)
            assert maps(parted_con) == maps(table)
            assert (await verify(store, parted_con.cursor())).equal


async def test_files_no_part_lists_are_swept_and_a_copy_reads_the_parts_of_its_read_model(store: EventStore, tmp_path: Path) -> None:
    await store.append_facts([*events(), *other_run()], timeout=60)
    db = tmp_path / "readmodel.duckdb"
    await replay(store, db, memory=SMALL)
    folder = stats_parts.folder(db)
    assert folder is not None
    (folder / "left-by-a-failed-batch.parquet").write_bytes(b"")
    with connect(db) as con:
        stats_parts.sweep(con)
        listed = {name for (name,) in con.execute("SELECT file FROM stats_parts").fetchall()}
        assert listed and set(os.listdir(folder)) == listed
        expected = rows(con)
    # As an SQL child does: a copy of the file elsewhere, reading the parts of the one it copied.
    (tmp_path / "copy").mkdir()
    shutil.copyfile(db, tmp_path / "copy" / db.name)
    with open_database(tmp_path / "copy" / db.name, read_only=True, parts_of=db) as copy:
        assert rows(copy).equals(expected)
        with pytest.raises(duckdb.PermissionException):
            copy.execute("SELECT count(*) FROM read_csv('/etc/passwd')")


async def test_a_read_model_moved_onto_another_takes_its_parts_along(store: EventStore, tmp_path: Path) -> None:
    await store.append_facts([*events(), *other_run()], timeout=60)
    built, target = tmp_path / "built.duckdb", tmp_path / "readmodel.duckdb"
    await replay(store, target)  # the one replaced, with no parts
    await replay(store, built, memory=SMALL)
    with connect(built) as con:
        expected = rows(con)
    move_onto(built, target)
    with connect(target) as con:
        assert parts(con) >= 1
        assert rows(con).equals(expected)


def _changed_midway(path: Path) -> None:
    """64 bytes in the middle turned over: zstd read such a part into other values as often as
    it refused it."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path.write_bytes(data)


PART_DAMAGE: dict[str, Callable[[Path], None]] = {
    "a part gone": lambda part: part.unlink(),
    "a part's bytes changed": _changed_midway,
    "a part cut to half": lambda part: os.truncate(part, part.stat().st_size // 2),
}


@pytest.mark.parametrize("damage", PART_DAMAGE)
async def test_a_read_model_with_a_damaged_part_is_made_again_from_the_log(store: EventStore, tmp_path: Path, damage: str) -> None:
    await store.append_facts([*events(), *other_run()], timeout=60)
    db = tmp_path / "readmodel.duckdb"
    await replay(store, db, memory=SMALL)
    with connect(db) as con:
        expected = rows(con)
        ((part,),) = con.execute("SELECT file FROM stats_parts ORDER BY file LIMIT 1").fetchall()
    folder = stats_parts.folder(db)
    assert folder is not None
    PART_DAMAGE[damage](folder / part)
    model = await ReadModel.open(store, db, SMALL)
    try:
        await model.catch_up()
    finally:
        model.close()
    assert rebuild.damaged_path(db).exists()
    with connect(db) as con:  # within the default budget: `rows` sorts them all at once
        assert parts(con) >= 1
        assert rows(con).equals(expected)


async def test_stats_by_name_read_through_parts_as_through_the_table(store: EventStore, tmp_path: Path) -> None:
    last = (await store.append_facts([*events(), *other_run()], timeout=60))[-1]
    whole, parted = tmp_path / "whole.duckdb", tmp_path / "parted.duckdb"
    await a_few_at_a_time(store, whole, last, DEFAULT_MEMORY)
    await replay(store, parted, memory=SMALL)
    with connect(whole) as table, connect(parted) as parted_con:
        assert parts(parted_con) >= 1
        for run_id in ("run-bounded", OTHER_RUN):
            read = [(con, q.run_summary(con, run_id)) for con in (table, parted_con)]
            for ask in (
                lambda con, run: stats.stat_catalogue(con, run, ""),
                lambda con, run: stats.stat_values(con, run, "L2_cache_bank[*].Miss_rate"),
                lambda con, run: stats.stat_values(con, run, "L2_total_cache_accesses"),
            ):
                expected, answer = (msgspec.json.encode(ask(con, run)) for con, run in read)
                assert answer == expected
