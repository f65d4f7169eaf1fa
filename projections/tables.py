"""DuckDB tables and Arrow schemas, both derived from the row Structs in `rows.py`."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import duckdb
import msgspec
import pyarrow as pa

from projections import stats_parts
from projections.rows import APPEND_TABLES, ENTITY_TABLES, PARKED_KEY, PARKED_TABLE, STATS_TABLES, ParkedRow

# An int whose type says it stays within 32 bits (`msgspec.Meta(le=...)`) is an INTEGER.
_INT32 = "int32"
_SQL = {str: "VARCHAR", int: "BIGINT", _INT32: "INTEGER", float: "DOUBLE", bool: "BOOLEAN", datetime: "TIMESTAMPTZ"}
_ARROW = {
    str: pa.string(), int: pa.int64(), _INT32: pa.int32(), float: pa.float64(), bool: pa.bool_(), datetime: pa.timestamp("us", tz="UTC")
}

ROW_TYPES: dict[str, type[msgspec.Struct]] = {
    **ENTITY_TABLES,
    **{t: spec[0] for t, spec in APPEND_TABLES.items()},
    **{t: spec[0] for t, spec in STATS_TABLES.items()},
    PARKED_TABLE: ParkedRow,
}
TABLE_OF: dict[type[msgspec.Struct], str] = {row_type: table for table, row_type in ROW_TYPES.items()}

R = TypeVar("R", bound=msgspec.Struct)

# Tables whose rows are stored under another name, read through a view of theirs.
STORED_AS = {"kernel_stats": stats_parts.HOT}

# The columns that identify a row of each table: entity rows are replaced by id, and a row of
# any other table already there is never added again.
KEYS: dict[str, tuple[str, ...]] = {
    **{t: ("id",) for t in ENTITY_TABLES},
    **{t: spec[1] for t, spec in APPEND_TABLES.items()},
    **{t: spec[1] for t, spec in STATS_TABLES.items()},
    PARKED_TABLE: PARKED_KEY,
}

# Views over the tables, made again each time a read model of this version is opened: they
# hold nothing, so a change to one needs no rebuild.
VIEWS = {
    # The stats catalogue: every stat name kernels of a config have, and how many have it,
    # the sample runs' kernels counted apart. Counted per sim first: DuckDB groups 20 M rows
    # by sim and stat id several times faster than by config and stat (bench/stats_bench.py).
    "stats": """WITH per_sim AS (SELECT k.sim_id, v.stat, count(*) AS kernels FROM kernel_stats v JOIN kernels k ON k.seq = v.seq GROUP BY ALL)
        SELECT s.gpu_config, n.name AS stat, sum(p.kernels)::BIGINT AS kernels, s.sample
        FROM per_sim p JOIN sims s ON s.id = p.sim_id JOIN stat_names n ON n.id = p.stat
        GROUP BY s.gpu_config, n.name, s.sample""",
}

CHECKPOINT_SQL = "CREATE TABLE IF NOT EXISTS checkpoint (id INTEGER PRIMARY KEY, seq BIGINT NOT NULL)"

# Columns that say when this read model did something, not what the log holds: a replay
# fills them in its own time, so comparisons with one leave them out.
_OWN_TIMES = {PARKED_TABLE: ("parked_at",)}


def _plain(info: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """A field's type without its metadata and without None (columns are all nullable)."""
    if isinstance(info, msgspec.inspect.Metadata):
        info = info.type
    if isinstance(info, msgspec.inspect.UnionType):
        (info,) = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
    return info


def _scalar(info: msgspec.inspect.Type) -> Any:
    if isinstance(info, msgspec.inspect.IntType) and info.le is not None and info.le < 2**31:
        return _INT32
    if isinstance(info, msgspec.inspect.LiteralType):
        return str
    scalar = {
        msgspec.inspect.StrType: str,
        msgspec.inspect.IntType: int,
        msgspec.inspect.FloatType: float,
        msgspec.inspect.BoolType: bool,
        msgspec.inspect.DateTimeType: datetime,
    }
    return scalar[type(info)]


def sql_type(info: msgspec.inspect.Type) -> str:
    """A field's DuckDB type: a list a LIST, a dict a MAP, a Struct a STRUCT of its fields."""
    info = _plain(info)
    if isinstance(info, msgspec.inspect.ListType):
        return f"{sql_type(info.item_type)}[]"
    if isinstance(info, msgspec.inspect.DictType):
        return f"MAP({sql_type(info.key_type)}, {sql_type(info.value_type)})"
    if isinstance(info, msgspec.inspect.StructType):
        return f"STRUCT({', '.join(f'{f.name} {sql_type(f.type)}' for f in info.fields)})"
    return _SQL[_scalar(info)]


def arrow_type(info: msgspec.inspect.Type) -> pa.DataType:
    """A field's Arrow type, as `sql_type` gives its DuckDB one."""
    info = _plain(info)
    if isinstance(info, msgspec.inspect.ListType):
        return pa.list_(arrow_type(info.item_type))
    if isinstance(info, msgspec.inspect.DictType):
        return pa.map_(arrow_type(info.key_type), arrow_type(info.value_type))
    if isinstance(info, msgspec.inspect.StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.type)) for f in info.fields])
    return _ARROW[_scalar(info)]


def _nested(info: msgspec.inspect.Type) -> bool:
    """Whether a column's values are Structs or dicts, which DuckDB and Arrow take as builtins."""
    info = _plain(info)
    if isinstance(info, msgspec.inspect.ListType):
        return _nested(info.item_type)
    return isinstance(info, msgspec.inspect.StructType | msgspec.inspect.DictType)


def _stored(field: msgspec.inspect.Field) -> bool:
    return not (isinstance(field.type, msgspec.inspect.Metadata) and (field.type.extra or {}).get("stored") is False)


def _fields(row_type: type[msgspec.Struct]) -> tuple[msgspec.inspect.Field, ...]:
    info = msgspec.inspect.type_info(row_type)
    assert isinstance(info, msgspec.inspect.StructType)
    return info.fields


@functools.cache
def stored_fields(row_type: type[msgspec.Struct]) -> tuple[int, ...]:
    """The positions of a row type's fields that are its table's columns (`rows.NOT_STORED`)."""
    return tuple(i for i, f in enumerate(_fields(row_type)) if _stored(f))


def columns(row_type: type[msgspec.Struct]) -> list[msgspec.inspect.Field]:
    fields = _fields(row_type)
    return [fields[i] for i in stored_fields(row_type)]


@functools.cache
def has_nested(row_type: type[msgspec.Struct]) -> bool:
    return any(_nested(f.type) for f in columns(row_type))


def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value, builtin_types=(datetime,))


@functools.cache
def _stored_values(row_type: type[msgspec.Struct]) -> Callable[[msgspec.Struct], tuple[Any, ...]]:
    """How a row of the type gives its column values: all its fields, or those stored picked
    by one C call (a generator over the fields cost more than the insert of the row)."""
    stored = stored_fields(row_type)
    if has_nested(row_type):  # its nested columns as builtins, as `to_arrow` takes them
        getters = _column_getters(row_type)
        return lambda row: tuple(get(row) for get in getters)
    if len(stored) == len(_fields(row_type)):
        return msgspec.structs.astuple
    pick = operator.itemgetter(*stored)
    return lambda row: pick(msgspec.structs.astuple(row))  # itemgetter of several positions gives a tuple


def values(row: msgspec.Struct) -> tuple[Any, ...]:
    """A row's column values, in column order."""
    return _stored_values(type(row))(row)


def column_sql(table: str) -> list[str]:
    """Each column of `table` as its definition: name and DuckDB type."""
    return [f"{f.name} {sql_type(f.type)}" for f in columns(ROW_TYPES[table])]


def create_sql(table: str) -> str:
    return f"CREATE TABLE IF NOT EXISTS {STORED_AS.get(table, table)} ({', '.join(column_sql(table))})"


@functools.cache
def _schema(row_type: type[msgspec.Struct]) -> pa.Schema:
    """The Arrow schema of a row type's table, made once (by type, so a new type is seen)."""
    return pa.schema([pa.field(f.name, arrow_type(f.type)) for f in columns(row_type)])


@functools.cache
def _column_getters(row_type: type[msgspec.Struct]) -> tuple[Callable[[msgspec.Struct], Any], ...]:
    getters: list[Callable[[msgspec.Struct], Any]] = []
    for f in columns(row_type):
        get = operator.attrgetter(f.name)
        getters.append(functools.partial(_built, get) if _nested(f.type) else get)
    return tuple(getters)


def _built(get: Callable[[msgspec.Struct], Any], row: msgspec.Struct) -> Any:
    return _builtins(get(row))


def to_arrow(table: str, rows: Sequence[msgspec.Struct]) -> pa.Table:
    """The rows as an Arrow table, each column taken from them by one C map of an attribute
    getter: 0.3 us a kernels row, where a tuple per row turned into columns by `zip` took 1.4
    (bench/README.md)."""
    row_type = ROW_TYPES[table]
    schema = _schema(row_type)
    return pa.Table.from_arrays(
        [pa.array(list(map(get, rows)), type=schema.field(i).type) for i, get in enumerate(_column_getters(row_type))], schema=schema
    )


def changed_columns(stored: R, row: R) -> dict[str, Any]:
    """The columns whose values `row` changes from `stored` (the same table's), with `row`'s
    values as `values` gives them."""
    return {name: get(row) for name, get in _named_getters(type(row)) if getattr(stored, name) != getattr(row, name)}


@functools.cache
def _named_getters(row_type: type[msgspec.Struct]) -> tuple[tuple[str, Callable[[msgspec.Struct], Any]], ...]:
    return tuple(zip([f.name for f in columns(row_type)], _column_getters(row_type), strict=True))


# What inserting rows raises when a value does not fit its column, such as an integer past 64
# bits: the fault of the event they came from, where any other error (I/O, memory) is not.
REFUSED_ROWS = (duckdb.DataError, OverflowError, pa.ArrowException)


def create_all(con: duckdb.DuckDBPyConnection) -> None:
    for table in ROW_TYPES:
        con.execute(create_sql(table))
    con.execute(CHECKPOINT_SQL)
    for statement in stats_parts.TABLES_SQL:
        con.execute(statement)
    stats_parts.make_views(con)
    for name, select in VIEWS.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {select}")
    con.execute("INSERT INTO checkpoint SELECT 1, 0 WHERE NOT EXISTS (SELECT 1 FROM checkpoint)")


def compared_columns(table: str) -> str:
    """The columns of `table` two read models of the same log agree on, for a SELECT."""
    own = _OWN_TIMES.get(table, ())
    if table not in ROW_TYPES or not own:
        return "*"
    return ", ".join(f.name for f in columns(ROW_TYPES[table]) if f.name not in own)


def checkpoint(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT seq FROM checkpoint WHERE id = 1").fetchone()
    return int(row[0]) if row else 0


def from_rows(row_type: type[R], records: list[tuple[Any, ...]]) -> list[R]:
    """Rows read back with `SELECT *` as `row_type`s (of a table that stores every field), by
    field name: STRUCTs, LISTs and MAPs as the Structs, lists and dicts their fields hold."""
    names = row_type.__struct_fields__
    assert len(stored_fields(row_type)) == len(names), f"{TABLE_OF[row_type]} does not store every field of its rows"
    if has_nested(row_type):
        return [msgspec.convert(dict(zip(names, record)), row_type) for record in records]
    return [row_type(**dict(zip(names, record))) for record in records]
