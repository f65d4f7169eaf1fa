"""How fast `serve`'s audit of the log at start (`projections/log_audit.py`) reads it through:
small events appended to an embedded nats-server, then every sequence and subject read with
a headers-only consumer, looking for messages the store lost.

    .venv/bin/python bench/log_audit_bench.py [--events 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import nats

from cascade_core import events as ev
from cascade_nats import server
from cascade_nats.store import EventStore
from projections.log_audit import lost_up_to

BATCH = 5000


async def measure(events: int, store_dir: Path) -> None:
    with server.running(store_dir, sync_interval="2m") as running:
        nc = await nats.connect(running.url)
        store = EventStore(nc)
        await store.ensure_stream()
        last = 0
        for start in range(0, events, BATCH):
            batch = [ev.RunCancelRequested(id=f"e{i}", at=datetime.now(UTC), run_id=f"run-{i % 50}") for i in range(start, min(start + BATCH, events))]
            last = (await store.append_facts(batch))[-1]
        started = time.perf_counter()
        lost = await lost_up_to(store, last)
        elapsed = time.perf_counter() - started
        print(f"audited {last} events in {elapsed:.2f}s ({last / elapsed:,.0f} events/s), {len(lost)} lost")
        await store.close()
        await nc.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cascade-audit-bench-") as tmp:
        asyncio.run(measure(args.events, Path(tmp)))


if __name__ == "__main__":
    main()
