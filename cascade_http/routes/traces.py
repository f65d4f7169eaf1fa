"""Trace routes: upload, add from a shared path, list, read, delete, and attaching real timing."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_app import shared_traces, traces
from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_app.uploads import receive
from cascade_api.models import SharedTraceAdd, Trace, TraceDetail
from cascade_core.traces import MEDIA_TYPES, RealTimingAttached
from cascade_formats import realtiming
from cascade_host import new_ids
from cascade_http.bodies import content_length, gathered, json_body
from cascade_http.openapi import operation
from cascade_http.responses import ApiError, MsgspecResponse, not_found
from cascade_http.state import cascade
from projections.queries.traces import list_traces, trace_detail, trace_summary

TAG = "traces"


async def _body(request: Request) -> AsyncIterator[bytes]:
    """The request body, a client that went away said as the upload command understands it."""
    try:
        async for piece in request.stream():
            yield piece
    except ClientDisconnect:
        raise receive.Disconnected from None


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
    trace_id = request.query_params.get("id") or new_ids.trace_id()
    await receive.upload_trace(c, trace_id, request.headers.get("content-type", ""), content_length(request), _body(request))
    return await _trace_answer(c, trace_id, 202)


async def _trace_answer(c: Cascade, trace_id: str, status: int) -> Response:
    """The trace a command made, as the read model shows it."""
    trace = await read(c, trace_summary, trace_id)
    if trace is None:
        raise not_found(f"trace {trace_id} not found")
    return MsgspecResponse(trace, status_code=status)


@operation(
    summary="Add a trace from a shared path",
    description="Takes the trace in a folder this server and its runners share, where it lies: its files are read and "
    "checked as an upload's are, and their SHA-256 digests recorded; nothing is copied. A runner that sees the folder at "
    "the same path reads it there, and fails a sim whose trace file has changed since (the detail gives the digest it "
    "had and the one it has); a runner that does not see it fails the sim saying so. The folder must lie under a root "
    "the server allows (`serve --shared-trace-root`), symbolic links resolved; a link inside it must stay under that "
    "root and name a file. Answers once the trace is ready.",
    tag=TAG,
    body=SharedTraceAdd,
    response=Trace,
    status=201,
    errors={
        400: "The body is not parsable.",
        409: "The id is taken by a trace that is not deleted.",
        413: "The body is over CASCADE_MAX_BODY_BYTES.",
        422: "The body fails validation, the id is not valid; the server allows no shared root, or the path is not a folder under one; a link "
        "leads out of the root; or the files are no trace (the detail says which file, and line, is wrong). Nothing is kept.",
    },
)
async def add_shared_trace(request: Request) -> Response:
    c, body = cascade(request), await json_body(request, SharedTraceAdd)
    trace_id = body.id or new_ids.trace_id()
    await shared_traces.add_shared_trace(c, trace_id, body.path, copy=body.copy)
    return await _trace_answer(c, trace_id, 201)


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
    description="Removes the trace's stored files; its events stay in the log, and its id may be used again. "
    "A sample trace's sample runs are removed with it.",
    tag=TAG,
    status=204,
    errors={
        404: "No trace has this id, or it was deleted.",
        409: "An active run uses the trace, or it is being uploaded.",
    },
)
async def delete_trace(request: Request) -> Response:
    await traces.delete_trace(cascade(request), request.path_params["trace_id"])
    return Response(status_code=204)


TIMING_MEDIA_TYPES = ("text/csv", "text/plain", "application/octet-stream")
_REPLACE = {None: False, "false": False, "true": True}


@operation(
    summary="Attach real timing to a trace",
    description="Takes a file of measured kernel times as the body and makes it the ready trace's real timing, "
    "which its runs' comparisons then score the simulator against. The layout is told from the header: Cascade's "
    "`kernel_id,kernel_name,duration_ns`, Nsight Compute's `ncu --csv` (its default page or `--page raw`, with "
    "`gpu__time_duration.sum` and/or `gpc__cycles_elapsed.avg`), or Nsight Systems' `nsys stats --report "
    "cuda_gpu_trace --format csv`. The header seen again starts another pass: passes concatenated are hardware "
    "repetitions. A pass holds the trace's kernel launches in launch order, under their kernels' names, from the first: "
    "all of them, or the first N (a profile cut short), never more. "
    "The Content-Type is not looked at. Timing the trace has already is replaced only with `?replace=true`.",
    tag=TAG,
    body=bytes,
    body_media_types=TIMING_MEDIA_TYPES,
    response=RealTimingAttached,
    query={"replace": "`true` to replace the real timing the trace has (its upload's, or attached before); default `false`."},
    errors={
        400: "`replace` is neither `true` nor `false`.",
        404: "No trace has this id, or it was deleted.",
        409: "The trace is a sample, is not ready, or has real timing and `replace` is not `true`.",
        413: f"The body is over {realtiming.MAX_BYTES} bytes; nothing is kept.",
        422: "The file is no timing of a known layout (the detail names its line), or its launches are not the trace's.",
    },
)
async def attach_real_timing(request: Request) -> Response:
    flag = request.query_params.get("replace")
    if flag not in _REPLACE:
        raise ApiError(400, f"replace must be true or false, not {str(flag)[:100]!r}")
    body = await gathered(request, realtiming.MAX_BYTES, "timing file", "the most of a timing file Cascade reads")
    answer = await traces.attach_real_timing(cascade(request), request.path_params["trace_id"], body, replace=_REPLACE[flag])
    return MsgspecResponse(answer)


routes: list[Route] = [
    Route("/api/traces", upload_trace, methods=["POST"]),
    Route("/api/traces", get_traces, methods=["GET"]),
    Route("/api/traces/shared", add_shared_trace, methods=["POST"]),
    Route("/api/traces/{trace_id}", get_trace, methods=["GET"]),
    Route("/api/traces/{trace_id}", delete_trace, methods=["DELETE"]),
    Route("/api/traces/{trace_id}/real-timing", attach_real_timing, methods=["PUT"]),
]
