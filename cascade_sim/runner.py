"""The simulator runner: takes launch requests from the shared durable consumer, one per free
slot, and runs each as an attempt.

Claiming is a decision: the runner reads the sim's last lifecycle event and appends its claim
expecting exactly that sequence, so two runners can never both own an attempt. A request
that comes back (its runner stopped keeping it in progress) is a lost runner: the next
attempt starts, or after `max_attempts` the sim fails saying so. Cancels are pushed: the
runner listens to run events and stops a cancelled run's sims at once; every heartbeat also
looks at the run's and the sim's last events, so a missed message or a replaced attempt is
noticed within seconds.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
import socket
from datetime import UTC, datetime
from pathlib import Path

import anyio
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.kv import KeyValue

from cascade_core import events as ev
from cascade_core import subjects
from cascade_core.heap import settle_heap
from cascade_core.models import Runner as RunnerInfo
from cascade_nats.objects import Objects
from cascade_nats.store import ConcurrencyError, EventStore
from cascade_sim import registry
from cascade_sim.attempt import HEARTBEAT_S, Attempt, Stop
from cascade_sim.dispatcher import consumed_event, ensure_consumers
from cascade_sim.install import AccelSimInstall
from cascade_sim.event_sender import EventSender
from cascade_sim.sim_report import Job
from cascade_sim.trace_cache import TraceCache, TraceUnavailable

log = logging.getLogger("cascade.runner")

BUSY = object()


class Runner:
    def __init__(
        self,
        nc: Client,
        install: AccelSimInstall,
        work_dir: Path,
        *,
        slots: int,
        sim_timeout_s: float | None = None,
        max_attempts: int = 3,
        ack_wait_s: float = 30.0,
        grace_s: float = 5.0,
        keep_failed: bool = False,
    ) -> None:
        if not (work_dir.is_absolute() and install.root.is_absolute()):
            # The simulator runs in a directory of its own, where a relative path means another place.
            raise ValueError(f"the runner needs absolute paths, not {work_dir} and {install.root}")
        self.nc = nc
        self.install = install
        self.store = EventStore(nc)
        self.objects = Objects(nc)
        self.work_dir = work_dir
        self.cache = TraceCache(work_dir / "traces", self.store, self.objects)
        self.slots = slots
        self.sim_timeout_s = sim_timeout_s
        self.max_attempts = max_attempts
        self.ack_wait_s = ack_wait_s
        self.grace_s = grace_s
        self.keep_failed = keep_failed
        self.host = socket.gethostname()
        self.id = f"{self.host}-{secrets.token_hex(3)}"
        self.started_at = datetime.now(UTC)
        self.configs = {c.name: c for c in install.configs()}
        self.running: dict[str, tuple[Job | None, Stop]] = {}  # no job yet while claiming
        self._slot_freed = asyncio.Event()
        self._kv: KeyValue | None = None

    # --- the loop -----------------------------------------------------------------------

    async def run(self) -> None:
        """Take and run sims until cancelled; running sims are then stopped and handed back."""
        await self.store.ensure_stream()
        await self.objects.ensure()
        await ensure_consumers(self.store.js, ack_wait_s=self.ack_wait_s)
        self._kv = await registry.bucket(self.store.js)
        cancels = await self.nc.subscribe(subjects.RUN_EVENTS, cb=self._on_run_event)
        settle_heap()
        log.info("runner %s: %d slots, configs %s", self.id, self.slots, ", ".join(self.configs) or "none")
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._announce)
                await self._take_requests(tg)
        finally:
            await cancels.unsubscribe()
            with anyio.CancelScope(shield=True):
                await registry.withdraw(self._kv, self.id)
                await self.store.close()
                await self.objects.close()

    async def _take_requests(self, tg: anyio.abc.TaskGroup) -> None:
        sub = await self.store.js.pull_subscribe_bind(subjects.LAUNCH_CONSUMER, subjects.STREAM)
        while True:
            free = self.slots - len(self.running)
            if free <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            try:
                messages = await sub.fetch(free, timeout=2)
            except TimeoutError:  # nothing to take (nats-py raises its own or asyncio's)
                continue
            for msg in messages:
                request = consumed_event(msg)
                if request is None:
                    await msg.term()
                    continue
                assert isinstance(request, ev.SimQueued)  # nothing else belongs on a queued subject
                # The slot is taken now, before the task starts, so the next fetch asks for less.
                self.running[request.sim_id] = (None, Stop())
                tg.start_soon(self._serve, msg, request)

    async def _announce(self) -> None:
        assert self._kv is not None
        while True:
            info = RunnerInfo(
                id=self.id,
                host=self.host,
                slots=self.slots,
                running=sorted(self.running),
                configs=sorted(self.configs),
                started_at=self.started_at,
                last_seen_at=datetime.now(UTC),
            )
            await registry.announce(self._kv, info)
            await asyncio.sleep(registry.ANNOUNCE_EVERY_S)

    async def _on_run_event(self, msg: Msg) -> None:
        try:
            event = subjects.decode(msg.subject.encode(), msg.data)
        except ev.Unreadable:
            return  # the projector parks it and says so; for a runner it cancels nothing
        if isinstance(event, ev.RunCancelRequested):
            for job, stop in list(self.running.values()):
                if job is not None and job.run_id == event.run_id:
                    log.info("sim %s: cancelled", job.sim_id)
                    stop.request()

    # --- one request --------------------------------------------------------------------

    async def _serve(self, msg: Msg, request: ev.SimQueued) -> None:
        """Handle one request, then acknowledge it, or hand it back to run again elsewhere
        (the runner is stopping, or failed itself)."""
        keep = asyncio.create_task(self._keep_in_progress(msg))
        done = False
        try:
            done = await self._handle(request)
        except Exception:
            log.exception("sim %s: the runner failed running it", request.sim_id)
        finally:
            keep.cancel()
            self.running.pop(request.sim_id, None)
            self._slot_freed.set()
            with anyio.CancelScope(shield=True):
                await (msg.ack() if done else msg.nak(delay=1))

    async def _keep_in_progress(self, msg: Msg) -> None:
        while True:
            await asyncio.sleep(self.ack_wait_s / 3)
            await msg.in_progress()

    async def _handle(self, request: ev.SimQueued) -> bool:
        """Run the request if it is ours to run; True when it needs no runner any more."""
        config = self.configs.get(request.gpu_config)
        if config is None:
            return await self._lacking_config(request)
        claim = await self._claim(request)
        if claim is None or claim is BUSY:
            return claim is None
        job = Job(request.run_id, request.sim_id, claim, request.trace_id, config, request.kernels_total)
        reporter = EventSender(self.store, job.sim_id, job.attempt)
        stop = Stop()
        self.running[job.sim_id] = (job, stop)
        if await self._cancelled(job):
            return True
        try:
            trace_dir = await self.cache.fetch(job.trace_id)
        except TraceUnavailable as err:
            await self._fail(job, reporter, str(err))
            return True
        workdir = self.work_dir / "sims" / f"{job.sim_id}.{job.attempt}"
        attempt = Attempt(
            job, self.install, self.objects, reporter, workdir, trace_dir, self.host, stop,
            grace_s=self.grace_s, timeout_s=self.sim_timeout_s,
        )
        watch = asyncio.create_task(self._watch(job, stop))
        try:
            result = await attempt.run()
        finally:
            watch.cancel()
        if result is None:  # another attempt owns the sim now
            await reporter.flush()
            shutil.rmtree(workdir, ignore_errors=True)
            return True
        attempt.report.finished(result)
        await reporter.flush()
        if result.succeeded or not self.keep_failed:
            shutil.rmtree(workdir, ignore_errors=True)
        log.info("sim %s attempt %d: %s", job.sim_id, job.attempt, "succeeded" if result.succeeded else result.error)
        return True

    async def _claim(self, request: ev.SimQueued) -> int | None | object:
        """Append this runner's claim of the next attempt: its number, None if the sim needs
        no runner any more, BUSY if a live runner still runs it."""
        assert self._kv is not None
        life = subjects.sim(request.run_id, request.sim_id, "life")
        while True:
            last = await self.store.last_on(life)
            attempt = 1
            if last is not None:
                match last.event:
                    case ev.SimFinished():
                        return None
                    case ev.SimClaimed() | ev.SimLaunched():
                        # Redelivered: its runner stopped keeping it in progress. Unless that
                        # runner still says it runs the sim (it was only slow), it is lost.
                        live = await registry.live(self._kv)
                        if any(request.sim_id in r.running for r in live if r.id != self.id):
                            return BUSY
                        if last.event.attempt >= self.max_attempts:
                            await self.store.append(self._runner_lost(request, last.event), expected_last_subject_seq=last.seq)
                            return None
                        attempt = last.event.attempt + 1
            claim = ev.SimClaimed(
                id=f"{request.sim_id}.{attempt}.claim",
                at=datetime.now(UTC),
                causation_id=request.id,
                correlation_id=request.correlation_id,
                run_id=request.run_id,
                sim_id=request.sim_id,
                attempt=attempt,
                runner_id=self.id,
                host=self.host,
            )
            try:
                await self.store.append(claim, expected_last_subject_seq=last.seq if last else 0)
                return attempt
            except ConcurrencyError:
                continue  # someone moved the sim on meanwhile: look again

    def _failed(self, request: ev.SimQueued, attempt: int, reason: str, error: str) -> ev.SimFinished:
        """A sim failed by the runner for want of a runner, not by the simulator; its id says
        why, so the same decision made twice is stored once."""
        return ev.SimFinished(
            id=f"{request.sim_id}.{reason}",
            at=datetime.now(UTC),
            causation_id=request.id,
            run_id=request.run_id,
            sim_id=request.sim_id,
            attempt=attempt,
            outcome="failed",
            error=error,
        )

    def _runner_lost(self, request: ev.SimQueued, last: ev.SimClaimed | ev.SimLaunched) -> ev.SimFinished:
        owner = f"{last.runner_id} on {last.host}" if isinstance(last, ev.SimClaimed) else f"the runner on {last.host}"
        error = (
            f"runner lost: {owner} stopped responding during attempt {last.attempt}; gave up after {last.attempt} attempts"
        )
        return self._failed(request, last.attempt, "lost", error)

    async def _lacking_config(self, request: ev.SimQueued) -> bool:
        assert self._kv is not None
        others = [r for r in await registry.live(self._kv) if r.id != self.id and request.gpu_config in r.configs]
        if others:
            return False  # handed back: a runner that has the config will take it
        last = await self.store.last_on(subjects.sim(request.run_id, request.sim_id, "life"))
        attempt = getattr(last.event, "attempt", 0) if last else 0
        await self.store.append(self._failed(request, attempt, "unrunnable", f"no runner has GPU config {request.gpu_config}"))
        return True

    async def _fail(self, job: Job, reporter: EventSender, error: str) -> None:
        reporter.emit(
            ev.SimFinished(
                id=reporter.next_id(), at=reporter.now(), run_id=job.run_id, sim_id=job.sim_id,
                attempt=job.attempt, outcome="failed", error=error,
            )
        )
        await reporter.flush()

    async def _cancelled(self, job: Job) -> bool:
        last = await self.store.last_on(subjects.run(job.run_id))
        return last is not None and isinstance(last.event, ev.RunCancelRequested)

    async def _watch(self, job: Job, stop: Stop) -> None:
        """Every heartbeat period: stop the sim if its run was cancelled (a pushed cancel may
        have been missed) or another attempt replaced this one."""
        life = subjects.sim(job.run_id, job.sim_id, "life")
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            if await self._cancelled(job):
                stop.request()
            last = await self.store.last_on(life)
            if last is not None and getattr(last.event, "attempt", job.attempt) != job.attempt:
                stop.request(report=False)

