"""The API is read-only while the read model is rebuilt (`projections/rebuild.py`).

Reads answer from the old read model, as it was; a request that would change something is
refused before it appends anything, since a command decides from the read model and waits
until it shows what it appended, which the old one never will.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from cascade_app.reads import RETRY_AFTER_S
from cascade_core.refusals import Unavailable
from cascade_http.responses import refusal

READS = frozenset({"GET", "HEAD", "OPTIONS"})


class ReadOnlyWhileRebuilding:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in READS and scope["path"].startswith("/api/"):
            rebuild = scope["app"].state.cascade.read_model.rebuild
            if rebuild is not None:
                detail = (
                    f"the read model is being rebuilt from the event log ({rebuild.applied:,} events so far) and takes "
                    "no changes until it is done; try again later (GET /api/health shows how far it is)"
                )
                await refusal(Unavailable(detail, retry_after_s=RETRY_AFTER_S))(scope, receive, send)
                return
        await self.app(scope, receive, send)
