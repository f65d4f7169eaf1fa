"""Opening a read model's DuckDB file, shut off from everything but that file.

People's SQL is checked on cursors of the database the projector writes and runs on a copy
of it (`user_sql.py`), and DuckDB's settings belong to a database, not to one of its
connections. So every read model, and every copy,
is opened with external access off (no file but its own, its log and its parts, no network, no
extension installed or loaded, no Python object read by its name: rows go in as Arrow tables
registered under a name) and its configuration locked once set, so that nothing run on it
can turn either back on.

Rows go in through a table named `incoming` that each connection registers once, whose rows
are the Arrow table last handed to `incoming()`: registering a table for each insert would
cost as much as the insert of a live event's few rows.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path

import duckdb
import pyarrow as pa

from projections import stats_parts

# Set once opened: the time zone needs the ICU extension, which DuckDB loads only then. A
# query of `kernel_stats` reads its parts' footers (`stats_parts.py`), kept between queries:
# a part is never changed, and a count of every row at 700 parts took 90 ms, 6 ms with them.
SETTINGS = {"TimeZone": "UTC", "parquet_metadata_cache": "true"}


def open_database(
    path: Path | str, *, read_only: bool = False, settings: Mapping[str, str] = {}, parts_of: Path | str | None = None
) -> duckdb.DuckDBPyConnection:
    """The DuckDB database at `path` with `settings` (and SETTINGS) set and locked, which may
    read and write its `kernel_stats` parts (`stats_parts.py`), or those of the read model
    `parts_of` when it is a copy of that one."""
    con = duckdb.connect(str(path), read_only=read_only)
    try:
        stats_parts.allow(con, path if parts_of is None else parts_of)
        con.execute("SET enable_external_access = false")
        for name, value in {**SETTINGS, **settings}.items():
            con.execute(f"SET {name} = '{value}'")
        con.execute("SET lock_configuration = true")
        _register_incoming(con)
    except BaseException:
        con.close()
        raise
    return con


_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def memory_limit(con: duckdb.DuckDBPyConnection) -> int:
    """The bytes the database may hold in memory, as its `memory_limit` setting reads ("64.0 MiB")."""
    ((setting,),) = con.execute("SELECT current_setting('memory_limit')").fetchall()
    number, unit = str(setting).split()
    return int(float(number) * _UNITS[unit])


@contextlib.contextmanager
def registered(con: duckdb.DuckDBPyConnection, name: str, rows: pa.Table | pa.RecordBatchReader) -> Iterator[None]:
    """`rows` readable as the table `name` in what `con` runs inside."""
    con.register(name, rows)
    try:
        yield
    finally:
        con.unregister(name)


class _Incoming:
    """What a connection reads as `incoming`: DuckDB asks for the stream at each scan."""

    def __init__(self) -> None:
        self.rows = _NOTHING

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.rows.__arrow_c_stream__(requested_schema)


_NOTHING = pa.table({"nothing": pa.array([], pa.int8())})  # registering reads a schema
_incoming: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, _Incoming] = weakref.WeakKeyDictionary()


def _register_incoming(con: duckdb.DuckDBPyConnection) -> None:
    # Outside any transaction: one rolled back would take the registration with it.
    feed = _incoming[con] = _Incoming()
    con.register("incoming", feed)


@contextlib.contextmanager
def incoming(con: duckdb.DuckDBPyConnection, rows: pa.Table) -> Iterator[None]:
    """`rows` readable as the table `incoming` in what `con` (opened by `open_database`)
    runs inside."""
    feed = _incoming[con]
    feed.rows = rows
    try:
        yield
    finally:
        feed.rows = _NOTHING
