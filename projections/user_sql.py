"""SQL that people write, run on the read model beside the projector.

A query must be one statement that DuckDB's own parser calls a SELECT, and every table
function it calls must be one of `TABLE_FUNCTIONS`, which read nothing but the read model
and change nothing: what reads files or the network (`read_csv`, `read_parquet`, `glob`...),
runs SQL of its own (`query`) or acts on the database (`checkpoint`) is refused before the
query runs, as are writes, `COPY`, `ATTACH`, `INSTALL`/`LOAD`, `PRAGMA`, `SET`, `CALL` and
several statements at once. DuckDB backs that up: the read model is opened with external
access off and its configuration locked (`database.py`), so a file named as a table, or a
function the check let through, reaches no file either.

Serve checks the query on a cursor of its own; the query then runs in a process of its own on
a copy of the read model, within a cap on its memory (`sql_process.py`). There it is
interrupted past its time limit, and refused once its answer passes its rows or bytes
(`answers.py` makes the answer). Functions that read DuckDB's settings are refused too: some
settings name paths on the server.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import duckdb
import msgspec
import pyarrow as pa

from cascade_api.models import SqlColumn, SqlFormat
from cascade_core.refusals import Invalid, TimedOut, Unanswerable
from projections import answers

TABLE_FUNCTIONS = frozenset(
    {
        "range", "generate_series", "unnest", "repeat", "json_each", "json_tree",
        "duckdb_columns", "duckdb_constraints", "duckdb_functions", "duckdb_keywords", "duckdb_schemas",
        "duckdb_tables", "duckdb_types", "duckdb_views", "pragma_table_info",
    }
)  # fmt: skip
# Settings name paths on the server (temp_directory, home_directory, secret_directory...); the
# table functions and PRAGMAs that show them are refused as any other.
SETTINGS_FUNCTIONS = frozenset({"current_setting"})
BATCH_ROWS = 8192


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    seconds: float
    rows: int
    bytes: int


_serialized = msgspec.json.Decoder(dict[str, Any])


def check(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The one SELECT `sql` holds, or `Unanswerable`; a ParserException if it does not parse."""
    statements = con.extract_statements(sql)
    if len(statements) != 1:
        raise Unanswerable(f"one statement at a time: this has {len(statements)}")
    (statement,) = statements
    if statement.type != duckdb.StatementType.SELECT:
        raise Unanswerable(f"only a SELECT is run here, and this is {statement.type.name.replace('_', ' ')}")
    tables, scalars = functions(con, statement.query)
    refused = sorted(tables - TABLE_FUNCTIONS)
    if refused:
        raise Unanswerable(
            f"{', '.join(refused)}: queries read only the read model's tables, so the table functions they may call are "
            + ", ".join(sorted(TABLE_FUNCTIONS))
        )
    settings = sorted(scalars & SETTINGS_FUNCTIONS)
    if settings:
        raise Unanswerable(f"{', '.join(settings)}: queries read only the read model's tables, not DuckDB's settings")
    return statement.query


def functions(con: duckdb.DuckDBPyConnection, select: str) -> tuple[set[str], set[str]]:
    """The names of the table functions and of the other functions a SELECT calls anywhere,
    as DuckDB parsed it."""
    ((text,),) = con.execute("SELECT json_serialize_sql(?)", [select]).fetchall()
    tree = _serialized.decode(text)
    if tree.get("error"):
        raise Unanswerable(f"the query cannot be checked: {tree.get('error_message', 'DuckDB could not serialize it')}")
    tables: set[str] = set()
    scalars: set[str] = set()
    nodes: list[Any] = [tree]
    while nodes:
        node = nodes.pop()
        if isinstance(node, dict):
            if node.get("type") == "TABLE_FUNCTION":
                tables.add(str(node.get("function", {}).get("function_name", "")).lower())
            elif node.get("class") == "FUNCTION":
                scalars.add(str(node.get("function_name", "")).lower())
            nodes.extend(node.values())
        elif isinstance(node, list):
            nodes.extend(node)
    return tables, scalars


def answer(con: duckdb.DuckDBPyConnection, sql: str, form: SqlFormat, limits: Limits) -> bytes:
    """The answer to `sql` in `form`; a refusal (unanswerable, an answer over a limit, timed out) or
    DuckDB's error if none."""
    select = check(con, sql)
    with _interrupted_after(con, limits.seconds), _read_transaction(con):
        relation = con.sql(select)
        columns = [SqlColumn(name, str(type_)) for name, type_ in zip(relation.columns, relation.types)]
        reader = relation.to_arrow_reader(BATCH_ROWS)
        try:
            return answers.encode(form, columns, reader.schema, _within(reader, limits.rows), limits.bytes)
        except answers.TooLarge as large:
            raise Invalid(f"{large}: over CASCADE_SQL_MAX_BYTES ({limits.bytes:,} bytes); ask for less, or aggregate") from None
        except answers.NoForm as no_form:
            raise Unanswerable(str(no_form)) from None
        finally:
            reader.close()


def _within(reader: pa.RecordBatchReader, limit: int) -> Iterator[pa.RecordBatch]:
    rows = 0
    for batch in reader:
        rows += batch.num_rows
        if rows > limit:
            raise Invalid(f"the answer has more than {limit:,} rows (CASCADE_SQL_MAX_ROWS); add a LIMIT, or aggregate")
        yield batch


@contextlib.contextmanager
def _read_transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    finally:
        con.execute("ROLLBACK")


@contextlib.contextmanager
def _interrupted_after(con: duckdb.DuckDBPyConnection, seconds: float) -> Iterator[None]:
    """DuckDB interrupted once `seconds` have passed, and the answer refused if they passed
    before it was done: a query DuckDB works out while planning it (a constant expression,
    such as `md5(repeat('x', 100000000))`) never sees the interrupt, and its answer, however
    late, would otherwise come back."""
    fired = threading.Event()

    def stop() -> None:
        fired.set()
        con.interrupt()

    timer = threading.Timer(seconds, stop)
    timer.start()
    try:
        yield
    except duckdb.InterruptException:
        raise TimedOut(timed_out(seconds)) from None
    finally:
        timer.cancel()
    if fired.is_set():
        raise TimedOut(timed_out(seconds))


def timed_out(seconds: float) -> str:
    return f"the query ran past CASCADE_SQL_TIMEOUT ({seconds:g} s) and was stopped"
