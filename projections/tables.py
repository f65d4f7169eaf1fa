"""DuckDB tables and Arrow schemas, both derived from the row Structs in `rows.py`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb
import msgspec
import pyarrow as pa

from projections.rows import APPEND_TABLES, ENTITY_TABLES, PARKED_TABLE, ParkedRow

_SQL = {str: "VARCHAR", int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN", datetime: "TIMESTAMPTZ"}
_ARROW = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(), datetime: pa.timestamp("us", tz="UTC")}

ROW_TYPES: dict[str, type[msgspec.Struct]] = {
    **ENTITY_TABLES,
    **{t: spec[0] for t, spec in APPEND_TABLES.items()},
    PARKED_TABLE: ParkedRow,
}

# Columns that say when this read model did something, not what the log holds: a replay
# fills them in its own time, so comparisons with one leave them out.
_OWN_TIMES = {PARKED_TABLE: ("parked_at",)}


def _base_type(info: msgspec.inspect.Type) -> tuple[Any, bool]:
    """The Python scalar type behind a field's type, and whether it is a list of it."""
    if isinstance(info, msgspec.inspect.UnionType):
        (info,) = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
    if isinstance(info, msgspec.inspect.ListType):
        return _base_type(info.item_type)[0], True
    scalar = {
        msgspec.inspect.StrType: str,
        msgspec.inspect.IntType: int,
        msgspec.inspect.FloatType: float,
        msgspec.inspect.BoolType: bool,
        msgspec.inspect.DateTimeType: datetime,
    }
    return scalar[type(info)], False


def columns(row_type: type[msgspec.Struct]) -> list[tuple[str, Any, bool]]:
    info = msgspec.inspect.type_info(row_type)
    return [(f.name, *_base_type(f.type)) for f in info.fields]  # type: ignore[attr-defined]


def create_sql(table: str, prefix: str = "") -> str:
    cols = ", ".join(f"{name} {_SQL[t]}{'[]' if is_list else ''}" for name, t, is_list in columns(ROW_TYPES[table]))
    return f"CREATE TABLE IF NOT EXISTS {prefix}{table} ({cols})"


def arrow_schema(table: str) -> pa.Schema:
    return pa.schema(
        [pa.field(name, pa.list_(_ARROW[t]) if is_list else _ARROW[t]) for name, t, is_list in columns(ROW_TYPES[table])]
    )


_SCHEMAS = {table: arrow_schema(table) for table in ROW_TYPES}


def to_arrow(table: str, rows: list[msgspec.Struct]) -> pa.Table:
    schema = _SCHEMAS[table]
    data = zip(*map(msgspec.structs.astuple, rows))
    return pa.Table.from_arrays([pa.array(col, type=schema.field(i).type) for i, col in enumerate(data)], schema=schema)


# What inserting rows raises when a value does not fit its column, such as an integer past 64
# bits: the fault of the event they came from, where any other error (I/O, memory) is not.
REFUSED_ROWS = (duckdb.DataError, OverflowError, pa.ArrowException)


def _columns(con: duckdb.DuckDBPyConnection, database: str | None) -> dict[str, list[str]]:
    """Each table's columns with their types, in order, in `database` (None: the current one)."""
    where = "database_name = current_database()" if database is None else "database_name = ?"
    records = con.execute(
        f"""SELECT table_name, list(column_name || ' ' || data_type ORDER BY column_index)
            FROM duckdb_columns() WHERE {where} AND schema_name = 'main' GROUP BY table_name""",
        [] if database is None else [database],
    ).fetchall()
    return dict(records)


def stale_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables a read model holds whose columns are not the row Structs' (an older or
    newer Cascade made them): rows of this version cannot be written into them."""
    existing = _columns(con, None)
    con.execute("ATTACH ':memory:' AS expected_schema")
    try:
        for table in ROW_TYPES:
            con.execute(create_sql(table, "expected_schema."))
        expected = _columns(con, "expected_schema")
    finally:
        con.execute("DETACH expected_schema")
    return sorted(t for t, columns in expected.items() if t in existing and existing[t] != columns)


def create_all(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables, made if missing. A read model with stale tables is emptied first, its
    checkpoint back to 0, so the projector rebuilds it from the log; those are returned."""
    con.execute("SET TimeZone = 'UTC'")
    stale = stale_tables(con)
    if stale:
        for table in [*ROW_TYPES, "checkpoint"]:
            con.execute(f"DROP TABLE IF EXISTS {table}")
    for table in ROW_TYPES:
        con.execute(create_sql(table))
    con.execute("CREATE TABLE IF NOT EXISTS checkpoint (id INTEGER PRIMARY KEY, seq BIGINT NOT NULL)")
    con.execute("INSERT INTO checkpoint SELECT 1, 0 WHERE NOT EXISTS (SELECT 1 FROM checkpoint)")
    return stale


def compared_columns(table: str) -> str:
    """The columns of `table` two read models of the same log agree on, for a SELECT."""
    own = _OWN_TIMES.get(table, ())
    if table not in ROW_TYPES or not own:
        return "*"
    return ", ".join(name for name in ROW_TYPES[table].__struct_fields__ if name not in own)


def checkpoint(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT seq FROM checkpoint WHERE id = 1").fetchone()
    return int(row[0]) if row else 0


def from_rows(table: str, records: list[tuple[Any, ...]]) -> list[msgspec.Struct]:
    """Rows read back with `SELECT *` as their Structs."""
    row_type = ROW_TYPES[table]
    names = row_type.__struct_fields__
    return [row_type(**dict(zip(names, record))) for record in records]
