"""A real uvicorn server in a thread, for what TestClient cannot do: many concurrent clients
(live event streams) and tools that speak HTTP to a URL (Schemathesis); and a reader of
server-sent events."""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import nats
import uvicorn
from starlette.applications import Starlette

from cascade_app.config import Settings
from cascade_app.service import Cascade
from cascade_core import events as ev
from cascade_http.run_events import Position, last_event_id
from cascade_nats import server
from cascade_nats.objects import Objects
from cascade_nats.store import EventStore
from cascade_process.serve import KEEP_ALIVE_S
from cascade_process.service import starlette_app
from tests.cascade_sim.world import TITANX, accelsim_tree


class LiveServer(msgspec.Struct):
    url: str
    app: Starlette
    nats_url: str

    @property
    def cascade(self) -> Cascade:
        return self.app.state.cascade  # type: ignore[no-any-return]

    async def projected(self, seq: int, timeout: float = 20.0) -> None:
        """Wait until the server's read model shows sequence `seq`."""
        with anyio.fail_after(timeout):
            while self.cascade.projector.applied < seq:
                await anyio.sleep(0.002)

    def seed(self, events: Sequence[ev.Event], objects: Mapping[str, bytes] = {}) -> None:
        """From a thread of the test's own: append events as facts and store objects, over a
        connection of its own, and wait until the server's read model shows them."""

        async def seed() -> None:
            nc = await nats.connect(self.nats_url)
            files, store = Objects(nc), EventStore(nc)
            try:
                await files.ensure()
                for name, data in objects.items():
                    await files.put(name, _once(data))
                seqs = await store.append_facts(list(events), timeout=30.0)
                await self.projected(seqs[-1])
            finally:
                await files.close()
                await store.close()
                await nc.close()

        anyio.run(seed)


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


@contextlib.contextmanager
def live_server(settings: Settings) -> Iterator[LiveServer]:
    app = starlette_app(settings)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, lifespan="on", log_level="warning", timeout_graceful_shutdown=2, timeout_keep_alive=KEEP_ALIVE_S
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        assert settings.nats_url is not None
        yield LiveServer(f"http://127.0.0.1:{port}", app, settings.nats_url)
    finally:
        server.should_exit = True
        thread.join(15)


COPY = "SM61_TITANX_COPY"  # the same options: the fake simulator replays SM61_TITANX's log for it


@contextlib.contextmanager
def live_with_copy(tmp: Path, token: str, *, samples: bool) -> Iterator[LiveServer]:
    """A live server on a nats-server of its own, its runner (2 slots) driving the fake
    simulator in an Accel-Sim tree under `tmp` that also has COPY."""
    tree = accelsim_tree(tmp / "accel-sim")
    shutil.copytree(tree / TITANX, tree / TITANX.parent / COPY)
    shutil.copytree(tree / "gpu-simulator/configs/tested-cfgs/SM61_TITANX", tree / "gpu-simulator/configs/tested-cfgs" / COPY)
    with server.running(tmp / "jetstream") as nats:
        settings = Settings(token=token, data_dir=tmp / "data", nats_url=nats.url, accelsim_dir=tree, runner=True, runner_slots=2, samples=samples)
        with live_server(settings) as live:
            yield live


class SseEvent(msgspec.Struct, frozen=True):
    event: str
    id: str
    data: Any

    @property
    def position(self) -> Position:
        """Where the id puts the event in its stream, as a resume from it reads it."""
        position = last_event_id(self.id)
        assert position is not None, f"not an event id: {self.id!r}"
        return position


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """The events of an SSE response as they arrive (comments skipped)."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if "data" in fields:
                yield SseEvent(fields.get("event", "message"), fields["id"], json.loads(fields["data"]))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
