"""Trace commands besides the upload (`uploads/receive.py`): delete a trace, attach real
timing to one. Each decides with `cascade_core.traces` under the one conflict rule
(`conflicts.py`)."""

from __future__ import annotations

import anyio

from cascade_app import clock
from cascade_app.conflicts import Decision, decided, last_shown, seq_of
from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_core.object_names import trace_prefix
from cascade_core.refusals import NotFound
from cascade_core.traces import Attachment, RealTimingAttached, attached, decide_delete, decide_real_timing
from cascade_formats.realtiming import timing_file
from cascade_host import new_ids
from cascade_nats import subjects
from projections.queries.traces import active_run_using, timed_trace, trace_state


async def delete_trace(c: Cascade, trace_id: str) -> None:
    """Delete the trace, then remove its stored files (its events stay in the log)."""

    async def delete() -> Decision[None]:
        last = await last_shown(c, subjects.trace(trace_id))
        trace = await read(c, trace_state, trace_id)
        active_run = await read(c, active_run_using, trace_id)
        deleted = decide_delete(
            trace, trace_id, clock.now(), new_ids.trace_deleted_id(),
            active_run=active_run, uploading_here=trace_id in c.uploading,
        )
        return Decision([deleted], seq_of(last), None)

    await decided(c, delete)
    await c.objects.delete_prefix(trace_prefix(trace_id))


async def attach_real_timing(c: Cascade, trace_id: str, body: bytes, *, replace: bool) -> RealTimingAttached:
    """Make the timing file `body` the ready trace's real timing: its rows, then the marker
    that makes them the trace's (the fold takes it only while the trace still has the timing
    it replaces, so of racing requests one attaches)."""

    async def attach() -> Decision[RealTimingAttached]:
        last = await last_shown(c, subjects.trace(trace_id))
        if last is None:
            raise NotFound(f"trace {trace_id} not found")
        trace, kernels = await read(c, timed_trace, trace_id)
        timing = await anyio.to_thread.run_sync(timing_file, body, kernels)
        attachment = Attachment(trace_id=trace_id, timing_id=new_ids.timing_id(), timing=timing, replace=replace)
        listed, marker = await anyio.to_thread.run_sync(decide_real_timing, trace, attachment, clock.now())
        return Decision([*listed, marker], last.seq, attached(marker))

    return await decided(c, attach)
