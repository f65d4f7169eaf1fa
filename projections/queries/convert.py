"""Rows as the API's Structs, field by field name, and the one row an aggregate answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import duckdb
import msgspec

S = TypeVar("S", bound=msgspec.Struct)


def from_row(api_type: type[S], row: object, **given: object) -> S:
    """An `api_type` whose fields are the row's attributes of the same names, but those
    `given`. Built, not validated: the read model holds what its events said, and an API
    limit tightened since must not hide it."""
    fields = {name: getattr(row, name) for name in api_type.__struct_fields__ if name not in given}
    return api_type(**fields, **given)


def one_row(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[object] | None = None) -> tuple[Any, ...]:
    """The row of a query that always answers one, such as `SELECT count(*) ...` with no
    GROUP BY. Read to its end: a result left unfinished on a connection makes the next
    relation query on it (`con.sql`) fail."""
    rows = con.execute(sql, params).fetchall()
    assert len(rows) == 1, f"{len(rows)} rows from {sql}"
    return rows[0]
