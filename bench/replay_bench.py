"""Replay into a fresh DuckDB file, as `cascade replay --db` does (`replay.replay_file`), of a
stored log kept between runs, so that two versions of the code replay the very same stream.

    .venv/bin/python bench/replay_bench.py --store DIR [--facts 400000] [--kernels 2000 --stats 4000] [--repeat 3]

The first run with a new `--store` appends the log there: `--facts` of event_bench's small
runner facts (heartbeats with a log line, kernel results without a map, over 64 sims), then
`--kernels` kernel results of 40 sims whose stats maps hold `--stats` values each (the names
of a real SM7_QV100 map, values at random: stats_bench's). Later runs replay what is stored.
Beside them, the machine's own pace: `grep -c` over the stored blocks, and the stream read
with nothing done to it. Each replay is timed from the start to the file renamed into place; the embedded
nats-server syncs every 2 minutes (replay only reads). The process's peak resident memory is
its highest so far (filling a new store counts too).

The other code is measured by putting its checkout first on PYTHONPATH: this script uses
nothing but `projections.replay.replay_file` and the stores' public calls.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import nats

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO / "bench"))  # after PYTHONPATH, so that another checkout's code is the one measured

import event_bench  # noqa: E402
import stats_bench  # noqa: E402

from cascade_nats import subjects  # noqa: E402
from cascade_nats import server  # noqa: E402
from cascade_nats.store import EventStore  # noqa: E402
from projections.replay import replay_file  # noqa: E402

PASSWORD_FILE = "bench-password"


async def fill(store: EventStore, facts: int, kernels: int, stats: int) -> None:
    await store.ensure_stream()
    await store.append_facts(event_bench.run_created())
    for i in range(0, facts, 20_000):
        await store.append_facts(event_bench.facts(min(20_000, facts - i), i), timeout=60)
    if kernels:
        history = stats_bench.events(stats_bench.random_maps(stats_bench.real_names(stats), kernels))
        for i in range(0, len(history), 200):
            await store.append_facts(history[i : i + 200], timeout=60)


def grep_rate(store_dir: Path) -> float:
    """MB/s of `grep -a -c` over the stream's stored blocks: how fast this machine reads them."""
    blocks = sorted(str(p) for p in (store_dir / "js").rglob("*.blk"))
    started = time.perf_counter()
    subprocess.run(["grep", "-a", "-c", '"type"', *blocks], stdout=subprocess.DEVNULL, check=False)
    return sum(Path(b).stat().st_size for b in blocks) / 1e6 / (time.perf_counter() - started)


async def read_rate(store: EventStore) -> float:
    """Events/s of the stream read alone, as replay reads it (`EventStore.raw`), nothing decoded."""
    started, count = time.perf_counter(), 0
    async for frames in store.raw(subjects.ALL, 1, until_caught_up=True):
        count += len(frames)
    return count / (time.perf_counter() - started)


@contextlib.asynccontextmanager
async def opened(store_dir: Path) -> AsyncIterator[EventStore]:
    """The log kept in `store_dir` (an empty one the first time), its server running."""
    password_file = store_dir / PASSWORD_FILE
    store_dir.mkdir(parents=True, exist_ok=True)
    if not password_file.exists():
        password_file.write_text(secrets.token_urlsafe(24))
    with server.running(store_dir / "js", password=password_file.read_text(), sync_interval="2m") as nats_server:
        nc = await nats.connect(nats_server.url)
        store = EventStore(nc)
        try:
            yield store
        finally:
            await store.close()
            await nc.close()


async def main(store_dir: Path, facts: int, kernels: int, stats: int, repeat: int) -> None:
    new = not (store_dir / PASSWORD_FILE).exists()
    async with opened(store_dir) as store:
        if new:
            await fill(store, facts, kernels, stats)
        total = await store.last_seq()
        size = sum(p.stat().st_size for p in (store_dir / "js").rglob("*.blk"))
        print(f"grep -a -c over the stored blocks: {grep_rate(store_dir):,.0f} MB/s; the stream read alone: {await read_rate(store):,.0f} events/s", flush=True)
        for _ in range(repeat):
            with tempfile.TemporaryDirectory(prefix="cascade-replay-bench-") as tmp:
                started, cpu = time.perf_counter(), time.process_time()
                seq = await replay_file(store, Path(tmp) / "replay.duckdb")
                elapsed, used = time.perf_counter() - started, time.process_time() - cpu
            assert seq == total, (seq, total)
            print(
                f"replay into a fresh DuckDB ({total:,} events, {size / 1e6:,.0f} MB stored): {total / elapsed:>9,.0f} events/s, "
                f"{size / 1e6 / elapsed:,.1f} MB/s, {elapsed:.2f} s, CPU {used / total * 1e6:.2f} us per event, "
                f"peak RSS so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB",
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path, required=True, help="where the log is kept between runs")
    parser.add_argument("--facts", type=int, default=400_000)
    parser.add_argument("--kernels", type=int, default=0)
    parser.add_argument("--stats", type=int, default=4_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.store, args.facts, args.kernels, args.stats, args.repeat))
