"""Event log throughput: raw pipelined publishing, end to end through the projector into
DuckDB, and replay into a fresh DuckDB, all against the embedded nats-server.

    .venv/bin/python bench/event_bench.py [--events 200000] [--sync-interval always|2m]

`--sync-interval` is the embedded server's (`cascade serve --nats-sync-interval`): `always`,
Cascade's default, syncs the store to disk on every write; `2m` is nats-server's own default.

The publisher runs in its own process (as the runner does); the projector runs here (as in
`cascade serve`). Events are small runner facts: heartbeats carrying one log line and kernel
results without stats maps, over 64 sims of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import nats

from cascade_core import events as ev
from cascade_host.heap import settle_heap
from cascade_nats import server
from cascade_nats.store import EventStore
from projections.projector import Projector, connect

SIMS = 64


def run_created() -> list[ev.Event]:
    at = datetime.now(UTC)
    sims = [ev.SimSpec(sim_id=f"sim-{i:03d}", gpu_config="SM7_QV100", replica=i) for i in range(SIMS)]
    created = ev.RunCreated(
        id=uuid.uuid4().hex, at=at, run_id="run-bench", trace_id="t", entries=[ev.ConfigCount(gpu_config="SM7_QV100", count=SIMS)],
        sims=sims, kernels_total=10**6,
    )
    claims = [ev.SimClaimed(id=uuid.uuid4().hex, at=at, run_id="run-bench", sim_id=s.sim_id, attempt=1, runner_id="r", host="h") for s in sims]
    return [created, *claims]


def facts(n: int, start: int = 0) -> list[ev.Event]:
    """Events `start` to `start + n` of the sims' lives: each publish continues where the
    previous one stopped, so every event is new to the projection (none takes the cheaper
    path of a repeated fact)."""
    at = datetime.now(UTC)
    out: list[ev.Event] = []
    for i in range(start, start + n):
        sim_id, k = f"sim-{i % SIMS:03d}", i // SIMS
        common = {"id": uuid.uuid4().hex, "at": at, "run_id": "run-bench", "sim_id": sim_id, "attempt": 1}
        if i % 2:
            out.append(
                ev.KernelFinished(
                    **common, kernel_index=k, uid=k + 1, name="_Z6vecAddIfEvPT_S1_S1_i", gpu_sim_cycle=6174,
                    gpu_sim_insn=19456, gpu_ipc=3.1513, sim_time_ns=5454.06,
                )
            )
        else:
            out.append(
                ev.SimHeartbeat(
                    **common, kernels_done=k, current_kernel="_Z6vecAddIfEvPT_S1_S1_i",
                    latest=ev.SimMetrics(gpu_tot_sim_cycle=6174.0, gpu_tot_sim_insn=19456.0, gpu_tot_ipc=3.15, sim_rate_ips=5e5),
                    first_line_seq=k + 1, log="gpu_sim_cycle = 6174",
                )
            )
    return out


async def publish(url: str, n: int, start: int) -> tuple[float, float]:
    """Publish events `start` to `start + n`; the rate, and the wall-clock time the first
    publish began (so the end-to-end clock leaves out this process's start-up)."""
    settle_heap()  # as a runner does when it starts
    nc = await nats.connect(url)
    store = EventStore(nc)
    events = facts(n, start)
    began = time.time()
    started = time.perf_counter()
    for i in range(0, n, 20_000):
        await store.append_facts(events[i : i + 20_000], timeout=60)
    elapsed = time.perf_counter() - started
    await store.close()
    await nc.close()
    return n / elapsed, began


def publisher_process(url: str, n: int, start: int = 0) -> tuple[float, float]:
    out = subprocess.run([sys.executable, __file__, "--publish", url, str(n), str(start)], capture_output=True, text=True, check=True)
    rate, began = out.stdout.split()
    return float(rate), float(began)


async def main(n: int, sync_interval: str) -> None:
    with tempfile.TemporaryDirectory() as tmp, server.running(Path(tmp) / "js", sync_interval=sync_interval) as nats_server:
        nc = await nats.connect(nats_server.url)
        store = EventStore(nc)
        await store.ensure_stream()
        await store.append_facts(run_created())
        size = len(ev.encode(facts(2)[0])), len(ev.encode(facts(2)[1]))

        raw_rate, _ = await asyncio.to_thread(publisher_process, nats_server.url, n)

        con = connect(Path(tmp) / "live.duckdb")
        projector = Projector(store, con)
        await projector.catch_up()
        task = asyncio.create_task(projector.run())
        first = await store.last_seq() + 1
        cpu = time.process_time()
        publish_rate, began = await asyncio.to_thread(publisher_process, nats_server.url, n, n)
        await projector.wait_for(first + n - 1, timeout=600)
        e2e_rate = n / (time.time() - began)
        projector_us = (time.process_time() - cpu) / n * 1e6
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        con.close()

        total = await store.last_seq()
        started, cpu = time.perf_counter(), time.process_time()
        replayed = Projector(store, connect(Path(tmp) / "replay.duckdb"))
        await replayed.catch_up()
        replay_rate = total / (time.perf_counter() - started)
        replay_us = (time.process_time() - cpu) / total * 1e6
        await nc.close()

    print(f"events per run: {n:,} (heartbeat {size[0]} B, kernel result {size[1]} B as JSON), sync_interval {sync_interval}")
    print(f"raw pipelined publish, no projector:     {raw_rate:>9,.0f} events/s")
    print(f"end to end (publish -> DuckDB queryable): {e2e_rate:>9,.0f} events/s  ({e2e_rate / raw_rate:.0%} of raw publish; publisher alongside: {publish_rate:,.0f}/s)")
    print(f"replay into a fresh DuckDB ({total:,} events): {replay_rate:>9,.0f} events/s")
    # CPU time of this process alone (the projector; not the publisher, not nats-server): on a
    # shared machine it varies less than the rates above.
    print(f"projector CPU per event: end to end {projector_us:.2f} us, replay {replay_us:.2f} us")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--publish"]:
        print(*asyncio.run(publish(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    else:
        parser = argparse.ArgumentParser()
        parser.add_argument("--events", type=int, default=200_000)
        parser.add_argument("--sync-interval", default=server.SYNC_ALWAYS, help="the embedded server's: always, or a duration such as 2m")
        args = parser.parse_args()
        asyncio.run(main(args.events, args.sync_interval))
