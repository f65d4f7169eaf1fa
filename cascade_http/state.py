"""What a request handler reaches through the application's state."""

from __future__ import annotations

from starlette.requests import Request

from cascade_app.service import Cascade


def cascade(request: Request) -> Cascade:
    """The running service, from a request handler."""
    return request.app.state.cascade  # type: ignore[no-any-return]
