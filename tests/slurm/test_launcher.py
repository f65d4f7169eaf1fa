"""`cascade slurm` against a real single-node Slurm: sims run in worker jobs it submits, each
sim's launcher_ref is its job's id, a job Slurm ends at its time limit fails the sim it held
with what sacct says (from the job completion log: the test's Slurm has no slurmdbd), one
scancelled by someone else loses its sim to another job, and cancelling a run cancels the
job that ran its sim."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_core import events as ev
from cascade_core import slurm
from cascade_process.service import starlette_app
from tests.cascade_http.conftest import service
from tests.cascade_sim.world import accelsim_tree, create_run, store_trace, wait_run
from tests.slurm.cluster import PARTITION, Cluster, slurm_cluster
from tests.support import TRACES, stop, wait_until

TOKEN = "t"
LEASE_S = 15  # a stopped job's sims come back this long after it ended: the launcher records why well before
PACE_S = 3  # per kernel: matrixmul-x40's 40 take 120 s, past a job's 1-minute limit


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with slurm_cluster() as c:
        yield c


@pytest.fixture
def client(tmp_path: Path, nats_url: str) -> Iterator[TestClient]:
    # No runner of its own: every sim runs in a Slurm job.
    settings = Settings(
        token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=accelsim_tree(tmp_path / "accel-sim"),
        runner=False, samples=False, runner_lease_s=LEASE_S,
    )
    with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


@pytest.fixture
def launcher(tmp_path: Path, nats_url: str, cluster: Cluster, client: TestClient) -> Iterator[Path]:
    """`cascade slurm` running; its log's path."""
    log = tmp_path / "launcher.log"
    env = {
        **cluster.env, "CASCADE_NATS_URL": nats_url, "CASCADE_RUNNER_LEASE": str(LEASE_S),
        "CASCADE_FAKE_ACCELSIM_PACE": str(PACE_S),
    }
    argv = [
        sys.executable, "-m", "cascade_cli", "slurm", "--accelsim-dir", str(tmp_path / "accel-sim"), "--partition", PARTITION,
        "--workers", "2", "--time", "1", "--idle-exit", "40", "--work-dir", str(tmp_path / "jobs"),
    ]
    with log.open("w") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        yield log
    finally:
        stop(process)


def submitted(log: Path) -> list[str]:
    return re.findall(r"submitted job (\d+)", log.read_text())


def runners_ended(client: TestClient) -> list[ev.RunnerEnded]:
    async def read() -> list[ev.RunnerEnded]:
        return [s.event async for s in service(client).store.read("cascade.ev.runner.>") if isinstance(s.event, ev.RunnerEnded)]

    return client.portal.call(read)  # type: ignore[union-attr]


@pytest.mark.timeout(300)
def test_sims_run_in_slurm_jobs_that_end_at_their_limit_or_with_their_run(client: TestClient, cluster: Cluster, launcher: Path) -> None:
    store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
    store_trace(service(client), client, "mm", TRACES / "matrixmul-x40", "sm_61")

    # Two sims, two jobs: each sim's launcher_ref is the id of a job the launcher submitted
    # (fresh: else the second would take the first's result, and need no job).
    quick = wait_run(client, create_run(client, "v", "SM61_TITANX", count=2, fresh=True)["id"], timeout=90)
    assert quick["state"] == "succeeded", quick
    jobs = submitted(launcher)
    refs = {sim["launcher_ref"] for sim in quick["sims"]}
    assert refs <= set(jobs) and len(jobs) <= 2, (refs, jobs)
    for ref in refs:
        assert cluster.job(ref)["JobName"] == "cascade-worker"

    # Two slow sims on the two idle workers: one's run is cancelled, the other outlives its job.
    slow = create_run(client, "mm", "SM61_TITANX", fresh=True)["id"]
    doomed = create_run(client, "mm", "SM61_TITANX", fresh=True)["id"]
    wait_run(client, slow, timeout=60, until="running")
    cancelled_job = wait_run(client, doomed, timeout=60, until="running")["sims"][0]["launcher_ref"]
    assert client.post(f"/api/runs/{doomed}/cancel").status_code == 200
    wait_until(lambda: cancelled_job not in cluster.queued(), 20, f"job {cancelled_job} was not cancelled (the launcher's log: {launcher})")
    assert cluster.job(cancelled_job)["JobState"] == "CANCELLED"
    assert wait_run(client, doomed, timeout=10)["state"] == "cancelled"

    # Someone scancels a job that runs a sim: the sim is lost, and runs again in another job.
    store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
    again = create_run(client, "combo", "SM61_TITANX")["id"]
    lost_job = wait_run(client, again, timeout=60, until="running")["sims"][0]["launcher_ref"]
    cluster.run("scancel", lost_job)
    rerun = wait_run(client, again, timeout=60)
    assert rerun["state"] == "succeeded" and rerun["sims"][0]["launcher_ref"] not in {lost_job, cancelled_job}, rerun
    assert {e.launcher_ref: e.state for e in runners_ended(client)}.get(lost_job) == "CANCELLED"

    # The slow sim's job reaches its time limit: the sim fails with what Slurm said.
    timed_out = wait_run(client, slow, timeout=150)
    sim = timed_out["sims"][0]
    assert timed_out["state"] == "failed", timed_out
    job = sim["launcher_ref"]
    # From sacct, out of the job completion log (scontrol would add "reason TimeLimit").
    said = slurm.parse_sacct(cluster.run("sacct", "-c", "-X", "-n", "-P", "-o", "JobID,State,ExitCode,Reason", "-j", job), job)
    assert said is not None and said.state == "TIMEOUT", said
    assert said.describe() == f"Slurm job {job} ended: TIMEOUT (exit code {said.exit_code})", said
    assert sim["error"] == f"{said.describe()} during attempt 1", sim["error"]
    assert cluster.job(job)["JobState"] == "TIMEOUT"
    ended = {e.launcher_ref: e for e in runners_ended(client)}
    assert ended[job].state == "TIMEOUT" and ended[job].reason == said.describe() and ended[job].runner_id == slurm.runner_id(cluster.name, job)
    assert cancelled_job not in ended  # the launcher's own cancel is no news


def test_a_launcher_without_slurm_says_so_in_one_line(tmp_path: Path, nats_url: str) -> None:
    tree = accelsim_tree(tmp_path / "accel-sim")
    done = subprocess.run(
        [sys.executable, "-m", "cascade_cli", "slurm", "--accelsim-dir", str(tree), "--workers", "1"],
        env={**os.environ, "CASCADE_NATS_URL": nats_url, "PATH": str(tmp_path)},  # no Slurm command on it
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr == "cascade: error: Slurm: scontrol: not found (are Slurm's commands on PATH?)\n"
