"""The plain-protocol connection: what stops its opening also closes it."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from cascade_nats.access import parse
from cascade_nats.wire import Wire

pytestmark = pytest.mark.anyio


async def test_an_opening_cut_short_closes_its_connection() -> None:
    connected, closed = anyio.Event(), anyio.Event()

    async def never_greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        await reader.read()  # until the client closes its end
        closed.set()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(never_greet, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        async with anyio.create_task_group() as tg:
            url = f"nats://127.0.0.1:{port}"
            tg.start_soon(Wire.open, url, parse(url))  # waits for the INFO line
            await connected.wait()
            tg.cancel_scope.cancel()  # as a stopping projector or a gone client's stream is
        with anyio.fail_after(5):
            await closed.wait()
