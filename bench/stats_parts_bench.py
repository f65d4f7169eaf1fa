"""`kernel_stats` as the read model keeps it (a small table and Parquet parts,
`projections/stats_parts.py`) against the same rows as one DuckDB table, as it was kept
before: bytes per kernel, and the queries' times.

    .venv/bin/python bench/stats_parts_bench.py [--rounds 13536] [--keep DIR]

The combo trace's big log (`--rounds` of its 3 kernels) through the runner's report into one
sim's events (`kernel_bytes_bench`), through the projector's live path into a read model
(kept in --keep DIR, and used again from there), at the default 64 MiB budget. Its rows are
then copied into one table in a DuckDB file of their own, in seq order, and each query
runs best of 3 over each, in one process at 64 MiB and 2 threads.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(REPO / "bench"))
from kernel_bytes_bench import as_sent  # noqa: E402
from projector_bench import project, sim_events  # noqa: E402

from cascade_core import events as ev  # noqa: E402
from cascade_nats import subjects  # noqa: E402

COLUMNS = "seq, stat, value, text, printed_total, sample"
# The read model attached as `model`, the one table as `kernel_stats`.
QUERIES = {
    "README's L2 hit rate per kernel name": """SELECT k.name, count(DISTINCT k.seq) AS kernels,
        1 - sum(v.value) FILTER (WHERE n.name = 'L2_total_cache_misses') / sum(v.value) FILTER (WHERE n.name = 'L2_total_cache_accesses')
        FROM {t} v JOIN model.stat_names n ON n.id = v.stat JOIN model.kernels k ON k.seq = v.seq
        WHERE n.name IN ('L2_total_cache_accesses', 'L2_total_cache_misses') GROUP BY ALL ORDER BY ALL""",
    "a stat's median over every kernel": """SELECT median(v.value), count(*) FROM {t} v JOIN model.stat_names n ON n.id = v.stat
        WHERE n.name = 'L2_total_cache_accesses'""",
    "a per-unit stat's values, by kernel": """SELECT v.seq, n.name, v.value FROM {t} v JOIN model.stat_names n ON n.id = v.stat
        WHERE n.name LIKE 'L2_cache_bank[%].Miss_rate' ORDER BY ALL LIMIT 50000""",
    "one kernel's map": "SELECT stat, value, text FROM {t} WHERE seq = $seq",
    "every row counted": "SELECT count(*), count(value) FROM {t}",
}


def built(rounds: int, keep: Path) -> Path:
    """The read model of one sim of `rounds` rounds of the combo log, made once in `keep`."""
    db = keep / f"combo-{rounds}.duckdb"
    if not db.exists():
        with tempfile.TemporaryDirectory(prefix="cascade-cold-") as tmp:
            events = as_sent(sim_events(0, Path(tmp), rounds=rounds)[0])
            project([(seq, subjects.of(e).encode(), ev.encode(e)) for seq, e in enumerate(events, 1)], 16, db)
    return db


def best_of_3(con: duckdb.DuckDBPyConnection, query: str, seq: int) -> float:
    times = []
    for _ in range(3):
        started = time.perf_counter()
        con.execute(query, {"seq": seq} if "$seq" in query else {}).fetchall()
        times.append(time.perf_counter() - started)
    return min(times)


def main(rounds: int, keep: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="cascade-parts-") as tmp:
        db = built(rounds, keep or Path(tmp))
        kernels = rounds * 3
        folder = db.with_name(db.name + ".parts")
        parts = sorted(folder.glob("*.parquet"))
        in_parts = sum(p.stat().st_size for p in parts)
        print(f"{kernels:,} kernels: the DuckDB file {db.stat().st_size / kernels:,.0f} B a kernel, "
              f"{len(parts)} parts {in_parts / kernels:,.0f} B a kernel")
        table = Path(tmp) / "table.duckdb"
        con = duckdb.connect(str(table))
        con.execute("SET memory_limit = '64MiB'; SET threads = 2")
        con.execute(f"ATTACH '{db}' AS model (READ_ONLY)")
        started = time.perf_counter()
        con.execute(f"CREATE TABLE kernel_stats AS SELECT {COLUMNS} FROM model.kernel_stats")  # parts in seq order, then the table
        con.execute("CHECKPOINT")
        print(f"the same rows as one DuckDB table (made in {time.perf_counter() - started:.0f} s): {table.stat().st_size / kernels:,.0f} B a kernel")
        seq = int(con.execute("SELECT max(seq) FROM model.kernels").fetchall()[0][0])
        print("| query | one table | the read model's view (table and parts) |")
        print("|---|--:|--:|")
        for name, query in QUERIES.items():
            times = [best_of_3(con, query.format(t=t), seq) for t in ("kernel_stats", "model.kernel_stats")]
            print(f"| {name} | {times[0] * 1e3:,.0f} ms | {times[1] * 1e3:,.0f} ms |")
        con.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=13536)
    parser.add_argument("--keep", type=Path, default=None)
    main(**vars(parser.parse_args()))
