"""The API is read-only while the read model is rebuilt (`projections/rebuild.py`), or while
the data dir's disk is full (`cascade_app/disk.py`).

Reads answer from the read model as it is (while it is rebuilt, from the old one, as it was);
a request that would change something is refused before it appends anything: a command
decides from the read model and waits until it shows what it appended, which the old one
never will, and a full disk takes no event or file (nats-server would not even answer). Both
go by themselves: the rebuild once the new read model takes the old one's place, the full disk
within seconds of space returning.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from cascade_app import disk
from cascade_app.reads import RETRY_AFTER_S
from cascade_app.service import Cascade
from cascade_core.refusals import NoSpace, Refused, Unavailable
from cascade_http.auth import SESSION_PATH
from cascade_http.responses import refusal

READS = frozenset({"GET", "HEAD", "OPTIONS"})


def why_read_only(c: Cascade) -> Refused | None:
    rebuild = c.read_model.rebuild
    if rebuild is not None:
        detail = (
            f"the read model is being rebuilt from the event log ({rebuild.applied:,} events so far) and takes "
            "no changes until it is done; try again later (GET /api/health shows how far it is)"
        )
        return Unavailable(detail, retry_after_s=RETRY_AFTER_S)
    if c.disk is not None and c.disk.full:
        return NoSpace(disk.said(c.disk))
    return None


class ReadOnly:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Signing in and out appends nothing: a browser may while the rest waits.
        changes = scope["type"] == "http" and scope["method"] not in READS and scope["path"] != SESSION_PATH
        if changes and scope["path"].startswith("/api/"):
            why = why_read_only(scope["app"].state.cascade)
            if why is not None:
                await refusal(why)(scope, receive, send)
                return
        await self.app(scope, receive, send)
