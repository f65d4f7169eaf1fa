"""The Runs API: GPU configs, runs, and what a run's sims produced.

Commands are `cascade_app.runs`; reads come from the read model through
`projections.queries.runs`. Long answers are streamed.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

import anyio
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_app import gpu_configs, runs, sim_logs
from cascade_app.clock import now
from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_api.models import Comparison, DerivedMetrics, KernelStat, RunDetail, RunFile, RunResults, RunSummary, StatCatalogue, StatValues
from cascade_core.gpu_configs import OfferedConfig
from cascade_core.object_names import trace_file
from cascade_core.refusals import Refused
from cascade_core.runs import RunCreate, RunEntries
from cascade_formats import derived_metrics
from cascade_formats.perfetto import PerfettoTrace, memcpys_before
from cascade_formats.timeline import SimStepTimeline
from cascade_formats.tracefiles import KERNELSLIST, MemcpyHtoD, TraceError, parse_kernelslist
from cascade_http import archive, paging, run_events
from cascade_http.bodies import json_body
from cascade_http.openapi import Query, operation
from cascade_http.readmodel import attachment, streamed
from cascade_http.responses import ApiError, MsgspecResponse, UnbrokenStreamingResponse, download, not_found
from cascade_http.state import cascade
from cascade_nats.objects import ObjectMissing
from cascade_sim import trace_cache
from projections import export
from projections.queries import results_files
from projections.queries import runs as q
from projections.queries import stats

NO_RUN = {404: "No run has this id."}


async def _run(c: Cascade, run_id: str) -> RunSummary:
    run = await read(c, q.run_summary, run_id)
    if run is None:
        raise not_found(f"run {run_id} not found")
    return run


async def _detail(c: Cascade, run_id: str, *, attention: bool = False) -> RunDetail:
    """The run; with `attention`, each sim says what needs attention (when it can be told)."""
    detail = await read(c, q.run_detail, run_id, await c.watch() if attention else None)
    if detail is None:
        raise not_found(f"run {run_id} not found")
    return detail


@operation(
    summary="List GPU configs",
    description="This server's Accel-Sim install's, and those the live runners announce: one per name and digest, "
    "sorted by name, then digest, each saying where it is (`local`, `runners`). Read as the files are now, not as "
    "they were at startup: a config added or edited is listed with its current digest without a restart.",
    response=list[OfferedConfig],
)
async def list_gpu_configs(request: Request) -> Response:
    return MsgspecResponse(await cascade(request).gpu_configs())


@operation(
    summary="Create a run",
    description="Each entry fans out to `count` sims, numbered by replica from 0 (entries naming the same "
    "config continue its numbering). The answer comes before any sim has launched.",
    body=RunCreate,
    response=RunDetail,
    status=201,
    errors={
        400: "The body is not parsable.",
        404: "trace_id names no trace.",
        409: "The trace is not ready, or is a sample, which has no instruction traces.",
        413: "The body is over CASCADE_MAX_BODY_BYTES, or the run would be too large to record.",
        422: "An entry names an unknown gpu_config or one of another arch than the trace's, the entries ask for "
        "more sims than CASCADE_MAX_SIMS_PER_RUN, or the body fails validation.",
    },
)
async def create_run(request: Request) -> Response:
    c = cascade(request)
    body = await json_body(request, RunCreate)
    created = await runs.create_run(c, body)
    return MsgspecResponse(await read(c, q.run_as_created, created), status_code=201)


_CYCLES = {"true": True, "false": False}


@operation(
    summary="List runs",
    description="Every run, newest first, with per-state sim counts; with `cycles=true`, each with its total cycles per config.",
    query={
        "tag": Query(description="Only runs that have this tag.", schema={"type": "string", "minLength": 1}),
        "name": Query(description="Only runs of this name.", schema={"type": "string", "minLength": 1}),
        "cycles": Query(
            description="`true`: each run's `cycles`, its total simulated cycles per config (`false`, the default, leaves them out).",
            schema={"type": "string", "enum": list(_CYCLES)},
        ),
    },
    response=list[RunSummary],
    errors={422: "A query parameter other than tag, name and cycles; tag or name empty; cycles neither true nor false."},
)
async def list_runs(request: Request) -> Response:
    params = request.query_params
    # A misspelt or empty filter must not answer every run as if it had filtered them.
    if unknown := sorted(set(params) - {"tag", "name", "cycles"}):
        raise ApiError(422, f"unknown query parameters {', '.join(map(repr, unknown))}: GET /api/runs filters by tag and name, and takes cycles")
    if empty := [key for key in ("tag", "name") if params.get(key) == ""]:
        raise ApiError(422, f"empty {' and '.join(empty)}: give a tag or name to filter by, or leave it out")
    cycles = params.get("cycles", "false")
    if cycles not in _CYCLES:
        raise ApiError(422, f"cycles must be true or false, not {cycles!r}")
    return MsgspecResponse(await read(cascade(request), q.runs, params.get("tag"), params.get("name"), _CYCLES[cycles]))


@operation(
    summary="Get a run",
    description="Each unfinished sim that may never finish unless someone acts says why in `attention`: "
    "no runner has taken it for a while and no live runner has its config, or its runner was lost.",
    response=RunDetail,
    errors=NO_RUN,
)
async def get_run(request: Request) -> Response:
    return MsgspecResponse(await _detail(cascade(request), request.path_params["run_id"], attention=True))


@operation(
    summary="Cancel a run",
    description="Moves every unfinished sim to cancelled. Calling it again, or on a sample run, changes nothing.",
    response=RunDetail,
    errors=NO_RUN,
)
async def cancel_run(request: Request) -> Response:
    return await _on_run(request, runs.cancel_run)


async def _on_run(request: Request, command: Callable[[Cascade, str], Awaitable[None]]) -> Response:
    """A command on the path's run, answered with the run after it."""
    c = cascade(request)
    run_id = request.path_params["run_id"]
    await command(c, run_id)
    return MsgspecResponse(await _detail(c, run_id, attention=True))


@operation(
    summary="Delete a run",
    description="Removes the run, its sims and all they produced from every list and query (campaigns' too); its "
    "events stay in the log (Get a run's events and a replay still show them), and its sims' stored files stay in "
    "the object store, where a sim alike may take its result from (`cached_from`). Only a run none of whose sims "
    "is unfinished: cancel an active run first. Once deleted, the run is unknown to every route.",
    status=204,
    errors={404: "No run has this id, or it was deleted.", 409: "The run is active: some of its sims are unfinished."},
)
async def delete_run(request: Request) -> Response:
    await runs.delete_run(cascade(request), request.path_params["run_id"])
    return Response(status_code=204)


@operation(
    summary="Retry a run",
    description="Starts a new attempt of every failed or cancelled sim (a split sim excepted): each is pending again, "
    "for the attempt after its last, and the run is active again; the attempts before stay in the sim's `attempts`, "
    "with how they ended. Calling it again while those sims wait or run changes nothing, so it is safe to retry; "
    "on a run with no failed or cancelled sim (a sample's) it changes nothing either.",
    response=RunDetail,
    errors=NO_RUN,
)
async def retry_run(request: Request) -> Response:
    return await _on_run(request, runs.retry_run)


@operation(
    summary="Add sims to a run",
    description="A top-up: each entry fans out to `count` more sims, as in Create a run, their replicas numbered on "
    "from those the config has in the run. A run that ended is active again while they run. With an "
    "Idempotency-Key, the same request again adds nothing, so it is safe to retry; the key with another body is refused.",
    body=RunEntries,
    response=RunDetail,
    headers={
        "Idempotency-Key": "Any text naming this request: a request with a key the run has already taken adds nothing "
        "when its entries are those the key came with, and is refused (422) when they are not."
    },
    errors={
        400: "The body is not parsable.",
        404: "No run has this id.",
        409: "The run is a sample, or its trace is no longer ready.",
        413: "The body is over CASCADE_MAX_BODY_BYTES, or the sims would be too many to record.",
        422: "An entry names an unknown gpu_config or one of another arch than the trace's, the run would have more "
        "sims than CASCADE_MAX_SIMS_PER_RUN, the Idempotency-Key came with other entries, or the body fails validation.",
    },
)
async def add_run_entries(request: Request) -> Response:
    body = await json_body(request, RunEntries)
    key = request.headers.get("idempotency-key")
    return await _on_run(request, lambda c, run_id: runs.add_entries(c, run_id, body, key))


@operation(summary="Compare real and simulated time", response=Comparison, errors=NO_RUN)
async def get_comparison(request: Request) -> Response:
    c = cascade(request)
    return MsgspecResponse(await read(c, q.run_comparison, await _run(c, request.path_params["run_id"]), c.comparisons))


def _name(min_length: int) -> dict[str, object]:
    """The schema of a stat's name or a search in a query: `*` only in `[*]`."""
    return {"type": "string", "minLength": min_length, "maxLength": stats.MAX_NAME, "pattern": r"^(?:[^*]|\[\*\])*$"}


def _checked(check: Callable[[str], object], text: str) -> str:
    """`text` if `check` takes it, else a 422 saying why."""
    try:
        check(text)
    except stats.BadName as bad:
        raise ApiError(422, str(bad)) from None
    return text


@operation(
    summary="List a run's stat names",
    description="The names in the run's kernels' stats maps (docs/stats-naming.md) that hold `q`, sorted, each with "
    f"how many kernels of each config have it: at most {stats.CATALOGUE_LIMIT}, `truncated` when more match. "
    "`tables` lists the per-unit tables among all the names that match, each index as `[*]`.",
    response=StatCatalogue,
    query={"q": Query(description="Part of the names wanted, any case; `[*]` stands for any index. Default: every name.", schema=_name(0))},
    errors={**NO_RUN, 422: f"q is over {stats.MAX_NAME} characters, or holds a * outside [*]."},
)
async def list_stats(request: Request) -> Response:
    c = cascade(request)
    q = _checked(stats.search_pattern, request.query_params.get("q", ""))
    return MsgspecResponse(await read(c, stats.stat_catalogue, await _run(c, request.path_params["run_id"]), q))


@operation(
    summary="Get a stat's values",
    description="Per kernel index and config, the stat's median over the config's replicas, with its least and greatest "
    "value. A name with `[*]` stands for every name with an index there: each row then says which `units` it is "
    f"(`L2_cache_bank[*].Miss_rate`, `maximum service time to same row.dram[*][*]`). At most {stats.VALUES_LIMIT} rows, "
    "`truncated` when more match. A name no kernel has gives no rows.",
    response=StatValues,
    query={"name": Query(description="The stat's name, as the catalogue lists it, or with `[*]` for any index.", required=True, schema=_name(1))},
    errors={**NO_RUN, 422: f"name is missing, empty, over {stats.MAX_NAME} characters, or holds a * outside [*]."},
)
async def get_stat_values(request: Request) -> Response:
    c = cascade(request)
    name = _checked(stats.name_pattern, request.query_params.get("name", ""))
    return MsgspecResponse(await read(c, stats.stat_values, await _run(c, request.path_params["run_id"]), name))


@operation(
    summary="Get a run's derived metrics",
    description="L1D and L2 hit rates, DRAM read and write bytes and bandwidth (GB/s), DRAM utilisation against the "
    "config's peak, achieved occupancy and IPC per SM: per kernel index and config (the median over the config's "
    "replicas) and per config over all its kernels, from each kernel's own stats and the options its sims ran with "
    "(their log's option dump; the config's gpgpusim.config when no sim's log has one). `metrics` gives each one's "
    "formula, the stats and options it reads.",
    response=DerivedMetrics,
    errors=NO_RUN,
)
async def get_derived_metrics(request: Request) -> Response:
    c = cascade(request)
    run = await _run(c, request.path_params["run_id"])
    options, _ = await _options_ran_with(c, run)
    return MsgspecResponse(await read(c, stats.derived, run, options))


async def _atom_bytes(c: Cascade, run: RunDetail) -> dict[str, float]:
    """The bytes a DRAM access moves in each sim, by sim id, from the options its config's
    sims ran with (`derived_metrics.ConfigFacts.atom_bytes`), where they are known."""
    options, labelled = await _options_ran_with(c, run)
    atoms = {}
    for sim in run.sims:
        given = options.get(labelled.apart.get(sim.id, sim.gpu_config))
        atom = None if given is None or isinstance(given, str) else derived_metrics.config_facts(given.values).atom_bytes
        if atom is not None:
            atoms[sim.id] = atom
    return atoms


async def _options_ran_with(c: Cascade, run: RunSummary) -> tuple[dict[str, stats.Options], q.Labelled]:
    """Each config's options, by its label (`runs.labels_of`: a config's replicas of other
    files apart): as the log of its first sim that has one shows them, what it ran with
    whatever its files say now; else as its gpgpusim.config sets them, or why neither could
    be read. And the labels, by which a sim finds its config's."""
    sims, labelled = await read(c, q.sim_rows, run), await read(c, q.labels_of, run)
    options: dict[str, stats.Options] = {}
    for sim in sims:
        label = labelled.apart.get(sim.id, sim.gpu_config)
        if label not in options and sim.log_seq:
            ran_with = await sim_logs.options_ran_with(c, sim)
            if ran_with is not None:
                options[label] = stats.GivenOptions(ran_with, "log")
    for label, name in {labelled.apart.get(s.id, s.gpu_config): s.gpu_config for s in sims}.items():
        if label not in options:
            try:
                options[label] = stats.GivenOptions(await gpu_configs.config_options(c, name), "config")
            except Refused as err:  # a config this server has no files of: its metrics that need options are null
                options[label] = err.detail
    return options, labelled


@operation(
    summary="List a run's kernel timings",
    description="Stats maps are empty. With `offset` or `limit`, one page of the kernels, in the same order.",
    response=list[KernelStat],
    query=paging.PAGE_QUERY,
    errors={422: paging.PAGE_ERROR, **NO_RUN},
)
async def list_kernels(request: Request) -> Response:
    c = cascade(request)
    page = paging.page_asked(request)
    run = await _run(c, request.path_params["run_id"])
    headers = None if page is None else paging.page_headers(request, page, await read(c, q.run_kernel_count, run))
    return streamed(c, q.run_kernel_pieces, run, page or q.WHOLE, media_type="application/json", headers=headers)


@operation(summary="List a run's step timing", response=list[SimStepTimeline], errors=NO_RUN)
async def list_step_timelines(request: Request) -> Response:
    c = cascade(request)
    detail = await _detail(c, request.path_params["run_id"])
    times = functools.partial(read, c, q.succeeded_kernel_times, detail)
    return Response(await c.step_timelines.encoded(detail, times), media_type="application/json")


# Each form of the run's results: how it is made, its media type and its file's extension.
RESULTS_FORMATS = {
    "json": (q.run_results_pieces, "application/json", "json"),
    "zip": (results_files.zip_pieces, "application/zip", "zip"),
    "ndjson": (results_files.ndjson_pieces, "application/x-ndjson", "ndjson"),
}


@operation(
    summary="Download run results",
    description="With `format=zip` or `format=ndjson`, for runs too large for one JSON document, the same results as "
    "one file per sim, streamed as they are made: a zip (deflated) of `run.json` (the RunResults with each sim's "
    "`kernels` empty) and `<gpu_config>/r<replica>/<sim_id>-results.json` per sim (each as Download sim results "
    "answers it), named `<run_id>-results.zip`; or NDJSON, one sim's SimResults a line, named `<run_id>-results.ndjson`.",
    response=RunResults,
    other_media_types=("application/zip", "application/x-ndjson"),
    query={"format": Query(description="`json` (the default), `zip` or `ndjson`.", schema={"type": "string", "enum": list(RESULTS_FORMATS)})},
    errors={422: "format is not json, zip or ndjson, or is given twice.", **NO_RUN},
)
async def run_results(request: Request) -> Response:
    c = cascade(request)
    pieces, media_type, extension = RESULTS_FORMATS[paging.choice(request, "format", tuple(RESULTS_FORMATS), "json")]
    run = await _run(c, request.path_params["run_id"])
    configs = await c.configs_by_name()
    return streamed(c, pieces, run, configs, c.stat_names, media_type=media_type, filename=f"{run.id}-results.{extension}")


@operation(
    summary="Download a run's archive",
    description="Everything of the run in one zip, streamed as it is made, a folder per config and replica as "
    "`cascade results` writes them: the results zip's files (`run.json`, "
    "`<gpu_config>/r<replica>/<sim_id>-results.json`), and beside each sim's "
    "results its `simulator.log` (as Download a sim's log answers it) and its output files under `files/`. "
    "Named `<run_id>.zip`.",
    response=bytes,
    media_type="application/zip",
    errors=NO_RUN,
)
async def run_archive(request: Request) -> Response:
    c = cascade(request)
    run = await _run(c, request.path_params["run_id"])
    pieces = archive.archive_pieces(c, run, await c.configs_by_name())
    return UnbrokenStreamingResponse(pieces, media_type="application/zip", headers=attachment(f"{run.id}.zip"))


@operation(
    summary="Export a run as Parquet",
    description="A zip of Parquet files, streamed as it is made, that pandas, polars and DuckDB read as they are: "
    "runs.parquet (the run), sims.parquet (its sims), kernels.parquet (their kernels, without stats maps), "
    "kernel_stats.parquet (every value of those maps: sim_id, kernel_index, stat, value (the kernel's own), text, "
    "printed_total (a running total as the log printed it); by sim and kernel, a kernel's values in its map's order) and timing.parquet "
    "(the real timing its trace uses). `cascade export RUN -o DIR` unpacks it. The read model's columns are "
    "described in README.md, Querying the read model.",
    response=bytes,
    media_type="application/zip",
    errors=NO_RUN,
)
async def export_run(request: Request) -> Response:
    c = cascade(request)
    run = await _run(c, request.path_params["run_id"])
    return streamed(c, export.zip_pieces, run.id, now(), media_type="application/zip", filename=f"{run.id}-parquet.zip")


@operation(summary="List a run's output files", response=list[RunFile], errors=NO_RUN)
async def list_run_files(request: Request) -> Response:
    c = cascade(request)
    return MsgspecResponse(await read(c, q.run_files, await _run(c, request.path_params["run_id"])))


async def _memcpys(c: Cascade, trace_id: str) -> dict[int, list[MemcpyHtoD]]:
    """The trace's memcpys by the launch they precede, from its kernelslist: stored, or where
    the trace lies when it was added from a shared path; none when it has neither (a sample
    run's trace) or it no longer reads."""
    try:
        try:
            data = await c.objects.read_all(trace_file(trace_id, KERNELSLIST))
        except ObjectMissing:
            shared = (await trace_cache.listed(c.store, trace_id)).shared_path
            if shared is None:
                return {}
            data = await anyio.Path(shared, KERNELSLIST).read_bytes()
        return memcpys_before(parse_kernelslist(data.decode()))
    except (OSError, UnicodeDecodeError, TraceError):
        return {}


@operation(
    summary="Download a Perfetto trace",
    description="Simulated time: per config a process, per sim a thread of kernel slices (cat `kernel`), two "
    "counter tracks sampled at each kernel's start (its own IPC, gpu_sim_insn / gpu_sim_cycle, and its own DRAM "
    "reads + writes in GB/s of its sim_time_ns, the bytes an access moves from the options the sim ran with; per "
    "microsecond where those cannot be read) and a Memcpy thread: Accel-Sim gives the trace's MemcpyHtoD "
    "commands no simulated time, so each is an instant event at the start of the launch it precedes in "
    "kernelslist.g, its bytes in args. Then a process \"Wall clock (runners)\": a thread per runner, a slice per "
    "finished sim (per chunk of a split sim) from its launch to its end, in real microseconds from the earliest launch.",
    response=PerfettoTrace,
    errors=NO_RUN,
)
async def get_perfetto(request: Request) -> Response:
    c = cascade(request)
    detail = await _detail(c, request.path_params["run_id"])
    atom_bytes, memcpys = await _atom_bytes(c, detail), await _memcpys(c, detail.trace_id)
    return streamed(c, q.perfetto_pieces, detail, atom_bytes, memcpys, media_type="application/json", filename=f"{detail.id}-perfetto.json")


@operation(
    summary="Stream run events",
    description="Server-sent events: `snapshot` (a RunDetail), then `sim` (a Sim), `kernel` (a KernelStat, "
    "stats empty), `file` (a RunFile) and `run` (the RunSummary once it finished). A `sim` event that moves its sim "
    "to another state also carries `run_sim_counts`: the run's `sim_counts` after it. An event's id says where in "
    "the log it comes from: `<seq>.<k>` is the k-th event (from 0) caused by the event at stream sequence `seq`, "
    "the snapshot's is `<S>`, the sequence it reflects, up to and including; ids increase strictly within a "
    "stream. With `Last-Event-ID`, no snapshot: exactly the events a client connected all along received after "
    "that id, then live ones. The stream ends after the run's final `run` event; a resume from at or past it "
    "gets 204.",
    media_type="text/event-stream",
    response=str,
    events={"snapshot": RunDetail, "sim": run_events.SimChange, "kernel": KernelStat, "file": RunFile, "run": RunSummary},
    errors={204: "The run ended at or before Last-Event-ID: nothing more will come.", **NO_RUN},
    query={"token": "The API token, for clients that cannot set the Authorization header."},
    headers={
        "Last-Event-ID": "Resume after this event: `N.k` after that event, `N` after every event of sequence N. "
        "Any other value counts as none: a fresh stream, from a snapshot."
    },
)
async def stream_run_events(request: Request) -> Response:
    c = cascade(request)
    run_id = request.path_params["run_id"]
    after = run_events.last_event_id(request.headers.get("last-event-id"))
    found = await read(c, q.run_rows, run_id)
    if found is None:
        raise not_found(f"run {run_id} not found")
    run, sims = found
    if run_events.finished_before(run, sims, after):
        return Response(status_code=204)
    return EventSourceResponse(run_events.events(c, run_id, after, q.places(sims)), ping=run_events.KEEP_ALIVE_S)


routes = [
    Route("/api/gpu-configs", list_gpu_configs, methods=["GET"]),
    Route("/api/runs", create_run, methods=["POST"]),
    Route("/api/runs", list_runs, methods=["GET"]),
    Route("/api/runs/{run_id}", get_run, methods=["GET"]),
    Route("/api/runs/{run_id}", delete_run, methods=["DELETE"]),
    Route("/api/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
    Route("/api/runs/{run_id}/retry", retry_run, methods=["POST"]),
    Route("/api/runs/{run_id}/entries", add_run_entries, methods=["POST"]),
    Route("/api/runs/{run_id}/comparison", get_comparison, methods=["GET"]),
    Route("/api/runs/{run_id}/kernels", list_kernels, methods=["GET"]),
    Route("/api/runs/{run_id}/stats", list_stats, methods=["GET"]),
    Route("/api/runs/{run_id}/stats/values", get_stat_values, methods=["GET"]),
    Route("/api/runs/{run_id}/stats/derived", get_derived_metrics, methods=["GET"]),
    Route("/api/runs/{run_id}/step-timelines", list_step_timelines, methods=["GET"]),
    Route("/api/runs/{run_id}/results", run_results, methods=["GET"]),
    Route("/api/runs/{run_id}/files", list_run_files, methods=["GET"]),
    Route("/api/runs/{run_id}/export", export_run, methods=["GET"]),
    Route("/api/runs/{run_id}/archive", run_archive, methods=["GET"]),
    Route("/api/runs/{run_id}/perfetto", get_perfetto, methods=["GET"]),
    Route("/api/runs/{run_id}/events", stream_run_events, methods=["GET"]),
]
