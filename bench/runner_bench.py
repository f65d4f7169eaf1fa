"""The runner end to end: simulator output -> events -> read model, and what it costs.

    .venv/bin/python bench/runner_bench.py [--size-mb 100] [--paced-kernels 100] [--simulator-mb-per-s 22.8] [--python PATH]

1. Throughput: the fake simulator prints a --size-mb log (the combo trace's real log with its
   kernel blocks repeated and renumbered) as fast as it can, or at --simulator-mb-per-s (it
   pauses after each kernel's block: a real simulator prints a block when it has simulated
   that kernel); a `cascade worker` process runs
   it while `cascade serve` (no runner of its own) projects. Reported: MB/s from the run's
   creation until every kernel is queryable, the worker's CPU time per MB of output, and its
   peak resident memory, and the resident memory of it and the server over the run (sampled
   every 50 ms). Then what the burst left on disk (the event stream, the read model), and the
   sim's log downloaded whole through the API. At a given pace the fake is first run alone,
   its output to /dev/null, to measure its bare time, and the whole path (created -> every
   kernel queryable) is reported as a multiple of it.
2. Latency: the fake prints the real log's kernels at 10 per second and notes when each
   block was flushed; the time from that to the kernel arriving on the run's event stream
   (sent right after the projector commits it) is reported as p50/p99.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import TextIO

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cascade_process import datadir, event_log  # noqa: E402
from cascade_sim.install import AccelSimInstall  # noqa: E402
from projections.projector import DEFAULT_MEMORY  # noqa: E402
from tests.cascade_sim.world import accelsim_tree  # noqa: E402
from tests.support import LOGS, TRACES  # noqa: E402

TOKEN = "bench"
OUT = REPO / "bench" / "out"
OUT.mkdir(exist_ok=True)
# The processes' logs, kept for a look when a number is off; opened when the bench runs, not
# when campaign_bench imports big_log.
LOG: TextIO
TRACE, CONFIG = "combo-vec-mm-xz", "SM61_TITANX"
LOG_NAME = f"{TRACE}__{CONFIG}.log"
BLOCK_END = "\ngpgpu_silicon_slowdown = "
UID = re.compile(r"(kernel_launch_uid = |uid: )(\d+)")
# The interpreter of the cascade processes (--python): a venv with the test extras has pandas,
# which pyarrow imports at its first array, 54 MiB of serve's RSS that a deployment's does not
# have (bench/README.md, "serve within 286 MiB").
PYTHON = sys.executable


def big_log(path: Path, size: int = 0, rounds: int = 1) -> int:
    """The combo log with its kernel sections repeated (renumbered) until the file holds
    `size` bytes and `rounds` repeats; returns how many kernels it has."""
    log = (LOGS / LOG_NAME).read_text()
    first = log.index("launching kernel name:")
    first = log.rindex("\n", 0, first) + 1
    last = log.index("\n", log.rindex(BLOCK_END) + 1) + 1  # the end of that line, not the newline that starts it
    top, body, tail = log[:first], log[first:last], log[last:]
    kernels_per_body = body.count(BLOCK_END)
    written, round_ = 0, 0
    with path.open("w") as f:
        written += f.write(top)
        while written < size or round_ < rounds:
            offset = round_ * kernels_per_body
            written += f.write(UID.sub(lambda m: f"{m[1]}{int(m[2]) + offset}", body))
            round_ += 1
        f.write(tail)
    return round_ * kernels_per_body


def grep_seconds(path: Path) -> float:
    """The best of 3 `grep -c ' = '` over the file: a yardstick for the machine's speed now."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run(["grep", "-c", " = ", str(path)], capture_output=True, check=True)
        best = min(best, time.perf_counter() - started)
    return best


def served(data: Path, timeout: float = 60) -> datadir.Service:
    """The service `cascade serve` on data dir `data` runs, once it answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        service = datadir.live_service(data)  # where the server listens, once it does
        try:
            if service is not None:
                request(service.api_url, "/api/health")
                return service
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("the server did not start")


def request(url: str, path: str, body: object | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method="POST" if data else "GET",
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def wait(url: str, run_id: str, kernels: int, timeout: float) -> dict:
    """The run once every kernel is queryable."""
    deadline = time.monotonic() + timeout
    while True:
        run = request(url, f"/api/runs/{run_id}")
        if run["state"] != "active" and run["sims"][0]["kernels_done"] >= kernels:  # type: ignore[index]
            return run  # type: ignore[return-value]
        assert run["state"] in ("active", "succeeded"), run
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)  # each poll costs the server a run detail query, ~10 ms of CPU here


class Sampler(threading.Thread):
    """A process's resident memory over time, from /proc."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: list[tuple[float, int]] = []  # (time.perf_counter(), kB)
        self.running = True

    def run(self) -> None:
        while self.running:
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
            except FileNotFoundError:
                return
            resident = re.search(r"VmRSS:\s+(\d+)", status)
            if resident is None:  # exited, not yet reaped: a zombie has no memory
                return
            self.samples.append((time.perf_counter(), int(resident[1])))
            time.sleep(0.05)

    @property
    def peak_kb(self) -> int:
        return max(kb for _, kb in self.samples)

    def curve(self, start: float, end: float) -> str:
        """MiB at the start, each quarter of the time from `start` to `end`, and the end; and the peak."""
        at = [next((kb for t, kb in self.samples if t >= start + (end - start) * q / 4), self.samples[-1][1]) for q in range(5)]
        return ", ".join(f"{kb / 1024:.0f}" for kb in at) + f" (peak {self.peak_kb / 1024:.0f})"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def upload(url: str, trace: str) -> None:
    out = subprocess.run([PYTHON, "-m", "cascade_cli", "trace", "upload", str(TRACES / trace), "--id", "combo", "--url", url],
                         env={**os.environ, "CASCADE_TOKEN": TOKEN}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def simulator_alone(tree: Path, logs: Path, work: Path, pace: float) -> float:
    """Wall seconds of the fake simulator run as the runner runs it, pausing `pace` seconds
    after each kernel's block, with its output going to /dev/null and nothing else of Cascade."""
    install = AccelSimInstall(tree)
    config = next(c for c in install.configs() if c.name == CONFIG)
    work.mkdir(exist_ok=True)
    install.prepare(config, work)
    env = {**os.environ, "CASCADE_FAKE_ACCELSIM_LOGS": str(logs), "CASCADE_FAKE_ACCELSIM_PACE": repr(pace)}
    command = install.command(config, work, TRACES / TRACE, env)
    started = time.perf_counter()
    subprocess.run(command.argv, env=command.env, cwd=command.cwd, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def simulator_pace(tree: Path, logs: Path, work: Path, seconds: float, kernels: int) -> tuple[float, float]:
    """The pause after each kernel's block that makes the fake take `seconds` alone, and the
    bare time it then took: a run at `seconds / kernels`, then one with the pause corrected by
    what that overshot (the fake's own start and its writing line by line when paced)."""
    pace = seconds / kernels
    overshoot = simulator_alone(tree, logs, work, pace) - seconds
    pace = max(0.0, pace - overshoot / kernels)
    return pace, simulator_alone(tree, logs, work, pace)


def main(size_mb: int, paced_kernels: int, simulator_mb_per_s: float | None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="cascade-runner-bench-"))
    try:
        tree = accelsim_tree(tmp / "accel-sim")
        logs = tmp / "logs"
        logs.mkdir()
        kernels = big_log(logs / LOG_NAME, size=size_mb * 1024 * 1024)
        size = (logs / LOG_NAME).stat().st_size
        grep_s = grep_seconds(logs / LOG_NAME)
        env = {**os.environ, "CASCADE_TOKEN": TOKEN, "CASCADE_FAKE_ACCELSIM_LOGS": str(logs)}
        burst_env, alone = env, None
        if simulator_mb_per_s is not None:
            pace, alone = simulator_pace(tree, logs, tmp / "alone", size / 1e6 / simulator_mb_per_s, kernels)
            burst_env = {**env, "CASCADE_FAKE_ACCELSIM_PACE": repr(pace)}
            print(f"the simulator alone (output to /dev/null), paced at {simulator_mb_per_s} MB/s: {alone:.2f} s, "
                  f"pausing {pace * 1e3:.2f} ms after each kernel's block")
        server = subprocess.Popen([PYTHON, "-m", "cascade_cli", "serve", "--port", "0", "--data-dir", str(tmp / "data"),
                                   "--accelsim-dir", str(tree), "--no-runner"], env=env, stdout=subprocess.DEVNULL, stderr=LOG)
        try:
            service = served(tmp / "data")
            # The worker logs in to the server's NATS with the data dir's password, given in its environment.
            nats_url = {"CASCADE_NATS_URL": event_log.live_nats_url(tmp / "data", service)}
            url, env = service.api_url, {**env, **nats_url}
            upload(url, TRACE)
            worker = subprocess.Popen([PYTHON, "-m", "cascade_cli", "worker", "--accelsim-dir", str(tree),
                                       "--slots", "1", "--work-dir", str(tmp / "worker")], env={**burst_env, **nats_url},
                                      stdout=subprocess.DEVNULL, stderr=LOG)
            try:
                time.sleep(2)
                sampler, served = Sampler(worker.pid), Sampler(server.pid)
                sampler.start()
                served.start()
                cpu_before = cpu_seconds(worker.pid)
                nats_pid = int(Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()[0])
                others_before = cpu_seconds(server.pid), cpu_seconds(nats_pid)
                started = time.perf_counter()
                run = request(url, "/api/runs", {"trace_id": "combo", "entries": [{"gpu_config": CONFIG, "count": 1}]})
                done = wait(url, run["id"], kernels, timeout=1800)  # type: ignore[index]
                elapsed = time.perf_counter() - started
                sim = done["sims"][0]
                created, began, ended = (datetime.fromisoformat(t).timestamp() for t in (done["created_at"], sim["started_at"], sim["finished_at"]))
                cpu = cpu_seconds(worker.pid) - cpu_before
                server_cpu, nats_cpu = cpu_seconds(server.pid) - others_before[0], cpu_seconds(nats_pid) - others_before[1]
                sampler.running = served.running = False
                print(f"output: {size / 1e6:.1f} MB, {kernels} kernels, every stat of each; "
                      f"grep -c ' = ' reads it at {size / 1e6 / grep_s:.0f} MB/s here (the machine's speed)")
                print(f"end to end (simulator stdout -> queryable kernels): {size / 1e6 / elapsed:.1f} MB/s ({elapsed:.1f} s)")
                print(f"  of which: created -> simulator running {began - created:.1f} s, running -> runner done {ended - began:.1f} s "
                      f"({size / 1e6 / (ended - began):.1f} MB/s), then until queryable {elapsed - (ended - created):.1f} s")
                if alone is not None:
                    print(f"  {elapsed / alone:.2f}x the simulator alone ({elapsed - alone:+.1f} s)")
                print(f"runner CPU: {cpu * 1e3 / (size / 1e6):.1f} ms per MB of output "
                      f"(a real kernel prints ~150 KB: {cpu / kernels * 1e3:.1f} ms per kernel here)")
                print(f"runner peak resident memory: {sampler.peak_kb / 1024:.1f} MB")
                print(f"resident memory MiB at the run's start, each quarter of it and its end: runner {sampler.curve(started, started + elapsed)}; "
                      f"cascade serve {served.curve(started, started + elapsed)}")
                print(f"CPU seconds meanwhile: runner {cpu:.1f}, cascade serve (projector, API) {server_cpu:.1f}, nats-server {nats_cpu:.1f}")
                print(f"cascade serve: {server_cpu * 1e3 / (size / 1e6):.1f} ms CPU per MB of output, peak resident memory {served.peak_kb / 1024:.1f} MB")
            finally:
                worker.terminate()
                worker.wait()
            # The paced run measures steady state: it starts once the burst above is folded in.
            print(f"write-ahead log folded into the database {quiet(tmp / 'data' / 'readmodel.duckdb.wal'):.1f} s after the burst")
            print(stored(tmp / "data"))
            print(log_download(url, sim["id"], server.pid, size))
            print(latency(url, tree, tmp, paced_kernels, env))
        finally:
            server.terminate()
            server.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def quiet(wal: Path, timeout: float = 300) -> float:
    """Wait until the server has folded its write-ahead log into the database file, which it
    does once the stream goes quiet with more than its `idle_checkpoint_at` in the log (a smaller
    one is left as it is: packed stats maps made the burst's log that small); returns how
    long that took."""
    started = time.perf_counter()
    while wal.exists() and wal.stat().st_size > DEFAULT_MEMORY.idle_checkpoint_at:
        assert time.perf_counter() - started < timeout, "the write-ahead log was never folded in"
        time.sleep(0.05)
    return time.perf_counter() - started


def stored(data: Path) -> str:
    """What the burst left on disk: the event stream's files and the read model's."""
    stream = sum(f.stat().st_size for d in (data / "jetstream").rglob("streams/CASCADE") for f in d.rglob("*") if f.is_file())
    model = sum(f.stat().st_size for f in data.glob("readmodel.duckdb*"))
    return f"on disk: the event stream {stream / 1e6:.1f} MB, the read model {model / 1e6:.1f} MB"


def log_download(url: str, sim_id: str, server_pid: int, size: int) -> str:
    """GET the sim's whole log: how fast, and what it costs the server."""
    cpu_before, started = cpu_seconds(server_pid), time.perf_counter()
    req = urllib.request.Request(f"{url}/api/sims/{sim_id}/log", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=600) as r:
        got = sum(len(chunk) for chunk in iter(lambda: r.read(1 << 20), b""))
    elapsed, cpu = time.perf_counter() - started, cpu_seconds(server_pid) - cpu_before
    assert got == size, f"the log route gave {got} bytes of a {size}-byte log"
    return f"log download: {got / 1e6:.1f} MB in {elapsed:.2f} s ({got / 1e6 / elapsed:.0f} MB/s), cascade serve CPU {cpu * 1e3 / (got / 1e6):.1f} ms per MB"


def latency(url: str, tree: Path, tmp: Path, kernels: int, env: dict[str, str]) -> str:
    logs = tmp / "logs-paced"
    logs.mkdir()
    big_log(logs / LOG_NAME, rounds=max(1, kernels // 3))
    times = tmp / "block-times.txt"
    paced_env = {**env, "CASCADE_FAKE_ACCELSIM_LOGS": str(logs), "CASCADE_FAKE_ACCELSIM_PACE": "0.1", "CASCADE_FAKE_ACCELSIM_BLOCK_TIMES": str(times)}
    worker = subprocess.Popen([PYTHON, "-m", "cascade_cli", "worker", "--accelsim-dir", str(tree),
                               "--slots", "1", "--work-dir", str(tmp / "worker-paced")], env=paced_env, stdout=subprocess.DEVNULL, stderr=LOG)
    arrivals: list[float] = []
    try:
        run = request(url, "/api/runs", {"trace_id": "combo", "entries": [{"gpu_config": CONFIG, "count": 1}]})
        req = urllib.request.Request(f"{url}/api/runs/{run['id']}/events", headers={"Authorization": f"Bearer {TOKEN}"})  # type: ignore[index]
        with urllib.request.urlopen(req, timeout=600) as stream:
            event = None
            for raw in stream:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "kernel":
                    arrivals.append(time.time())
    finally:
        worker.terminate()
        worker.wait()
    flushed = [float(t) for t in times.read_text().split()]
    delays = sorted((a - f) * 1e3 for a, f in zip(arrivals, flushed))
    p50, p99 = delays[len(delays) // 2], delays[min(len(delays) - 1, int(len(delays) * 0.99))]
    return f"paced at 10 kernels/s, {len(delays)} kernels: block flushed -> kernel on the event stream p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {delays[-1]:.1f} ms"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--paced-kernels", type=int, default=150)
    parser.add_argument("--simulator-mb-per-s", type=float, help="the fake simulator's pace (default: as fast as it can)")
    parser.add_argument("--python", default=sys.executable, help="the cascade processes' interpreter, e.g. a venv without the test extras, as deployed")
    args = parser.parse_args()
    PYTHON = args.python
    LOG = (OUT / "runner_bench.log").open("w")
    main(args.size_mb, args.paced_kernels, args.simulator_mb_per_s)
