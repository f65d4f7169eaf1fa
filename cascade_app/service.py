"""The running service as commands and reads see it: NATS connection, event store, object
store, read model and projector, the GPU configs (this server's, read again when they change,
and the live runners'), the live runners. `cascade_process.service`
starts it and keeps its long-lived tasks going."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Hashable
from datetime import UTC, datetime

import anyio
import duckdb
import msgspec
from nats.aio.client import Client
from nats.js.kv import KeyValue

from cascade_app.config import Settings
from cascade_app.disk import DiskSpace
from cascade_app.lru import Lru
from cascade_app.step_timelines import StepTimelines
from cascade_core import events as ev
from cascade_core.attention import Watch
from cascade_core.gpu_configs import GpuConfig, OfferedConfig, offered
from cascade_api.models import Comparison, ParkedEvent
from cascade_core.runners import Runner
from cascade_core.variants import as_config, root_base
from cascade_nats.objects import Objects
from cascade_nats.store import EventStore
from cascade_nats.supervise import Supervision
from cascade_sim import registry, variant_files
from cascade_sim.install import AccelSimInstall
from projections import sql_process
from projections.queries import stats_maps
from projections.rebuild import ReadModel
from projections.rows import ParkedRow

NATS_ANSWER_S = 2.0  # how long a read that asks NATS (health, live runners) waits for it
# People's SQL queries at once (`POST /api/sql`): each may keep DuckDB's threads busy for its
# whole time limit, and the projector must still get its turn. Others wait.
SQL_QUERIES_AT_ONCE = 2
RUNNERS_FRESH_S = 1.0  # the live runners are asked again after this long


class Cascade:
    """Everything a command or a read may use."""

    def __init__(
        self,
        *,
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
        self.step_timelines = StepTimelines(objects)
        self.comparisons: Lru[Hashable, Comparison] = Lru(64)
        self.stat_names = stats_maps.Names()
        self.sql_queries = anyio.CapacityLimiter(SQL_QUERIES_AT_ONCE)
        self.sql_children = sql_process.Children()
        self.supervision = supervision
        self.uploading: set[str] = set()  # ids of the traces this process is receiving now
        # What the log's audit at start found lost up to the read model's checkpoint then
        # (`projections/log_audit.py`); the projector parks what it finds lost after it.
        self.lost_in_log: list[ParkedRow] = []
        self.disk: DiskSpace | None = None  # the data dir's, as last looked at
        self._kv: KeyValue | None = None
        self._runners: tuple[float, list[Runner]] | None = None
        read_model.after_swap(self._forget_answers)

    def with_lost_in_log(self, parked: list[ParkedEvent]) -> list[ParkedEvent]:
        """`parked` and what the log's audit found lost that is not among them, by sequence."""
        seen = {e.seq for e in parked}
        audited = [msgspec.convert(row, ParkedEvent, from_attributes=True) for row in self.lost_in_log if row.seq not in seen]
        return sorted(parked + audited, key=lambda e: e.seq)

    def _forget_answers(self) -> None:
        """Comparisons and stat names kept from a read model another version built: the
        rebuilt one may differ. A read still on the old one keeps its own to itself."""
        self.comparisons = Lru(64)
        self.stat_names = stats_maps.Names()

    async def local_configs(self) -> list[GpuConfig]:
        """This server's install's configs as its files are now (`AccelSimInstall.configs`
        reads again only what changed), so a config added or edited needs no restart."""
        return [] if self.install is None else await anyio.to_thread.run_sync(self.install.configs)

    async def gpu_configs(self) -> list[OfferedConfig]:
        """The configs a run may name: this server's install's and the live runners', and the
        variants of those (only the former while NATS does not answer)."""
        return offered(await self.local_configs(), await self.runners() or [], await self.variants())

    async def variants(self) -> list[tuple[GpuConfig, str]]:
        """Every config variant, with the config it derives from in the end; none while NATS
        does not answer."""
        if not self.nc.is_connected:
            return []
        try:
            with anyio.fail_after(NATS_ANSWER_S):
                known = await variant_files.variants(self.store)
        except Exception:  # noqa: BLE001 - NATS is unwell; health says how
            return []
        return [(as_config(derived), root_base(derived.name, known)) for derived in known.values()]

    async def configs_by_name(self) -> dict[str, GpuConfig]:
        """A config of each name a run may name, this server's own first, as results show it:
        without a digest, which would be of the files there now (a sim's own are its launch's)."""
        by_name: dict[str, GpuConfig] = {}
        for config in sorted(await self.gpu_configs(), key=lambda c: not c.local):
            by_name.setdefault(config.name, GpuConfig(name=config.name, arch=config.arch, core_clock_mhz=config.core_clock_mhz))
        return by_name

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
