"""The Campaigns API: named, tagged sets of runs (traces × configs × replicas), their sims'
progress, and a stat's table, trace by config.

Commands are `cascade_app.campaigns`; reads come from `projections.queries.campaigns`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_api.campaigns import CampaignDetail, CampaignSummary, CampaignTable
from cascade_app import campaigns
from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_core.campaigns import BadCampaign, CampaignCreate, CampaignEntries
from cascade_http.bodies import json_body
from cascade_http.openapi import Query, operation
from cascade_http.responses import MsgspecResponse, not_found
from cascade_http.state import cascade
from projections.queries import campaigns as q

NO_CAMPAIGN = {404: "No campaign has this id or name."}
BAD_RUNS = {
    400: "The body is not parsable.",
    404: "A trace named is not there.",
    409: "A trace is not ready, or is a sample.",
    413: "The body is over CASCADE_MAX_BODY_BYTES, or a run would be too large to record.",
    422: "A config is unknown or of another arch than a trace's, a trace or config is named twice, the baseline is "
    "not one of the configs, a run would have more sims than CASCADE_MAX_SIMS_PER_RUN, or the body fails validation.",
}


async def _detail(c: Cascade, key: str) -> CampaignDetail:
    detail = await read(c, q.campaign_detail, key)
    if detail is None:
        raise not_found(f"campaign {key} not found")
    return detail


@operation(
    summary="Create a campaign",
    description="One run per trace, each with an entry per config of `replicas` sims, created as Create a run does "
    "(named as the campaign, with its tags). Every run is checked before any is made: a refused body makes nothing.",
    tag="campaigns",
    body=CampaignCreate,
    response=CampaignDetail,
    status=201,
    errors={**BAD_RUNS, 409: "The name is taken, or a trace is not ready, or is a sample."},
)
async def create_campaign(request: Request) -> Response:
    c = cascade(request)
    body = await json_body(request, CampaignCreate)
    campaign_id = await campaigns.create_campaign(c, body)
    return MsgspecResponse(await _detail(c, campaign_id), status_code=201)


@operation(summary="List campaigns", description="Every campaign, newest first.", tag="campaigns", response=list[CampaignSummary])
async def list_campaigns(request: Request) -> Response:
    return MsgspecResponse(await read(cascade(request), q.campaigns))


@operation(
    summary="Get a campaign",
    description="The campaign and each of its sims (trace, config, replica): state, progress and rate.",
    tag="campaigns",
    response=CampaignDetail,
    errors=NO_CAMPAIGN,
)
async def get_campaign(request: Request) -> Response:
    return MsgspecResponse(await _detail(cascade(request), request.path_params["campaign"]))


@operation(
    summary="Get a campaign's table of a stat",
    description="For each trace and config, the stat's mean over the sims that succeeded having simulated every "
    "launch (a sim still running, failed, cancelled or cut short counts for nothing), and normalised to a baseline config.",
    tag="campaigns",
    query={
        "stat": Query(
            description="gpu_tot_sim_cycle, gpu_tot_sim_insn, gpu_tot_ipc, or any stat's name.",
            required=True,
            schema={"type": "string", "minLength": 1},
        ),
        "baseline": "One of the campaign's configs (default: the campaign's baseline, if it has one).",
    },
    response=CampaignTable,
    errors={**NO_CAMPAIGN, 422: "No stat is given, or the baseline is not one of the campaign's configs."},
)
async def get_campaign_table(request: Request) -> Response:
    key = request.path_params["campaign"]
    stat = request.query_params.get("stat", "")
    if not stat:
        raise BadCampaign("stat is required: gpu_tot_sim_cycle, gpu_tot_sim_insn, gpu_tot_ipc, or any stat's name")
    table = await read(cascade(request), q.campaign_table, key, stat, request.query_params.get("baseline") or None)
    if table is None:
        raise not_found(f"campaign {key} not found")
    return MsgspecResponse(table)


async def _on_campaign(request: Request, command: Callable[[Cascade, str], Awaitable[str]]) -> Response:
    c = cascade(request)
    return MsgspecResponse(await _detail(c, await command(c, request.path_params["campaign"])))


def _on_each_run(command: Callable[[Cascade, str], Awaitable[str]], summary: str, description: str) -> Callable[[Request], Awaitable[Response]]:
    """A route that does to each of the campaign's runs what the run's own route does."""

    @operation(summary=summary, description=description, tag="campaigns", response=CampaignDetail, errors=NO_CAMPAIGN)
    async def endpoint(request: Request) -> Response:
        return await _on_campaign(request, command)

    return endpoint


cancel_campaign = _on_each_run(
    campaigns.cancel_campaign, "Cancel a campaign", "Cancels each of its runs (as Cancel a run). Calling it again changes nothing."
)
retry_campaign = _on_each_run(
    campaigns.retry_campaign, "Retry a campaign", "Retries each of its runs (as Retry a run): every failed or cancelled sim runs again."
)


@operation(
    summary="Top a campaign up",
    description="New traces get a run on every config; new configs an entry in every run; `replicas` more sims of "
    "every trace on every config. Every run is checked before any is changed.",
    tag="campaigns",
    body=CampaignEntries,
    response=CampaignDetail,
    errors={**BAD_RUNS, **NO_CAMPAIGN, 422: BAD_RUNS[422] + " Or the top-up adds nothing, or names a trace or config the campaign has."},
)
async def add_campaign_entries(request: Request) -> Response:
    body = await json_body(request, CampaignEntries)
    return await _on_campaign(request, lambda c, key: campaigns.add_to_campaign(c, key, body))


routes = [
    Route("/api/campaigns", create_campaign, methods=["POST"]),
    Route("/api/campaigns", list_campaigns, methods=["GET"]),
    Route("/api/campaigns/{campaign}", get_campaign, methods=["GET"]),
    Route("/api/campaigns/{campaign}/table", get_campaign_table, methods=["GET"]),
    Route("/api/campaigns/{campaign}/cancel", cancel_campaign, methods=["POST"], name="cancel_campaign"),
    Route("/api/campaigns/{campaign}/retry", retry_campaign, methods=["POST"], name="retry_campaign"),
    Route("/api/campaigns/{campaign}/entries", add_campaign_entries, methods=["POST"]),
]
