"""Every recorded event still decodes, as it was stored, and each corpus replays to its
recorded tables (`corpus.py`). A change that fails here either breaks old logs, or changed
the read model on purpose: then record the tables again (`record.py`) and review the diff."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import duckdb
import msgspec
import pytest

from cascade_core import events as ev
from cascade_core import packed_stats
from cascade_nats import deflated, subjects
from cascade_nats.store import EventStore
from projections.projector import DEFAULT_MEMORY, Memory
from tests.corpus import corpus


class Tagged(msgspec.Struct):
    type: str


def stored_type(line: corpus.Line) -> str:
    return msgspec.json.decode(corpus.data(line), type=Tagged).type


def test_every_current_event_type_has_recorded_events() -> None:
    recorded = {type(ev.decode(corpus.data(line))) for line in corpus.every_line()}
    missing = [ev.tag_of(t) for t in get_args(ev.AnyEvent) if t not in recorded]
    assert not missing, f"record stored events of {missing} in a corpus of their own (tests/corpus/record.py)"


def _structs(info: msgspec.inspect.Type, found: dict[type, msgspec.inspect.StructType]) -> None:
    """Every Struct type `info` holds, down through lists, dicts and unions."""
    if isinstance(info, msgspec.inspect.StructType):
        if info.cls in found:
            return
        found[info.cls] = info
        for field in info.fields:
            _structs(field.type, found)
    for child in ("item_type", "value_type"):
        if isinstance(sub := getattr(info, child, None), msgspec.inspect.Type):
            _structs(sub, found)
    for sub in getattr(info, "types", ()):
        _structs(sub, found)


def _held(info: msgspec.inspect.Type, stored: Any, held: dict[type, set[str]]) -> None:
    """Which fields of each Struct the stored JSON value holds (a default is left out)."""
    if isinstance(info, msgspec.inspect.StructType) and isinstance(stored, dict):
        held.setdefault(info.cls, set()).update(stored)
        for field in info.fields:
            if field.encode_name in stored:
                _held(field.type, stored[field.encode_name], held)
    elif isinstance(info, msgspec.inspect.ListType) and isinstance(stored, list):
        for item in stored:
            _held(info.item_type, item, held)
    for sub in getattr(info, "types", ()):
        _held(sub, stored, held)


def test_every_field_of_the_current_event_types_is_recorded() -> None:
    # A field added to an event or a value type it holds (as `stats_naming` was) is covered
    # only by events stored with it.
    current = {ev.tag_of(t): info for t, info in zip(get_args(ev.AnyEvent), msgspec.inspect.multi_type_info(get_args(ev.AnyEvent)))}
    held: dict[type, set[str]] = {}
    for line in corpus.every_line():
        if (info := current.get(stored_type(line))) is not None:
            _held(info, msgspec.json.decode(corpus.data(line)), held)
    structs: dict[type, msgspec.inspect.StructType] = {}
    for info in current.values():
        _structs(info, structs)
    envelope = set(ev.Event.__struct_fields__)  # set where Cascade has a cause, on some types only
    missing = [
        f"{cls.__name__}.{field.name}"
        for cls, info in structs.items()
        for field in info.fields
        if field.encode_name not in held.get(cls, set()) and not (issubclass(cls, ev.Event) and field.name in envelope)
    ]
    missing += [f for f in sorted(envelope) if not any(f in fields for cls, fields in held.items() if issubclass(cls, ev.Event))]
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
    # Within three quarters of the default budget, so that a replay never fits only just: a
    # batch's writes are one transaction, held in memory until it commits.
    memory = Memory(DEFAULT_MEMORY.limit * 3 // 4)
    replayed = await corpus.replayed(store, corpus.recorded(version), tmp_path / "replay.duckdb", memory)
    recorded = corpus.read_tables(version)
    assert list(replayed) == list(recorded)
    for table, rows in recorded.items():
        assert replayed[table] == rows, (
            f"{table} is not what {corpus.tables_file(version).name} recorded: if the read model changed on purpose, "
            f"run `{corpus.RECORD} tables` and review its diff"
        )


def _without_per_kernel(line: corpus.Line) -> corpus.Line:
    """The kernel result without the differences it carries, apart or with its values."""
    event = ev.decode(corpus.data(line))
    if not isinstance(event, ev.KernelFinished) or event.stats is None:
        return line
    values = packed_stats.packed_floats(deflated.floats_of(event.stats))
    stats = msgspec.structs.replace(event.stats, values=values, with_differences=False)
    return corpus.Line(line.subject, msgspec.Raw(ev.encode(msgspec.structs.replace(event, stats=stats, per_kernel=None))))


_OWN_VALUES = """SELECT s.id, s.split IS NULL AND NOT s.reuse AND len(s.resumed) = 0 AS straight, k.kernel_index, v.stat, v.value::VARCHAR, v.printed_total::VARCHAR
    FROM kernel_stats v JOIN kernels k USING (seq) JOIN sims s ON s.id = k.sim_id WHERE v.printed_total IS NOT NULL ORDER BY ALL"""


@pytest.mark.anyio
async def test_results_without_per_kernel_values_get_them_from_the_printed_totals_of_a_sim_run_whole_and_straight(
    store: EventStore, tmp_path: Path
) -> None:
    # The newest corpus replayed as its events are, and as older ones were, without `per_kernel`.
    await corpus.replayed(store, corpus.recorded(corpus.VERSIONS[-1]), tmp_path / "new.duckdb")
    with duckdb.connect(str(tmp_path / "new.duckdb")) as con:
        carried = con.execute(_OWN_VALUES).fetchall()
    await store.js.delete_stream(store.stream)  # and with it what it knew of the events' ids
    await store.ensure_stream()
    await corpus.replayed(store, [_without_per_kernel(line) for line in corpus.recorded(corpus.VERSIONS[-1])], tmp_path / "old.duckdb")
    with duckdb.connect(str(tmp_path / "old.duckdb")) as con:
        derived = con.execute(_OWN_VALUES).fetchall()
    straight = [row for row in carried if row[1]]
    assert straight and [row for row in derived if row[1]] == straight
    assert {row[4] for row in derived if not row[1]} == {None}, "a split, reusing or resumed sim's cannot be told"
