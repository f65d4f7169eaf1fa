"""The Starlette application: routes, authentication, errors, and the service's lifetime."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from cascade_core.models import ErrorDetail, Health, ValidationErrorBody
from cascade_http import service
from cascade_http.service import cascade
from cascade_http.auth import BearerAuth
from cascade_http.config import Settings
from cascade_http.openapi import document, operation
from cascade_http.read_only import ReadOnlyWhileRebuilding
from cascade_http.readmodel import read
from cascade_http.responses import MsgspecResponse
from cascade_http.validation import RequestValidationError
from cascade_nats.store import EventTooLarge
from projections.queries.parked import parked_count

VERSION = "0.1.0"
WEB_DIR = Path(__file__).parent / "static"


@operation(
    summary="Service health",
    description="`projected_seq` is the last event reads show. While a read model another version built is rebuilt "
    "from the log, `rebuild` says why and how far it is: reads answer from the old one, and requests that change "
    "something answer 503 with `Retry-After` until the new one takes its place.",
    tag="service",
    response=Health,
    auth=False,
)
async def health(request: Request) -> Response:
    c = cascade(request)
    return MsgspecResponse(
        Health(
            status="ok",
            stream_seq=await c.store.last_seq(),
            projected_seq=c.read_model.seq,
            queue_depth=await c.queue_depth(),
            runners=len(await c.runners()),
            parked=await read(c, parked_count),
            rebuild=c.read_model.rebuild,
        )
    )


async def openapi(request: Request) -> Response:
    return MsgspecResponse(request.app.state.openapi)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return MsgspecResponse(ErrorDetail(str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def event_too_large(request: Request, exc: Exception) -> Response:
    """The last resort for a request whose event the store refused before sending it: every
    route's own limits should have refused the request first."""
    return MsgspecResponse(ErrorDetail(f"the request is too large to record ({exc}); make it smaller"), status_code=413)


async def validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return MsgspecResponse(ValidationErrorBody(exc.issues), status_code=422)


def routes() -> list[Route]:
    from cascade_http.routes import all_routes

    return [Route("/api/health", health, methods=["GET"]), Route("/api/openapi.json", openapi, methods=["GET"]), *all_routes]


class WebAssets(StaticFiles):
    """The web app's files, revalidated on every load so an upgrade is seen at once."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


async def web_app(request: Request) -> Response:
    return FileResponse(WEB_DIR / "index.html", headers={"Cache-Control": "no-cache"})


def web_routes() -> list[BaseRoute]:
    """The web app (`cascade_http/static`): its page at `/` and its files under `/static`."""
    return [Route("/", web_app, methods=["GET"]), Mount("/static", WebAssets(directory=WEB_DIR), name="static")]


def create_app(settings: Settings) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with service.running(settings) as running:
            app.state.cascade = running
            yield

    app_routes = routes()
    app = Starlette(
        routes=[*app_routes, *web_routes()],
        middleware=[Middleware(BearerAuth), Middleware(ReadOnlyWhileRebuilding)],
        exception_handlers={HTTPException: http_error, RequestValidationError: validation_error, EventTooLarge: event_too_large},
        lifespan=lifespan,
    )
    app.state.token = settings.token
    app.state.openapi = document(app_routes, title="Cascade", version=VERSION)
    return app
