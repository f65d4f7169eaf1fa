"""Every recorded event still decodes, as it was stored, and each corpus replays to its
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
    recorded = {type(ev.decode(corpus.data(line))) for line in corpus.every_line()}
    missing = [ev.tag_of(t) for t in get_args(ev.AnyEvent) if t not in recorded]
    assert not missing, f"record stored events of {missing} in a corpus of their own (tests/corpus/record.py)"


def test_every_field_of_the_current_event_types_is_recorded() -> None:
    # A field added to an event (as `stats_naming` was) is covered only by events stored with
    # it: a default is left out of the stored bytes.
    held: dict[str, set[str]] = {}
    for line in corpus.every_line():
        held.setdefault(stored_type(line), set()).update(msgspec.json.decode(corpus.data(line), type=dict[str, msgspec.Raw]))
    envelope = set(ev.Event.__struct_fields__)  # set where Cascade has a cause, on some types only
    missing = [
        f"{ev.tag_of(t)} {f}" for t in get_args(ev.AnyEvent) for f in t.__struct_fields__ if f not in envelope | held.get(ev.tag_of(t), set())
    ]
    missing += [f for f in sorted(envelope) if not any(f in fields for fields in held.values())]
    assert not missing, f"record a corpus of events that hold {missing} (tests/corpus/record.py)"


@pytest.mark.parametrize("version", corpus.VERSIONS)
def test_every_recorded_event_decodes_on_its_subject_and_is_stored_as_it_would_be_now(version: int) -> None:
    for line in corpus.recorded(version):
        event = subjects.decode(line.subject.encode(), corpus.data(line))
        if ev.event_type(event) == stored_type(line):  # not upcast: still the current version
            assert ev.encode(event) == corpus.data(line), "an event of the current version encodes to its stored bytes"


@pytest.mark.parametrize("version", corpus.VERSIONS)
def test_decoding_a_corpus_in_one_call_gives_what_decoding_each_gives(version: int) -> None:
    data = [corpus.data(line) for line in corpus.recorded(version)]
    assert ev.decode_all(data) == [ev.decode(one) for one in data]


@pytest.mark.anyio
@pytest.mark.parametrize("version", corpus.VERSIONS)
async def test_a_corpus_replays_to_its_recorded_tables(store: EventStore, tmp_path: Path, version: int) -> None:
    replayed = await corpus.replayed(store, corpus.recorded(version), tmp_path / "replay.duckdb")
    recorded = corpus.read_tables(version)
    assert list(replayed) == list(recorded)
    for table, rows in recorded.items():
        assert replayed[table] == rows, (
            f"{table} is not what {corpus.tables_file(version).name} recorded: if the read model changed on purpose, "
            f"run `{corpus.RECORD} tables` and review its diff"
        )
