"""Reads while many sims run and many clients watch: GET latency under load.

Starts `cascade serve` as the README does (embedded nats-server, its own runner, here with
--sims slots), the real simulator of --accelsim-dir on matrixmul-x40 or the fake simulator replaying the combo trace's real SM61_TITANX log with its
kernels repeated to --kernels (campaign_bench's log), paced so each sim runs about
--sim-seconds: one kernel result of 3,814 stat values per sim every --sim-seconds/--kernels. It creates one run of --sims sims, waits until all run,
then measures GET /api/runs and GET /api/runs/{id} one at a time for --seconds: first with
no client watching, then with --clients clients reading the run's event stream (a lean
asyncio SSE client each, reading and dropping what comes). Reported: median, p99 and max of
each read, and every process's CPU over each phase.

    .venv/bin/python bench/sse_load_bench.py [--sims 32] [--clients 200] [--seconds 30] [--sim-seconds 240] [--kernels 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.campaign_bench import sim_log  # noqa: E402
from bench.runner_bench import CONFIG, PYTHON, TOKEN, cpu_seconds, request, served, upload  # noqa: E402
from tests.cascade_sim.world import accelsim_tree  # noqa: E402

AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def watcher(host: str, port: int, path: str, ready: asyncio.Event, stop: asyncio.Event) -> int:
    """Reads the stream until `stop`; the bytes it read."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n".encode())
    await writer.drain()
    read = 0
    try:
        while not stop.is_set():
            try:
                chunk = await asyncio.wait_for(reader.read(65536), 0.5)
            except TimeoutError:
                continue
            if not chunk:
                break
            if b"event: snapshot" in chunk:
                ready.set()
            read += len(chunk)
    finally:
        writer.close()
    return read


async def probe(base: str, path: str, seconds: float) -> list[float]:
    out = []
    async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=120) as http:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            (await http.get(path)).raise_for_status()
            out.append(time.perf_counter() - t)
            await asyncio.sleep(0.05)
    return out


def line(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"  {name:<24} n {len(values):4d}   median {statistics.median(values) * 1000:8.1f} ms   p99 {p99 * 1000:8.1f} ms   max {ordered[-1] * 1000:8.1f} ms"


def processes(server: int) -> dict[str, int]:
    """serve, its nats-server and the simulators by pid (the runner is serve's own task)."""
    found = {"serve": server}
    for pid in Path(f"/proc/{server}/task/{server}/children").read_text().split():
        if b"accel-sim.out" in Path(f"/proc/{pid}/cmdline").read_bytes():
            continue  # counted with the simulators
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        found[name if name not in found else f"{name}-{pid}"] = int(pid)
    return found


def simulators_cpu() -> float:
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"accel-sim.out" in (entry / "cmdline").read_bytes():
                    total += cpu_seconds(int(entry.name))
            except OSError:
                pass
    return total


async def phase(base: str, run_id: str, seconds: float, clients: int, server: int) -> None:
    host, port = base.removeprefix("http://").split(":")
    stop, readies = asyncio.Event(), [asyncio.Event() for _ in range(clients)]
    tasks = [asyncio.create_task(watcher(host, int(port), f"/api/runs/{run_id}/events", ready, stop)) for ready in readies]
    await asyncio.wait_for(asyncio.gather(*(ready.wait() for ready in readies)), 300)
    pids = processes(server)
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    sims_before, began = simulators_cpu(), time.perf_counter()
    runs, run = await asyncio.gather(probe(base, "/api/runs", seconds), probe(base, f"/api/runs/{run_id}", seconds))
    wall = time.perf_counter() - began
    cpu = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    stop.set()
    read = sum(await asyncio.gather(*tasks))
    print(f"{clients} clients watching ({read / 1e6:.1f} MB read in all)")
    print(line("GET /api/runs", runs))
    print(line("GET /api/runs/{id}", run))
    shares = ", ".join(f"{name} {seconds / wall:.2f}" for name, seconds in cpu.items())
    print(f"  cores busy: {shares}, simulators {(simulators_cpu() - sims_before) / wall:.2f}")


def main(sims: int, clients: int, seconds: float, sim_seconds: float, kernels: int, accelsim_dir: Path | None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="cascade-sse-load-"))
    env = {**os.environ, "CASCADE_TOKEN": TOKEN}
    try:
        if accelsim_dir is None:
            logs, kernels = sim_log(tmp, kernels)
            env |= {"CASCADE_FAKE_ACCELSIM_PACE": repr(sim_seconds / kernels), "CASCADE_FAKE_ACCELSIM_LOGS": str(logs)}
        tree = accelsim_tree(tmp / "accel-sim") if accelsim_dir is None else accelsim_dir
        server = subprocess.Popen(
            [PYTHON, "-m", "cascade_cli", "serve", "--port", "0", "--data-dir", str(tmp / "data"), "--accelsim-dir", str(tree),
             "--runner-slots", str(sims), "--no-samples"],
            env=env, stdout=subprocess.DEVNULL, stderr=open(tmp / "serve.log", "w"),
        )
        try:
            base = served(tmp / "data").api_url
            upload(base, "combo-vec-mm-xz" if accelsim_dir is None else "matrixmul-x40")
            # Fresh: replicas alike would otherwise simulate once and take that result.
            run = request(base, "/api/runs", {"trace_id": "combo", "entries": [{"gpu_config": CONFIG, "count": sims, "fresh": True}]})
            run_id = run["id"]  # type: ignore[index]
            deadline = time.monotonic() + 300
            while request(base, f"/api/runs/{run_id}")["sim_counts"].get("running", 0) < sims:  # type: ignore[index]
                assert time.monotonic() < deadline, f"the sims did not all start: {request(base, f'/api/runs/{run_id}')['sim_counts']}"  # type: ignore[index]
                time.sleep(0.5)
            print(f"{sims} sims running" + (f", each a kernel result every {sim_seconds / kernels:.2f} s ({kernels} kernels)" if accelsim_dir is None else f" on {accelsim_dir}"))
            asyncio.run(phase(base, run_id, seconds, 0, server.pid))
            asyncio.run(phase(base, run_id, seconds, clients, server.pid))
        finally:
            server.terminate()
            server.wait(60)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sims", type=int, default=32)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--sim-seconds", type=float, default=240.0, help="how long each sim runs")
    parser.add_argument("--kernels", type=int, default=3, help="kernels per sim (a multiple of 3)")
    parser.add_argument("--accelsim-dir", type=Path, help="a built Accel-Sim: its sims of matrixmul-x40 instead of the fake's")
    args = parser.parse_args()
    main(args.sims, args.clients, args.seconds, args.sim_seconds, args.kernels, args.accelsim_dir)
