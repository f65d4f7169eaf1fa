"""How long a run event stream takes to resume: the catch-up is folded from the run's history.

Starts `cascade serve` (no runner) in its own process on an embedded nats-server and appends,
as a runner does, a finished run of --sims sims, each with --heartbeats heartbeats carrying
--lines lines of a real Accel-Sim log, --kernels kernel results with stats maps of real size
(~950 keys, ~30 KB), six files and its success. Then, --repeat times each, over HTTP:

- a fresh stream (the snapshot of the finished run), for comparison;
- resumed from the run's first event, from the middle of the stream, and from inside its
  last sequence (one event to send): each reads the run's whole history from the log and
  folds it, so the time is what the fold costs, and what varies is how much is sent;
- resumed from its end: a 204, decided from the read model alone.

    .venv/bin/python bench/sse_resume_bench.py [--sims 20] [--heartbeats 200] [--lines 50] [--kernels 10] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import nats

from cascade_core import events as ev
from cascade_core.object_names import sim_file
from cascade_nats.store import EventStore
from runs_api_bench import AUTH, RUN, T0, _id, created, kernel, service
from tests.support import LOGS  # noqa: E402 - on the path runs_api_bench put it on

LOG = LOGS / "combo-vec-mm-xz__SM61_TITANX.log"
FILES = ("accelsim.log.gz", "exit-status.txt", "gpgpu_inst_stats.txt", "kernel-stats.csv", "perf_counter.csv.gz", "x.json")


def history(sims: int, heartbeats: int, lines: int, kernels: int) -> Iterator[list[ev.Event]]:
    """The run, one batch of events per sim after its creation."""
    yield created(sims, kernels)
    text = itertools.cycle(LOG.read_text().splitlines())
    every = max(1, heartbeats // max(kernels, 1))
    for i in range(sims):
        sim_id = f"sim-{i:03d}"
        common: dict[str, Any] = {"run_id": RUN, "sim_id": sim_id, "attempt": 1}
        at = T0 + timedelta(seconds=1)
        batch: list[ev.Event] = [
            ev.SimClaimed(id=_id(), at=at, runner_id="r", host="h", **common),
            ev.SimLaunched(id=_id(), at=at, launcher_ref=str(i), host="h", config_digests={}, **common),
        ]
        done = 0
        for h in range(heartbeats):
            at += timedelta(seconds=2)
            latest = ev.SimMetrics(gpu_tot_sim_cycle=1e3 * h, gpu_tot_sim_insn=3e3 * h, gpu_tot_ipc=3.0, sim_rate_ips=5e5)
            log = "\n".join(itertools.islice(text, lines))
            batch.append(
                ev.SimHeartbeat(id=_id(), at=at, kernels_done=done, current_kernel="k", latest=latest, first_line_seq=h * lines + 1, log=log, **common)
            )
            if h % every == every - 1 and done < kernels:
                batch.append(kernel(sim_id, done, at, stats=True))
                done += 1
        for name in FILES:
            object_name = sim_file(sim_id, 1, name)
            batch.append(ev.SimFileStored(id=_id(), at=at, name=name, size=100, content_type="text/plain", object_name=object_name, digest="d", **common))
        batch.append(ev.SimFinished(id=_id(), at=at, outcome="succeeded", exit_code=0, **common))
        yield batch


async def populate(nats_url: str, base: str, args: argparse.Namespace) -> tuple[int, int]:
    """Appends the run; returns how many events it has and their bytes."""
    nc = await nats.connect(nats_url)
    store = EventStore(nc)
    count = size = last = 0
    for batch in history(args.sims, args.heartbeats, args.lines, args.kernels):
        last = (await store.append_facts(batch, timeout=120.0))[-1]
        count += len(batch)
        size += sum(len(ev.encode(e)) for e in batch)
    await store.close()
    await nc.close()
    async with httpx.AsyncClient(base_url=base) as http:
        while (await http.get("/api/health")).json()["projected_seq"] < last:
            await asyncio.sleep(0.2)
    return count, size


async def stream(http: httpx.AsyncClient, last_id: str | None) -> tuple[float, list[str], int]:
    """Seconds until the stream ended, the ids it sent, and its status."""
    headers = {"Last-Event-ID": last_id} if last_id is not None else {}
    started = time.perf_counter()
    ids = []
    async with http.stream("GET", f"/api/runs/{RUN}/events", headers=headers) as response:
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                ids.append(line[4:])
    return time.perf_counter() - started, ids, response.status_code


async def measure(base: str, repeat: int) -> None:
    async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=120) as http:
        # Every event id of the run, from a resume after nothing of it.
        _, everything, _ = await stream(http, "0")
        cases = [
            ("fresh stream (snapshot of the finished run)", None),
            ("resumed from its first event", everything[0]),
            ("resumed from the middle", everything[len(everything) // 2]),
            ("resumed inside its last sequence", everything[-2]),
            ("resumed from its end (204)", everything[-1]),
        ]
        print(f"the run's stream: {len(everything):,} events")
        for name, last_id in cases:
            results = [await stream(http, last_id) for _ in range(repeat)]
            seconds = [r[0] for r in results]
            print(
                f"  {name:<46} median {statistics.median(seconds) * 1000:8.1f} ms   best {min(seconds) * 1000:8.1f} ms"
                f"   {len(results[0][1]):>6,} events, status {results[0][2]}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sims", type=int, default=20)
    parser.add_argument("--heartbeats", type=int, default=200)
    parser.add_argument("--lines", type=int, default=50, help="log lines per heartbeat")
    parser.add_argument("--kernels", type=int, default=10, help="kernel results per sim, with full stats maps")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with service() as (nats_url, base, _, _):
        count, size = asyncio.run(populate(nats_url, base, args))
        print(
            f"run of {args.sims} sims x {args.heartbeats} heartbeats ({args.lines} log lines each) and {args.kernels} kernels: "
            f"{count:,} events, {size / 1e6:.1f} MB"
        )
        asyncio.run(measure(base, args.repeat))

if __name__ == "__main__":
    main()
