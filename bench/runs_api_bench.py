"""The Runs API on a large run: reads, the kernel stream, and live event latency.

Starts `cascade serve` in its own process on an embedded nats-server, and builds a run of
--sims sims with --kernels finished kernels each by appending events as a runner does: one
sim's kernels carry full stats maps of real size (~950 keys, ~30 KB), the others none. All
sims but the last then succeed; the last keeps running. Then, over HTTP, next to the trivial
route GET /api/gpu-configs measured the same way:

- GET /api/runs/{id} and /api/runs/{id}/comparison: median and p99 of --requests calls; the
  comparison also computed afresh, after each of 4 x --repeat new kernels (its cache is kept
  only while the kernels table is unchanged);
- GET /api/runs/{id}/kernels: rows per second over the whole list as bytes arrive (the client
  parses it only afterwards, to count), median and best of --repeat;
- live events: --clients clients on GET /api/runs/{id}/events while the running sim finishes
  --events more kernels one at a time; the delay from starting each append to each client
  reading that kernel's event, p50 and p99 over all clients and events.

    .venv/bin/python bench/runs_api_bench.py [--sims 64] [--kernels 2000] [--clients 100] [--events 200] [--gap-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import nats

from cascade_core import events as ev
from cascade_core import packed_stats
from cascade_nats import server
from cascade_nats.store import EventStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support import TREE  # noqa: E402 - the shared Accel-Sim tree, wherever this checkout is

TOKEN = "bench-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CONFIG, CLOCK_MHZ = "SM86_RTX3070", 1132.0
RUN = "run-bench"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _id() -> str:
    return uuid.uuid4().hex


def stats_map(uid: int) -> dict[str, float | str]:
    """About 950 keys and 30 KB, as Accel-Sim prints per kernel."""
    stats: dict[str, float | str] = {"kernel_name": f"_Z6kernelILi{uid}EEvPf", "kernel_launch_uid": float(uid)}
    for i in range(948):
        stats[f"L2_cache_stats_breakdown[GLOBAL_ACC_R][HIT_{i:04d}]"] = float(i * uid % 9973) + 0.25
    return stats


def kernel(sim_id: str, index: int, at: datetime, *, stats: bool) -> ev.KernelFinished:
    cycles = 5000 + index % 977
    return ev.KernelFinished(
        id=_id(), at=at, run_id=RUN, sim_id=sim_id, attempt=1, kernel_index=index, uid=index + 1,
        name=f"_Z6kernelILi{index % 50}EEvPf", gpu_sim_cycle=cycles, gpu_sim_insn=cycles * 3, gpu_ipc=3.0,
        sim_time_ns=cycles / CLOCK_MHZ * 1000, stats=packed_stats.from_mapping(stats_map(index + 1)) if stats else None,
    )


def created(sims: int, kernels: int) -> list[ev.Event]:
    """The run's trace and the run, of `sims` sims named sim-000 on."""
    trace = {"trace_id": "bench-trace"}
    return [
        ev.TraceUploadStarted(id=_id(), at=T0, content_type="application/x-tar", **trace),
        ev.TraceReady(
            id=_id(), at=T0, trace_gpu_arch="sm_86", kernel_count=kernels, bytes=1, suggested_sim_config=CONFIG,
            has_real_timing=False, has_step_timeline=False, **trace,
        ),
        ev.RunCreated(
            id=_id(), at=T0, run_id=RUN, trace_id="bench-trace", entries=[ev.ConfigCount(gpu_config=CONFIG, count=sims)],
            sims=[ev.SimSpec(sim_id=f"sim-{i:03d}", gpu_config=CONFIG, replica=i) for i in range(sims)], kernels_total=kernels,
        ),
    ]


def history(sims: int, kernels: int) -> Iterator[list[ev.Event]]:
    """The run, in batches of events: created, then each sim's life."""
    yield created(sims, kernels * 2)
    for i in range(sims):
        sim_id, at = f"sim-{i:03d}", T0 + timedelta(seconds=i)
        common = {"run_id": RUN, "sim_id": sim_id, "attempt": 1}
        batch: list[ev.Event] = [
            ev.SimClaimed(id=_id(), at=at, runner_id="r", host="h", **common),
            ev.SimLaunched(id=_id(), at=at, launcher_ref=str(i), host="h", config_digests={}, **common),
        ]
        for k in range(kernels):
            batch.append(kernel(sim_id, k, at, stats=i == 0))
            if len(batch) >= 2000 or (i == 0 and len(batch) >= 100):
                yield batch
                batch = []
        latest = ev.SimMetrics(gpu_tot_sim_cycle=1e6, gpu_tot_sim_insn=3e6, gpu_tot_ipc=3.0, sim_rate_ips=5e5)
        batch.append(ev.SimHeartbeat(id=_id(), at=at + timedelta(seconds=1), kernels_done=kernels, current_kernel="k", latest=latest, **common))
        if i < sims - 1:
            batch.append(ev.SimFinished(id=_id(), at=at + timedelta(seconds=1), outcome="succeeded", exit_code=0, **common))
        yield batch


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(data: Path, nats_url: str, port: int) -> subprocess.Popen[bytes]:
    cascade = Path(sys.executable).parent / "cascade"
    env = {**os.environ, "CASCADE_TOKEN": TOKEN, "CASCADE_NATS_URL": nats_url}  # the URL carries a password: not in argv
    args = [str(cascade), "serve", "--no-runner", "--data-dir", str(data), "--port", str(port), "--accelsim-dir", str(TREE)]
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health").status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("cascade serve did not start")


@contextlib.contextmanager
def service() -> Iterator[tuple[str, str, subprocess.Popen[bytes], Path]]:
    """`cascade serve` (no runner) on an embedded nats-server, in a temp dir, until the block
    ends: the NATS URL, the API's base URL, the server's process and its data dir."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so the server and nats-server are stopped
    with tempfile.TemporaryDirectory() as tmp, server.running(Path(tmp) / "jetstream") as nats_server:
        port = free_port()
        process = start_server(Path(tmp) / "data", nats_server.url, port)
        try:
            yield nats_server.url, f"http://127.0.0.1:{port}", process, Path(tmp) / "data"
        finally:
            process.terminate()
            process.wait(30)


async def populate(nats_url: str, base: str, sims: int, kernels: int) -> float:
    nc = await nats.connect(nats_url)
    store = EventStore(nc)
    started = time.perf_counter()
    last = 0
    for batch in history(sims, kernels):
        last = (await store.append_facts(batch, timeout=120.0))[-1]
    await nc.close()
    async with httpx.AsyncClient(base_url=base) as http:
        while (await http.get("/api/health")).json()["projected_seq"] < last:
            await asyncio.sleep(0.2)
    return time.perf_counter() - started


async def timings(http: httpx.AsyncClient, path: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        response = await http.get(path)
        response.raise_for_status()
        out.append(time.perf_counter() - t)
    return out


def ms(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


def report(name: str, values: list[float]) -> None:
    print(f"  {name:<52} median {statistics.median(values) * 1000:8.2f} ms   p99 {ms(values, 0.99):8.2f} ms")


async def reads(nats_url: str, base: str, n: int, repeat: int, sims: int, kernels: int) -> None:
    async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=60) as http:
        await timings(http, f"/api/runs/{RUN}", 20)  # warm up
        print("reads (one client, sequential, keep-alive)")
        report("GET /api/gpu-configs (trivial)", await timings(http, "/api/gpu-configs", n))
        report(f"GET /api/runs/{{id}} ({sims} sims)", await timings(http, f"/api/runs/{RUN}", n))
        report(f"GET /api/runs/{{id}}/comparison ({kernels} rows, unchanged run)", await timings(http, f"/api/runs/{RUN}/comparison", n))
        # Each time after the running sim finished one more kernel: computed afresh.
        nc = await nats.connect(nats_url)
        store = EventStore(nc)
        cold = []
        for k in range(repeat * 4):
            [seq] = await store.append_facts([kernel(f"sim-{sims - 1:03d}", kernels + k, T0, stats=False)])
            while (await http.get("/api/health")).json()["projected_seq"] < seq:
                await asyncio.sleep(0.005)
            cold += await timings(http, f"/api/runs/{RUN}/comparison", 1)
        await nc.close()
        report("GET /api/runs/{id}/comparison (after each new kernel)", cold)
        rates, seconds = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            async with http.stream("GET", f"/api/runs/{RUN}/kernels") as response:
                body = b"".join([chunk async for chunk in response.aiter_bytes()])
            seconds.append(time.perf_counter() - t)
            rows = len(json.loads(body))
            rates.append(rows / seconds[-1])
        print(
            f"  GET /api/runs/{{id}}/kernels ({rows:,} rows, {len(body) / 1e6:.1f} MB)   "
            f"median {statistics.median(rates):,.0f} rows/s ({statistics.median(seconds) * 1000:.0f} ms), best {max(rates):,.0f} rows/s"
        )
        trivial = await timings(http, "/api/gpu-configs", n)
        print(f"    next to it, the trivial route: {1 / statistics.median(trivial):,.0f} requests/s")


async def sse_kernel_ids(host: str, port: int, path: str, ready: asyncio.Semaphore, want: int, out: dict[int, float]) -> None:
    """A lean SSE client (plain asyncio; chunked HTTP/1.1): records when each `kernel` event's
    id arrives, releases `ready` once the snapshot is in, returns after `want` kernels."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n".encode())
    while await reader.readline() not in (b"\r\n", b""):
        pass  # status line and headers
    buffer = b""
    try:
        while len(out) < want:
            size = int((await reader.readline()).strip(), 16)
            buffer += await reader.readexactly(size + 2)
            now = time.perf_counter()
            *messages, buffer = buffer.split(b"\r\n\r\n")
            for message in messages:
                if b"event: snapshot" in message:
                    ready.release()
                elif b"event: kernel" in message:
                    out[int(message.split(b"id: ", 1)[1].split(b".", 1)[0])] = now  # id <seq>.<k>
    finally:
        writer.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def live_events(nats_url: str, base: str, server_pid: int, clients: int, events: int, gap_s: float, sims: int, kernels: int) -> None:
    sent: dict[int, float] = {}
    received: list[dict[int, float]] = [{} for _ in range(clients)]
    ready = asyncio.Semaphore(0)
    host, port = base.removeprefix("http://").split(":")
    tasks = [asyncio.create_task(sse_kernel_ids(host, int(port), f"/api/runs/{RUN}/events", ready, events, got)) for got in received]
    for _ in range(clients):
        await ready.acquire()
    nc = await nats.connect(nats_url)
    store = EventStore(nc)
    cpu = cpu_seconds(server_pid)
    for k in range(events):
        event = kernel(f"sim-{sims - 1:03d}", kernels + k, T0 + timedelta(days=1), stats=False)
        t = time.perf_counter()
        [seq] = await store.append_facts([event])
        sent[seq] = t
        await asyncio.sleep(gap_s)
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    cpu = cpu_seconds(server_pid) - cpu
    await nc.close()
    async with httpx.AsyncClient(base_url=base, headers=AUTH) as http:
        trivial = await timings(http, "/api/gpu-configs", 200)
    delays = [got[seq] - t for got in received for seq, t in sent.items() if seq in got]
    missing = clients * events - len(delays)
    print(f"live events ({clients} clients, {events} kernel results appended one at a time, {gap_s * 1000:.0f} ms apart)")
    print(
        f"  append -> every client has the event               p50 {ms(delays, 0.5):8.2f} ms   p99 {ms(delays, 0.99):8.2f} ms"
        f"   max {ms(delays, 1.0):.2f} ms   missing {missing}"
    )
    print(f"  server CPU per appended kernel result (projecting it, sending it to every client): {cpu / events * 1000:.1f} ms")
    report("GET /api/gpu-configs round trip (trivial)", trivial)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sims", type=int, default=64)
    parser.add_argument("--kernels", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--gap-ms", type=float, default=50.0, help="between two appended kernel results")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with service() as (nats_url, base, process, data):
        took = asyncio.run(populate(nats_url, base, args.sims, args.kernels))
        db = (data / "readmodel.duckdb").stat().st_size
        print(f"run of {args.sims} sims x {args.kernels} kernels appended and projected in {took:.1f} s (read model {db / 1e6:.0f} MB)")
        asyncio.run(reads(nats_url, base, args.requests, args.repeat, args.sims, args.kernels))
        asyncio.run(live_events(nats_url, base, process.pid, args.clients, args.events, args.gap_ms / 1000, args.sims, args.kernels + args.repeat * 4))


if __name__ == "__main__":
    main()
