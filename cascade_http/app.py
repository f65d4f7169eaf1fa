"""The Starlette application: routes, authentication, errors, and the service's lifetime."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import msgspec
import nats.errors
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from cascade_app import disk
from cascade_app.reads import read
from cascade_app.service import NATS_ANSWER_S, Cascade
from cascade_core import attention
from cascade_api.models import ErrorDetail, Health, ParkedEvent, Problem, ValidationErrorBody
from cascade_core.refusals import NoSpace, Refused, Unavailable
from cascade_http.auth import BearerAuth
from cascade_http.hosts import KnownHosts
from cascade_http.openapi import document, operation
from cascade_http.read_only import ReadOnly
from cascade_http.responses import MsgspecResponse, refusal
from cascade_http.security_headers import SecurityHeaders
from cascade_http.sessions import Sessions
from cascade_http.state import cascade
from cascade_http.validation import RequestValidationError
from cascade_nats.pipeline import PublishError
from cascade_nats.store import EventTooLarge, StoreError
from cascade_nats.supervise import ConnectionWatch, describe
from projections.queries import runs as q
from projections.queries.parked import lost_events, parked_count

VERSION = "0.1.0"
log = logging.getLogger("cascade")
# What a store or a wait on NATS raises when it did not store a request's events or files, or
# did not answer in time (nats-py's timeouts are its own and builtin ones).
NOT_STORED: tuple[type[Exception], ...] = (nats.errors.Error, PublishError, StoreError, TimeoutError)
WEB_DIR = Path(__file__).parent / "static"


@operation(
    summary="Service health",
    description="`ok`, or `degraded` (503) with what fails: a task of the service that keeps failing and is being "
    "started again (the projector, the dispatcher, the runner's loops, the embedded nats-server), NATS out of "
    "reach, while reads show the read model as it last was. Events lost from the log make it `degraded` too, "
    "but answer 200, as the service serves: task `event log`, messages nats-server could not read back from its "
    "store, each with the subjects stored around it, which name the runs and sims it may have been of (`GET "
    "/api/parked` lists them all). Answers within seconds however NATS is. "
    "`projected_seq` is the last event reads show. While a read model another version built is rebuilt from the "
    "log, `rebuild` says why and how far it is: reads answer from the old one, and requests that change something "
    "answer 503 with `Retry-After` until the new one takes its place.",
    tag="service",
    response=Health,
    also={503: "Degraded: `problems` says what fails."},
    auth=False,
)
async def health(request: Request) -> Response:
    c = cascade(request)
    problems = [msgspec.convert(f, Problem, from_attributes=True) for f in c.supervision.failing()]
    stream_seq = queue_depth = None
    if c.nc.is_connected:
        try:
            with anyio.fail_after(NATS_ANSWER_S):
                stream_seq = await c.store.last_seq()
        except Exception as err:  # noqa: BLE001 - the answer says what went wrong instead
            problems.append(Problem(task=ConnectionWatch.TASK, error=describe(err), since=datetime.now(UTC), restarts=0))
    elif not any(p.task == ConnectionWatch.TASK for p in problems):
        # Lost a moment ago: nats-py tells its watch only after it stopped being connected.
        problems.append(Problem(task=ConnectionWatch.TASK, error="not connected to NATS", since=datetime.now(UTC), restarts=0))
    if c.disk is not None and c.disk.full_since is not None:
        problems.append(Problem(task=DISK_TASK, error=disk.said(c.disk), since=c.disk.full_since, restarts=0))
    failing = bool(problems)
    lost = c.with_lost_in_log(await read(c, lost_events))
    if lost:
        problems.append(Problem(task=LOST_TASK, error=_said(lost), since=lost[0].parked_at, restarts=0))
    runners = await c.runners()
    if runners is not None:
        queue_depth = attention.waiting(await read(c, q.unfinished_sims), runners)
    report = Health(
        status="degraded" if problems else "ok",
        stream_seq=stream_seq,
        projected_seq=c.read_model.seq,
        queue_depth=queue_depth,
        runners=None if runners is None else len(runners),
        parked=await read(c, parked_count),
        problems=problems,
        rebuild=c.read_model.rebuild,
    )
    # A loss in the log is said, but the service itself serves: only what fails makes it 503,
    # so that a load balancer or a start script does not take it for down.
    return MsgspecResponse(report, status_code=503 if failing else 200)


LOST_TASK = "event log"
DISK_TASK = "disk"
_LOST_SHOWN = 3  # the rest are in GET /api/parked


def _said(lost: list[ParkedEvent]) -> str:
    shown = "; ".join(f"sequence {e.seq} {e.error}" for e in lost[:_LOST_SHOWN])
    more = f"; and {len(lost) - _LOST_SHOWN} more (GET /api/parked)" if len(lost) > _LOST_SHOWN else ""
    return f"{len(lost)} event{'s' if len(lost) > 1 else ''} lost from the store: {shown}{more}"


async def openapi(request: Request) -> Response:
    return MsgspecResponse(request.app.state.openapi)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return MsgspecResponse(ErrorDetail(str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return refusal(exc)


async def event_too_large(request: Request, exc: Exception) -> Response:
    """The last resort for a request whose event the store refused before sending it: every
    route's own limits should have refused the request first."""
    return MsgspecResponse(ErrorDetail(f"the request is too large to record ({exc}); make it smaller"), status_code=413)


STORE_RETRY_S = 5


async def not_stored(request: Request, exc: Exception) -> Response:
    """A request whose events or files NATS did not store, or did not answer for in time: 507
    saying what is free when the data dir's disk is full, else 503 to ask again."""
    c = cascade(request)
    log.warning("%s %s: not stored: %s", request.method, request.url.path, describe(exc))
    if c.disk is not None and c.disk.full:
        return refusal(NoSpace(disk.said(c.disk)))
    return refusal(Unavailable(f"the event log did not store it or did not answer in time ({describe(exc)}); try again", retry_after_s=STORE_RETRY_S))


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


async def api_docs(request: Request) -> Response:
    return RedirectResponse("/#/api")


def web_routes() -> list[BaseRoute]:
    """The web app (`cascade_http/static`): its page at `/`, its files under `/static`, and
    `/docs`, where an API's rendered reference is looked for, leading to its API page."""
    return [
        Route("/", web_app, methods=["GET"]),
        Route("/docs", api_docs, methods=["GET"]),
        Mount("/static", WebAssets(directory=WEB_DIR), name="static"),
    ]


def create_app(token: str | None, service: Callable[[], contextlib.AbstractAsyncContextManager[Cascade]]) -> Starlette:
    """The app answering requests that carry `token`, from the service `service()` runs for
    the app's lifetime (`cascade_process.service` wires one)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with service() as running:
            app.state.cascade = running
            yield

    app_routes = routes()
    app = Starlette(
        routes=[*app_routes, *web_routes()],
        middleware=[Middleware(SecurityHeaders), Middleware(KnownHosts), Middleware(BearerAuth), Middleware(ReadOnly)],
        exception_handlers={
            HTTPException: http_error, Refused: refused, RequestValidationError: validation_error, EventTooLarge: event_too_large,
            **dict.fromkeys(NOT_STORED, not_stored),
        },
        lifespan=lifespan,
    )
    app.state.token = token
    app.state.sessions = Sessions()
    app.state.openapi = document(app_routes, title="Cascade", version=VERSION)
    return app
