"""The read model knows which version built it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from cascade_nats.store import EventStore
from projections import fold, version
from projections.projector import Projector, connect
from tests.projections.changed_model import CHANGES, add_a_column
from tests.projections.histories import lifecycle
from tests.projections.test_fold import dump

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
        reason = "its tables changed" if change == "a column added" else f"the fold's version went from 1 to {fold.VERSION}"
    with duckdb.connect(str(db), read_only=True) as con:
        before, recorded = dump(con), version.stored(con)
    with pytest.raises(version.Outdated, match=reason):
        connect(db)
    with duckdb.connect(str(db), read_only=True) as con:
        assert (dump(con), version.stored(con)) == (before, recorded)
