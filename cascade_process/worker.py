"""`cascade worker`: a runner on this machine for a Cascade cluster, needing only NATS; and
the runner `cascade serve` runs beside the API the same way.

In a Slurm job (`SLURM_JOB_ID` in its environment, as `cascade slurm` submits it, or by
hand) the runner is the job's: its id names the job, its sims' `launcher_ref` is the job id,
and stopped by Slurm it leaves its sims' requests to their lease (`runner.Launcher`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path

from nats.aio.client import Client

from cascade_app.config import Settings
from cascade_core import slurm
from cascade_nats.supervise import Supervision, supervise
from cascade_process.connection import connect_nats
from cascade_sim.install import AccelSimInstall
from cascade_sim.runner import Launcher, Runner

log = logging.getLogger("cascade.worker")
IDLE_CHECK_S = 1.0


def slurm_job(environ: Mapping[str, str]) -> Launcher | None:
    """The Slurm job this process runs in, if any, as its runner is named after it."""
    job = environ.get("SLURM_JOB_ID")
    if not job:
        return None
    return Launcher(runner_id=slurm.runner_id(environ.get("SLURM_CLUSTER_NAME", ""), job), launcher_ref=job)


def runner(
    nc: Client, install: AccelSimInstall, work_dir: Path, settings: Settings, supervision: Supervision, *, launched: bool = False
) -> Runner:
    """A runner of `install`'s simulator in `work_dir`, as `settings` size it; `launched`: a
    worker's, which may run in a Slurm job (serve's own runner never does)."""
    return Runner(
        nc=nc,
        simulator=install,
        work_dir=work_dir,
        slots=settings.runner_slots,
        sim_timeout_s=settings.sim_timeout_s,
        ack_wait_s=settings.runner_lease_s,
        supervision=supervision,
        launcher=slurm_job(os.environ) if launched else None,
    )


async def work(settings: Settings, work_dir: Path, idle_exit_s: float | None = None) -> None:
    """Run sims until Ctrl-C or SIGTERM, which cancel the runner: it stops its sims, hands them
    back for another runner (in a Slurm job: leaves them to their lease) and withdraws from the
    runner list before the connection closes. With `idle_exit_s`, it also ends once it has
    run nothing for that long (how `cascade slurm`'s jobs end when the queue is empty)."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await _run(settings, work_dir, idle_exit_s)


async def _run(settings: Settings, work_dir: Path, idle_exit_s: float | None) -> None:
    assert settings.nats_url is not None and settings.accelsim_dir is not None
    # What fails is only logged here: a worker has no health route. It rides out a NATS
    # outage of any length, and goes on when NATS is back.
    supervision = Supervision()
    nc = await connect_nats(settings.nats_access(), name="cascade-worker", supervision=supervision)
    try:
        local = runner(nc, AccelSimInstall(settings.accelsim_dir), work_dir, settings, supervision, launched=True)
        running = asyncio.create_task(supervise("runner", local.run, supervision))  # as serve runs its own
        try:
            if idle_exit_s is None:
                await running
            else:
                await _until_idle(local, idle_exit_s)
                log.info("runner %s: nothing to run for %g s, ending", local.id, idle_exit_s)
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
    finally:
        await nc.close()


async def _until_idle(local: Runner, idle_s: float) -> None:
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < idle_s:
        await asyncio.sleep(IDLE_CHECK_S)
        if local.running:
            idle_since = time.monotonic()
