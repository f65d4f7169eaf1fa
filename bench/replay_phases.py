"""Where a replay's CPU goes: each phase of `projector.apply` timed on its own, over a log
that `replay_bench.py --store DIR` keeps.

    .venv/bin/python bench/replay_phases.py --store DIR [--repeat 2]

The stream is read whole first (`EventStore.raw`, as the projector reads it), then cut into
batches of `MAX_BATCH` and each batch decoded (`parking.sort_out`), its rows loaded, folded
(without live changes where the fold can leave them out, as a replay does), written and
committed into a fresh DuckDB file, one phase after the other, in one thread; CPU time per
event of each phase, the mean over `--repeat` turns. Another checkout's code is measured by
putting it first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from replay_bench import opened  # this directory's, first on sys.path when run as a script

from cascade_host.heap import settle_heap
from cascade_nats import subjects
from cascade_nats.firehose import Frame
from projections import parking
from projections import projector as P
from projections.fold import fold


def fold_as_replay() -> Callable[..., object]:
    if "changes" in inspect.signature(fold).parameters:
        return lambda rows, items: fold(rows, items, changes=False)
    return fold


class Clock:
    def __init__(self) -> None:
        self.spent: Counter[str] = Counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.process_time()
        try:
            yield
        finally:
            self.spent[name] += time.process_time() - started


def project(frames: list[Frame], db: Path, clock: Clock) -> None:
    replayed = fold_as_replay()
    con = P.connect(db)
    cache = P.RowCache()
    for start in range(0, len(frames), P.MAX_BATCH):
        with clock.phase("decode (sort_out)"):
            batch = parking.sort_out(frames[start : start + P.MAX_BATCH])
        with clock.phase("load rows"):
            con.execute("BEGIN TRANSACTION")
            rows = P.load(con, batch.items, cache)
        with clock.phase("fold"):
            folded = replayed(rows, batch.items)
        with clock.phase("write (Arrow, inserts)"):
            P.write(con, folded, batch.last_seq, batch.parked, cache)
        with clock.phase("commit"):
            con.execute("COMMIT")
            cache.update(folded.rows)
    with clock.phase("final CHECKPOINT"):
        con.execute("CHECKPOINT")
        con.close()


async def main(store_dir: Path, repeat: int) -> None:
    settle_heap()
    async with opened(store_dir) as store:
        clock, count = Clock(), 0
        for _ in range(repeat):
            frames: list[Frame] = []
            with clock.phase("read (firehose)"):
                async for batch in store.raw(subjects.ALL, 1, until_caught_up=True):
                    frames.extend(batch)
            count = len(frames)
            with tempfile.TemporaryDirectory(prefix="cascade-replay-phases-") as tmp:
                project(frames, Path(tmp) / "replay.duckdb", clock)
    for name, spent in clock.spent.items():
        print(f"{name:24s} {spent / repeat / count * 1e6:8.2f} us per event")
    print(f"{'in all':24s} {sum(clock.spent.values()) / repeat / count * 1e6:8.2f} us per event ({count:,} events)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path, required=True, help="a log replay_bench.py --store made")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.store, args.repeat))
