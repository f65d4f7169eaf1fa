"""The result cache: a sim whose result is already known is not simulated again
(docs/reuse-cache.md).

A sim's key is a digest of what decides its result, as its runner knows it once it has
claimed it: the trace's contents (its files' digests), the config files the simulator is
given (as `sim.launched` records them), the simulator's build (its binary's digest), and
everything its launch request asks but for what names it (split and chunk, reuse, the
launches, and any option a request comes to carry). Two key-value buckets hold the cache:
`cascade_results` maps a key to the sim (or chunk) attempt that succeeded with it, written
only once that attempt finished every launch; `cascade_results_running` says which sim alike
simulates now (an entry kept fresh while it runs, gone with its bucket's TTL when its runner
is lost), so sims alike queued together wait for the first instead of all simulating.

A hit is the source attempt's events (launch, heartbeats with its log, kernel results, files,
finish) said again of the new attempt at their times, its stored files referenced where they
are: every route answers for it as for the source, and its launch says `cached_from`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

import msgspec
import nats.js.api as api
import nats.js.errors
from nats.js.client import JetStreamContext
from nats.js.kv import KeyValue

from cascade_core import events as ev
from cascade_core import sims
from cascade_core.gpu_configs import GpuConfig
from cascade_nats import subjects
from cascade_nats.store import EventStore

RESULTS_BUCKET = "cascade_results"
RUNNING_BUCKET = "cascade_results_running"
RUNNING_TTL_S = 30.0  # how long a lost runner's sim keeps sims alike waiting
WAIT_S = 1.0  # how often a sim waiting for one alike looks again
LAUNCHER_REF = "cache"  # what a cached attempt "runs as": no process
# A launch request's fields that say which sim it is, or how it is asked, not what is simulated.
_NAMING = frozenset({"id", "at", "causation_id", "correlation_id", "run_id", "sim_id", "trace_id", "gpu_config", "attempt", "by_config", "fresh"})
# A config's fields that name it, not what its files say.
_CONFIG_NAMING = frozenset({"name", "base"})


class CachedResult(msgspec.Struct, frozen=True, kw_only=True):
    """The sim (or chunk) attempt whose result a key has."""

    run_id: str
    sim_id: str
    attempt: int
    chunk: int | None = None


def key(request: ev.SimQueued, *, trace: str, config: GpuConfig, config_files: Mapping[str, str], build: str) -> str:
    """The key of a sim's result: `trace` its contents' digest, `config_files` the files its
    simulator is given with their sha256, `build` the simulator's."""
    asked = {name: value for name, value in msgspec.structs.asdict(request).items() if name not in _NAMING}
    told = {name: value for name, value in msgspec.structs.asdict(config).items() if name not in _CONFIG_NAMING}
    what = {"trace": trace, "config": told, "config_files": dict(config_files), "build": build, "asked": asked}
    return hashlib.sha256(msgspec.json.encode(what, order="sorted")).hexdigest()


def replayed(
    source: Iterable[ev.AnyEvent],
    sim: sims.SimLife,
    *,
    cached_from: CachedResult,
    runner_id: str,
    host: str,
    next_id: Callable[[], str],
    at: datetime,
) -> list[sims.Command] | None:
    """What a runner says of the claimed attempt `sim` taking the source attempt's result,
    given the source sim's (or chunk's) life and data events, in order: its launch (saying
    `cached_from`), its facts re-addressed, and its finish, at the time `at` the result was
    taken, a microsecond apart so that each heartbeat is the latest heard (`sim.evolve`):
    a sim's times are its own (a reference's speed-up reads a cached sim's wall time off its
    source, `projections/queries/runs.py`). A chunk's log lines are numbered in
    its attempt's range (`sim_report.first_line_seq`). None when the source holds no success."""
    shift = 0 if sim.chunk is None else (sim.attempt - cached_from.attempt) << 32
    readdress = {
        "run_id": sim.run_id, "sim_id": sim.sim_id, "attempt": sim.attempt, "causation_id": None, "correlation_id": None,
    }
    commands: list[sims.Command] = []
    finished: ev.SimFinished | None = None
    for event in source:
        if not isinstance(event, ev.SimLaunched | ev.SimHeartbeat | ev.KernelFinished | ev.SimFileStored | ev.SimFinished):
            continue
        if event.attempt != cached_from.attempt:
            continue
        match event:
            case ev.SimLaunched():
                fact: sims.Fact = msgspec.structs.replace(
                    event, id=next_id(), at=_nth(at, commands), **readdress, launcher_ref=LAUNCHER_REF, host=host,
                    runner_id=runner_id, cached_from=cached_from.sim_id,
                )
            case ev.SimHeartbeat():
                fact = msgspec.structs.replace(
                    event, id=next_id(), at=_nth(at, commands), **readdress, first_line_seq=event.first_line_seq + shift
                )
            case ev.KernelFinished() | ev.SimFileStored():
                fact = msgspec.structs.replace(event, id=next_id(), at=_nth(at, commands), **readdress)
            case ev.SimFinished():
                finished = event
                continue
        commands.append(sims.Record(fact))
    if finished is None or finished.outcome != "succeeded":
        return None
    outcome = sims.Outcome(succeeded=True, exit_code=finished.exit_code, error=None)
    commands.append(sims.Finish(event_id=next_id(), at=_nth(at, commands), attempt=sim.attempt, outcome=outcome))
    return commands


def _nth(at: datetime, said: list[sims.Command]) -> datetime:
    """The time of the next of the events said after `said`."""
    return at + timedelta(microseconds=len(said))


async def source_events(store: EventStore, source: CachedResult) -> list[ev.AnyEvent]:
    """The source sim's (or chunk's) life and data events, life first: its launch before
    its facts, its finish last."""
    life = [s.event async for s in store.read(subjects.chunk(source.run_id, source.sim_id, "life", source.chunk))]
    data = [s.event async for s in store.read(subjects.chunk(source.run_id, source.sim_id, "data", source.chunk))]
    return [*(e for e in life if not isinstance(e, ev.SimFinished)), *data, *(e for e in life if isinstance(e, ev.SimFinished))]


class ResultCache:
    """The two buckets, as a runner uses them."""

    def __init__(self, results: KeyValue, running: KeyValue) -> None:
        self.results = results
        self.running = running

    @classmethod
    async def open(cls, js: JetStreamContext) -> ResultCache:
        return cls(await _bucket(js, RESULTS_BUCKET, ttl=None), await _bucket(js, RUNNING_BUCKET, ttl=RUNNING_TTL_S))

    async def look(self, key: str) -> CachedResult | None:
        try:
            entry = await self.results.get(key)
        except nats.js.errors.KeyNotFoundError:
            return None
        return None if not entry.value else msgspec.json.decode(entry.value, type=CachedResult)

    async def record(self, key: str, source: CachedResult) -> None:
        """`source` succeeded, every launch simulated: sims alike take its result from now on."""
        await self.results.put(key, msgspec.json.encode(source))

    async def turn(self, key: str, holder: str, stopped: asyncio.Event) -> CachedResult | bool:
        """The result of a sim alike, waiting while one simulates; or True once `holder` is
        the one to simulate (it holds the key's running entry, kept by `hold`), False when
        `stopped` is set first."""
        while True:
            source = await self.look(key)
            if source is not None:
                return source
            if await self._take(key, holder):
                source = await self.look(key)  # recorded between the look and the take
                if source is None:
                    return True
                await self.release(key)
                return source
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopped.wait(), WAIT_S)
                return False

    async def _take(self, key: str, holder: str) -> bool:
        try:
            await self.running.create(key, holder.encode())
            return True
        except nats.js.errors.KeyWrongLastSequenceError:
            try:
                entry = await self.running.get(key)
            except nats.js.errors.KeyNotFoundError:
                return False  # gone meanwhile: the next look takes it
            return entry.value == holder.encode()  # its own, its request delivered again

    async def hold(self, key: str, holder: str) -> None:
        """Keep the key's running entry `holder`'s while it simulates (until cancelled)."""
        while True:
            await asyncio.sleep(RUNNING_TTL_S / 3)
            await self.running.put(key, holder.encode())

    async def release(self, key: str) -> None:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await self.running.purge(key)


async def _bucket(js: JetStreamContext, name: str, *, ttl: float | None) -> KeyValue:
    try:
        return await js.key_value(name)
    except nats.js.errors.BucketNotFoundError:
        return await js.create_key_value(api.KeyValueConfig(bucket=name, history=1, ttl=ttl))
