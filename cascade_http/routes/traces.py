"""Trace routes: upload, list, read, delete."""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_core import subjects
from cascade_core.models import Trace, TraceDetail
from cascade_core.object_names import trace_prefix
from cascade_core.traces import MEDIA_TYPES, Refused, check_upload, decide_delete, new_trace_id
from cascade_http.bodies import content_length
from cascade_http.openapi import operation
from cascade_http.readmodel import read
from cascade_http.responses import ApiError, MsgspecResponse, not_found
from cascade_http.service import cascade
from cascade_http.uploads.receive import now, receive_trace
from cascade_nats.store import ConcurrencyError
from projections.queries.traces import active_run_using, list_traces, trace_detail, trace_summary

TAG = "traces"


def _uploading(request: Request) -> set[str]:
    """Ids of the traces this process is receiving now."""
    state = request.app.state
    if not hasattr(state, "trace_uploads"):
        state.trace_uploads = set()
    return state.trace_uploads  # type: ignore[no-any-return]


@operation(
    summary="Upload a trace",
    description="Takes an Accel-Sim trace directory as a tar stream, plain or compressed as the Content-Type says, "
    "with its files at the archive's root or under one top folder, and stores it as it arrives. Answers once the "
    "trace is ready or failed; a failed trace's `error` says which file (and line) is wrong. `?id=` chooses the "
    "trace's id; without it one is generated.",
    tag=TAG,
    body=bytes,
    body_media_types=tuple(MEDIA_TYPES),
    response=Trace,
    status=202,
    query={"id": "The trace's id: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit."},
    errors={
        409: "The id is taken by a trace that is not deleted.",
        413: "The body is over CASCADE_MAX_UPLOAD_BYTES, or once decompressed over CASCADE_MAX_EXPANDED_BYTES or "
        "more than CASCADE_MAX_EXPANSION_RATIO times its compressed size; nothing is kept.",
        415: "The Content-Type is not application/x-tar, application/gzip or application/x-xz.",
        422: "The id is not valid.",
    },
)
async def upload_trace(request: Request) -> Response:
    c = cascade(request)
    trace_id = request.query_params.get("id") or new_trace_id()
    content_type = request.headers.get("content-type", "")
    try:
        compression = check_upload(trace_id, content_type, content_length(request), c.settings.max_upload_bytes)
        await receive_trace(c, trace_id, compression, content_type, request.stream(), _uploading(request))
    except Refused as refused:
        raise ApiError(refused.status, refused.detail) from None
    trace = await read(c, trace_summary, trace_id)
    if trace is None:
        raise not_found(f"trace {trace_id} not found")
    return MsgspecResponse(trace, status_code=202)


@operation(summary="List traces", description="Every trace not deleted, newest first.", tag=TAG, response=list[Trace])
async def get_traces(request: Request) -> Response:
    return MsgspecResponse(await read(cascade(request), list_traces))


@operation(
    summary="Get a trace",
    description="The trace with its metadata (stored files, arch, suggested config) and its kernels in launch order.",
    tag=TAG,
    response=TraceDetail,
    errors={404: "No trace has this id, or it was deleted."},
)
async def get_trace(request: Request) -> Response:
    trace_id = request.path_params["trace_id"]
    trace = await read(cascade(request), trace_detail, trace_id)
    if trace is None:
        raise not_found(f"trace {trace_id} not found")
    return MsgspecResponse(trace)


@operation(
    summary="Delete a trace",
    description="Removes the trace's stored files; its events stay in the log, and its id may be used again.",
    tag=TAG,
    status=204,
    errors={
        404: "No trace has this id, or it was deleted.",
        409: "An active run uses the trace, it is a sample, or it is being uploaded.",
    },
)
async def delete_trace(request: Request) -> Response:
    c = cascade(request)
    trace_id = request.path_params["trace_id"]

    trace = await read(c, trace_summary, trace_id)
    active_run = await read(c, active_run_using, trace_id)
    last = await c.store.last_on(subjects.trace(trace_id))
    try:
        deleted = decide_delete(
            trace, trace_id, now(), f"delete.{secrets.token_hex(8)}",
            active_run=active_run, uploading_here=trace_id in _uploading(request),
        )
        await c.append(deleted, expected_last_subject_seq=last.seq if last else 0)
    except Refused as refused:
        raise ApiError(refused.status, refused.detail) from None
    except ConcurrencyError:
        raise ApiError(409, f"trace {trace_id} changed while it was being deleted; try again") from None
    await c.objects.delete_prefix(trace_prefix(trace_id))
    return Response(status_code=204)


routes: list[Route] = [
    Route("/api/traces", upload_trace, methods=["POST"]),
    Route("/api/traces", get_traces, methods=["GET"]),
    Route("/api/traces/{trace_id}", get_trace, methods=["GET"]),
    Route("/api/traces/{trace_id}", delete_trace, methods=["DELETE"]),
]
