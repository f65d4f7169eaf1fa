"""Requests straight into the app's ASGI interface, for what TestClient cannot do: send a body
in pieces without Content-Length and count how many of them the app read, end it with a
disconnect, or send a header twice."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec
from starlette.testclient import TestClient

from tests.cascade_http.conftest import TOKEN

AUTH = (b"authorization", f"Bearer {TOKEN}".encode())


class Answer(msgspec.Struct, frozen=True):
    status: int
    body: Any  # the JSON body, {} when there is none
    read: int  # how many of the body's pieces the app asked for


def call(
    client: TestClient,
    method: str,
    path: str,
    *,
    query: str = "",
    headers: Sequence[tuple[bytes, bytes]] = (AUTH,),
    chunks: Sequence[bytes] = (),
    end: str = "complete",
) -> Answer:
    """Send `chunks` as the body, then its end: "complete" or "disconnect"."""
    messages: list[dict[str, Any]] = [{"type": "http.request", "body": c, "more_body": True} for c in chunks]
    messages.append({"type": "http.request", "body": b"", "more_body": False} if end == "complete" else {"type": "http.disconnect"})
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(b"host", b"testserver"), *headers],  # as every HTTP/1.1 client sends it
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    read = 0

    async def go() -> Answer:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            nonlocal read
            read += 1
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await client.app(scope, receive, send)  # type: ignore[arg-type]
        body = b"".join(m.get("body", b"") for m in sent[1:])
        return Answer(int(sent[0]["status"]), json.loads(body or b"{}"), min(read, len(chunks)))

    return client.portal.call(go)  # type: ignore[union-attr]
