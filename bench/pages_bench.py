"""Answers that page, at LLM scale: each paged or per-sim form of the kernels and results
routes on a run of --sims sims of --kernels kernels each (the fake simulator replaying the
combo log's kernels repeated, as campaign_bench does), on a fresh `cascade serve` under
--db-memory-bytes (default: serve's own). Per route: status, seconds, bytes, and serve's peak
RSS while it answered (sampled every 20 ms).

    python bench/pages_bench.py [--sims 4] [--kernels 10152] [--keep DIR]

--keep DIR keeps (or reuses, when it holds one) the data dir, so a rerun skips the ingest.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.campaign_bench import sim_log  # noqa: E402
from bench.runner_bench import CONFIG, PYTHON, TOKEN, request, served, upload  # noqa: E402
from tests.cascade_sim.world import accelsim_tree  # noqa: E402

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_during(pid: int, work: Callable[[], tuple[int, int]]) -> tuple[int, int, float, float]:
    """(status, bytes) of `work()`, its wall seconds, and serve's peak RSS in MiB meanwhile."""
    peak = rss_mib(pid)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, rss_mib(pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    try:
        status, size = work()
    finally:
        done.set()
        sampler.join()
    return status, size, time.perf_counter() - started, peak


def fetch(base: str, path: str, cap_s: float) -> Callable[[], tuple[int, int]]:
    """Reads the answer to GET `path`, for at most `cap_s` seconds (then it says so)."""

    def work() -> tuple[int, int]:
        size = 0
        started = time.perf_counter()
        try:
            with httpx.stream("GET", base + path, headers=AUTH, timeout=600) as response:
                for piece in response.iter_bytes(1 << 20):
                    size += len(piece)
                    if time.perf_counter() - started > cap_s:
                        print(f"  {path}: stopped reading at {cap_s:.0f} s, {size / 1e6:,.1f} MB", flush=True)
                        break
                return response.status_code, size
        except httpx.HTTPError as err:
            print(f"  {path}: {type(err).__name__} after {size:,} bytes", flush=True)
            return -1, size

    return work


def main(sims: int, kernels: int, keep: Path | None, db_memory_bytes: int | None, cap_s: float, only: str | None) -> None:
    home = keep or Path(tempfile.mkdtemp(prefix="cascade-pages-bench-"))
    env = {**os.environ, "CASCADE_TOKEN": TOKEN}
    reuse = (home / "data").exists()
    logs = home / "logs"
    if not reuse:
        home.mkdir(parents=True, exist_ok=True)
        logs, kernels = sim_log(home, kernels)
    env |= {"CASCADE_FAKE_ACCELSIM_PACE": "0", "CASCADE_FAKE_ACCELSIM_LOGS": str(logs)}
    tree = home / "accel-sim"
    if not tree.exists():
        accelsim_tree(tree)
    budget = [] if db_memory_bytes is None else ["--db-memory-bytes", str(db_memory_bytes)]
    server = subprocess.Popen(
        [PYTHON, "-m", "cascade_cli", "serve", "--port", "0", "--data-dir", str(home / "data"), "--accelsim-dir", str(tree),
         "--runner-slots", str(sims), "--no-samples", *budget],
        env=env, stdout=subprocess.DEVNULL, stderr=open(home / "serve.log", "a"),
    )
    try:
        base = served(home / "data", timeout=300).api_url
        if not reuse:
            upload(base, "combo-vec-mm-xz")
            request(base, "/api/runs", {"trace_id": "combo", "entries": [{"gpu_config": CONFIG, "count": sims, "fresh": True}]})
        run_id = request(base, "/api/runs")[0]["id"]  # type: ignore[index]
        started = time.monotonic()
        while (run := request(base, f"/api/runs/{run_id}"))["state"] == "active":  # type: ignore[index]
            time.sleep(2)
        done = sum(s["kernels_done"] for s in run["sims"])  # type: ignore[index]
        print(f"run {run_id}: {run['state']}, {len(run['sims'])} sims, {done:,} kernels (waited {time.monotonic() - started:.0f} s)", flush=True)  # type: ignore[index]
        sim_id = run["sims"][0]["id"]  # type: ignore[index]
        per_sim = run["sims"][0]["kernels_done"]  # type: ignore[index]
        paths = [
            f"/api/runs/{run_id}/kernels",
            f"/api/runs/{run_id}/kernels?limit=10000",
            f"/api/runs/{run_id}/kernels?offset={max(0, done - 10000)}&limit=10000",
            f"/api/sims/{sim_id}/results?limit=1000",
            f"/api/sims/{sim_id}/results?offset={max(0, per_sim - 1000)}&limit=1000",
            f"/api/sims/{sim_id}/results?stats=headline",
            f"/api/sims/{sim_id}/results?stats=none",
            f"/api/runs/{run_id}/results?format=zip",
            f"/api/runs/{run_id}/results?format=ndjson",
        ]
        print(f"serve's RSS before: {rss_mib(server.pid):.0f} MiB", flush=True)
        print("| route | status | s | MB | serve peak RSS MiB |\n|---|---|---|---|---|")
        for path in (p for p in paths if only is None or only in p):
            status, size, seconds, peak = peak_rss_during(server.pid, fetch(base, path, cap_s))
            shown = path.replace(run_id, "{run}").replace(sim_id, "{sim}")
            print(f"| `{shown}` | {status} | {seconds:.1f} | {size / 1e6:,.1f} | {peak:.0f} |", flush=True)
    finally:
        server.terminate()
        server.wait(60)
        if keep is None:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sims", type=int, default=4)
    parser.add_argument("--kernels", type=int, default=10152)
    parser.add_argument("--keep", type=Path, help="keep the data dir here, or reuse the one it holds")
    parser.add_argument("--db-memory-bytes", type=int, help="serve's DuckDB budget (default: serve's, 64 MiB)")
    parser.add_argument("--cap-seconds", type=float, default=3600.0, help="stop reading an answer after this long (its MB/s tell the rest)")
    parser.add_argument("--only", help="only the routes whose path holds this text")
    args = parser.parse_args()
    main(args.sims, args.kernels, args.keep, args.db_memory_bytes, args.cap_seconds, args.only)
