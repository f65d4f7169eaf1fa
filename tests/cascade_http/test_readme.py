"""The README followed to the letter, as a new user does: a fresh directory, no flags but
`--accelsim-dir`, the default data dir `./.cascade`, and the commands run from there.

The only thing not taken from the README is the port: a test must not assume that 8000 is
free. The README's command has no `--port`, so the port goes through CASCADE_PORT (which
`cascade serve` reads as it reads the flag), set to 0 for any free port; the commands that
follow find the real one the way they find 8000, in the data dir's service file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from cascade_process import datadir
from tests.cascade_http.served import api, clean_env, health, start, stop
from tests.cascade_sim.world import accelsim_tree
from tests.support import TRACES, wait_until

# The console script the README runs (`.venv/bin/cascade`), beside this interpreter.
CASCADE = Path(sys.executable).with_name("cascade")
SIM_COMMAND = re.compile(r"sim \S+ attempt \d+: pid \d+ runs (\S+) -trace (\S+)")


def run_to_the_end(url: str, token: str, trace_id: str) -> dict:  # type: ignore[type-arg]
    run = api(url, token, "POST", "/api/runs", {"trace_id": trace_id, "entries": [{"gpu_config": "SM61_TITANX", "count": 2}]})
    wait_until(lambda: api(url, token, "GET", f"/api/runs/{run['id']}")["state"] != "active", 90, "the run did not finish")
    return api(url, token, "GET", f"/api/runs/{run['id']}")


def upload(cwd: Path, env: dict[str, str]) -> str:
    """`cascade trace upload DIR` from `cwd`: no --url, no token; the id it printed."""
    done = subprocess.run([str(CASCADE), "trace", "upload", str(TRACES / "combo-vec-mm-xz")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    match = re.fullmatch(r"trace (\S+): ready: 3 kernels, sm_61, \d+ bytes\n", done.stdout)
    assert match, done.stdout
    return match[1]


def assert_absolute_sim_paths(output: str) -> None:
    commands = SIM_COMMAND.findall(output)
    assert len(commands) == 1, output  # one replica simulates; the other takes its result (the result cache)
    for binary, trace in commands:
        assert Path(binary).is_absolute() and Path(trace).is_absolute(), (binary, trace)


def test_serve_with_only_an_accelsim_dir_runs_sims_from_a_fresh_directory(tmp_path: Path) -> None:
    assert CASCADE.exists(), f"{CASCADE}: install as the README says (pip install -e .)"
    accelsim_tree(tmp_path / "accel-sim")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    env = clean_env(CASCADE_PORT="0")
    data = fresh / ".cascade"
    # A relative --accelsim-dir too, as a user would type it.
    served = start([str(CASCADE), "serve", "--accelsim-dir", "../accel-sim"], data, tmp_path / "serve.log", cwd=fresh, env=env)
    try:
        assert f"cascade: a new API token is in {data / 'token'}, readable by you alone (cat {data / 'token'})\n" in served.text()
        trace_id = upload(fresh, env)
        token = (data / "token").read_text().strip()
        assert token not in served.text(), "the token is printed nowhere"
        run = run_to_the_end(served.url, token, trace_id)
        assert run["state"] == "succeeded" and [s["state"] for s in run["sims"]] == ["succeeded", "succeeded"], run
        assert_absolute_sim_paths(served.text())
    finally:
        assert stop(served.process) == 0, served.text()
    assert "Traceback" not in served.text(), served.text()


def test_a_worker_with_its_default_work_dir_runs_sims_from_a_fresh_directory(tmp_path: Path) -> None:
    accelsim_tree(tmp_path / "accel-sim")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    data = tmp_path / "cluster"
    env = clean_env(CASCADE_PORT="0")
    served = start(
        [str(CASCADE), "serve", "--data-dir", str(data), "--accelsim-dir", str(tmp_path / "accel-sim"), "--no-runner"],
        data, tmp_path / "serve.log", env=env,
    )
    # The URL carries the password: in the environment, not on the command line, where others see it.
    with (tmp_path / "worker.log").open("wb") as out:
        worker = subprocess.Popen(
            [str(CASCADE), "worker", "--accelsim-dir", "../accel-sim"],
            cwd=fresh, env={**env, "CASCADE_NATS_URL": served.nats_url}, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: health(served.url)["runners"] == 1, 30, "the worker did not announce itself")
        trace_id = upload(fresh, clean_env(CASCADE_DATA_DIR=str(data)))
        run = run_to_the_end(served.url, (data / "token").read_text().strip(), trace_id)
        assert run["state"] == "succeeded", run
        assert datadir.try_lock(fresh / ".cascade-worker", "work dir") is None, "the worker holds its default work dir"
        assert_absolute_sim_paths((tmp_path / "worker.log").read_text())
    finally:
        assert stop(worker) == 0, (tmp_path / "worker.log").read_text()
        assert stop(served.process) == 0, served.text()


def test_a_serve_without_accelsim_and_a_worker_beside_it_run_sims_with_every_default(tmp_path: Path) -> None:
    # The quick start's other way: `cascade serve` alone, then `cascade worker --accelsim-dir DIR`
    # in the same directory, which finds the serve's NATS by its data dir, with no URL given.
    accelsim_tree(tmp_path / "accel-sim")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    env = clean_env(CASCADE_PORT="0")
    data = fresh / ".cascade"
    served = start([str(CASCADE), "serve"], data, tmp_path / "serve.log", cwd=fresh, env=env)
    with (tmp_path / "worker.log").open("wb") as out:
        worker = subprocess.Popen([str(CASCADE), "worker", "--accelsim-dir", "../accel-sim"], cwd=fresh, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: health(served.url)["runners"] == 1, 30, f"the worker did not announce itself: {(tmp_path / 'worker.log').read_text()}")
        trace_id = upload(fresh, env)
        run = run_to_the_end(served.url, (data / "token").read_text().strip(), trace_id)
        assert run["state"] == "succeeded", run
    finally:
        assert stop(worker) == 0, (tmp_path / "worker.log").read_text()
        assert stop(served.process) == 0, served.text()


def test_a_worker_with_no_nats_and_no_serve_beside_it_says_where_it_looked(tmp_path: Path) -> None:
    accelsim_tree(tmp_path / "accel-sim")
    done = subprocess.run(
        [str(CASCADE), "worker", "--accelsim-dir", str(tmp_path / "accel-sim")], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "cascade: error: cascade worker needs --nats-url (or CASCADE_NATS_URL): the cluster's NATS, "
        f"or a cascade serve holding data dir {tmp_path / '.cascade'} on this machine\n"
    )
