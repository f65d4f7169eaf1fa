"""What a request handler reaches through the application's state."""

from __future__ import annotations

from starlette.requests import Request

from cascade_app.service import Cascade


def cascade(request: Request) -> Cascade:
    """The running service, from a request handler."""
    running: Cascade = request.app.state.cascade
    return running
