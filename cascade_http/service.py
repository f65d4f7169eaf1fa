"""The running service: NATS connection, event store, projector and read model, wired
together for the lifetime of the HTTP app."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import anyio
import duckdb
import msgspec
import nats
import nats.js.errors
from nats.aio.client import Client

from cascade_core import events as ev
from cascade_core import subjects
from cascade_core.models import Runner
from cascade_http.config import Settings
from cascade_nats.store import EventStore
from projections.projector import Projector, connect

log = logging.getLogger("cascade")


class Cascade:
    """Everything a request handler may use."""

    def __init__(self, settings: Settings, nc: Client, store: EventStore, projector: Projector) -> None:
        self.settings = settings
        self.nc = nc
        self.store = store
        self.projector = projector

    def reader(self) -> duckdb.DuckDBPyConnection:
        """A connection for one reading thread; DuckDB shows it the last committed batch."""
        return self.projector.con.cursor()

    async def queue_depth(self) -> int:
        """Sims waiting for a runner: launch requests not yet taken."""
        try:
            info = await self.store.js.consumer_info(subjects.STREAM, subjects.LAUNCH_CONSUMER)
        except nats.js.errors.NotFoundError:
            return 0
        return int(info.num_pending or 0)

    async def runners(self) -> list[Runner]:
        """Runners that announced themselves recently."""
        try:
            bucket = await self.store.js.key_value(subjects.RUNNERS_BUCKET)
            keys = await bucket.keys()
        except (nats.js.errors.BucketNotFoundError, nats.js.errors.NoKeysError):
            return []
        runners = []
        for key in keys:
            entry = await bucket.get(key)
            if entry.value:
                runners.append(msgspec.json.decode(entry.value, type=Runner))
        return sorted(runners, key=lambda r: r.id)

    async def append(self, event: ev.Event, *, expected_last_subject_seq: int | None = None) -> int:
        """Append a decided event and wait until the read model shows it."""
        seq = await self.store.append(event, expected_last_subject_seq=expected_last_subject_seq)
        await self.projector.wait_for(seq)
        return seq


async def connect_nats(url: str, *, name: str = "cascade") -> Client:
    return await nats.connect(
        url, name=name, connect_timeout=5, max_reconnect_attempts=-1, reconnect_time_wait=0.5, allow_reconnect=True
    )


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Cascade]:
    if settings.nats_url is None:
        raise ValueError("running() needs a NATS URL; `cascade serve` starts the embedded server first")
    nc = await connect_nats(settings.nats_url)
    try:
        store = EventStore(nc)
        await store.ensure_stream()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        con = await anyio.to_thread.run_sync(connect, settings.db_path)
        projector = Projector(store, con)
        await projector.catch_up()
        cascade = Cascade(settings, nc, store, projector)
        async with anyio.create_task_group() as tg:
            tg.start_soon(projector.run)
            yield cascade
            tg.cancel_scope.cancel()
        con.close()
    finally:
        await nc.close()
