"""Operator routes: checking the live read model against a fresh replay, and what was parked."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_app.reads import read
from cascade_api.models import ParkedEvent
from cascade_http.openapi import operation
from cascade_http.responses import MsgspecResponse
from cascade_http.state import cascade
from projections.queries.parked import parked_events
from projections.replay import Verification, verify


@operation(
    summary="Verify the read model",
    description="Replays the event log into a scratch database up to the live read model's checkpoint and "
    "compares them table by table. `cascade replay --verify` calls this while the server runs.",
    tag="service",
    response=Verification,
)
async def verify_read_model(request: Request) -> Response:
    c = cascade(request)
    with c.reader() as live:
        return MsgspecResponse(await verify(c.store, live))


@operation(
    summary="List parked events",
    description="Stored messages no consumer could use, by stream sequence: not JSON, a type or version this "
    "version does not know, an event on a subject it does not belong to, or one the read model cannot apply; "
    "and messages lost from the store (an error starting `lost:`: nats-server could not read them back, and their "
    "subjects are lost with them, so the row names the messages stored around each). "
    "Every consumer went on past them; `/api/health` counts them. `cascade events --parked` prints this.",
    tag="service",
    response=list[ParkedEvent],
)
async def list_parked(request: Request) -> Response:
    c = cascade(request)
    return MsgspecResponse(c.with_lost_in_log(await read(c, parked_events)))


routes = [Route("/api/replay/verify", verify_read_model, methods=["POST"]), Route("/api/parked", list_parked, methods=["GET"])]
