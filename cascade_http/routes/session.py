"""Browser sessions: `POST /api/session` signs a browser in with the token or a one-time code
and sets its session cookie (`cascade_http.sessions`); `DELETE` signs it out."""

from __future__ import annotations

from typing import Literal, TypedDict

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_api.models import SignIn
from cascade_http.auth import AuthRefusal, bearer, cookie_name, session_id, token_matches
from cascade_http.bodies import json_body
from cascade_http.openapi import operation
from cascade_http.responses import ApiError
from cascade_http.sessions import SESSION_S, CodeRefused, Sessions


class CookieAttributes(TypedDict):
    path: str
    httponly: bool
    samesite: Literal["strict"]
    secure: bool


SIGNED_IN = (
    "204 when the Bearer token or the session cookie signs the request in, else 401: how the web app finds whether "
    "this browser is signed in (its cookie is out of its scripts' reach)."
)


def sessions(request: Request) -> Sessions:
    kept: Sessions = request.app.state.sessions
    return kept


def cookie_attributes(request: Request) -> CookieAttributes:
    """Out of scripts' reach, sent to this server's pages alone, and only over https when served so."""
    return {"path": "/", "httponly": True, "samesite": "strict", "secure": request.url.scheme == "https"}


def signed_in(request: Request, given: SignIn) -> str:
    """A new session's id for what `given` (or the Authorization header) shows, else ApiError 401."""
    if given.code is not None:
        try:
            return sessions(request).trade(given.code)
        except CodeRefused as refused:
            raise ApiError(401, str(refused)) from None
    expected: str = request.app.state.token
    if given.token is not None:
        shown = token_matches(given.token, expected)
    else:
        try:
            by_header = bearer(request.scope, expected)
        except AuthRefusal as refused:
            raise ApiError(401, str(refused)) from None
        if by_header is None:
            raise ApiError(401, 'Send the API token: {"token": "..."} or an Authorization: Bearer header, or a sign-in code: {"code": "..."}')
        shown = by_header
    if not shown:
        raise ApiError(401, "Invalid token")
    return sessions(request).open()


@operation(
    summary="Sign a browser in",
    description="Trades the API token (`token`, or the Authorization header with an empty object) or a one-time "
    "sign-in code (`code`, from the link `cascade serve` prints at start: it works once, within 15 minutes) for "
    "an HttpOnly, SameSite=Strict session cookie that every `/api` route takes beside the Bearer header; a "
    "request that changes something with it must come from this server's pages (`Origin`). The cookie holds a "
    "random id, not the token; sessions are kept in the server's memory, so a restart signs every browser out.",
    tag="service",
    body=SignIn,
    status=204,
    errors={
        400: "The body is not parsable.",
        401: "The token is wrong, or the code is unknown, used or expired: the detail says which.",
        413: "The body is over CASCADE_MAX_BODY_BYTES.",
        422: "The body is not an object of these fields.",
    },
    auth=False,
)
async def sign_in(request: Request) -> Response:
    given = await json_body(request, SignIn)
    response = Response(status_code=204)
    response.set_cookie(cookie_name(request.scope), signed_in(request, given), max_age=SESSION_S, **cookie_attributes(request))
    return response


@operation(summary="Whether the request is signed in", description=SIGNED_IN, tag="service", status=204)
async def session_state(request: Request) -> Response:
    return Response(status_code=204)


@operation(
    summary="Sign a browser out",
    description="Ends the session of the request's cookie and clears the cookie. With the Bearer header there is "
    "no session to end: 204 all the same.",
    tag="service",
    status=204,
)
async def sign_out(request: Request) -> Response:
    sid = session_id(request.scope)
    if sid is not None:
        sessions(request).close(sid)
    response = Response(status_code=204)
    response.delete_cookie(cookie_name(request.scope), **cookie_attributes(request))
    return response


routes = [
    Route("/api/session", sign_in, methods=["POST"]),
    Route("/api/session", session_state, methods=["GET"]),
    Route("/api/session", sign_out, methods=["DELETE"]),
]
