"""Operator routes: checking the live read model against a fresh replay."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_http.service import cascade
from cascade_http.openapi import operation
from cascade_http.responses import MsgspecResponse
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
    return MsgspecResponse(await verify(c.store, c.reader()))


routes = [Route("/api/replay/verify", verify_read_model, methods=["POST"])]
