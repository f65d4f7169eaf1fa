"""The service `cascade serve` runs: NATS connection, event store, projector and read model,
wired together for the lifetime of the API app, with the dispatcher and a local runner.

Its long-lived tasks (the projector, the dispatcher, the local runner, and the watcher that
starts the embedded nats-server again when it dies) each run under a supervisor
(`cascade_nats.supervise`), so that none takes the others down with it, and what fails shows
in `/api/health`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import anyio
from starlette.applications import Starlette

from cascade_app import disk
from cascade_app.config import Settings
from cascade_app.service import Cascade
from cascade_app.uploads.receive import fail_cut_short
from cascade_http.app import create_app
from cascade_nats.objects import Objects
from cascade_nats.server import EmbeddedNats
from cascade_nats.store import EventStore
from cascade_nats.supervise import Supervision, retry, supervise
from cascade_process.connection import connect_nats
from cascade_process.worker import runner
from cascade_sim import registry, samples
from cascade_sim.dispatcher import dispatch, ensure_consumer
from cascade_sim.install import AccelSimInstall
from projections import sql_process
from projections.log_audit import lost_up_to
from projections.projector import Memory
from projections.rebuild import ReadModel

log = logging.getLogger("cascade")


def starlette_app(settings: Settings, embedded: EmbeddedNats | None = None) -> Starlette:
    """The API app serving the service on `settings` for as long as the app runs."""
    return create_app(settings.token, lambda: running(settings, embedded))


async def _audit(cascade: Cascade) -> None:
    cascade.lost_in_log = await lost_up_to(cascade.store, cascade.read_model.seq)
    if cascade.lost_in_log:
        log.warning("%d of the log's events up to sequence %d are lost from the store (health says which)", len(cascade.lost_in_log), cascade.read_model.seq)


DISK_LOOK_S = 1.0


async def _watch_disk(cascade: Cascade, embedded: EmbeddedNats | None) -> None:
    """Look at the data dir's disk every second (`cascade_app/disk.py`); once it has room
    again, start the embedded nats-server again if it failed to write its store meanwhile:
    it refuses every write after such a failure until it is restarted (its watcher starts
    it again once it has stopped)."""
    while True:
        before = cascade.disk
        cascade.disk = disk.looked_at(cascade.settings.data_dir, before, datetime.now(UTC))
        if cascade.disk.full and (before is None or not before.full):
            log.warning("%s", disk.said(cascade.disk))
        if embedded is not None and not cascade.disk.full and embedded.store_failed():
            log.warning("nats-server failed to write its store for want of space; the disk has room again: restarting it")
            await anyio.to_thread.run_sync(embedded.stop)
        await anyio.sleep(DISK_LOOK_S)


@contextlib.asynccontextmanager
async def running(settings: Settings, embedded: EmbeddedNats | None = None) -> AsyncIterator[Cascade]:
    """The service on `settings.nats_url`; `embedded` is the nats-server there when this
    process started it, and is started again whenever it dies."""
    if settings.nats_url is None:
        raise ValueError("running() needs a NATS URL; `cascade serve` starts the embedded server first")
    supervision = Supervision()
    nc = await connect_nats(settings.nats_access(), supervision=supervision)
    store = EventStore(nc)
    objects = Objects(nc)
    try:
        await store.ensure_stream(settings.replicas)
        await objects.ensure(settings.replicas)
        await registry.bucket(store.js, settings.replicas)
        if settings.samples:
            await samples.load(store, objects)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        memory = None if settings.db_memory_bytes is None else Memory(settings.db_memory_bytes)
        read_model = await ReadModel.open(store, settings.db_path, memory)
        await anyio.to_thread.run_sync(sql_process.remove_copies, settings.db_path)
        await read_model.catch_up()
        install = AccelSimInstall(settings.accelsim_dir) if settings.accelsim_dir is not None else None
        cascade = Cascade(
            settings=settings, nc=nc, store=store, objects=objects, read_model=read_model, install=install, supervision=supervision
        )
        if install is None:
            log.warning("no Accel-Sim dir (CASCADE_ACCELSIM_DIR): no sim runs here; runs may name the configs of live runners")
        else:
            log.info("GPU configs in %s: %s", install.root, ", ".join(c.name for c in await cascade.local_configs()) or "none")
        await ensure_consumer(store.js)
        async with anyio.create_task_group() as tg:
            if embedded is not None:
                tg.start_soon(supervise, "nats-server", embedded.keep_running, supervision)
            tg.start_soon(supervise, "projector", read_model.run, supervision)
            tg.start_soon(retry, "log audit", lambda: _audit(cascade), supervision)
            tg.start_soon(retry, "uploads cut short", lambda: fail_cut_short(cascade), supervision)
            tg.start_soon(supervise, "disk", lambda: _watch_disk(cascade, embedded), supervision)
            tg.start_soon(supervise, "dispatcher", lambda: dispatch(store, ack_wait_s=settings.runner_lease_s), supervision)
            if settings.runner and install is not None:
                local = runner(nc, install, settings.data_dir / "runner", settings, supervision)
                tg.start_soon(supervise, "runner", local.run, supervision)
            yield cascade
            tg.cancel_scope.cancel()
        await cascade.sql_children.aclose()
        read_model.close()
    finally:
        await store.close()
        await objects.close()
        await nc.close()
