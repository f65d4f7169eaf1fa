"""Connecting nats-py's client without leaking its socket.

`nats.connect()` makes a client and connects it; when the server refuses the login (or the
connection fails after the socket opened), it raises and leaves the socket open, for the
garbage collector to find, maybe after the event loop has closed ("ResourceWarning: loop is
closed"). Here a client that does not connect is closed before the error goes on.
"""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client


async def connect(url: str, **options: Any) -> Client:
    client = Client()
    try:
        await client.connect(url, **options)
    except BaseException:
        await client.close()
        raise
    return client
