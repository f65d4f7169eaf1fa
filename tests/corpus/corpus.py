"""The recorded event corpora: what versions of Cascade stored, which every later version
must still decode and replay to the same tables.

A corpus is recorded whenever what stored events hold changes, by a new version of a type or
a new field (`events-v2.jsonl`: kernel results with `stats_naming` 2, the stats names of
docs/stats-naming.md; real timing attached to a ready trace, with cycles and passes; a
trace's `layers`; `events-v3.jsonl`: split sims, their entries' and sims' `split`, launch
requests and facts per `chunk`; `events-v4.jsonl`: `sim.kernel_finished.v2`, stats maps
packed; retry and top-up; reuse of repeated kernels; launch requests placed by config,
`by_config`, on `queued.<config>`; `runner.ended.v1`, a launch's `runner_id`; `events-v5.jsonl`: a reference sim's `reference_for`
and an entry's `reference`, a claim's `resume`, a retry's `chunks`; `events-v6.jsonl`: a heartbeat's lines deflated, `log_deflated`; `events-v7.jsonl`: a sim's finish `cut_short`, a kernel result's `per_kernel`; `events-v13.jsonl`: `trace.path_added.v1`, a trace added from a shared path; `events-v15.jsonl`: `stat_names.defined.v1`, maps naming their set by `names_digest`; `events-v16.jsonl`: maps `with_differences`, heartbeats' lines as xz;
`events-v12.jsonl` is another branch's). `events-v<n>.jsonl` holds one stored message a line,
`{"subject": ..., "event": ...}`, the event exactly as its bytes were stored (recorded from a live service by
`record.py`, never edited). `tables-v<n>.json` is the read model those events replay to,
table by table; strings longer than `LONG` characters are kept as their length and digest.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import duckdb
import msgspec

from cascade_core import events as ev
from cascade_formats.stat_kinds import KINDS
from cascade_nats.store import EventStore
from projections import tables
from projections.queries import stats_maps
from projections.projector import Memory
from projections.replay import replay
from projections.rows import KernelRow

HERE = Path(__file__).parent
VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)  # the recorded corpora, oldest first; the newest is what this version stores
RECORD = "python -m tests.corpus.record"  # run from the checkout, with its venv
LONG = 200


class Line(msgspec.Struct, frozen=True):
    subject: str
    event: msgspec.Raw  # the stored bytes, untouched


def events_file(version: int) -> Path:
    return HERE / f"events-v{version}.jsonl"


def tables_file(version: int) -> Path:
    return HERE / f"tables-v{version}.json"


def lines(path: Path) -> list[Line]:
    return msgspec.json.Decoder(Line).decode_lines(path.read_bytes())


def recorded(version: int) -> list[Line]:
    return lines(events_file(version))


def every_line() -> list[Line]:
    """The lines of every corpus, oldest first."""
    return [line for version in VERSIONS for line in recorded(version)]


def data(line: Line) -> bytes:
    return bytes(line.event)


def encode_line(subject: str, event: bytes) -> bytes:
    return msgspec.json.encode(Line(subject, msgspec.Raw(event)))


async def publish(store: EventStore, corpus: list[Line]) -> list[int]:
    """Store every message as recorded, in order; returns their stream sequences."""
    messages: list[tuple[str, bytes, str | None]] = [(line.subject, data(line), ev.decode(data(line)).id) for line in corpus]
    return await store.pipeline.publish_all(messages, 60)


async def replayed(store: EventStore, corpus: list[Line], db: Path, memory: Memory | None = None) -> dict[str, Table]:
    """The tables `corpus` replays to, stored into an empty `store` and projected into `db`
    (within `memory`, by default the projector's)."""
    await publish(store, corpus)
    await replay(store, db, memory=memory)
    with duckdb.connect(str(db)) as con:
        return dump(con)


class Table(msgspec.Struct, frozen=True):
    columns: list[str]
    rows: list[list[Any]]


# Tables of more rows than a recording should hold, summed up instead. What kernel_stats
# holds is in the kernels table's `stats`: each map made again from its rows, which must be
# the map as the event carried it (recorded as its digest).
SUMMED = {
    "kernel_stats": "SELECT count(*) AS rows, count(value) AS numbers, count(text) AS texts, count(printed_total) AS printed_totals, "
    "md5(string_agg(value::VARCHAR, ',' ORDER BY seq, stat) FILTER (WHERE printed_total IS NOT NULL)) AS md5_of_their_values, "
    "count(*) FILTER (WHERE sample) AS sample_rows FROM kernel_stats",
    "stat_names": "SELECT count(*) AS names, md5(string_agg(name, chr(10) ORDER BY id)) AS md5_by_id, "
    + ", ".join(f"count(*) FILTER (kind = '{kind}') AS {kind}" for kind in KINDS)
    + " FROM stat_names",
}


def dump(con: duckdb.DuckDBPyConnection) -> dict[str, Table]:
    """Every table of the read model (checkpoint included), its rows sorted, in the columns
    two read models of one log agree on, with values as JSON holds them."""
    out: dict[str, Table] = {}
    for table in [*tables.ROW_TYPES, "checkpoint"]:
        result = con.execute(SUMMED.get(table) or f"SELECT {tables.compared_columns(table)} FROM {table} ORDER BY ALL")
        columns = [d[0] for d in result.description]
        out[table] = Table(columns, [[_value(v) for v in record] for record in result.fetchall()])
    out["kernels"] = _with_maps(con, out["kernels"])
    return msgspec.json.decode(msgspec.json.encode(out), type=dict[str, Table])  # datetimes as text


def _with_maps(con: duckdb.DuckDBPyConnection, kernels: Table) -> Table:
    """The kernels, each with its stats map where KernelRow has it."""
    seq = kernels.columns.index("seq")
    maps = stats_maps.kernel_maps(con, [row[seq] for row in kernels.rows], stats_maps.Names())
    columns = [c for c in KernelRow.__struct_fields__ if c != "per_kernel"]  # in kernel_stats' values
    rows = [[_value(maps.get(row[seq], b"{}").decode()) if c == "stats" else row[kernels.columns.index(c)] for c in columns] for row in kernels.rows]
    return Table(columns, rows)


def read_tables(version: int) -> dict[str, Table]:
    return msgspec.json.decode(tables_file(version).read_bytes(), type=dict[str, Table])


def _value(value: Any) -> Any:
    if isinstance(value, str) and len(value) > LONG:
        return f"{len(value)} characters, sha256 {hashlib.sha256(value.encode()).hexdigest()}"
    if isinstance(value, list):
        return [_value(v) for v in value]
    return value
