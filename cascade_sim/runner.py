"""The simulator runner: takes launch requests, one per free slot, from the durable consumers
of its configs' requests (one per config, shared by every runner that has it: it never sees a
request it cannot run), and runs each as an attempt of its simulator backend
(`simulator.Simulator`), which alone knows how the simulator runs and what its output says.
It listens to its configs' launch subjects, and at each request published asks that config's
consumer at once; it asks them all every 2 s, for what comes back unannounced (a request whose
lease ran out). Requests from before placement by config are on the `launch` consumer every
runner took from: a runner drains it too, through its adapter (`legacy_launches`), which
delivers only what the runner has the config for.

A request's path reads top-down in `Runner._handle`: claim the sim's next attempt, plan what
it simulates (a chunk of a split sim, where it resumes a lost runner's, what it reuses),
launch it while watching its run and its sim, and report how it ended; or, when a sim alike
already succeeded, take its result instead of launching (`result_cache.py`).

What to append is decided by `cascade_core/sims.py`, given commands with the time in them;
the runner does the I/O around it. Claiming: the runner reads the sim's last lifecycle
event and appends the claim decided from it expecting exactly that sequence, so two runners
can never both own an attempt. A request that comes back (its runner stopped keeping it in
progress) is a lost runner: the next attempt starts, or after `max_attempts` the sim fails
saying so. Cancels are pushed: the
runner listens to run events and stops a cancelled run's sims at once; every heartbeat also
looks at the run's and the sim's last events, so a missed message or a replaced attempt is
noticed within seconds.

Every loop here (taking requests, announcing, listening for cancels, keeping each request in
progress, watching each sim) runs under a supervisor, so NATS going away for any length of
time ends none of them: running sims go on, their events wait (`event_sender`), and when NATS is
back the runner carries on. A request whose lease ran out meanwhile comes back to some
runner: to this one, which keeps the sim (the request is still its own), or to another,
which claims the next attempt if this one has not announced itself again by then, and this
one's watch then stops its attempt without a word.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import socket
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import anyio
import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.kv import KeyValue

from cascade_core import events as ev
from cascade_core import packed_stats, reuse, sims, split
from cascade_core.gpu_configs import GpuConfig
from cascade_core.runners import Runner as RunnerInfo
from cascade_core.runners import SimulatorBuild
from cascade_core.reuse import Reuse
from cascade_core.variants import as_config, root_base
from cascade_host import new_ids
from cascade_host.heap import settle_heap
from cascade_nats import subjects
from cascade_nats.objects import Objects
from cascade_nats.store import ConcurrencyError, EventStore
from cascade_nats.supervise import Supervision, supervise
from cascade_sim import registry, result_cache
from cascade_sim.attempt import HEARTBEAT_S, Attempt, Stop
from cascade_sim.dispatcher import ensure_launch_consumer
from cascade_sim.event_sender import EventSender
from cascade_sim.launch_digests import LaunchDigests
from cascade_sim.launch_requests import Delivery, Handled, Source, settle
from cascade_sim.legacy_launches import legacy_launches
from cascade_sim.result_cache import CachedResult, ResultCache
from cascade_sim.sim_report import Job, Kept, SimReport, kept_by
from cascade_sim.sim_life import as_requested, last_life
from cascade_sim.simulator import Simulator, Versions
from cascade_sim.trace_cache import TraceCache, TraceUnavailable
from cascade_sim.variant_files import VariantFiles, VariantUnavailable, variants

log = logging.getLogger("cascade.runner")

SWEEP_S = 2.0  # how often every consumer is asked, for what comes back unannounced (a lease run out)
# What becomes of a request that claims no attempt: done when its sim needs no runner any
# more, left to the live runner that still runs it.
Unclaimed = Literal["done", "leave"]


def held_name(request: ev.SimQueued) -> str:
    """What a runner holds, as it lists it among its running: a sim, or a chunk of one."""
    return sims.chunk_name(request.sim_id, request.chunk)


class Claimed(msgspec.Struct, frozen=True):
    """A claim this runner appended: the sim as it left it, and, when it resumes a lost
    runner's attempt, where, and what the attempts before recorded."""

    sim: sims.SimLife
    resume: ev.Resume | None
    kept: Kept | None


def _launches(request: ev.SimQueued) -> split.Chunk:
    """The launches a request's sim (a sim whole, or its chunk) measures."""
    if request.chunk is None or request.split is None:
        return split.whole(request.kernels_total)
    return split.chunk_of(request.kernels_total, request.split, request.chunk)


def planned(request: ev.SimQueued, config: GpuConfig, claimed: Claimed) -> Job:
    """What the claimed attempt simulates: the request's sim whole or its chunk of a split
    sim, from where it resumes a lost runner's attempt if it does."""
    launches = _launches(request)
    cut = launches if claimed.resume is None else split.resumed(launches, claimed.resume)
    whole = request.chunk is None or request.split is None
    return Job(
        run_id=request.run_id,
        sim_id=request.sim_id,
        attempt=claimed.sim.attempt,
        trace_id=request.trace_id,
        gpu_config=config,
        kernels_total=request.kernels_total,
        chunk=None if whole else cut,
        resumed=cut if whole and claimed.resume is not None else None,
        kept=claimed.kept,
    )


def ending(finished: ev.SimFinished | None, sim: sims.SimLife) -> str:
    """How an attempt ended, as the runner logs it."""
    if finished is None:
        return f"ended, the sim being {sim.state}"
    return "succeeded" if finished.outcome == "succeeded" else str(finished.error)


class Slot:
    """A sim this runner took: the latest delivery of its request, and once claimed, its job."""

    def __init__(self, msg: Msg) -> None:
        self.msg = msg
        self.job: Job | None = None
        self.stop = Stop()


def _ringing(source: Source, bell: asyncio.Event) -> Callable[[Msg], Awaitable[None]]:
    """What hears a request published for `source`'s config: it is asked first, at once."""

    async def ring(_: Msg) -> None:
        source.rung = True
        bell.set()

    return ring


class Launcher(msgspec.Struct, frozen=True):
    """The scheduler job a runner runs in (a Slurm job), which may end it: its runner id and
    `launcher_ref` (the job's id) come from it, and when the runner is stopped it leaves its
    sims' requests to their lease rather than handing them back, so that whoever records
    why the job ended (`cascade slurm`) has done so when the next attempt is decided."""

    runner_id: str
    launcher_ref: str


class Runner:
    def __init__(
        self,
        *,
        nc: Client,
        simulator: Simulator,
        work_dir: Path,
        slots: int,
        sim_timeout_s: float | None = None,
        max_attempts: int = 3,
        ack_wait_s: float = 30.0,
        grace_s: float = 5.0,
        keep_failed: bool = False,
        supervision: Supervision | None = None,
        launcher: Launcher | None = None,
    ) -> None:
        if not work_dir.is_absolute():
            # The simulator runs in a directory of its own, where a relative path means another place.
            raise ValueError(f"the runner needs an absolute work dir, not {work_dir}")
        self.nc = nc
        self.simulator = simulator
        self.store = EventStore(nc)
        self.objects = Objects(nc)
        self.work_dir = work_dir
        self.cache = TraceCache(work_dir / "traces", self.store, self.objects)
        self.variant_files = VariantFiles(work_dir / "configs", self.objects)
        self.launch_digests = LaunchDigests()
        self.slots = slots
        self.sim_timeout_s = sim_timeout_s
        self.max_attempts = max_attempts
        self.ack_wait_s = ack_wait_s
        self.grace_s = grace_s
        self.keep_failed = keep_failed
        self.supervision = supervision or Supervision()
        self.host = socket.gethostname()
        self.launcher = launcher
        self.id = launcher.runner_id if launcher is not None else new_ids.runner_id(self.host)
        self.started_at = datetime.now(UTC)
        self.configs = {c.name: c for c in simulator.configs()}
        # Every config variant, as last read: those whose base this runner has it runs too.
        self.variants: dict[str, ev.GpuConfigDerived] = {}
        self.build: str | None = None  # found at the start of `run`: reading a binary takes a while
        self.versions = Versions(accel_sim_build=None, gpgpu_sim_build=None)  # as the last sim launched here printed them
        self.running: dict[str, Slot] = {}
        self.names_stored: set[str] = set()  # digests of the sets of stat names stored (`EventSender`)
        self._slot_freed = asyncio.Event()
        self._kv: KeyValue | None = None
        self._results: ResultCache | None = None

    # --- the loop -----------------------------------------------------------------------

    async def run(self) -> None:
        """Take and run sims until cancelled; running sims are then stopped and handed back."""
        await self.store.ensure_stream()
        await self.objects.ensure()
        kv = self._kv = await registry.bucket(self.store.js)
        self._results = await ResultCache.open(self.store.js)
        self.build = await anyio.to_thread.run_sync(self.simulator.build)
        settle_heap()
        log.info("runner %s: %d slots, configs %s", self.id, self.slots, ", ".join(self.configs) or "none")
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._supervised, "announcing itself", self._announce)
                tg.start_soon(self._supervised, "listening for cancels", self._listen_for_cancels)
                await self._supervised("taking requests", lambda: self._take_requests(tg))
        finally:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception), anyio.move_on_after(5):  # NATS away: the entry expires by itself
                    await registry.withdraw(kv, self.id)
                await self.store.close()
                await self.objects.close()

    async def _supervised(self, what: str, loop: Callable[[], Awaitable[None]]) -> None:
        await supervise(f"runner {self.id}: {what}", loop, self.supervision)

    async def _take_requests(self, tg: anyio.abc.TaskGroup) -> None:
        """Take requests as slots free up, until something fails; the sims taken run in `tg`."""
        sources: list[Source] = []
        bell = asyncio.Event()  # rung by each request published for one of this runner's configs
        taking: dict[str, tuple[Source, Subscription]] = {}  # by config

        async def follow_configs() -> None:
            """Take from the consumer of each config the simulator has now and of each variant
            of those, and of no other: a config added or removed, or a variant derived, since
            needs no restart."""
            self.variants = await variants(self.store)
            runnable = self.runnable()
            for config in sorted(runnable - taking.keys()):
                name = await ensure_launch_consumer(self.store.js, config, ack_wait_s=self.ack_wait_s)
                source = Source(name, await self.store.js.pull_subscribe_bind(name, subjects.STREAM))
                source.rung = True  # requests published before it was listened to (a new variant's) may wait
                taking[config] = (source, await self.nc.subscribe(subjects.launch_requests(config), cb=_ringing(source, bell)))
                sources.append(source)
            for config in sorted(taking.keys() - runnable):
                source, listening = taking.pop(config)
                sources.remove(source)
                await source.close()
                with contextlib.suppress(Exception):
                    await listening.unsubscribe()

        try:
            await follow_configs()
            assert self._kv is not None
            legacy = await legacy_launches(self.store, self._kv, runner_id=self.id, configs=set(self.configs))
            if legacy is not None:
                sources.append(legacy)
            await self._take(sources, bell, tg, follow_configs)
        finally:
            for source in sources:
                await source.close()
            for _, listening in taking.values():
                with contextlib.suppress(Exception):  # gone with its connection, if that is why it stops
                    await listening.unsubscribe()

    async def _take(
        self, sources: list[Source], bell: asyncio.Event, tg: anyio.abc.TaskGroup, follow_configs: Callable[[], Awaitable[None]]
    ) -> None:
        """Ask the consumers rung for, and every `SWEEP_S` all of them (first following the
        configs the simulator has now), for as many requests as there are free slots."""
        swept = -SWEEP_S  # when every consumer was last asked
        while True:
            if self.slots - len(self.running) <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            bell.clear()  # what is published from now on rings again
            sweep = time.monotonic() - swept >= SWEEP_S
            if sweep:
                await follow_configs()
            for source in sorted((s for s in sources if sweep or s.rung), key=lambda s: not s.rung):  # those rung for first
                free = self.slots - len(self.running)
                if free <= 0:
                    break
                self._took(await source.take(free), tg)
                if source.retired:
                    sources.remove(source)
            if sweep:
                swept = time.monotonic()
            if not any(s.rung for s in sources):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(bell.wait(), max(0.0, swept + SWEEP_S - time.monotonic()))

    def _took(self, delivered: list[Delivery], tg: anyio.abc.TaskGroup) -> None:
        """Start each request taken in `tg`."""
        for delivery in delivered:
            request = delivery.request
            slot = self.running.get(held_name(request))
            if slot is not None:
                # Our own, back after its lease ran out while NATS was away: still ours.
                slot.msg = delivery.msg
                continue
            # The slot is taken now, before the task starts, so the next fetch asks for less.
            self.running[held_name(request)] = Slot(delivery.msg)
            tg.start_soon(self._serve, request)

    def runnable(self) -> set[str]:
        """The configs this runner runs: the simulator's, and the variants of those."""
        return {*self.configs, *(name for name in self.variants if root_base(name, self.variants) in self.configs)}

    def _config(self, name: str) -> GpuConfig | None:
        """Config `name` if this runner runs it (a variant: as its event says it)."""
        if name in self.configs:
            return self.configs[name]
        return as_config(self.variants[name]) if name in self.runnable() - self.configs.keys() else None

    async def _announce(self) -> None:
        """Say who this runner is and what it runs, every few seconds, with the simulator's
        configs as they are now (read again when they changed)."""
        assert self._kv is not None
        while True:
            self.configs = {c.name: c for c in await anyio.to_thread.run_sync(self.simulator.configs)}
            info = RunnerInfo(
                id=self.id,
                host=self.host,
                slots=self.slots,
                running=sorted(self.running),
                configs=sorted(self.runnable()),
                started_at=self.started_at,
                last_seen_at=datetime.now(UTC),
                gpu_configs=[self.configs[name] for name in sorted(self.configs)],
                simulator=SimulatorBuild(
                    binary_digest=self.build, accel_sim_build=self.versions.accel_sim_build, gpgpu_sim_build=self.versions.gpgpu_sim_build
                ),
                load=os.getloadavg()[0],
            )
            await registry.announce(self._kv, info)
            await asyncio.sleep(registry.ANNOUNCE_EVERY_S)

    async def _listen_for_cancels(self) -> None:
        sub = await self.nc.subscribe(subjects.RUN_EVENTS)
        try:
            async for msg in sub.messages:
                await self._on_run_event(msg)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _on_run_event(self, msg: Msg) -> None:
        try:
            event = subjects.decode(msg.subject.encode(), msg.data)
        except ev.Unreadable:
            return  # the projector parks it and says so; for a runner it cancels nothing
        if isinstance(event, ev.RunCancelRequested):
            for slot in list(self.running.values()):
                job = slot.job
                if job is not None and job.run_id == event.run_id:
                    log.info("sim %s: cancelled", job.sim_id)
                    slot.stop.request()

    # --- one request: claim -> plan -> launch -> watch -> report ---------------------------

    async def _serve(self, request: ev.SimQueued) -> None:
        """Handle one request, then settle it: acknowledge it, hand it back to run again
        elsewhere (the runner is stopping, or failed itself), or leave it to the runner that
        holds its sim now."""
        slot = self.running[held_name(request)]
        keep = asyncio.create_task(self._supervised(f"keeping {held_name(request)} in progress", lambda: self._keep_in_progress(slot)))
        handled: Handled = "hand back"
        try:
            handled = await self._handle(request, slot)
        except asyncio.CancelledError:
            if self.launcher is not None:
                handled = "leave"  # its job is ending: the lease brings the request back once that is recorded
            raise
        except Exception:
            log.exception("sim %s: the runner failed running it", held_name(request))
        finally:
            keep.cancel()
            self.running.pop(held_name(request), None)
            self._slot_freed.set()
            with anyio.CancelScope(shield=True):
                await settle(request, slot.msg, handled)

    async def _keep_in_progress(self, slot: Slot) -> None:
        while True:
            await asyncio.sleep(self.ack_wait_s / 3)
            await slot.msg.in_progress()

    async def _handle(self, request: ev.SimQueued, slot: Slot) -> Handled:
        """Run the request if it is ours to run: claim the sim's next attempt, plan what it
        simulates, launch it watched (or take a sim alike's result), and report how it ended."""
        config = self._config(request.gpu_config)
        if config is None:
            log.warning("sim %s: GPU config %s is no longer here; handed back", held_name(request), request.gpu_config)
            return "hand back"
        if await self._cancel_of(request) is not None:
            log.info("sim %s: its run was cancelled since the request was made; dropped", held_name(request))
            return "done"
        claimed = await self._claim(request)
        if not isinstance(claimed, Claimed):
            return claimed
        slot.job = planned(request, config, claimed)
        # A cancel pushed while it claimed found no job to stop.
        if await self._cancel_of(request) is not None:
            return "done"
        trace = await self._trace(slot.job)
        if isinstance(trace, Path) and config.base is not None:
            trace = await self._with_variant_files(slot, trace)
        if isinstance(trace, Path) and request.reuse:
            slot.job = await self._reusing(slot.job, trace)
        sender = EventSender(
            store=self.store, sim_id=slot.job.name, attempt=slot.job.attempt, supervision=self.supervision, names_stored=self.names_stored
        )
        report = SimReport(
            job=slot.job, emit=sender.emit, next_id=sender.next_id, now=sender.now, reader=self.simulator.reader(), sim=claimed.sim
        )
        if isinstance(trace, sims.Outcome):
            return await self._report(report, sender, trace, slot.stop)
        key = await self._key(request, claimed, slot.job, trace)
        if key is None or request.fresh:
            return await self._report(report, sender, await self._launch(request, report, sender, trace, slot), slot.stop, key)
        return await self._cached_or_launched(request, report, sender, trace, slot, key)

    # claim

    async def _claim(self, request: ev.SimQueued) -> Claimed | Unclaimed:
        """Append this runner's claim of the next attempt: the sim as claimed (and where it
        resumes a lost runner's attempt), or what becomes of a request that claims none."""
        launches = _launches(request)
        while True:
            seq, sim = await as_requested(self.store, request)
            held = sim.under_way and await self._held_elsewhere(request)
            lost = sim.under_way and not held  # its runner is gone
            ended = await self._ended(sim.runner_id) if lost else None
            # A reusing sim's later launches take results of earlier ones: it starts over.
            kept = await self._kept(request, sim, launches) if lost and not request.reuse else None
            command = sims.Claim(
                at=datetime.now(UTC), runner_id=self.id, host=self.host, max_attempts=self.max_attempts,
                held_elsewhere=held, ended=ended, first_attempt=max(request.attempt, 1), causation_id=request.id,
                correlation_id=request.correlation_id, resume=None if kept is None else split.resume_at(launches, kept.launches),
            )
            decided = sims.decide(command, sim)
            if not decided:
                return "done" if sim.finished else "leave"
            (event,) = decided
            try:
                await self.store.append(event, expected_last_subject_seq=seq)
            except ConcurrencyError:
                continue  # someone moved the sim on meanwhile: look again
            if not isinstance(event, ev.SimClaimed):
                return "done"
            if event.resume is not None:
                log.info("sim %s attempt %d: resumes its lost runner's at launch %d", held_name(request), event.attempt, event.resume.first)
            return Claimed(sim=sims.evolve(sim, event), resume=event.resume, kept=kept if event.resume is not None else None)

    async def _held_elsewhere(self, request: ev.SimQueued) -> bool:
        """Whether another live runner lists the request's sim (or chunk) among its running."""
        assert self._kv is not None
        return any(held_name(request) in r.running for r in await registry.live(self._kv) if r.id != self.id)

    async def _kept(self, request: ev.SimQueued, sim: sims.SimLife, launches: split.Chunk) -> Kept | None:
        """What the lost attempt of the sim (or its chunk) recorded, as its data subject's
        last event says."""
        last = await self.store.last_on(subjects.chunk(request.run_id, request.sim_id, "data", request.chunk))
        event = None if last is None else last.event
        if isinstance(event, ev.KernelFinished) and event.stats is not None and not event.stats.names:
            # Its map names its set of names by digest: the set's event holds the names.
            stored = await self.store.last_on(subjects.stat_names(event.stats.names_digest))
            defined = None if stored is None else stored.event
            if not isinstance(defined, ev.StatNamesDefined):
                return None  # nothing to read its totals by: the sim starts again from its first launch
            event = msgspec.structs.replace(event, stats=packed_stats.with_names(event.stats, defined.names))
        return kept_by(event, sim.attempt, launches)

    async def _ended(self, runner_id: str | None) -> ev.RunnerEnded | None:
        """What ended a runner, if its scheduler's launcher recorded it."""
        last = None if runner_id is None else await self.store.last_on(subjects.runner(runner_id))
        return last.event if last is not None and isinstance(last.event, ev.RunnerEnded) else None

    # plan (beside `planned`: what a reusing sim reuses, which its trace says)

    async def _trace(self, job: Job) -> Path | sims.Outcome:
        """The job's trace, on this runner's disk; or, when it cannot be had, the outcome of
        an attempt that never ran."""
        try:
            return await self.cache.fetch(job.trace_id)
        except TraceUnavailable as err:
            return sims.Outcome(succeeded=False, exit_code=None, error=str(err))

    async def _with_variant_files(self, slot: Slot, trace_dir: Path) -> Path | sims.Outcome:
        """The trace's directory, with the slot's job given its variant's files (fetched to
        this runner's disk if need be); or, when they cannot be had, the outcome of an attempt
        that never ran."""
        assert slot.job is not None
        try:
            files = await self.variant_files.fetch(self.variants[slot.job.gpu_config.name])
        except VariantUnavailable as err:
            return sims.Outcome(succeeded=False, exit_code=None, error=str(err))
        slot.job = msgspec.structs.replace(slot.job, config_files=files)
        return trace_dir

    async def _reusing(self, job: Job, trace_dir: Path) -> Job:
        """The job of a sim of the trace (or its chunk) reusing repeated kernels: what it
        simulates, by the launch digests of the kernel files it launches, read off the disk
        in a thread."""
        kernelslist = (trace_dir / "kernelslist.g").read_text().splitlines()
        paths = [path for _, path in reuse.launches(kernelslist, job.chunk)]
        digests = await asyncio.to_thread(self.launch_digests.of, trace_dir, paths)
        return msgspec.structs.replace(job, reuse=reuse.plan(kernelslist, digests, job.chunk))

    # the result cache (`result_cache.py`): take a sim alike's result, or simulate as the one of them that does

    async def _key(self, request: ev.SimQueued, claimed: Claimed, job: Job, trace_dir: Path) -> str | None:
        """The key of the job's result, its config's files prepared in its working directory
        to know what the simulator is given; None when it has none: the build is unknown, or
        the attempt resumes a lost runner's (its result is partly the attempts' before)."""
        if self.build is None or claimed.resume is not None:
            return None
        workdir = self._workdir(job)
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        files = await asyncio.to_thread(functools.partial(self.simulator.prepare, job.gpu_config, workdir, source=job.config_files))
        # The trace cache names a trace's directory by the digest of its files' digests.
        return result_cache.key(request, trace=trace_dir.name, config=job.gpu_config, config_files=files, build=self.build)

    async def _cached_or_launched(
        self, request: ev.SimQueued, report: SimReport, sender: EventSender, trace_dir: Path, slot: Slot, key: str
    ) -> Handled:
        """Take the result of a sim alike that succeeded, waiting while one simulates; or,
        when none has, simulate it, sims alike waiting meanwhile."""
        results = self._results
        assert results is not None
        holder = f"{report.job.name}.{report.job.attempt}"
        turn = await results.turn(key, holder, slot.stop.requested)
        if isinstance(turn, CachedResult):
            taken = await self._take_cached(report, sender, turn)
            # Its events hold no success (a cache written by hand): simulated, and the key's result anew.
            return taken or await self._report(report, sender, await self._launch(request, report, sender, trace_dir, slot), slot.stop, key)
        if not turn:
            return "done"  # stopped while waiting: its run was cancelled
        holding = asyncio.create_task(self._supervised(f"holding {key}", lambda: results.hold(key, holder)))
        try:
            return await self._report(report, sender, await self._launch(request, report, sender, trace_dir, slot), slot.stop, key)
        finally:
            holding.cancel()
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):  # NATS away: the entry expires by itself
                await results.release(key)

    async def _take_cached(self, report: SimReport, sender: EventSender, source: CachedResult) -> Handled | None:
        """Say the source attempt's result again of the report's: None when its events hold no success."""
        started = time.monotonic()
        job = report.job
        events = await result_cache.source_events(self.store, source)
        commands = result_cache.replayed(
            events, report.sim, cached_from=source, runner_id=self.id, host=self.host, next_id=sender.next_id, at=sender.now()
        )
        if commands is None:
            return None
        for command in commands:
            report.decide(command)
        await sender.flush()
        shutil.rmtree(self._workdir(job), ignore_errors=True)
        log.info("sim %s attempt %d: took sim %s's result from the cache in %.3f s", job.name, job.attempt, source.sim_id, time.monotonic() - started)
        return "done"

    # launch and watch

    def _workdir(self, job: Job) -> Path:
        return self.work_dir / "sims" / f"{job.name}.{job.attempt}"

    async def _launch(self, request: ev.SimQueued, report: SimReport, sender: EventSender, trace_dir: Path, slot: Slot) -> sims.Outcome | None:
        """Run the attempt's simulator to its end, watched (`_watch`): its outcome, or None
        when another attempt owns the sim now."""
        job = report.job
        attempt = Attempt(
            report=report, simulator=self.simulator, objects=self.objects, sender=sender, workdir=self._workdir(job),
            trace_dir=trace_dir, host=self.host, stop=slot.stop, grace_s=self.grace_s, timeout_s=self.sim_timeout_s,
            launcher_ref=None if self.launcher is None else self.launcher.launcher_ref,
        )
        queued_seq = slot.msg.metadata.sequence.stream
        watch = asyncio.create_task(self._supervised(f"watching {job.sim_id}", lambda: self._watch(request, report, slot.stop, queued_seq)))
        try:
            return await attempt.run()
        finally:
            watch.cancel()
            if report.versions.accel_sim_build or report.versions.gpgpu_sim_build:
                self.versions = report.versions

    async def _watch(self, request: ev.SimQueued, report: SimReport, stop: Stop, queued_seq: int) -> None:
        """Every heartbeat period: stop the sim if its run was cancelled since its request
        was made (a pushed cancel may have been missed, and a retry may have followed it) or
        another attempt replaced this one, or a chunk if another chunk failed since its
        request was queued. The run's events are read again only when its subject moved on."""
        run_seq = 0
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            last = await self.store.last_on(subjects.run(request.run_id))
            if last is not None and last.seq != run_seq:
                run_seq = last.seq
                cancelled = await self._cancel_of(request)
                if cancelled is not None:
                    report.observe(cancelled)
                    stop.request()
            await self._look_at_sim(report, queued_seq)
            if not report.current or report.sim.finished:
                stop.request()

    async def _cancel_of(self, request: ev.SimQueued) -> ev.RunCancelRequested | None:
        """The cancel that ended what the request asks for (`sims.cancel_of`), from its run's events."""
        return sims.cancel_of(request, [stored.event async for stored in self.store.read(subjects.run(request.run_id))])

    async def _look_at_sim(self, report: SimReport, queued_seq: int) -> None:
        """Tell the attempt what its sim's (or its chunk's) life subject says; and stop a
        chunk's sim if another chunk failed since its request was queued (a failure before
        it is one a retry asked past)."""
        job, chunk = report.job, report.job.chunk
        _, last = await last_life(self.store, job.run_id, job.sim_id, None if chunk is None else chunk.index)
        if last is not None:
            report.observe(last)
        siblings = [] if chunk is None else [i for i in range(chunk.count) if i != chunk.index]
        for sibling in siblings:
            if not report.sim.finished:
                seq, last = await last_life(self.store, job.run_id, job.sim_id, sibling)
                if seq > queued_seq and sims.latest(job.run_id, job.sim_id, last, sibling).state == "failed":
                    report.sim = sims.stopped(report.sim)  # the sim failed with it: this chunk stops

    # report

    async def _report(self, report: SimReport, sender: EventSender, outcome: sims.Outcome | None, stop: Stop, key: str | None = None) -> Handled:
        """Say how the attempt ended, unless another attempt replaced it (whose runner now has
        the request), and clear its working directory, but for a failure when those are kept.
        A success that simulated every launch is the result of its `key` from then on."""
        job = report.job
        if outcome is None:  # another attempt owns the sim now, and its runner the request
            await sender.flush()
            shutil.rmtree(self._workdir(job), ignore_errors=True)
            return "leave"
        finished = report.finished(outcome, wall_time_limit_s=self.sim_timeout_s if stop.timed_out else None)
        await sender.flush()
        if key is not None and finished is not None and finished.outcome == "succeeded" and finished.cut_short is None:
            assert self._results is not None
            chunk = None if job.chunk is None else job.chunk.index
            await self._results.record(key, CachedResult(run_id=job.run_id, sim_id=job.sim_id, attempt=job.attempt, chunk=chunk))
        if (finished is not None and finished.outcome == "succeeded") or not self.keep_failed:
            shutil.rmtree(self._workdir(job), ignore_errors=True)
        log.info("sim %s attempt %d: %s", job.name, job.attempt, ending(finished, report.sim))
        return "done"
