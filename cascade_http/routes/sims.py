"""One sim's results, log and output files."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_app import runs
from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_app.sim_logs import log_text
from cascade_core.ids import is_file_name
from cascade_api.models import ReferenceComparison, SimFile, SimResults
from cascade_http import paging
from cascade_http.openapi import Query, operation
from cascade_http.readmodel import attachment, streamed
from cascade_http.responses import ClosingStreamingResponse, MsgspecResponse, not_found
from cascade_http.state import cascade
from projections.queries import runs as q
from projections.rows import SimRow

NO_SIM = {404: "No sim has this id."}


async def _sim(c: Cascade, sim_id: str) -> SimRow:
    sim = await read(c, q.sim_row, sim_id)
    if sim is None:
        raise not_found(f"sim {sim_id} not found")
    return sim


@operation(
    summary="Download sim results",
    description="Kernels carry their full stats maps, or with `stats` the headline ones or none. With `offset` or "
    "`limit`, one page of the kernels, by kernel_index; `totals` stay the sim's.",
    response=SimResults,
    query={**paging.PAGE_QUERY, "stats": paging.STATS_QUERY},
    errors={422: f"stats is not none, headline or all, or {paging.PAGE_ERROR}", **NO_SIM},
)
async def sim_results(request: Request) -> Response:
    c = cascade(request)
    page, stats = paging.page_asked(request), paging.stats_asked(request)
    sim = await _sim(c, request.path_params["sim_id"])
    run = await read(c, q.run_summary, sim.run_id)
    configs = await c.configs_by_name()
    args = (run, sim, configs, c.stat_names, stats, page or q.WHOLE)
    filename = f"{sim.id}-results.json"
    headers = None if page is None else paging.page_headers(request, page, await read(c, q.kernel_count, [sim.id]))
    return streamed(c, q.sim_results_pieces, *args, media_type="application/json", filename=filename, headers=headers)


@operation(
    summary="Download a sim's log",
    description="With `after_line=N`, only the lines past the first N of the sim's current attempt: what a "
    "follower that has N lines asks for next (`cascade sim log SIM --follow`). The headers `X-Sim-State` and "
    "`X-Sim-Attempt` say the sim's state and attempt as the answer started: once a sim has finished, its log is whole.",
    media_type="text/plain",
    query={"after_line": Query(description="Lines to leave out from the start.", schema={"type": "integer", "minimum": 0})},
    response=str,
    errors={
        **NO_SIM,
        422: "after_line is not a whole number of 0 or more, or is given twice.",
        503: "NATS, whose event log holds the log's lines, does not answer now.",
    },
)
async def sim_log(request: Request) -> Response:
    c = cascade(request)
    sim = await _sim(c, request.path_params["sim_id"])
    body = await log_text(c, sim, paging.whole_number(request, "after_line", 0, None) or 0)
    headers = {**attachment(f"{sim.id}.log"), "X-Sim-State": sim.state, "X-Sim-Attempt": str(sim.attempt)}
    return ClosingStreamingResponse(body, media_type="text/plain", headers=headers)


@operation(summary="List a sim's output files", response=list[SimFile], errors=NO_SIM)
async def list_sim_files(request: Request) -> Response:
    c = cascade(request)
    return MsgspecResponse(await read(c, q.sim_files, await _sim(c, request.path_params["sim_id"])))


@operation(
    summary="Download an output file",
    description="A `.gz` file comes back as application/gzip with no Content-Encoding.",
    media_type="application/octet-stream",
    response=bytes,
    errors={404: "No sim has this id, or the sim has no file with this name."},
)
async def download_file(request: Request) -> Response:
    c = cascade(request)
    sim = await _sim(c, request.path_params["sim_id"])
    name: str = request.path_params["name"]
    missing = not_found(f"sim {sim.id} has no file '{name}'")
    if not is_file_name(name):
        raise missing  # a name the reference does not allow is answered as a missing file
    row = await read(c, q.file_row, sim, name)
    stored = None if row is None else await c.objects.stat(row.object_name)
    if row is None or stored is None:
        raise missing
    # The stored type as it is: no charset is added, since the file's encoding is not known.
    content_type = "application/gzip" if name.endswith(".gz") else row.content_type
    headers = {**attachment(name), "Content-Type": content_type, "Content-Length": str(stored.size)}
    return ClosingStreamingResponse(c.objects.read(row.object_name), headers=headers)


NOT_FAST = "The sim is neither split nor reusing repeated kernels (it runs whole and in sequence already), or it is a reference."


@operation(
    summary="Request a sim's reference",
    description="For a split or reusing sim: adds to its run a reference, a sim of the same trace and config run whole "
    "and in sequence (its `reference_for` names the sim; it is numbered on from the config's replicas, counted in the "
    "run's sim_counts, and left out of the run's comparison and stats), and answers the comparison of the two so far. Asking "
    "again adds nothing and answers the same reference, so it is safe to retry. A failed reference is retried with its run.",
    response=ReferenceComparison,
    errors={
        404: "No sim has this id.",
        409: "The run's trace is no longer ready.",
        422: f"{NOT_FAST} Or no live runner has its config any more, or the run would have more sims than CASCADE_MAX_SIMS_PER_RUN.",
    },
)
async def request_reference(request: Request) -> Response:
    c = cascade(request)
    sim_id = request.path_params["sim_id"]
    await runs.request_reference(c, sim_id)
    return MsgspecResponse(await runs.reference_comparison(c, sim_id))


@operation(
    summary="Compare a sim with its reference",
    description="A split or reusing sim (or its reference) against the reference: per kernel launch and in total, "
    "the fast sim's cycles and instructions, the reference's, and the error of the fast one, signed, (fast - "
    "reference) / reference in percent; each one's wall time, and the speed-up, once both succeeded. The kernels "
    "either has so far, while they run.",
    response=ReferenceComparison,
    errors={404: "No sim has this id, or the sim has no reference.", 422: NOT_FAST},
)
async def get_reference(request: Request) -> Response:
    return MsgspecResponse(await runs.reference_comparison(cascade(request), request.path_params["sim_id"]))


routes = [
    Route("/api/sims/{sim_id}/reference", request_reference, methods=["POST"]),
    Route("/api/sims/{sim_id}/reference", get_reference, methods=["GET"]),
    Route("/api/sims/{sim_id}/results", sim_results, methods=["GET"]),
    Route("/api/sims/{sim_id}/log", sim_log, methods=["GET"]),
    Route("/api/sims/{sim_id}/files", list_sim_files, methods=["GET"]),
    Route("/api/sims/{sim_id}/files/{name}", download_file, methods=["GET"]),
]
