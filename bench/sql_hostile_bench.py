"""Hostile SQL on `POST /api/sql` (issue 28, item 2): each query's time, answer and memory,
and what other users' reads (`GET /api/runs`) take meanwhile.

Starts `cascade serve` (no runner, the sample traces and runs, CASCADE_SQL_TIMEOUT=--timeout)
in its own process on an embedded nats-server, then for each query: posts it while one client
reads GET /api/runs over and over, and samples every 20 ms the resident memory of serve and
of any process running a query (`projections.sql_process`). Prints one line per query: its
status, time and first words, serve's and the query process's peak RSS, and the reads' p50,
p99 and max; first the reads alone, and the time of a normal query asked 5 times, 2 s apart.

    .venv/bin/python bench/sql_hostile_bench.py [--timeout 5] [--source DIR]

--source runs serve from another checkout's source (such as `git archive` of an older commit
with the C extensions copied in), to measure the same queries before a change.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

TOKEN = "bench-token"
NORMAL_REPEATS = 5
AUTH = {"Authorization": f"Bearer {TOKEN}"}
QUERIES = [
    ("normal", "SELECT count(*) FROM kernels"),
    ("gigabyte string", "SELECT length(repeat('x', 1000000000))"),
    ("20M-item list sorted", "SELECT len(list_sort(range(20000000)))"),
    ("10 GB answer", "SELECT repeat('x', 100000) FROM range(100000)"),
    ("CPU past the limit", "SELECT count(*) FROM range(1000000000000) a JOIN range(1000) b ON a.range % 7 = b.range"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(data: Path, port: int, timeout_s: float, source: Path | None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CASCADE_TOKEN": TOKEN, "CASCADE_SQL_TIMEOUT": str(timeout_s)}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    serve = "import sys; from cascade_cli.main import main; sys.exit(main())"
    args = [sys.executable, "-c", serve, "serve", "--no-runner", "--data-dir", str(data), "--port", str(port)]
    process = subprocess.Popen(args, env=env, cwd=source, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/runs", headers=AUTH).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise SystemExit("cascade serve did not start")


def rss(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) << 10 for line in status.splitlines() if line.startswith("VmRSS:")), 0)


def query_processes() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"projections.sql_process" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


class Peaks:
    """Peak RSS of serve and of query processes, sampled every 20 ms in a thread."""

    def __init__(self, serve: int) -> None:
        self.serve_pid = serve
        self.serve = self.query = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.serve = max(self.serve, rss(self.serve_pid))
            self.query = max([self.query, *map(rss, query_processes())])
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


async def reads_until(http: httpx.AsyncClient, done: asyncio.Event) -> list[float]:
    took = []
    while not done.is_set():
        started = time.perf_counter()
        (await http.get("/api/runs")).raise_for_status()
        took.append(time.perf_counter() - started)
    return took


def spread(took: list[float]) -> str:
    ms = sorted(t * 1000 for t in took)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"GET /api/runs n={len(ms)} p50 {statistics.median(ms):.0f} ms, p99 {p99:.0f} ms, max {ms[-1]:.0f} ms"


async def measure(base: str, serve: int) -> None:
    async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=600) as http:
        done = asyncio.Event()
        reading = asyncio.create_task(reads_until(http, done))
        await asyncio.sleep(3)
        done.set()
        print(f"{'reads alone':22} {spread(await reading)}", flush=True)
        normal = []
        for _ in range(NORMAL_REPEATS):
            started = time.perf_counter()
            (await http.post("/api/sql", json={"sql": QUERIES[0][1]})).raise_for_status()
            normal.append(time.perf_counter() - started)
            await asyncio.sleep(2)  # as a person asks: the next process has started by then
        print(f"{'normal, one by one':22} {', '.join(f'{t:.2f}' for t in normal)} s", flush=True)
        for name, sql in QUERIES:
            done = asyncio.Event()
            peaks = Peaks(serve)
            reading = asyncio.create_task(reads_until(http, done))
            started = time.perf_counter()
            answer = await http.post("/api/sql", json={"sql": sql})
            took = time.perf_counter() - started
            done.set()
            reads = await reading
            peaks.stop()
            said = answer.json().get("detail", "rows") if answer.status_code != 200 or len(answer.content) < 1000 else "rows"
            print(
                f"{name:22} {answer.status_code} in {took:.1f} s ({str(said)[:60]}); peak RSS serve {peaks.serve >> 20} MiB, "
                f"query process {peaks.query >> 20} MiB; {spread(reads)}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--source", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        process = start_server(Path(tmp) / "data", port, args.timeout, args.source)
        try:
            asyncio.run(measure(f"http://127.0.0.1:{port}", process.pid))
        finally:
            process.terminate()
            process.wait(30)


if __name__ == "__main__":
    main()
