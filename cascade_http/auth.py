"""Bearer-token authentication for `/api`.

Every `/api` route needs one `Authorization: Bearer <token>` header, compared in constant
time, except the OpenAPI document and the health check. Browsers' EventSource cannot set headers, so the
run event stream (and only it) also takes the token as `?token=`.
"""

from __future__ import annotations

import hmac
import re

from starlette.types import ASGIApp, Receive, Scope, Send

from cascade_http.responses import MsgspecResponse
from cascade_api.models import ErrorDetail

OPEN_PATHS = frozenset({"/api/openapi.json", "/api/health"})
QUERY_TOKEN_PATH = re.compile(r"^/api/runs/[^/]+/events$")


def _problem(scope: Scope) -> str | None:
    """Why the request is not authenticated, or None if it is."""
    expected: str = scope["app"].state.token
    given = [value for name, value in scope["headers"] if name == b"authorization"]
    if len(given) > 1:
        # Proxies and servers disagree on which of several counts, so none does.
        return f"{len(given)} Authorization headers were sent; send exactly one"
    if given:
        scheme, _, token = given[0].decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return "Authorization header must be 'Bearer <token>'"
        return None if hmac.compare_digest(token.strip().encode(), expected.encode()) else "Invalid token"
    if QUERY_TOKEN_PATH.match(scope["path"]):
        for pair in scope.get("query_string", b"").decode("latin-1").split("&"):
            key, _, value = pair.partition("=")
            if key == "token":
                return None if hmac.compare_digest(value.encode(), expected.encode()) else "Invalid token"
    return "Not authenticated"


class BearerAuth:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and path.startswith("/api/") and path not in OPEN_PATHS:
            problem = _problem(scope)
            if problem is not None:
                response = MsgspecResponse(ErrorDetail(problem), status_code=401, headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
