from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cascade_nats.store import EventStore
from projections import replay as replay_module
from projections.projector import connect
from projections.replay import replay_file
from tests.projections.histories import lifecycle

pytestmark = pytest.mark.anyio


class Broken(Exception):
    pass


def out(tmp_path: Path) -> Path:
    """A directory of its own (the test's nats-server keeps its store in `tmp_path`)."""
    (tmp_path / "out").mkdir()
    return tmp_path / "out"


def beside(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir())


async def test_a_replay_into_a_file_takes_its_place_once_complete(store: EventStore, tmp_path: Path) -> None:
    seqs = await store.append_facts(lifecycle())
    target = out(tmp_path) / "audit.duckdb"
    target.write_text("an older read model")
    (target.parent / "audit.duckdb.wal").write_text("its log")
    assert await replay_file(store, target) == seqs[-1]
    assert beside(target) == ["audit.duckdb"], "no partial file or stale log is left"
    with connect(target) as con:
        assert con.execute("SELECT count(*) FROM sims").fetchone() == (3,)


@pytest.mark.parametrize("how", ["fails", "is interrupted"])
async def test_a_replay_that_does_not_finish_leaves_nothing(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    started = anyio.Event()

    async def unfinished(store: EventStore, db: Path, **_: object) -> int:
        connect(db).close()  # the partial file, as a real replay has it from the start
        (db.parent / f"{db.name}.wal").write_text("half a batch")
        started.set()
        if how == "fails":
            raise Broken("the log stopped answering")
        await anyio.sleep_forever()
        raise AssertionError

    monkeypatch.setattr(replay_module, "replay", unfinished)
    target = out(tmp_path) / "audit.duckdb"
    target.write_text("an older read model")
    if how == "fails":
        with pytest.raises(Broken):
            await replay_file(store, target)
    else:
        async with anyio.create_task_group() as tg:  # what Ctrl-C does to `asyncio.run`'s task
            tg.start_soon(replay_file, store, target)
            await started.wait()
            assert len(beside(target)) == 3
            tg.cancel_scope.cancel()
    assert beside(target) == ["audit.duckdb"]
    assert target.read_text() == "an older read model"


async def test_a_replay_up_to_a_sequence_reads_on_until_it_comes(store: EventStore, tmp_path: Path) -> None:
    # What a server of a cluster behind the others shows a replay: the log ends short of the
    # sequence the live read model applied, which comes a moment later.
    events = lifecycle()
    seqs = await store.append_facts(events[:-2])
    target = out(tmp_path) / "audit.duckdb"
    async with anyio.create_task_group() as tg:
        replayed: list[int] = []

        async def replay_up_to_two_more() -> None:
            replayed.append(await replay_module.replay(store, target, until_seq=seqs[-1] + 2))

        tg.start_soon(replay_up_to_two_more)
        await anyio.sleep(0.5)  # the replay has caught up with what is stored, and waits
        assert not replayed
        rest = await store.append_facts(events[-2:])
    assert replayed == [rest[-1]]
    with connect(target) as con:
        assert con.execute("SELECT seq FROM checkpoint").fetchone() == (rest[-1],)
