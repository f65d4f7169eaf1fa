"""Which code built a read model: a fingerprint of its tables and the fold's version, kept in
the file's `read_model` table.

The fingerprint is a digest of every table's name, its columns and their DuckDB types, and the
columns that identify its rows, all derived from the row Structs (`rows.py`, `tables.py`), and
the stats' kinds (`cascade_formats/stat_kinds.toml`); the
fold's version is `fold.VERSION`, bumped by hand when the fold's meaning changes. A file that
records another fingerprint or version, or none though it has tables (built before read models
recorded one), is outdated: its rows may not fit the row types or may say what this fold would
not, and a table it lacks would start empty with the checkpoint already past every event. The
service rebuilds such a file from the log (`rebuild.py`).
"""

from __future__ import annotations

import hashlib

import duckdb
import msgspec

from cascade_formats import stat_kinds
from projections import fold, stats_parts, tables

TABLE = "read_model"


class Version(msgspec.Struct, frozen=True):
    tables: str  # the tables' fingerprint
    fold_version: int


_COLUMNS = ", ".join(Version.__struct_fields__)


def fingerprint() -> str:
    layout = [[table, tables.column_sql(table), list(tables.KEYS[table])] for table in tables.ROW_TYPES]
    # The stats' kinds decide kernel_stats' values (a running total's own value is a difference).
    stored = [tables.STORED_AS, stats_parts.TABLES_SQL]
    return hashlib.sha256(msgspec.json.encode([layout, stored, tables.CHECKPOINT_SQL, stat_kinds.RULES])).hexdigest()[:16]


def current() -> Version:
    return Version(fingerprint(), fold.VERSION)


class Outdated(Exception):
    """A read model another version built."""

    def __init__(self, found: Version | None, wanted: Version) -> None:
        self.found = found
        self.wanted = wanted
        super().__init__(self.reason)

    @property
    def reason(self) -> str:
        if self.found is None:
            return "was built before read models recorded their version"
        changes = []
        if self.found.tables != self.wanted.tables:
            changes.append(f"its tables changed (fingerprint {self.found.tables}, now {self.wanted.tables})")
        if self.found.fold_version != self.wanted.fold_version:
            changes.append(f"the fold's version went from {self.found.fold_version} to {self.wanted.fold_version}")
        return "was built by another version: " + " and ".join(changes)


def _table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    records = con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()
    return {name for (name,) in records}


def stored(con: duckdb.DuckDBPyConnection) -> Version | None:
    """The version the read model records, or None if it records none."""
    if TABLE not in _table_names(con):
        return None
    record = con.execute(f"SELECT {_COLUMNS} FROM {TABLE}").fetchone()
    return Version(**dict(zip(Version.__struct_fields__, record))) if record else None


def outdated(con: duckdb.DuckDBPyConnection) -> Outdated | None:
    """Why the read model is not this version's, or None if it is, or is new (has no tables)."""
    if not _table_names(con):
        return None
    found, wanted = stored(con), current()
    return None if found == wanted else Outdated(found, wanted)


def ensure(con: duckdb.DuckDBPyConnection) -> None:
    """Give a new read model this version's tables, checkpoint and version, in one transaction,
    so that no crash leaves tables without a version. Raises `Outdated` for a read model another
    version built, and leaves it as it is."""
    why = outdated(con)
    if why is not None:
        raise why
    new = TABLE not in _table_names(con)  # not outdated, so it has no tables at all
    con.execute("BEGIN TRANSACTION")
    try:
        tables.create_all(con)
        if new:
            con.execute(f"CREATE TABLE {TABLE} (tables VARCHAR NOT NULL, fold_version INTEGER NOT NULL)")
            con.execute(f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES (?, ?)", list(msgspec.structs.astuple(current())))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
