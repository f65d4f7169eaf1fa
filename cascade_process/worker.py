"""`cascade worker`: a runner on this machine for a Cascade cluster, needing only NATS; and
the runner `cascade serve` runs beside the API the same way."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

from nats.aio.client import Client

from cascade_app.config import Settings
from cascade_nats.supervise import Supervision, supervise
from cascade_process.connection import connect_nats
from cascade_sim.install import AccelSimInstall
from cascade_sim.runner import Runner


def runner(nc: Client, install: AccelSimInstall, work_dir: Path, settings: Settings, supervision: Supervision) -> Runner:
    """A runner of `install`'s simulator in `work_dir`, as `settings` size it."""
    return Runner(
        nc,
        install,
        work_dir,
        slots=settings.runner_slots,
        sim_timeout_s=settings.sim_timeout_s,
        ack_wait_s=settings.runner_lease_s,
        supervision=supervision,
    )


async def work(settings: Settings, work_dir: Path) -> None:
    """Run sims until Ctrl-C or SIGTERM, which cancel the runner: it stops its sims, hands them
    back for another runner and withdraws from the runner list before the connection closes."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await _run(settings, work_dir)


async def _run(settings: Settings, work_dir: Path) -> None:
    assert settings.nats_url is not None and settings.accelsim_dir is not None
    # What fails is only logged here: a worker has no health route. It rides out a NATS
    # outage of any length, and goes on when NATS is back.
    supervision = Supervision()
    nc = await connect_nats(settings.nats_access(), name="cascade-worker", supervision=supervision)
    try:
        local = runner(nc, AccelSimInstall(settings.accelsim_dir), work_dir, settings, supervision)
        await supervise("runner", local.run, supervision)  # as serve runs its own
    finally:
        await nc.close()
