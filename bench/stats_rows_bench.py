"""What a kernel's stats map costs to write as rows of `kernel_stats`, alone: the projector's
`stats_rows.rows` (the map to Arrow columns) and DuckDB's insert of them, per MB of log.

    .venv/bin/python bench/stats_rows_bench.py [--size-mb 50] [--kernels 8,128] [--repeat 3]

The kernel results are those of `projector_bench.py`'s sim (the combo trace's real log made
--size-mb long), their maps packed as the runner packs them; each transaction takes --kernels
of them, into a fresh read model each turn; the best turn's CPU is reported. The other code is
measured by running this from its checkout (its directory first on sys.path).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cascade_core import events as ev  # noqa: E402
from projections import projector, stats_rows  # noqa: E402
from projections.database import incoming  # noqa: E402
from projections.rows import KernelRow  # noqa: E402

sys.path.insert(1, str(REPO / "bench"))
from projector_bench import sim_events  # noqa: E402


def kernel_rows(events: list[ev.Event]) -> list[KernelRow]:
    """The sim's kernel results as the fold's kernels rows, by seq from 1."""
    results = [e for e in events if isinstance(e, ev.KernelFinished) and e.stats is not None]
    return [
        KernelRow(sim_id="s", attempt=1, kernel_index=i, uid=i + 1, name=e.name, gpu_sim_cycle=1, gpu_sim_insn=1, gpu_ipc=1.0,
                  sim_time_ns=1.0, stats=e.stats, seq=i + 1)
        for i, e in enumerate(results)
    ]


def write(kernels: list[KernelRow], per: int, db: Path) -> tuple[float, float]:
    """CPU seconds making the rows and inserting them, `per` kernels a transaction."""
    con = projector.connect(db)
    names = stats_rows.StatNames()
    made = inserted = 0.0
    try:
        for i in range(0, len(kernels), per):
            part = kernels[i : i + per]
            started = time.process_time()
            con.execute("BEGIN")
            rows = stats_rows.rows(con, part, {k.seq for k in part}, names)
            between = time.process_time()
            with incoming(con, rows):
                con.execute("INSERT INTO kernel_stats_hot SELECT * FROM incoming")
            con.execute("COMMIT")
            made += between - started
            inserted += time.process_time() - between
    finally:
        con.close()
    return made, inserted


def main(size_mb: int, kernels: str, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="cascade-stats-rows-bench-") as tmp:
        events, log_bytes = sim_events(size_mb, Path(tmp))
        rows = kernel_rows(events)
        mb = log_bytes / 1e6
        print(f"{mb:.1f} MB of log: {len(rows)} kernel results with maps")
        for per in (int(k) for k in kernels.split(",")):
            turns = [write(rows, per, Path(tmp) / f"readmodel-{per}-{turn}.duckdb") for turn in range(repeat)]
            made, inserted = min(turns, key=sum)
            print(f"  {per} kernels a transaction: rows {made * 1e3 / mb:.2f} + insert {inserted * 1e3 / mb:.2f} ms CPU per MB of log")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=50)
    parser.add_argument("--kernels", default="8,128")
    parser.add_argument("--repeat", type=int, default=3)
    main(**vars(parser.parse_args()))
