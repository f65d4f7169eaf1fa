"""A campaign at the simulator's real speed on a 3-node JetStream cluster, and how many such
sims at once one `cascade serve` keeps up with.

    .venv/bin/python bench/campaign_bench.py campaign [--sims 1000] [--kernels 9] [--workers 3] [--slots 8] [--pace 1.1]
    .venv/bin/python bench/campaign_bench.py capacity [--levels 16,32,48,64,80,96,128] [--kernels 45] [--workers 3] [--pace 1.1]

Both run what an operator runs: three nats-servers clustered on loopback (tests/nats_cluster.py),
`cascade serve --no-runner` and `cascade worker` processes given all three with --nats-url
(tests/faults/cluster.py), the combo trace uploaded, its sims on SM61_TITANX (every shared
trace is sm_61, which runs on that config only). The fake simulator replays the real log of
that pair with its kernels repeated to --kernels (runner_bench's big_log), 54 KB of output and
3,814 stat values a kernel, sleeping --pace seconds after each kernel's stats block; the runner
sends a heartbeat every 2 s besides. A real kernel prints ~150 KB (9,232 values on SM7_QV100)
every few seconds: 1.1 s per 54 KB is the same output, and about as many values, per second
and sim, in 2.7 times as many kernel results (so per event the bench asks more than a real sim).

campaign: one run of --sims sims on --workers workers of --slots slots. Reported: the wall
time; dispatch latency from the events' `at` (queued -> launched, which for a campaign larger
than its slots is mostly waiting for one, so also slot freed -> the next launch on that runner);
the projector's lag (the stream's last sequence minus the read model's, from /api/health once a
second); every process's resident memory over the run and open file descriptors at the start
and the end, and its CPU time.

capacity: for each level N, a run of N sims all running at once (the workers have the slots);
over the time all N run, the lag sampled once a second. serve keeps up when the lag does not
grow (its least-squares slope is under 2 % of the rate events arrive at) and stays under 5 s of
events; the sims run at real speed while their kernels arrive at 90 % of the paced rate or more
(on 2 cores the sims' own processes compete with serve). Levels rise until either fails.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.runner_bench import LOG_NAME, big_log, cpu_seconds  # noqa: E402
from cascade_core import events as ev  # noqa: E402
from cascade_nats.subject_tokens import subject_token  # noqa: E402
from cascade_nats import subjects  # noqa: E402
from cascade_nats.access import parse  # noqa: E402
from cascade_nats.connect import connect  # noqa: E402
from cascade_nats.store import EventStore  # noqa: E402
from tests.faults.cluster import Cluster, rss_mib, wait_for  # noqa: E402
from tests.nats_cluster import NatsCluster  # noqa: E402

CONFIG = "SM61_TITANX"  # the one config an sm_61 trace may run on, and every shared trace is sm_61
TRACE = "combo-vec-mm-xz"
PER_ENTRY = 64  # the most sims a run's entry may ask for


class Process(NamedTuple):
    name: str
    pid: int


class Usage(NamedTuple):
    rss_mib: float
    fds: int
    cpu_s: float


def busy_cores() -> float:
    """CPU seconds the whole machine has spent not idle (every process: the sims, other work)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def usage(pid: int) -> Usage:
    return Usage(rss_mib(pid), len(os.listdir(f"/proc/{pid}/fd")), cpu_seconds(pid))


class Lag(NamedTuple):
    t: float  # time.monotonic()
    stream_seq: int
    projected_seq: int

    @property
    def behind(self) -> int:
        return self.stream_seq - self.projected_seq


class Sampler(threading.Thread):
    """Once a second: the projector's lag, from the service's health; and each process's
    resident memory."""

    def __init__(self, cluster: Cluster, processes: list[Process]) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.processes = processes
        self.lags: list[Lag] = []
        self.rss: dict[Process, list[tuple[float, float]]] = {p: [] for p in processes}  # (time.monotonic(), MiB)
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            try:
                status, health = self.cluster.health()
            except OSError:
                continue
            if status == 200 and health["stream_seq"] is not None:
                self.lags.append(Lag(time.monotonic(), health["stream_seq"], health["projected_seq"]))
            for process in self.processes:
                self.rss[process].append((time.monotonic(), rss_mib(process.pid)))

    def between(self, start: float, end: float) -> list[Lag]:
        return [lag for lag in self.lags if start <= lag.t <= end]

    def rss_at(self, process: Process, t: float) -> float:
        """The process's resident memory in the first sample at or after `t` (the last if none is)."""
        return next((mib for at, mib in self.rss[process] if at >= t), self.rss[process][-1][1])

    def peak(self, process: Process) -> float:
        return max(mib for _, mib in self.rss[process])


def p99(values: list[float] | list[int]) -> float:
    """The 99th percentile, by nearest rank."""
    return sorted(values)[math.ceil(len(values) * 0.99) - 1]


def percentiles(values: list[float]) -> str:
    if not values:
        return "none"
    return f"p50 {statistics.median(values):.2f} s, p99 {p99(values):.2f} s, max {max(values):.2f} s (n={len(values)})"


@contextmanager
def campaign_cluster(tmp: Path, workers: int, slots: int, pace: float, logs: Path) -> Iterator[tuple[Cluster, list[Process]]]:
    """The 3 nats-servers, `cascade serve` and `workers` workers on them, the trace uploaded,
    every worker announced; and the processes to watch."""
    nats = NatsCluster(tmp / "nats")
    nats.start()
    cluster = Cluster(tmp / "cascade", pace_s=pace, lease_s=30, nats_url=nats.url)
    try:
        served = cluster.serve(runner=False)
        cluster.upload(TRACE, trace_id="combo")
        for i in range(workers):
            cluster.worker(f"w{i}", slots=slots, CASCADE_FAKE_ACCELSIM_LOGS=str(logs))
        wait_for(lambda: cluster.health()[1]["runners"] == workers, 60, "the workers never announced themselves")
        processes = [Process("serve", served.process.pid)]
        processes += [Process(name, worker.pid) for name, worker in cluster.workers.items()]
        processes += [Process(f"nats-server {node.name}", node.process.pid) for node in nats.nodes if node.process is not None]
        yield cluster, processes
    finally:
        cluster.close()
        nats.stop()


def poll(condition: Callable[[], Any], interval: float, timeout: float, message: str) -> Any:
    """`condition()` once it is truthy, asked every `interval` seconds (not tests' 0.1 s: each
    ask is a query the service answers, and its CPU time is measured here)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, message
        time.sleep(interval)
    return value


def caught_up(cluster: Cluster, timeout: float = 600) -> float:
    """Waits until the read model holds the stream's last event; returns how long that took."""
    started = time.monotonic()
    poll(lambda: (h := cluster.health()[1])["stream_seq"] is not None and h["projected_seq"] >= h["stream_seq"], 0.5, timeout, "the projector never caught up")
    return time.monotonic() - started


async def life_events(nats_url: str, run_id: str) -> list[ev.Event]:
    """The run's launch requests and its sims' life events (claimed, launched, finished), from the stream."""
    nc = await connect(parse(nats_url))
    try:
        store = EventStore(nc)
        requests = f"{subjects.PREFIX}.run.{subject_token(run_id)}.sim.*.queued.*"
        return [stored.event for subject in (requests, subjects.run_lives(run_id)[0]) async for stored in store.read(subject)]
    finally:
        await nc.close()


def dispatch(events: list[ev.Event], slots: int) -> tuple[list[float], list[float]]:
    """Seconds from each sim's launch request to its launch; and, per runner, from a slot
    freed (a sim of its finished) to the next launch that took it."""
    queued = {e.sim_id: e.at for e in events if isinstance(e, ev.SimQueued)}
    launched = [e for e in events if isinstance(e, ev.SimLaunched)]
    runner_of = {e.sim_id: e.runner_id for e in launched}
    waits = [(e.at - queued[e.sim_id]).total_seconds() for e in launched]
    launches: dict[str | None, list[datetime]] = defaultdict(list)
    finishes: dict[str | None, list[datetime]] = defaultdict(list)
    for launch in launched:
        launches[launch.runner_id].append(launch.at)
    for finish in events:
        if isinstance(finish, ev.SimFinished):
            finishes[runner_of.get(finish.sim_id)].append(finish.at)
    refills: list[float] = []
    for runner, unsorted in launches.items():
        ats, freed = sorted(unsorted), sorted(finishes[runner])
        # The k-th launch past the first `slots` took the slot the (k - slots)-th finish freed.
        refills += [(ats[k] - freed[k - slots]).total_seconds() for k in range(slots, len(ats)) if k - slots < len(freed)]
    return waits, refills


def lag_line(lags: list[Lag]) -> str:
    behind = [lag.behind for lag in lags]
    if not behind:
        return "no samples"
    return f"median {statistics.median(behind):.0f}, p99 {p99(behind):.0f}, max {max(behind)} events ({len(behind)} samples)"


def usage_table(sampler: Sampler, start: dict[Process, Usage], end: dict[Process, Usage], began: float, ended: float) -> str:
    """Each process's memory at the start, at each quarter of the time between `began` and
    `ended`, and at the end; its open files at the start and the end; its CPU time between."""
    quarters = [began + (ended - began) * q / 4 for q in (1, 2, 3)]
    lines = ["| process | RSS MiB: start, 1/4, 1/2, 3/4, end (peak) | open fds: start, end | CPU s |", "|---|---|---|---|"]
    for p in sampler.processes:
        a, b = start[p], end[p]
        rss = ", ".join(f"{mib:.0f}" for mib in (a.rss_mib, *(sampler.rss_at(p, t) for t in quarters), b.rss_mib))
        lines.append(f"| {p.name} | {rss} ({sampler.peak(p):.0f}) | {a.fds}, {b.fds} | {b.cpu_s - a.cpu_s:.1f} |")
    return "\n".join(lines)


def run_of(cluster: Cluster, sims: int) -> str:
    """A run of `sims` sims of the trace on CONFIG, in as many entries as that takes."""
    counts = [min(PER_ENTRY, sims - n) for n in range(0, sims, PER_ENTRY)]
    run = cluster.api("POST", "/api/runs", {"trace_id": "combo", "entries": [{"gpu_config": CONFIG, "count": c} for c in counts]})
    return str(run["id"])


def sim_log(tmp: Path, kernels: int) -> tuple[Path, int]:
    """A directory holding the combo log with its kernels repeated to about `kernels`, for the
    fake simulator to replay; and how many kernels it has."""
    logs = tmp / "logs"
    logs.mkdir()
    return logs, big_log(logs / LOG_NAME, rounds=max(1, kernels // 3))


def campaign(sims: int, kernels: int, workers: int, slots: int, pace: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="cascade-campaign-bench-"))
    try:
        logs, per_sim = sim_log(tmp, kernels)
        with campaign_cluster(tmp, workers, slots, pace, logs) as (cluster, processes):
            sampler = Sampler(cluster, processes)
            start = {p: usage(p.pid) for p in processes}
            load = os.getloadavg()
            sampler.start()
            began = time.monotonic()
            run_id = run_of(cluster, sims)
            run = poll(lambda: (r := cluster.run(run_id))["state"] != "active" and r, 5, 3600, "the run never ended")
            ended = time.monotonic()
            drained = caught_up(cluster)
            sampler.stopping.set()
            sampler.join()
            end = {p: usage(p.pid) for p in processes}
            asked = time.perf_counter()
            cluster.run(run_id)
            detail_s = time.perf_counter() - asked
            events = asyncio.run(life_events(cluster.nats_url, run_id))
            waits, refills = dispatch(events, slots)
            outcomes = dict(Counter(s["state"] for s in run["sims"]))
            kernels = sum(s["kernels_done"] for s in run["sims"])
            # From the events, not the polls (every 5 s): the first launch request to the last sim's end.
            wall = (max(e.at for e in events if isinstance(e, ev.SimFinished)) - min(e.at for e in events if isinstance(e, ev.SimQueued))).total_seconds()
            print(f"campaign: {sims} sims x {per_sim} kernels ({CONFIG}, 54 KB of output a kernel, {pace:g} s apart) on {workers} workers x {slots} slots, "
                  f"3-node cluster; load average before {load[0]:.1f}, after {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
            print(f"run {run['state']} ({outcomes}), {kernels} kernels; wall time {wall:.1f} s ({sims / wall * 60:.0f} sims/min), "
                  f"nominal {math.ceil(sims / (workers * slots)) * per_sim * pace:.0f} s; read model caught up {drained:.1f} s after the run's end was seen")
            print(f"queued -> launched: {percentiles(waits)}")
            print(f"slot freed -> next sim launched on it: {percentiles(refills)}")
            print(f"projector lag (stream last seq - read model seq, sampled each second): {lag_line(sampler.between(began, ended))}; "
                  f"{sampler.lags[-1].stream_seq if sampler.lags else '?'} events in the stream")
            print(f"(the bench polled the run's detail every 5 s: {detail_s * 1e3:.0f} ms an answer, for {sims} sims)")
            print(usage_table(sampler, start, end, began, ended))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def slope(lags: list[Lag]) -> float:
    """Least-squares growth of the lag, events per second."""
    ts = [lag.t for lag in lags]
    mean_t, mean_b = statistics.fmean(ts), statistics.fmean(lag.behind for lag in lags)
    var = sum((t - mean_t) ** 2 for t in ts)
    return sum((lag.t - mean_t) * (lag.behind - mean_b) for lag in lags) / var if var else 0.0


def capacity(levels: list[int], kernels: int, pace: float, workers: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="cascade-capacity-bench-"))
    try:
        logs, per_sim = sim_log(tmp, kernels)
        slots = math.ceil(max(levels) / workers)
        with campaign_cluster(tmp, workers, slots, pace, logs) as (cluster, processes):
            print(f"capacity: sims of {per_sim} kernels ({CONFIG}, 54 KB of output a kernel, {pace:g} s apart), all at once, "
                  f"on {workers} workers x {slots} slots, 3-node cluster, {os.cpu_count()} cores")
            sampler = Sampler(cluster, processes)
            start = {p: usage(p.pid) for p in processes}
            sampler.start()
            time.sleep(10)
            idle = (cpu_seconds(processes[0].pid) - start[processes[0]].cpu_s) / 10
            print(f"serve with no sims, answering the bench's health request each second: {idle:.2f} CPU s/s")
            print("| sims at once | load avg | events/s in | lag slope | lag median / max | kernels/s (nominal) | queued -> launched | "
                  "CPU s/s: serve, workers, 3 nats, whole machine | serve keeps up | sims at real speed |")
            print("|---|---|---|---|---|---|---|---|---|---|")
            began, kept, why = time.monotonic(), 0, "the levels ran out"
            for n in levels:
                keeps_up, real_speed = level(cluster, processes, sampler, n, per_sim, pace, slots)
                if not (keeps_up and real_speed):
                    why = f"at {n}: " + ("the projector's lag grew" if not keeps_up else "the machine slowed the sims below their pace")
                    break
                kept = n
            caught_up(cluster)
            sampler.stopping.set()
            sampler.join()
            print(f"the last level at real speed that serve kept up with: {kept} sims at once ({why})")
            print(usage_table(sampler, start, {p: usage(p.pid) for p in processes}, began, time.monotonic()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def level(cluster: Cluster, processes: list[Process], sampler: Sampler, n: int, per_sim: int, pace: float, slots: int) -> tuple[bool, bool]:
    """One level: n sims at once, from when the last launched until the first finished.
    Whether the projector kept up; whether the sims ran at their paced speed."""
    caught_up(cluster)
    load = os.getloadavg()[0]
    run_id = run_of(cluster, n)

    def running() -> dict[str, Any] | None:
        run = cluster.run(run_id)
        states = [s["state"] for s in run["sims"]]
        return run if states.count("running") == n or run["state"] != "active" else None

    window_start = poll(running, 1, 600, f"{n} sims never all ran")
    t0, cpu0, busy0 = time.monotonic(), {p: cpu_seconds(p.pid) for p in processes}, busy_cores()
    k0 = sum(s["kernels_done"] for s in window_start["sims"])

    def first_finished() -> dict[str, Any] | None:
        run = cluster.run(run_id)
        return run if any(s["state"] != "running" for s in run["sims"]) else None

    window_end = poll(first_finished, 2, per_sim * pace * 3 + 600, "no sim finished")
    t1, cpu1, busy1 = time.monotonic(), {p: cpu_seconds(p.pid) for p in processes}, busy_cores()
    k1 = sum(s["kernels_done"] for s in window_end["sims"])
    poll(lambda: cluster.run(run_id)["state"] != "active", 2, 3600, "the run never ended")
    lags = sampler.between(t0, t1)
    seconds = t1 - t0
    rate = (lags[-1].stream_seq - lags[0].stream_seq) / (lags[-1].t - lags[0].t) if len(lags) > 1 else 0.0
    grows = slope(lags) if len(lags) > 2 else 0.0
    behind = [lag.behind for lag in lags] or [0]
    keeps_up = len(lags) > 2 and grows <= 0.02 * rate and max(behind) <= 5 * rate
    # Sims the machine slowed (their kernels later than paced) are no longer real-speed sims.
    real_speed = (k1 - k0) / seconds >= 0.9 * n / pace
    events = asyncio.run(life_events(cluster.nats_url, run_id))
    waits, _ = dispatch(events, slots)
    used = {p.name: (cpu1[p] - cpu0[p]) / seconds for p in processes}
    workers_cpu = sum(c for name, c in used.items() if name.startswith("w"))
    nats_cpu = sum(c for name, c in used.items() if name.startswith("nats"))
    print(f"| {n} | {load:.1f} | {rate:.0f} | {grows:+.1f} events/s | {statistics.median(behind):.0f} / {max(behind)} | "
          f"{(k1 - k0) / seconds:.1f} ({n / pace:.1f}) | {percentiles(waits)} | "
          f"{used['serve']:.2f}, {workers_cpu:.2f}, {nats_cpu:.2f}, {(busy1 - busy0) / seconds:.2f} | {'yes' if keeps_up else 'no'} | {'yes' if real_speed else 'no'} |", flush=True)
    return keeps_up, real_speed


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    modes = parser.add_subparsers(dest="mode", required=True)
    one = modes.add_parser("campaign")
    one.add_argument("--sims", type=int, default=1000)
    one.add_argument("--slots", type=int, default=8, help="slots per worker")
    one.add_argument("--kernels", type=int, default=9, help="kernels per sim (a multiple of 3)")
    many = modes.add_parser("capacity")
    many.add_argument("--levels", default="16,32,48,64,80,96,128", help="sims at once, comma-separated, rising")
    many.add_argument("--kernels", type=int, default=45, help="kernels per sim (a multiple of 3)")
    for mode in (one, many):
        mode.add_argument("--workers", type=int, default=3)
        mode.add_argument("--pace", type=float, default=1.1, help="seconds between a sim's kernels")
    args = parser.parse_args()
    if args.mode == "campaign":
        campaign(args.sims, args.kernels, args.workers, args.slots, args.pace)
    else:
        capacity([int(n) for n in args.levels.split(",")], args.kernels, args.pace, args.workers)
