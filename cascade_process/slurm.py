"""`cascade slurm`: Cascade workers as Slurm jobs, as many as the queue needs, up to a limit.

Each job runs `cascade worker` (this Python, so the same install) with the launcher's NATS
settings in its environment: a runner like any other, pulling launch requests from
JetStream. Every few seconds the launcher compares the queue (launch requests no live
runner holds) with what runs and what is coming (`cascade_core.slurm.plan`): it submits jobs
(sbatch) while requests wait, up to `--workers`, and cancels jobs still waiting for a node
once the queue no longer needs them; a worker with nothing to run for `--idle-exit` seconds
ends by itself. A job of its own that leaves the queue other than COMPLETED is looked up,
in sacct first (its accounting, else its job completion log), else `scontrol show job` (a
cluster with neither), and recorded as
`runner.ended.v1` for the job's runner, which the sims it held are decided from when their
requests come back (`cascade_core/sims.py`). A run's cancel stops its sims as on every
runner, and the launcher then scancels the jobs that ran them and run nothing else.

Jobs are named (`--job-name`, default `cascade-worker`): a launcher started again takes over
the jobs of that name that are still queued or running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import nats.js.errors
from nats.aio.client import Client
from nats.js.kv import KeyValue

from cascade_app.config import ENV, ConfigError, Settings
from cascade_core import events as ev
from cascade_core import slurm
from cascade_core.runners import Runner
from cascade_nats import subjects
from cascade_nats.store import EventStore
from cascade_nats.supervise import Supervision, supervise
from cascade_process.connection import connect_nats
from cascade_sim import registry
from cascade_sim.install import AccelSimInstall

log = logging.getLogger("cascade.slurm")

TICK_S = 2.0
STARTED = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED"})  # a worker runs, or did


class SlurmError(Exception):
    """A Slurm command that failed; the message is its own."""


class Options(msgspec.Struct, frozen=True, kw_only=True):
    """How the launcher submits its jobs."""

    accelsim_dir: Path
    work_dir: Path  # each job's working directory (`job-<id>`) and log (`job-<id>.log`) go here
    workers: int  # jobs at most
    slots: int = 1  # sims per job, and its --cpus-per-task
    partition: str | None = None
    time: str | None = None  # --time, as sbatch takes it
    idle_exit_s: float = 60.0
    job_name: str = "cascade-worker"
    sbatch_args: Sequence[str] = ()
    tick_s: float = TICK_S


class Commands:
    """The Slurm commands, run with `environ` (SLURM_CONF and the NATS settings jobs inherit)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = dict(environ)

    async def run(self, *argv: str) -> str:
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, env=self.environ, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
        except FileNotFoundError as missing:
            raise SlurmError(f"{argv[0]}: not found (are Slurm's commands on PATH?)") from missing
        out, err = await process.communicate()
        if process.returncode:
            said = err.decode(errors="replace").strip().splitlines()
            raise SlurmError(f"{' '.join(argv[:2])}: {said[-1] if said else f'exit status {process.returncode}'}")
        return out.decode(errors="replace")

    async def cluster(self) -> str:
        """The cluster's name, as its jobs see it in SLURM_CLUSTER_NAME."""
        for line in (await self.run("scontrol", "show", "config")).splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "ClusterName":
                return value.strip()
        raise SlurmError("scontrol show config: no ClusterName")

    async def jobs(self, name: str) -> dict[str, str]:
        """This user's queued and running jobs of that name: job id to state."""
        out = await self.run("squeue", "--noheader", "--me", "--name", name, "--format", "%i %T")
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    async def end_of(self, job_id: str) -> slurm.JobEnd:
        """How a job that left the queue ended: sacct's account from the accounting database,
        else from the job completion log (`sacct -c`: JobCompType=jobcomp/filetxt, a cluster
        without slurmdbd), else scontrol's (while slurmctld keeps the job, MinJobAge)."""
        fields = ("-X", "-n", "-P", "-o", "JobID,State,ExitCode,Reason", "-j", job_id)
        for argv in (("sacct", *fields), ("sacct", "-c", *fields)):
            try:
                end = slurm.parse_sacct(await self.run(*argv), job_id)
            except SlurmError as err:  # "Slurm accounting storage is disabled"; no completion log
                log.debug("%s", err)
                continue
            if end is not None:
                return end
        try:
            end = slurm.parse_scontrol(await self.run("scontrol", "show", "job", "-o", job_id), job_id)
        except SlurmError as err:
            log.warning("%s", err)
        return end or slurm.JobEnd(job_id=job_id, state="UNKNOWN", reason="Slurm no longer knows the job")

    async def submit(self, options: Options, python: str) -> str:
        work = shlex.quote(str(options.work_dir))
        worker = [
            python, "-m", "cascade_cli", "worker", "--accelsim-dir", str(options.accelsim_dir),
            "--slots", str(options.slots), "--idle-exit", f"{options.idle_exit_s:g}",
        ]
        script = f'exec {shlex.join(worker)} --work-dir {work}/job-"$SLURM_JOB_ID"'
        argv = [
            "sbatch", "--parsable", "--job-name", options.job_name, "--cpus-per-task", str(options.slots),
            "--output", str(options.work_dir / "job-%j.log"),
        ]
        argv += ["--partition", options.partition] if options.partition else []
        argv += ["--time", options.time] if options.time else []
        out = await self.run(*argv, *options.sbatch_args, "--wrap", script)
        return out.strip().split(";")[0]  # `id;cluster` on a federation

    async def cancel(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            await self.run("scancel", *job_ids)


class Launcher:
    def __init__(self, *, nc: Client, options: Options, commands: Commands, cluster: str, supervision: Supervision | None = None) -> None:
        self.nc = nc
        self.store = EventStore(nc)
        self.options = options
        self.commands = commands
        self.supervision = supervision or Supervision()
        self.cluster = cluster
        self.jobs: dict[str, str] = {}  # ours, queued or running: job id to state
        self.cancelled: set[str] = set()  # jobs this launcher cancelled: their end is no news
        self._kv: KeyValue | None = None
        # Its jobs' workers run its install's configs, and pull their launch requests: read
        # again at each look, so a config added or removed since counts as the workers see it.
        self.install = AccelSimInstall(options.accelsim_dir)

    def runner_of(self, job_id: str) -> str:
        return slurm.runner_id(self.cluster, job_id)

    async def run(self) -> None:
        """Scale and watch jobs until cancelled; jobs are left running (idle ones end by themselves)."""
        self.options.work_dir.mkdir(parents=True, exist_ok=True)
        await self.store.ensure_stream()
        self._kv = await registry.bucket(self.store.js)
        log.info("slurm launcher: cluster %s, up to %d jobs of %d slots, named %s", self.cluster, self.options.workers, self.options.slots, self.options.job_name)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(supervise("slurm launcher: listening for cancels", self._listen_for_cancels, self.supervision))
                await supervise("slurm launcher: scaling", self._scale, self.supervision)
        finally:
            await self.store.close()

    async def _scale(self) -> None:
        while True:
            await self.tick()
            await asyncio.sleep(self.options.tick_s)

    async def tick(self) -> None:
        """Look at the jobs and the queue once, and act."""
        assert self._kv is not None
        present = await self.commands.jobs(self.options.job_name)
        for job_id in sorted(set(self.jobs) - set(present), key=_in_order):
            await self._ended(job_id)
        self.jobs = present
        runners = {r.id: r for r in await registry.live(self._kv)}
        coming = [j for j in present if self.runner_of(j) not in runners]
        held = sum(len(r.running) for r in runners.values())
        decided = slurm.plan(
            demand=max(0, await self._requests() - held),
            free_slots=sum(max(0, r.slots - len(r.running)) for r in runners.values()),
            waiting_jobs=len(coming),
            jobs=len(present),
            slots_per_job=self.options.slots,
            max_jobs=self.options.workers,
        )
        waiting = sorted((j for j in coming if present[j] not in STARTED), key=_in_order, reverse=True)[: decided.cancel_waiting]
        if waiting:
            log.info("slurm launcher: the queue no longer needs jobs %s; cancelling them", ", ".join(waiting))
            await self._cancel(waiting)
        for _ in range(decided.submit):
            job_id = await self.commands.submit(self.options, sys.executable)
            self.jobs[job_id] = "PENDING"
            log.info("slurm launcher: submitted job %s", job_id)

    async def _requests(self) -> int:
        """The launch requests waiting or in progress for the configs the jobs' workers have
        (a config's consumer appears with its first request)."""
        total = 0
        for config in await asyncio.to_thread(self.install.configs):
            try:
                info = await self.store.js.consumer_info(subjects.STREAM, subjects.launch_consumer(config.name))
            except nats.js.errors.NotFoundError:
                continue
            total += (info.num_pending or 0) + (info.num_ack_pending or 0)
        return total

    async def _cancel(self, job_ids: Sequence[str]) -> None:
        self.cancelled.update(job_ids)
        await self.commands.cancel(job_ids)

    async def _ended(self, job_id: str) -> None:
        if job_id in self.cancelled:
            self.cancelled.discard(job_id)
            return
        end = await self.commands.end_of(job_id)
        if end.completed:
            return
        runner = self.runner_of(job_id)
        log.warning("slurm launcher: %s (runner %s)", end.describe(), runner)
        await self.store.append(slurm.ended(runner, end, event_id=f"{runner}.ended", at=datetime.now(UTC)))

    async def _listen_for_cancels(self) -> None:
        sub = await self.nc.subscribe(subjects.RUN_EVENTS)
        try:
            async with asyncio.TaskGroup() as tg:  # each cancel waits for an announcement: none holds up the next
                async for msg in sub.messages:
                    with contextlib.suppress(ev.Unreadable):  # the projector parks it; it cancels nothing
                        event = subjects.decode(msg.subject.encode(), msg.data)
                        if isinstance(event, ev.RunCancelRequested):
                            tg.create_task(self._run_cancelled(event.run_id))
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _run_cancelled(self, run_id: str) -> None:
        """Cancel the jobs whose runners held the cancelled run's sims and run nothing now:
        they stop those sims as every runner does (and announce it within a period)."""
        assert self._kv is not None
        lives = [stored.event for subject in subjects.run_lives(run_id) async for stored in self.store.read(subject)]
        holders = {e.runner_id for e in lives if isinstance(e, ev.SimClaimed | ev.SimLaunched) and e.runner_id is not None}
        jobs = [job_id for job_id in self.jobs if self.runner_of(job_id) in holders]
        if not jobs:
            return
        await asyncio.sleep(registry.ANNOUNCE_EVERY_S + 1)
        runners = {r.id: r for r in await registry.live(self._kv)}
        idle = [job_id for job_id in jobs if job_id in self.jobs and not _running(runners, self.runner_of(job_id))]
        if idle:
            log.info("slurm launcher: run %s cancelled; cancelling jobs %s, which ran its sims and nothing else now", run_id, ", ".join(idle))
            await self._cancel(idle)


def _in_order(job_id: str) -> tuple[int, str]:
    return len(job_id), job_id  # job ids are numbers: a longer one is newer


def _running(runners: Mapping[str, Runner], runner_id: str) -> list[str]:
    runner = runners.get(runner_id)
    return [] if runner is None else runner.running


async def launch(settings: Settings, options: Options) -> None:
    """Run the launcher until Ctrl-C or SIGTERM. Jobs get this environment (sbatch's default,
    --export=ALL) with the launcher's NATS settings in it, so each worker reaches the same
    NATS the same way, and no credential is on a command line."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    assert settings.nats_url is not None
    commands = Commands({**os.environ})
    try:
        cluster = await commands.cluster()
        if options.partition:
            await commands.run("scontrol", "show", "partition", options.partition)
    except SlurmError as err:
        raise ConfigError(f"Slurm: {err}") from err
    nats = {ENV["nats_url"]: settings.nats_url, **{ENV[field]: str(path) for field, path in settings.nats_files.items()}}
    supervision = Supervision()
    nc = await connect_nats(settings.nats_access(), name="cascade-slurm", supervision=supervision)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await Launcher(nc=nc, options=options, commands=Commands({**os.environ, **nats}), cluster=cluster, supervision=supervision).run()
    finally:
        await nc.close()
