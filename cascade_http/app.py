"""The Starlette application: routes, authentication, errors, and the service's lifetime."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_core.models import ErrorDetail, Health, ValidationErrorBody
from cascade_http import service
from cascade_http.auth import BearerAuth
from cascade_http.config import Settings
from cascade_http.openapi import document, operation
from cascade_http.responses import MsgspecResponse
from cascade_http.validation import RequestValidationError

VERSION = "0.1.0"


def cascade(request: Request) -> service.Cascade:
    return request.app.state.cascade  # type: ignore[no-any-return]


@operation(summary="Service health", tag="service", response=Health, auth=False)
async def health(request: Request) -> Response:
    c = cascade(request)
    return MsgspecResponse(
        Health(
            status="ok",
            stream_seq=await c.store.last_seq(),
            projected_seq=c.projector.applied,
            queue_depth=await c.queue_depth(),
            runners=len(await c.runners()),
        )
    )


async def openapi(request: Request) -> Response:
    return MsgspecResponse(request.app.state.openapi)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return MsgspecResponse(ErrorDetail(str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return MsgspecResponse(ValidationErrorBody(exc.issues), status_code=422)


def routes() -> list[Route]:
    from cascade_http.routes import all_routes

    return [Route("/api/health", health, methods=["GET"]), Route("/api/openapi.json", openapi, methods=["GET"]), *all_routes]


def create_app(settings: Settings) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with service.running(settings) as running:
            app.state.cascade = running
            yield

    app_routes = routes()
    app = Starlette(
        routes=app_routes,
        middleware=[Middleware(BearerAuth)],
        exception_handlers={HTTPException: http_error, RequestValidationError: validation_error},
        lifespan=lifespan,
    )
    app.state.token = settings.token
    app.state.openapi = document(app_routes, title="Cascade", version=VERSION)
    return app
