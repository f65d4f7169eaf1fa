from __future__ import annotations

from pathlib import Path

import pytest

from cascade_nats.store import EventStore
from projections import projector as projector_module
from projections.projector import Projector, connect
from projections.replay import replay
from tests.projections.histories import lifecycle
from tests.projections.test_fold import dump

pytestmark = pytest.mark.anyio


class Crash(Exception):
    pass


def crash_at(point: str, after: int):  # type: ignore[no-untyped-def]
    calls = {"n": 0}

    def fault(where: str) -> None:
        if where == point:
            calls["n"] += 1
            if calls["n"] > after:
                raise Crash(where)

    return fault


@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
@pytest.mark.parametrize("after", [0, 2])
async def test_a_crash_at_any_point_loses_and_repeats_nothing(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, after: int
) -> None:
    monkeypatch.setattr(projector_module, "MAX_BATCH", 5)
    await store.append_facts(lifecycle())
    db = tmp_path / "live.duckdb"

    con = connect(db)
    with pytest.RaisesGroup(Crash):
        await Projector(store, con, fault=crash_at(point, after)).catch_up()
    con.close()

    con = connect(db)
    restarted = Projector(store, con)
    await restarted.catch_up()
    assert restarted.applied == await store.last_seq()

    await replay(store, tmp_path / "fresh.duckdb")
    fresh = connect(tmp_path / "fresh.duckdb")
    assert dump(con) == dump(fresh)


async def test_live_projection_reaches_each_append(store: EventStore, tmp_path: Path) -> None:
    import anyio

    con = connect(tmp_path / "live.duckdb")
    projector = Projector(store, con)
    async with anyio.create_task_group() as tg:
        tg.start_soon(projector.run)
        for event in lifecycle():
            seq = await store.append(event)
            await projector.wait_for(seq, timeout=5)
            assert projector.applied >= seq
        tg.cancel_scope.cancel()
    (state,) = con.execute("SELECT state FROM runs").fetchone()  # type: ignore[misc]
    assert state == "cancelled"
    sims = dict(con.execute("SELECT id, state FROM sims").fetchall())
    assert sims == {"sim-a0": "succeeded", "sim-a1": "cancelled", "sim-a2": "cancelled"}
    kernels = con.execute("SELECT sim_id, attempt, uid FROM kernels ORDER BY ALL").fetchall()
    assert kernels == [("sim-a0", 2, 1), ("sim-a0", 2, 2), ("sim-a1", 1, 1)]


async def test_a_supervised_projector_resumes_after_a_failure(store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    from cascade_nats.supervise import Supervision, supervise

    monkeypatch.setattr(projector_module, "MAX_BATCH", 5)
    failures: list[str] = []

    def fail_once(where: str) -> None:
        if where == "before_commit" and not failures:
            failures.append(where)
            raise Crash(where)

    con = connect(tmp_path / "live.duckdb")
    projector = Projector(store, con, fault=fail_once)
    seqs = await store.append_facts(lifecycle())
    health = Supervision()
    async with anyio.create_task_group() as tg:
        tg.start_soon(supervise, "projector", projector.run, health)
        await projector.wait_for(seqs[-1], timeout=10)
        with anyio.fail_after(5):
            while health.failing():  # listed until it has run a while without failing
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    assert failures == ["before_commit"]
    await replay(store, tmp_path / "fresh.duckdb")
    assert dump(con) == dump(connect(tmp_path / "fresh.duckdb"))


def test_a_batch_stops_at_its_event_count_or_its_byte_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(projector_module, "MAX_BATCH", 4)
    small = [(seq, b"s", b"x" * 10) for seq in range(1, 7)]
    assert projector_module.batch_length(small, 100) == (4, 40)
    assert projector_module.batch_length(small[:3], 100)[0] == 3
    big = [(1, b"s", b"x" * 60), (2, b"s", b"x" * 60), (3, b"s", b"x")]
    assert projector_module.batch_length(big, 100)[0] == 2  # the event that passes the bound ends it
    assert projector_module.batch_length([(1, b"s", b"x" * 500)], 100) == (1, 500)


async def test_the_write_ahead_log_is_folded_in_when_the_stream_goes_quiet(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    monkeypatch.setattr(projector_module, "IDLE_S", 0.3)
    con = connect(tmp_path / "live.duckdb")
    con.execute("CHECKPOINT")
    wal = tmp_path / "live.duckdb.wal"
    projector = Projector(store, con)
    projector.idle_checkpoint_at = 0
    seqs = await store.append_facts(lifecycle())
    async with anyio.create_task_group() as tg:
        tg.start_soon(projector.run)
        await projector.wait_for(seqs[-1], timeout=10)
        assert wal.exists() and wal.stat().st_size > 0, "the batch went to the log first"
        with anyio.fail_after(5):
            while wal.exists() and wal.stat().st_size > 0:
                await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    await replay(store, tmp_path / "fresh.duckdb")
    assert dump(con) == dump(connect(tmp_path / "fresh.duckdb"))


async def test_the_read_model_is_opened_within_its_memory_and_checkpoints_within_it(tmp_path: Path, store: EventStore) -> None:
    memory = projector_module.Memory(128 << 20)
    con = connect(tmp_path / "live.duckdb", memory)
    settings = dict(con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN ('memory_limit', 'checkpoint_threshold')").fetchall())
    assert settings == {"memory_limit": "128.0 MiB", "checkpoint_threshold": "64.0 MiB"}
    assert Projector(store, con, memory=memory).checkpoint_at == 32 << 20  # a quarter: what waits for it is in memory
    assert projector_module.Memory(4 << 30).checkpoint_at == projector_module.CHECKPOINT_AT
    assert projector_module.DEFAULT_MEMORY == projector_module.Memory(64 << 20)  # enough for a 1 GB log now that its text is not kept
