"""Authentication for `/api`: the bearer token, or a browser's session cookie.

Every `/api` route needs one `Authorization: Bearer <token>` header, compared in constant
time, except the OpenAPI document, the health check and signing in (`POST /api/session`).
Browsers' EventSource cannot set headers, so the run event stream (and only it) also takes
the token as `?token=`. Without either, the session cookie `POST /api/session` set
(`cascade_http.sessions`) signs a request in; a request that changes something must then
also come from the server's own pages (its `Origin`, or `Sec-Fetch-Site: same-origin`), or
another site's page could send it with the cookie the browser adds (cross-site request
forgery: SameSite=Strict stops other sites, but not another port of the same host).
"""

from __future__ import annotations

import hmac
import re
from urllib.parse import urlsplit

from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from cascade_http.responses import MsgspecResponse
from cascade_http.sessions import Sessions
from cascade_api.models import ErrorDetail

OPEN_PATHS = frozenset({"/api/openapi.json", "/api/health"})
SESSION_PATH = "/api/session"
QUERY_TOKEN_PATH = re.compile(r"^/api/runs/[^/]+/events$")
COOKIE = "cascade_session"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class AuthRefusal(Exception):
    """Why a request is refused, and with which status."""

    def __init__(self, detail: str, status: int) -> None:
        super().__init__(detail)
        self.status = status


def token_matches(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def header(scope: Scope, name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope["headers"] if key == name]


def cookie_name(scope: Scope) -> str:
    """The session cookie's name at the server the request was sent to: browsers keep cookies
    by host whatever the port, so two servers of one host would otherwise sign each other's
    browsers out."""
    hosts = header(scope, b"host")
    _, colon, port = hosts[0].rpartition(":") if len(hosts) == 1 else ("", "", "")
    return f"{COOKIE}-{port}" if colon and port.isdigit() else COOKIE


def session_id(scope: Scope) -> str | None:
    """The session cookie's value, if the request sent one."""
    name = cookie_name(scope)
    # Parsed as browsers send cookies, as Starlette does: one malformed cookie of another
    # site's app on this host does not hide the session's.
    for text in header(scope, b"cookie"):
        if (value := cookie_parser(text).get(name)) is not None:
            return value
    return None


def same_origin(scope: Scope) -> bool:
    """Whether the browser says the request comes from this server's own pages: its Origin
    names the host the request was sent to (the Host, which `KnownHosts` checked), or, with
    no Origin, its Sec-Fetch-Site says so."""
    origins, hosts = header(scope, b"origin"), header(scope, b"host")
    if origins:
        return len(origins) == 1 and len(hosts) == 1 and urlsplit(origins[0]).netloc.lower() == hosts[0].lower()
    return header(scope, b"sec-fetch-site") == ["same-origin"]


def bearer(scope: Scope, expected: str) -> bool | None:
    """Whether the request's Authorization header carries the token; None without one."""
    given = header(scope, b"authorization")
    if len(given) > 1:
        # Proxies and servers disagree on which of several counts, so none does.
        raise AuthRefusal(f"{len(given)} Authorization headers were sent; send exactly one", 401)
    if not given:
        return None
    scheme, _, token = given[0].partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthRefusal("Authorization header must be 'Bearer <token>'", 401)
    return token_matches(token.strip(), expected)


def check(scope: Scope) -> None:
    """Nothing if the request is authenticated; else raises AuthRefusal, saying why."""
    expected: str = scope["app"].state.token
    by_header = bearer(scope, expected)
    if by_header is not None:
        if not by_header:
            raise AuthRefusal("Invalid token", 401)
        return
    if QUERY_TOKEN_PATH.match(scope["path"]):
        for pair in scope.get("query_string", b"").decode("latin-1").split("&"):
            key, _, value = pair.partition("=")
            if key == "token":
                if not token_matches(value, expected):
                    raise AuthRefusal("Invalid token", 401)
                return
    sid = session_id(scope)
    if sid is None:
        raise AuthRefusal("Not authenticated", 401)
    sessions: Sessions = scope["app"].state.sessions
    if not sessions.valid(sid):
        raise AuthRefusal("The session has ended (signed out, or the server restarted): sign in again", 401)
    if scope["method"] not in SAFE_METHODS and not same_origin(scope):
        raise AuthRefusal(f"{scope['method']} with the session cookie from another origin is refused; send the Bearer token instead", 403)


class BearerAuth:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        signing_in = path == SESSION_PATH and scope.get("method") == "POST"
        if scope["type"] == "http" and path.startswith("/api/") and path not in OPEN_PATHS and not signing_in:
            try:
                check(scope)
            except AuthRefusal as refusal:
                headers = {"WWW-Authenticate": "Bearer"} if refusal.status == 401 else None
                await MsgspecResponse(ErrorDetail(str(refusal)), status_code=refusal.status, headers=headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)
