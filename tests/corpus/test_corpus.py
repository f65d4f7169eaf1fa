"""Every recorded event still decodes, as it was stored, and the corpus replays to the
recorded tables (`corpus.py`). A change that fails here either breaks old logs, or changed
the read model on purpose: then record the tables again (`record.py`) and review the diff."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import msgspec
import pytest

from cascade_core import events as ev
from cascade_core import subjects
from cascade_nats.store import EventStore
from tests.corpus import corpus


class Tagged(msgspec.Struct):
    type: str


def stored_type(line: corpus.Line) -> str:
    return msgspec.json.decode(corpus.data(line), type=Tagged).type


def test_every_current_event_type_has_recorded_events() -> None:
    recorded = {type(ev.decode(corpus.data(line))) for path in sorted(corpus.HERE.glob("events-v*.jsonl")) for line in corpus.lines(path)}
    missing = [ev.tag_of(t) for t in get_args(ev.AnyEvent) if t not in recorded]
    assert not missing, f"record stored events of {missing} in a corpus of their own (tests/corpus/record.py)"


def test_every_recorded_event_decodes_on_its_subject_and_is_stored_as_it_would_be_now() -> None:
    for line in corpus.lines():
        event = subjects.decode(line.subject.encode(), corpus.data(line))
        if ev.event_type(event) == stored_type(line):  # not upcast: still the current version
            assert ev.encode(event) == corpus.data(line), "an event of the current version encodes to its stored bytes"


def test_decoding_the_corpus_in_one_call_gives_what_decoding_each_gives() -> None:
    data = [corpus.data(line) for line in corpus.lines()]
    assert ev.decode_all(data) == [ev.decode(one) for one in data]


@pytest.mark.anyio
async def test_the_corpus_replays_to_the_recorded_tables(store: EventStore, tmp_path: Path) -> None:
    replayed = await corpus.replayed(store, corpus.lines(), tmp_path / "replay.duckdb")
    recorded = corpus.read_tables()
    assert list(replayed) == list(recorded)
    for table, rows in recorded.items():
        assert replayed[table] == rows, (
            f"{table} is not what {corpus.TABLES.name} recorded: if the read model changed on purpose, "
            f"run `{corpus.RECORD} tables` and review its diff"
        )
