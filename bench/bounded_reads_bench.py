"""The reads that scan a whole run's `kernel_stats`, at scale, under serve's default DuckDB budget.

    .venv/bin/python bench/bounded_reads_bench.py [--kernels 10152] [--sims 4] [--keep DIR]

A run of `--sims` sims of `--kernels` kernels each (the fake simulator replaying `big_log`) is
made once on a `cascade serve` with its own runner (kept in --keep DIR to measure again
without ingesting again). Then, on a serve started afresh on that data dir, each read is asked
once: its status, its time, the bytes of its body, whether the body was complete, and serve's
resident memory while it ran (sampled every 50 ms: at its start, each quarter, its end, and
its peak). Last, `replay --verify` through the
API (as the CLI asks a running serve), and the same offline (`cascade replay --verify` on the
data dir, serve stopped): its time and peak resident memory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.runner_bench import CONFIG, LOG_NAME, PYTHON, TOKEN, TRACE, Sampler, big_log, served, upload  # noqa: E402
from tests.cascade_sim.world import accelsim_tree  # noqa: E402

STAT = "L2_cache_bank[*].Miss_rate"
ROUTES = [
    "/api/runs/{run}/kernels",
    "/api/runs/{run}/comparison",
    "/api/runs/{run}/stats?q=Miss",
    "/api/runs/{run}/stats/values?name=gpu_sim_cycle",
    f"/api/runs/{{run}}/stats/values?name={STAT}",
    "/api/runs/{run}/perfetto",
    "/api/runs/{run}/export",
]


def serve(keep: Path, tree: Path, logs: Path, runner: bool) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "CASCADE_TOKEN": TOKEN, "CASCADE_FAKE_ACCELSIM_LOGS": str(logs)}
    argv = [PYTHON, "-m", "cascade_cli", "serve", "--port", "0", "--data-dir", str(keep / "data"), "--accelsim-dir", str(tree)]
    with (keep / "serve.log").open("a") as log:
        server = subprocess.Popen([*argv, *([] if runner else ["--no-runner"])], env=env, stdout=subprocess.DEVNULL, stderr=log)
    return server, served(keep / "data", timeout=300).api_url


def stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    server.wait(timeout=120)


def api(url: str, path: str, body: object | None = None) -> Any:  # noqa: ANN401
    answer = httpx.request("POST" if body else "GET", url + path, json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    answer.raise_for_status()
    return answer.json()


def ingest(keep: Path, tree: Path, logs: Path, sims: int, kernels: int) -> str:
    server, url = serve(keep, tree, logs, runner=True)
    try:
        upload(url, TRACE)
        run = api(url, "/api/runs", {"trace_id": "combo", "entries": [{"gpu_config": CONFIG, "count": sims, "fresh": True}]})
        run_id = str(run["id"])
        started = time.perf_counter()
        while True:
            detail = api(url, f"/api/runs/{run_id}")
            if detail["state"] != "active" and all(s["kernels_done"] >= kernels for s in detail["sims"]):
                break
            assert detail["state"] in ("active", "succeeded"), detail
            time.sleep(2)
        print(f"ingested {sims} x {kernels} kernels in {time.perf_counter() - started:.0f} s")
        (keep / "run_id").write_text(run_id)
        return run_id
    finally:
        stop(server)


def measured(sampler: Sampler, ask: Callable[[], str]) -> tuple[str, float, str]:
    """What `ask()` answered, its seconds and serve's RSS in MiB meanwhile (`Sampler.curve`)."""
    sampler.samples.clear()
    time.sleep(0.1)
    started = time.perf_counter()
    answer = ask()
    elapsed = time.perf_counter() - started
    time.sleep(0.1)
    return str(answer), elapsed, sampler.curve(started, started + elapsed)


def get(url: str, path: str) -> str:
    got = 0
    try:
        with httpx.stream("GET", url + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=600) as r:
            for piece in r.iter_bytes():
                got += len(piece)
            return f"{r.status_code}, {got / 1e6:.1f} MB"
    except httpx.HTTPError as err:
        return f"FAILED after {got / 1e6:.1f} MB: {type(err).__name__}"


def verify_api(url: str) -> str:
    r = httpx.post(url + "/api/replay/verify", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=3600)
    return f"{r.status_code}, equal={r.json().get('equal')}" if r.status_code == 200 else f"{r.status_code} {r.text[:200]}"


def main(kernels: int, sims: int, keep: Path | None) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="cascade-bounded-bench-"))
    keep = keep or scratch
    try:
        keep.mkdir(parents=True, exist_ok=True)
        tree, logs = keep / "accel-sim", keep / "logs"
        if not tree.exists():
            accelsim_tree(tree)
        if not logs.exists():
            logs.mkdir()
            big_log(logs / LOG_NAME, rounds=kernels // 3)
        run_id = (keep / "run_id").read_text() if (keep / "run_id").exists() else ingest(keep, tree, logs, sims, kernels)
        server, url = serve(keep, tree, logs, runner=False)
        sampler = Sampler(server.pid)
        sampler.start()
        try:
            time.sleep(1)
            print(f"run {run_id}: {sims} x {kernels} kernels; serve at rest {sampler.peak_kb // 1024} MiB")
            for route in ROUTES:
                path = route.format(run=run_id)
                answer, elapsed, peak = measured(sampler, lambda: get(url, path))
                print(f"  GET {path:<70} {answer:<40} {elapsed:7.1f} s  serve MiB {peak}")
            answer, elapsed, peak = measured(sampler, lambda: verify_api(url))
            print(f"  POST /api/replay/verify {answer:<40} {elapsed:7.1f} s  serve MiB {peak}")
        finally:
            sampler.running = False
            stop(server)
        env = {**os.environ, "CASCADE_TOKEN": TOKEN}
        verify = subprocess.Popen([PYTHON, "-m", "cascade_cli", "replay", "--verify", "--data-dir", str(keep / "data")],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        sampler = Sampler(verify.pid)
        sampler.start()
        started = time.perf_counter()
        out, _ = verify.communicate()
        print(f"  cascade replay --verify (offline): exit {verify.returncode} in {time.perf_counter() - started:.1f} s, "
              f"peak {sampler.peak_kb // 1024} MiB; {out.decode().strip().splitlines()[-1]}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=10152, help="kernels per sim (rounded down to 3s)")
    parser.add_argument("--sims", type=int, default=4)
    parser.add_argument("--keep", type=Path, help="a directory to make the run in once and measure it from again")
    args = parser.parse_args()
    main(args.kernels, args.sims, args.keep)
