"""A trace as the domain holds it: its upload's state, what the upload found in its files,
the real timing in use, whether it is deleted; `evolve` is the one place an event changes it.

Pure: the trace (None: never uploaded) and an event in, the trace out (`trace` itself when
nothing changed). Its files, kernels and timing rows are not part of it: the read model keeps
them beside it, those of the events the trace `takes_rows` of (`projections/fold.py`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from cascade_core import events as ev


TraceState = Literal["uploading", "processing", "ready", "failed"]


class Trace(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    id: str
    sample: bool  # ships with Cascade
    created_at: datetime
    updated_at: datetime
    state: str  # uploading, processing, ready, failed
    error: str | None
    deleted: bool
    # What the upload found in its files, and what its `cascade.json` says.
    bytes: int
    kernel_count: int
    trace_gpu_arch: str | None
    suggested_sim_config: str | None
    has_step_timeline: bool
    model: str | None
    layers: list[str | int]  # as `cascade.json` lists them
    source_gpu: str | None
    # Real timing: whether it has any, and the timing_id of that in use.
    has_real_timing: bool
    real_timing: str | None


def new(e: ev.TraceUploadStarted | ev.TracePathAdded) -> Trace:
    """A trace as its upload starts, or as it is added from a shared path: nothing found in it yet."""
    return Trace(
        id=e.trace_id, state="uploading", error=None, created_at=e.at, updated_at=e.at, model=None, layers=[], source_gpu=None,
        trace_gpu_arch=None, suggested_sim_config=None, kernel_count=0, bytes=0, has_real_timing=False, has_step_timeline=False,
        sample=isinstance(e, ev.TraceUploadStarted) and e.sample, deleted=False, real_timing=None,
    )


def takes_rows(trace: Trace | None, e: ev.TraceEvent) -> bool:
    """Whether the trace takes what the event lists (files, kernels, timing rows): it is
    neither failed nor deleted, and the event is of its own upload, not of an earlier one
    under the same id, since deleted."""
    return trace is not None and e.at >= trace.created_at and not trace.deleted and trace.state != "failed"


def evolve(trace: Trace | None, e: ev.TraceEvent) -> Trace | None:
    if trace is not None and e.at < trace.created_at:
        return trace  # from an earlier upload under the same id, since deleted
    match e:
        case ev.TraceUploadStarted() | ev.TracePathAdded():
            return new(e) if trace is None or trace.deleted and e.at > trace.updated_at else trace
        case ev.TraceFilesStored():
            if trace is not None and takes_rows(trace, e) and trace.state == "uploading":  # the whole upload is stored
                return msgspec.structs.replace(trace, state="processing", updated_at=e.at)
            return trace
        case ev.TraceRealTimingAttached():
            if trace is not None and not trace.deleted and trace.state == "ready" and trace.real_timing == e.replaces:
                return msgspec.structs.replace(trace, real_timing=e.timing_id, has_real_timing=True, updated_at=e.at)
            return trace
    if trace is None or trace.deleted or trace.state in ("ready", "failed") and not isinstance(e, ev.TraceDeleted):
        return trace
    match e:
        case ev.TraceReady():
            return msgspec.structs.replace(
                trace,
                state="ready",
                updated_at=e.at,
                trace_gpu_arch=e.trace_gpu_arch,
                kernel_count=e.kernel_count,
                bytes=e.bytes,
                suggested_sim_config=e.suggested_sim_config,
                has_real_timing=e.has_real_timing,
                real_timing=ev.UPLOAD_TIMING if e.has_real_timing else None,
                has_step_timeline=e.has_step_timeline,
                model=e.model,
                layers=list(e.layers),
                source_gpu=e.source_gpu,
            )
        case ev.TraceFailed():
            return msgspec.structs.replace(trace, state="failed", error=e.error, bytes=e.bytes, updated_at=e.at)
        case ev.TraceDeleted():
            return msgspec.structs.replace(trace, deleted=True, updated_at=e.at)
    return trace
