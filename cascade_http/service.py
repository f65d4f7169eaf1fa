"""The running service: NATS connection, event store, projector and read model, wired
together for the lifetime of the HTTP app."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Hashable

import anyio
import duckdb
import nats
import nats.js.errors
from nats.aio.client import Client
from starlette.requests import Request

from cascade_core import events as ev
from cascade_core import subjects
from cascade_core.models import Comparison, GpuConfig, Runner
from cascade_http.config import Settings
from cascade_http.lru import Lru
from cascade_http.step_timelines import StepTimelines
from cascade_nats.objects import Objects
from cascade_nats.store import EventStore
from cascade_sim.dispatcher import dispatch, ensure_consumers
from cascade_sim.install import AccelSimInstall
from cascade_sim import registry, samples
from cascade_sim import runner as sim_runner
from projections.rebuild import ReadModel

log = logging.getLogger("cascade")


class Cascade:
    """Everything a request handler may use."""

    def __init__(
        self,
        settings: Settings,
        nc: Client,
        store: EventStore,
        objects: Objects,
        read_model: ReadModel,
        install: AccelSimInstall | None,
    ) -> None:
        self.settings = settings
        self.nc = nc
        self.store = store
        self.objects = objects
        self.read_model = read_model
        self.projector = read_model.projector
        self.install = install
        self.gpu_configs: list[GpuConfig] = install.configs() if install is not None else []
        self.step_timelines = StepTimelines(objects)
        self.comparisons: Lru[Hashable, Comparison] = Lru(64)
        read_model.after_swap(self._forget_comparisons)

    def _forget_comparisons(self) -> None:
        """Comparisons kept from a read model another version built: the rebuilt one may
        differ. A read still on the old one keeps its cache to itself."""
        self.comparisons = Lru(64)

    def gpu_config(self, name: str) -> GpuConfig | None:
        return next((c for c in self.gpu_configs if c.name == name), None)

    def reader(self) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A cursor of the read model for one reading thread, closed on leaving
        (`projections/readers.py`)."""
        return self.read_model.reader()

    async def queue_depth(self) -> int:
        """Sims waiting for a runner: launch requests not yet taken."""
        try:
            info = await self.store.js.consumer_info(subjects.STREAM, subjects.LAUNCH_CONSUMER)
        except nats.js.errors.NotFoundError:
            return 0
        return int(info.num_pending or 0)

    async def runners(self) -> list[Runner]:
        """Runners that announced themselves recently."""
        return await registry.live(await registry.bucket(self.store.js))

    async def append(self, event: ev.Event, *, expected_last_subject_seq: int | None = None) -> int:
        """Append a decided event and wait until the read model shows it."""
        seq = await self.store.append(event, expected_last_subject_seq=expected_last_subject_seq)
        await self.projector.wait_for(seq)
        return seq


def cascade(request: Request) -> Cascade:
    """The running service, from a request handler."""
    return request.app.state.cascade  # type: ignore[no-any-return]


async def connect_nats(url: str, *, name: str = "cascade") -> Client:
    return await nats.connect(
        url, name=name, connect_timeout=5, max_reconnect_attempts=-1, reconnect_time_wait=0.5, allow_reconnect=True
    )


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Cascade]:
    if settings.nats_url is None:
        raise ValueError("running() needs a NATS URL; `cascade serve` starts the embedded server first")
    nc = await connect_nats(settings.nats_url)
    store = EventStore(nc)
    objects = Objects(nc)
    try:
        await store.ensure_stream()
        await objects.ensure()
        if settings.samples:
            await samples.load(store, objects)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        read_model = await ReadModel.open(store, settings.db_path)
        await read_model.catch_up()
        install = AccelSimInstall(settings.accelsim_dir) if settings.accelsim_dir is not None else None
        cascade = Cascade(settings, nc, store, objects, read_model, install)
        if install is None:
            log.warning("no Accel-Sim dir (CASCADE_ACCELSIM_DIR): the GPU config list is empty and no sim runs here")
        else:
            log.info("GPU configs in %s: %s", install.root, ", ".join(c.name for c in cascade.gpu_configs) or "none")
        await ensure_consumers(store.js, ack_wait_s=settings.runner_lease_s)
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_model.run)
            tg.start_soon(dispatch, store)
            if settings.runner and install is not None:
                runner = sim_runner.Runner(
                    nc,
                    install,
                    settings.data_dir / "runner",
                    slots=settings.runner_slots,
                    sim_timeout_s=settings.sim_timeout_s,
                    ack_wait_s=settings.runner_lease_s,
                )
                tg.start_soon(runner.run)
            yield cascade
            tg.cancel_scope.cancel()
        read_model.close()
    finally:
        await store.close()
        await objects.close()
        await nc.close()
