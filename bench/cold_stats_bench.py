"""What `kernel_stats` would cost as Parquet files beside the DuckDB file (a cold part, by
sim, zstd) instead of a DuckDB table: bytes per kernel, the time and memory to write a part,
and the queries' times over a view of the parts against the table. Measures a layout this
version does not have (issue 26, item 3), so that the one built is chosen from numbers.

    .venv/bin/python bench/cold_stats_bench.py [--rounds 13536] [--sims 4] [--keep DIR]

The combo trace's big log (`--rounds` of its 3 kernels) through the runner's report into one
sim's events (`kernel_bytes_bench`), through the projector's live path into a DuckDB file
(kept in --keep DIR, and used again from there); its `kernel_stats` cut by seq into --sims
parts, as a run of that many sims of --rounds * 3 kernels would be cut, each written by
DuckDB's COPY at the default 64 MiB budget and 2 threads. Then each query, best of 3, over
the table and over a view of the parts; last, what DuckDB's file keeps after its rows are
deleted (a part written, its rows gone from the table).
"""

from __future__ import annotations

import argparse
import resource
import shutil
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
QUERIES = {
    "README's L2 hit rate per kernel name": """SELECT k.name, count(DISTINCT k.seq) AS kernels,
        1 - sum(v.value) FILTER (WHERE n.name = 'L2_total_cache_misses') / sum(v.value) FILTER (WHERE n.name = 'L2_total_cache_accesses')
        FROM {t} v JOIN stat_names n ON n.id = v.stat JOIN kernels k ON k.seq = v.seq
        WHERE n.name IN ('L2_total_cache_accesses', 'L2_total_cache_misses') GROUP BY ALL ORDER BY ALL""",
    "a stat's median over every kernel": """SELECT median(v.value), count(*) FROM {t} v JOIN stat_names n ON n.id = v.stat
        WHERE n.name = 'L2_total_cache_accesses'""",
    "a per-unit stat's values, by kernel": """SELECT v.seq, n.name, v.value FROM {t} v JOIN stat_names n ON n.id = v.stat
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


def parts(con: duckdb.DuckDBPyConnection, sims: int, out: Path, row_group: int) -> tuple[list[Path], float, int]:
    """kernel_stats cut by seq into `sims` Parquet files of `row_group` rows a row group, in
    its stored order; the seconds taken, and the bytes written."""
    low, high = con.execute("SELECT min(seq), max(seq) FROM kernel_stats").fetchone() or (0, 0)
    edges = [low + (high - low + 1) * i // sims for i in range(sims + 1)]
    files = [out / f"part-{i}.parquet" for i in range(sims)]
    started = time.perf_counter()
    for path, first, after in zip(files, edges, edges[1:]):
        con.execute(
            f"COPY (SELECT {COLUMNS} FROM kernel_stats WHERE seq >= {first} AND seq < {after}) "  # noqa: S608 - numbers of ours
            f"TO '{path}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {row_group})"
        )
    return files, time.perf_counter() - started, sum(p.stat().st_size for p in files)


def best_of_3(con: duckdb.DuckDBPyConnection, query: str, seq: int) -> float:
    times = []
    for _ in range(3):
        started = time.perf_counter()
        con.execute(query, {"seq": seq} if "$seq" in query else {}).fetchall()
        times.append(time.perf_counter() - started)
    return min(times)


def main(rounds: int, sims: int, keep: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="cascade-cold-") as tmp:
        db = built(rounds, keep or Path(tmp))
        kernels = rounds * 3
        size = db.stat().st_size
        print(f"{kernels} kernels; the read model {size / kernels:,.0f} B a kernel (the file, after a checkpoint)")
        con = duckdb.connect(str(db), read_only=True)
        con.execute("SET memory_limit = '64MiB'; SET threads = 2")
        for row_group in (122_880, 500_000):
            out = Path(tmp) / f"parts-{row_group}"
            out.mkdir()
            try:
                _, seconds, written = parts(con, sims, out, row_group)
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
                print(f"parts of {row_group:,} rows a row group: {written / kernels:,.0f} B a kernel, "
                      f"written in {seconds:.1f} s ({seconds * 1e3 / kernels:.2f} ms a kernel), peak RSS {rss} MiB")
            except duckdb.OutOfMemoryException as err:
                print(f"parts of {row_group:,} rows a row group: out of the budget ({str(err).splitlines()[0]})")
                continue
        seq = int((con.execute("SELECT max(seq) FROM kernels").fetchone() or (0,))[0])
        print("| query | the table | a view of the parts (122,880 rows a row group) |")
        print("|---|--:|--:|")
        con.execute(f"CREATE OR REPLACE TEMP VIEW cold AS SELECT * FROM read_parquet({[str(f) for f in sorted((Path(tmp) / 'parts-122880').glob('*.parquet'))]!r})")
        for name, query in QUERIES.items():
            table, view = (best_of_3(con, query.format(t=t), seq) for t in ("kernel_stats", "cold"))
            print(f"| {name} | {table * 1e3:,.0f} ms | {view * 1e3:,.0f} ms |")
        con.close()
        emptied = Path(tmp) / "emptied.duckdb"
        shutil.copy(db, emptied)
        with duckdb.connect(str(emptied)) as writer:
            writer.execute("DELETE FROM kernel_stats")
            writer.execute("CHECKPOINT")
            free = writer.execute("SELECT free_blocks * block_size FROM pragma_database_size()").fetchone() or (0,)
        print(f"the file with kernel_stats' rows deleted, after a checkpoint: {emptied.stat().st_size / kernels:,.0f} B a kernel, "
              f"of it free {free[0] / kernels:,.0f} B")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=13536)
    parser.add_argument("--sims", type=int, default=4)
    parser.add_argument("--keep", type=Path, default=None)
    main(**vars(parser.parse_args()))
