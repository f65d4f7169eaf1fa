"""Reads of what the projector parked: stored messages no consumer could use."""

from __future__ import annotations

import duckdb

from cascade_core.models import ParkedEvent

Con = duckdb.DuckDBPyConnection

_FIELDS = ParkedEvent.__struct_fields__


def parked_events(con: Con) -> list[ParkedEvent]:
    """Every parked message, by stream sequence."""
    records = con.execute(f"SELECT {', '.join(_FIELDS)} FROM parked ORDER BY seq").fetchall()
    return [ParkedEvent(**dict(zip(_FIELDS, record))) for record in records]


def parked_count(con: Con) -> int:
    (count,) = con.execute("SELECT count(*) FROM parked").fetchone()  # type: ignore[misc]
    return int(count)
