"""Responses whose bodies msgspec encodes: the Structs in `cascade_core.models` go out as is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from starlette.exceptions import HTTPException
from starlette.responses import Response

ENCODER = msgspec.json.Encoder()


class MsgspecResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return ENCODER.encode(content)


def download(content: Any, filename: str) -> MsgspecResponse:
    return MsgspecResponse(content, headers={"Content-Disposition": f'attachment; filename="{filename}"'})


class ApiError(HTTPException):
    """An error answered as `{"detail": <text>}` with its status."""

    def __init__(self, status_code: int, detail: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status_code, detail, headers)


def not_found(detail: str) -> ApiError:
    return ApiError(404, detail)
