"""The read model knows which version built it, and one another version built is rebuilt
from the log beside it and swapped in (`projections/rebuild.py`); reads in flight finish on
the connection they started on."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest

from cascade_nats.store import EventStore
from projections import fold, rebuild, tables, version
from projections import projector as projector_module
from projections.fold import Folded
from projections.projector import Projector, connect
from projections.projector import apply as real_apply
from projections.readers import Readers
from projections.rebuild import ReadModel
from projections.replay import replay
from tests.projections.changed_model import CHANGES, NOTE, add_a_column
from tests.projections.histories import lifecycle
from tests.projections.test_fold import dump
from tests.projections.test_parking import assert_parked, poisoned_log

pytestmark = pytest.mark.anyio


def out(tmp_path: Path) -> Path:
    """A directory of its own (the test's nats-server keeps its store in `tmp_path`)."""
    (tmp_path / "out").mkdir()
    return tmp_path / "out"


async def built(store: EventStore, db: Path) -> int:
    """A read model of the lifecycle history in `db`, as this version builds it."""
    seqs = await store.append_facts(lifecycle())
    with connect(db) as con:
        await Projector(store, con).catch_up()
    return seqs[-1]


def without_note(dumped: dict[str, list[tuple[object, ...]]]) -> dict[str, list[tuple[object, ...]]]:
    """A dump of a read model with the column `add_a_column` adds (the sims table's last) left out."""
    return dumped | {"sims": [row[:-1] for row in dumped["sims"]]}


def on_transaction(monkeypatch: pytest.MonkeyPatch, n: int, act: Callable[[], object]) -> Callable[[], int]:
    """Make the projector call `act` as its `n`th transaction begins; returns how many have."""
    begun = 0

    def apply(*args: Any, **kwargs: Any) -> Folded:
        nonlocal begun
        begun += 1
        if begun == n:
            act()
        return real_apply(*args, **kwargs)

    monkeypatch.setattr(projector_module, "apply", apply)
    return lambda: begun


async def run_until_swapped(model: ReadModel, last: int) -> None:
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(model.run)
            while model.rebuild is not None or model.projector.applied < last:
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()


def test_a_new_read_model_records_this_version(tmp_path: Path) -> None:
    with connect(tmp_path / "new.duckdb") as con:
        assert version.stored(con) == version.current() == version.Version(version.fingerprint(), fold.VERSION)
    with connect(tmp_path / "new.duckdb") as con:  # and opens again as this version's
        assert version.outdated(con) is None


def test_the_fingerprint_follows_the_tables_and_the_version_the_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    before = version.current()
    CHANGES["the fold's version bumped"](monkeypatch)
    assert version.current() == version.Version(before.tables, before.fold_version + 1)
    add_a_column(monkeypatch)
    assert version.current().tables != before.tables


@pytest.mark.parametrize("change", [*CHANGES, "no version recorded"])
async def test_a_read_model_another_version_built_is_outdated_and_left_as_it_is(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    db = out(tmp_path) / "readmodel.duckdb"
    await built(store, db)
    if change == "no version recorded":
        with duckdb.connect(str(db)) as con:  # as every read model before versions were recorded
            con.execute("DROP TABLE read_model")
        reason = "was built before read models recorded their version"
    else:
        CHANGES[change](monkeypatch)
        reason = "its tables changed" if change == "a column added" else rf"the fold's version went from \d+ to {fold.VERSION}"
    with duckdb.connect(str(db), read_only=True) as con:
        before, recorded = dump(con), version.stored(con)
    with pytest.raises(version.Outdated, match=reason):
        connect(db)
    with duckdb.connect(str(db), read_only=True) as con:
        assert (dump(con), version.stored(con)) == (before, recorded)


def test_a_read_in_flight_finishes_on_the_connection_it_started_on(tmp_path: Path) -> None:
    old, new = duckdb.connect(), duckdb.connect()
    old.execute("CREATE TABLE t AS SELECT 'old' AS v")
    new.execute("CREATE TABLE t AS SELECT 'new' AS v")
    readers = Readers(old)
    with readers.cursor() as in_flight:
        readers.move_to(new)
        with readers.cursor() as later:
            assert later.execute("SELECT v FROM t").fetchone() == ("new",)
        assert in_flight.execute("SELECT v FROM t").fetchone() == ("old",)
    with pytest.raises(duckdb.ConnectionException):
        old.execute("SELECT 1")  # closed with its last cursor
    readers.close()
    with pytest.raises(duckdb.ConnectionException):
        new.execute("SELECT 1")


@pytest.mark.parametrize("change", CHANGES)
async def test_an_outdated_read_model_is_rebuilt_beside_it_and_swapped_in(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    db = out(tmp_path) / "readmodel.duckdb"
    last = await built(store, db)
    with duckdb.connect(str(db), read_only=True) as con:
        old = dump(con)
    CHANGES[change](monkeypatch)

    model = await ReadModel.open(store, db)
    assert model.rebuild is not None and model.seq == last
    with model.reader() as con:  # the old one, as it was
        assert dump(con) == old
    await run_until_swapped(model, last)
    with model.reader() as con:
        assert version.stored(con) == version.current() and model.seq == last
        if change == "a column added":
            assert con.execute("SELECT list(DISTINCT note), count(*) FROM sims").fetchone() == ([NOTE], 3)
        rebuilt = dump(con)
    model.close()
    assert sorted(p.name for p in db.parent.iterdir()) == ["readmodel.duckdb"]
    await replay(store, tmp_path / "fresh.duckdb")
    with connect(tmp_path / "fresh.duckdb") as fresh:
        assert rebuilt == dump(fresh)
    assert (without_note(rebuilt) if change == "a column added" else rebuilt) == old, "every row once"


async def test_a_rebuild_keeps_the_parked_parked_and_loses_or_repeats_nothing_while_reads_are_answered(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = out(tmp_path) / "readmodel.duckdb"
    _, bad = await poisoned_log(store)
    last = await store.last_seq()
    with connect(db) as con:
        await Projector(store, con).catch_up()
        assert_parked(con, bad)
        old = dump(con)
    add_a_column(monkeypatch)
    monkeypatch.setattr(projector_module, "MAX_BATCH", 3)
    # The rebuild's third transaction waits until the test has read the old model meanwhile.
    reached, released = threading.Event(), threading.Event()

    def wait_for_the_test() -> None:
        reached.set()
        released.wait(30)

    on_transaction(monkeypatch, 3, wait_for_the_test)
    model = await ReadModel.open(store, db)
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(model.run)
                assert await anyio.to_thread.run_sync(reached.wait, 30)
                assert model.rebuild is not None and 0 < model.rebuild.applied < last and model.seq == last
                with model.reader() as con:
                    assert dump(con) == old
                released.set()
                while model.rebuild is not None:
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
    finally:
        released.set()
    with model.reader() as con:
        assert_parked(con, bad)
        assert con.execute("SELECT list(DISTINCT note), count(*) FROM sims").fetchone() == ([NOTE], 3)
        assert without_note(dump(con)) == old, "every row once, parked messages too"
    model.close()


class Crash(Exception):
    pass


async def test_a_rebuild_stopped_halfway_goes_on_from_its_checkpoint_at_the_next_start(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = out(tmp_path) / "readmodel.duckdb"
    last = await built(store, db)
    add_a_column(monkeypatch)
    monkeypatch.setattr(projector_module, "MAX_BATCH", 5)

    def crash() -> None:
        raise Crash("the machine went down")

    begun = on_transaction(monkeypatch, 3, crash)
    model = await ReadModel.open(store, db)
    crashed = False
    with anyio.fail_after(30):
        try:
            await model.run()
        except* Crash:  # the failure ends the task: its supervisor's to start again
            crashed = True
    assert crashed and begun() == 3
    model.close()
    partial = rebuild.rebuild_path(db)
    with duckdb.connect(str(partial), read_only=True) as con:
        stopped_at = tables.checkpoint(con)  # two batches
    assert 0 < stopped_at < last
    with duckdb.connect(str(db), read_only=True) as con:
        assert "note" not in [c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'sims'").fetchall()]

    monkeypatch.setattr(projector_module, "apply", real_apply)
    caplog.set_level(logging.INFO, "cascade.projector")
    model = await ReadModel.open(store, db)
    assert model.projector.applied == stopped_at
    assert f"rebuilding it from the log into {partial}, going on from sequence {stopped_at}" in caplog.text
    await run_until_swapped(model, last)
    model.close()
    assert f"rebuilt read model {db}: {last - stopped_at} events in " in caplog.text
    await replay(store, tmp_path / "fresh.duckdb")
    with connect(db) as con, connect(tmp_path / "fresh.duckdb") as fresh:
        assert dump(con) == dump(fresh)


async def test_leftovers_of_a_rebuild_are_cleared_or_started_again(store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = out(tmp_path) / "readmodel.duckdb"
    last = await built(store, db)
    partial = rebuild.rebuild_path(db)
    partial.write_text("not a database: a crash while it was made")
    add_a_column(monkeypatch)
    model = await ReadModel.open(store, db)
    assert model.projector.applied == 0, "started again"
    await run_until_swapped(model, last)
    model.close()

    monkeypatch.undo()  # the version before, which finds the newer model outdated
    model = await ReadModel.open(store, db)
    model.close()
    assert partial.exists()  # its rebuild, not yet run
    add_a_column(monkeypatch)  # and back to the newer one, whose model is current
    model = await ReadModel.open(store, db)
    assert model.rebuild is None
    model.close()
    assert not partial.exists(), "a rebuild file for another version is of no use"


def flip_in_every_block(db: Path) -> None:
    """One byte flipped in each of DuckDB's 256 KiB blocks past its 12 KiB of headers."""
    with db.open("r+b") as f:
        for at in range((12 << 10) + 4096, db.stat().st_size, 256 << 10):
            f.seek(at)
            byte = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([byte[0] ^ 0xFF]))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "cut to half": lambda db: os.truncate(db, db.stat().st_size // 2),
    "cut to its header": lambda db: os.truncate(db, 100),
    "not a database": lambda db: db.write_bytes(b"not a database\n" * 1000),
    "bytes flipped in its blocks": flip_in_every_block,
}


@pytest.mark.parametrize("damage", DAMAGE)
async def test_a_damaged_read_model_is_moved_aside_and_made_again_from_the_log(
    store: EventStore, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    db = out(tmp_path) / "readmodel.duckdb"
    last = await built(store, db)
    with duckdb.connect(str(db), read_only=True) as con:
        whole = dump(con)
    DAMAGE[damage](db)
    damaged = db.stat().st_size
    with caplog.at_level(logging.WARNING, logger="cascade.projector"):
        model = await ReadModel.open(store, db)
    try:
        await model.catch_up()
        assert model.projector.applied == last and model.rebuild is None
        with model.reader() as con:
            assert dump(con) == whole
    finally:
        model.close()
    assert rebuild.damaged_path(db).stat().st_size == damaged  # kept for a look (DuckDB may have rewritten its header)
    (line,) = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert line.startswith(f"read model {db} is damaged (") and line.endswith(f"); moved to {rebuild.damaged_path(db)}, and made again from the log")


async def test_a_read_model_another_process_holds_is_left_as_it_is(store: EventStore, tmp_path: Path) -> None:
    db = out(tmp_path) / "readmodel.duckdb"
    await built(store, db)
    hold = f"import duckdb, sys; c = duckdb.connect({str(db)!r}); print('held', flush=True); sys.stdin.read()"
    with subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            with pytest.raises(duckdb.IOException, match="lock"):
                await ReadModel.open(store, db)
        finally:
            holder.kill()
    assert not rebuild.damaged_path(db).exists()
