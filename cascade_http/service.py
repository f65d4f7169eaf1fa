"""The running service: NATS connection, event store, projector and read model, wired
together for the lifetime of the HTTP app.

Its long-lived tasks (the projector, the dispatcher, the local runner, and the watcher that
starts the embedded nats-server again when it dies) each run under a supervisor
(`cascade_nats.supervise`), so that none takes the others down with it, and what fails shows
in `/api/health`."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Hashable
from datetime import UTC, datetime

import anyio
import duckdb
from nats.aio.client import Client
from nats.js.kv import KeyValue
from starlette.requests import Request

from cascade_core import events as ev
from cascade_core.attention import Watch
from cascade_core.models import Comparison, GpuConfig, Runner
from cascade_http.config import Settings
from cascade_http.lru import Lru
from cascade_http.step_timelines import StepTimelines
from cascade_nats import connect as client
from cascade_nats import server as nats_server
from cascade_nats.objects import Objects
from cascade_nats.store import EventStore
from cascade_nats.supervise import ConnectionWatch, Supervision, supervise
from cascade_nats.wire import without_credentials
from cascade_sim.dispatcher import dispatch, ensure_consumers
from cascade_sim.install import AccelSimInstall
from cascade_sim import registry, samples
from cascade_sim import runner as sim_runner
from projections.queries import stats_maps
from projections.rebuild import ReadModel

log = logging.getLogger("cascade")

NATS_ANSWER_S = 2.0  # how long a read that asks NATS (health, live runners) waits for it
# People's SQL queries at once (`POST /api/sql`): each may keep DuckDB's threads busy for its
# whole time limit, and the projector must still get its turn. Others wait.
SQL_QUERIES_AT_ONCE = 2
RUNNERS_FRESH_S = 1.0  # the live runners are asked again after this long


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
        supervision: Supervision,
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
        self.stat_names = stats_maps.Names()
        self.sql_queries = anyio.CapacityLimiter(SQL_QUERIES_AT_ONCE)
        self.supervision = supervision
        self._kv: KeyValue | None = None
        self._runners: tuple[float, list[Runner]] | None = None
        read_model.after_swap(self._forget_answers)

    def _forget_answers(self) -> None:
        """Comparisons and stat names kept from a read model another version built: the
        rebuilt one may differ. A read still on the old one keeps its own to itself."""
        self.comparisons = Lru(64)
        self.stat_names = stats_maps.Names()

    def gpu_config(self, name: str) -> GpuConfig | None:
        return next((c for c in self.gpu_configs if c.name == name), None)

    def reader(self) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A cursor of the read model for one reading thread, closed on leaving
        (`projections/readers.py`)."""
        return self.read_model.reader()

    async def runners(self) -> list[Runner] | None:
        """Runners that announced themselves recently (as of at most a second ago); None
        when NATS is not connected or does not answer in time."""
        if not self.nc.is_connected:
            return None
        if self._runners is not None and time.monotonic() - self._runners[0] < RUNNERS_FRESH_S:
            return self._runners[1]
        try:
            with anyio.fail_after(NATS_ANSWER_S):
                self._kv = self._kv or await registry.bucket(self.store.js)
                runners = await registry.live(self._kv)
        except Exception:  # noqa: BLE001 - NATS is unwell; health says how
            return None
        self._runners = (time.monotonic(), runners)
        return runners

    async def watch(self) -> Watch | None:
        """What a sim's attention is judged against; None when the live runners are not known."""
        runners = await self.runners()
        return None if runners is None else Watch(runners, datetime.now(UTC), self.settings.runner_lease_s)

    async def append(self, event: ev.Event, *, expected_last_subject_seq: int | None = None) -> int:
        """Append a decided event and wait until the read model shows it."""
        seq = await self.store.append(event, expected_last_subject_seq=expected_last_subject_seq)
        await self.projector.wait_for(seq)
        return seq


def cascade(request: Request) -> Cascade:
    """The running service, from a request handler."""
    return request.app.state.cascade  # type: ignore[no-any-return]


async def connect_nats(url: str, *, name: str = "cascade", supervision: Supervision | None = None) -> Client:
    """A client that reconnects for as long as it takes, its connection's state in `supervision`."""
    watch = ConnectionWatch(supervision or Supervision(), without_credentials(url))
    watch.client = await client.connect(
        url, name=name, connect_timeout=5, max_reconnect_attempts=-1, reconnect_time_wait=0.5, allow_reconnect=True,
        error_cb=watch.error, disconnected_cb=watch.disconnected, reconnected_cb=watch.reconnected, closed_cb=watch.closed,
    )
    return watch.client


@contextlib.asynccontextmanager
async def running(settings: Settings, embedded: nats_server.EmbeddedNats | None = None) -> AsyncIterator[Cascade]:
    """The service on `settings.nats_url`; `embedded` is the nats-server there when this
    process started it, and is started again whenever it dies."""
    if settings.nats_url is None:
        raise ValueError("running() needs a NATS URL; `cascade serve` starts the embedded server first")
    supervision = Supervision()
    nc = await connect_nats(settings.nats_url, supervision=supervision)
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
        cascade = Cascade(settings, nc, store, objects, read_model, install, supervision)
        if install is None:
            log.warning("no Accel-Sim dir (CASCADE_ACCELSIM_DIR): the GPU config list is empty and no sim runs here")
        else:
            log.info("GPU configs in %s: %s", install.root, ", ".join(c.name for c in cascade.gpu_configs) or "none")
        await ensure_consumers(store.js, ack_wait_s=settings.runner_lease_s)
        async with anyio.create_task_group() as tg:
            if embedded is not None:
                tg.start_soon(supervise, "nats-server", embedded.keep_running, supervision)
            tg.start_soon(supervise, "projector", read_model.run, supervision)
            tg.start_soon(supervise, "dispatcher", lambda: dispatch(store), supervision)
            if settings.runner and install is not None:
                runner = sim_runner.Runner(
                    nc,
                    install,
                    settings.data_dir / "runner",
                    slots=settings.runner_slots,
                    sim_timeout_s=settings.sim_timeout_s,
                    ack_wait_s=settings.runner_lease_s,
                    supervision=supervision,
                )
                tg.start_soon(supervise, "runner", runner.run, supervision)
            yield cascade
            tg.cancel_scope.cancel()
        read_model.close()
    finally:
        await store.close()
        await objects.close()
        await nc.close()
