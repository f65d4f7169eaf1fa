"""Reads of what the projector parked: stored messages no consumer could use."""

from __future__ import annotations

import duckdb

from cascade_api.models import ParkedEvent
from projections.parking import LOST
from projections.queries.convert import one_row

Con = duckdb.DuckDBPyConnection

_FIELDS = ParkedEvent.__struct_fields__


def parked_events(con: Con) -> list[ParkedEvent]:
    """Every parked message, by stream sequence."""
    records = con.execute(f"SELECT {', '.join(_FIELDS)} FROM parked ORDER BY seq").fetchall()
    return [ParkedEvent(**dict(zip(_FIELDS, record))) for record in records]


def lost_events(con: Con) -> list[ParkedEvent]:
    """The messages nats-server could not read back from its store (`parking.lost`), by sequence."""
    records = con.execute(f"SELECT {', '.join(_FIELDS)} FROM parked WHERE starts_with(error, ?) ORDER BY seq", [LOST]).fetchall()
    return [ParkedEvent(**dict(zip(_FIELDS, record))) for record in records]


def parked_count(con: Con) -> int:
    (count,) = one_row(con, "SELECT count(*) FROM parked")
    return int(count)


def parked_seqs(con: Con, subject_prefix: str, up_to: int) -> frozenset[int]:
    """The sequences parked up to `up_to` among the subjects that start with `subject_prefix`."""
    records = con.execute(
        "SELECT seq FROM parked WHERE seq <= ? AND starts_with(subject, ?)", [up_to, subject_prefix]
    ).fetchall()
    return frozenset(seq for (seq,) in records)
