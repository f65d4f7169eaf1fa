"""Reads of traces, their files and kernels, answered as the API's Structs.

Every function takes a DuckDB connection (a cursor of the read model, used by one thread) and
reads what the projector last committed. A caller that makes several reads that must agree
runs them in one transaction; these functions open none, so they work inside the caller's.
Deleted traces are never shown.
"""

from __future__ import annotations

import duckdb
import msgspec

from cascade_core.events import TraceKernel
from cascade_api.models import Trace, TraceDetail, TraceFileRef, TraceMetadata
from cascade_core.object_names import trace_file
from cascade_core.trace import Trace as TraceState
from projections import tables
from projections.queries.convert import from_row
from projections.rows import TraceRow

Con = duckdb.DuckDBPyConnection

# Every TraceKernel field is a trace_kernels column of the same name: rows come in its order.
_TRACE_KERNEL_COLUMNS = ", ".join(TraceKernel.__struct_fields__)


def list_traces(con: Con) -> list[Trace]:
    """Every trace not deleted, newest first."""
    records = con.execute("SELECT * FROM traces WHERE NOT deleted ORDER BY created_at DESC, id").fetchall()
    return [trace_from_row(row) for row in tables.from_rows(TraceRow, records)]


def trace_summary(con: Con, trace_id: str) -> Trace | None:
    row = _row(con, trace_id)
    return None if row is None else trace_from_row(row)


def trace_detail(con: Con, trace_id: str) -> TraceDetail | None:
    """The trace with its stored files (by path) and its kernels (by launch uid)."""
    row = _row(con, trace_id)
    return None if row is None else _detail(con, row)


def trace_state(con: Con, trace_id: str) -> TraceState | None:
    """The trace's domain state, for a decision."""
    row = _row(con, trace_id)
    return None if row is None else row.trace


def timed_trace(con: Con, trace_id: str) -> tuple[TraceState | None, list[TraceKernel]]:
    """The trace's domain state and its kernels, which a timing file is lined up with."""
    row = _row(con, trace_id)
    return (None, []) if row is None else (row.trace, _kernels(con, trace_id))


def _detail(con: Con, row: TraceRow) -> TraceDetail:
    trace_id = row.id
    files = con.execute("SELECT path, bytes FROM trace_files WHERE trace_id = ? ORDER BY path", [trace_id]).fetchall()
    summary = trace_from_row(row)
    metadata = TraceMetadata(
        status="ok" if row.state == "ready" else row.state,
        files=[TraceFileRef(trace_file(trace_id, path), size) for path, size in files],
        trace_gpu_arch=row.trace_gpu_arch,
        suggested_sim_config=row.suggested_sim_config,
    )
    return TraceDetail(**msgspec.structs.asdict(summary), metadata=metadata, kernels=_kernels(con, trace_id))


def _kernels(con: Con, trace_id: str) -> list[TraceKernel]:
    """The trace's kernels, by launch uid."""
    kernels = con.execute(f"SELECT {_TRACE_KERNEL_COLUMNS} FROM trace_kernels WHERE trace_id = ? ORDER BY uid", [trace_id]).fetchall()
    return [TraceKernel(**dict(zip(TraceKernel.__struct_fields__, k))) for k in kernels]


def active_run_using(con: Con, trace_id: str) -> str | None:
    """An active run of the trace, the oldest if there are several."""
    found = con.execute("SELECT id FROM runs WHERE trace_id = ? AND state = 'active' ORDER BY created_at, id LIMIT 1", [trace_id]).fetchall()
    return str(found[0][0]) if found else None


def _row(con: Con, trace_id: str) -> TraceRow | None:
    records = con.execute("SELECT * FROM traces WHERE id = ? AND NOT deleted", [trace_id]).fetchall()
    rows = tables.from_rows(TraceRow, records)
    return rows[0] if rows else None


def trace_from_row(row: TraceRow) -> Trace:
    """The row as the API shows it: every Trace field is a field of the trace's domain state
    of the same name."""
    return from_row(Trace, row.trace)
