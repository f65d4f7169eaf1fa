"""How long a rebuild of the read model takes (`projections/rebuild.py`), and how reads fare
meanwhile: the event bench's runner facts are appended, a read model is built from them, then
the fold's version is bumped, as a developer does, and the read model is opened again, which
rebuilds it beside the old one and swaps it in.

    .venv/bin/python bench/rebuild_bench.py [--events 200000]

Measured: from opening the outdated read model until the rebuilt one answers reads (its
replay, the swap, the reopening), next to a plain replay of the same log into a fresh file;
and a small read (`SELECT count(*) FROM kernels`, on the old read model until the swap) every
20 ms throughout.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import nats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.event_bench import publisher_process, run_created  # noqa: E402

from cascade_nats import server  # noqa: E402
from cascade_nats.store import EventStore  # noqa: E402
from projections import fold  # noqa: E402
from projections.rebuild import ReadModel  # noqa: E402
from projections.replay import replay  # noqa: E402


def count_kernels(model: ReadModel) -> int:
    with model.reader() as con:
        (count,) = con.execute("SELECT count(*) FROM kernels").fetchone()  # type: ignore[misc]  # one row, always
        return int(count)


async def rebuild(store: EventStore, db: Path, last: int) -> tuple[float, list[float]]:
    """Seconds from opening the outdated read model until the rebuilt one answers reads, and
    the latency of each read made meanwhile."""
    started = time.perf_counter()
    model = await ReadModel.open(store, db)
    latencies: list[float] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(model.run)
        while model.rebuild is not None or model.projector.applied < last:
            asked = time.perf_counter()
            await anyio.to_thread.run_sync(count_kernels, model)
            latencies.append(time.perf_counter() - asked)
            await anyio.sleep(0.02)
        elapsed = time.perf_counter() - started
        tg.cancel_scope.cancel()
    model.close()
    return elapsed, latencies


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, server.running(Path(tmp) / "js") as nats_server:
        nc = await nats.connect(nats_server.url)
        try:
            store = EventStore(nc)
            await store.ensure_stream()
            await store.append_facts(run_created())
            await asyncio.to_thread(publisher_process, nats_server.url, n)
            last = await store.last_seq()

            db = Path(tmp) / "readmodel.duckdb"
            model = await ReadModel.open(store, db)
            await model.catch_up()
            model.close()

            fold.VERSION += 1  # what a developer does when the fold's meaning changes
            elapsed, latencies = await rebuild(store, db, last)

            started = time.perf_counter()
            await replay(store, Path(tmp) / "fresh.duckdb")
            replayed = time.perf_counter() - started
        finally:
            await nc.close()

    latencies.sort()
    print(f"events: {last:,}")
    print(f"rebuild, opened outdated -> rebuilt one answers: {elapsed:.2f} s ({last / elapsed:,.0f} events/s)")
    print(f"plain replay into a fresh file:                  {replayed:.2f} s ({last / replayed:,.0f} events/s)")
    print(
        f"reads meanwhile: {len(latencies)}, median {statistics.median(latencies) * 1000:.1f} ms, "
        f"p99 {latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)  # the rebuild's own lines
    asyncio.run(main(parser.parse_args().events))
