"""The runners that announced themselves: host, slots, running sims, last seen."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_core.runners import Runner
from cascade_http.openapi import operation
from cascade_http.responses import ApiError, MsgspecResponse
from cascade_http.state import cascade


@operation(
    summary="List runners",
    description="Every runner seen in the last seconds, in `cascade serve` or `cascade worker`, sorted by id.",
    tag="runners",
    response=list[Runner],
    errors={503: "NATS, where runners announce themselves, does not answer."},
)
async def list_runners(request: Request) -> Response:
    runners = await cascade(request).runners()
    if runners is None:
        raise ApiError(503, "the runner list is in NATS, which does not answer now; see /api/health")
    return MsgspecResponse(runners)


routes = [Route("/api/runners", list_runners, methods=["GET"])]
