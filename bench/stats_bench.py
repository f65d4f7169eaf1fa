"""The long table of kernel stats (`kernel_stats`): writing it, and reading it back.

    .venv/bin/python bench/stats_bench.py [--kernels 10000] [--stats 2000] [--repeat 20]

Builds a read model the way the projector does, from kernel results whose stats maps hold
`--stats` values each (the first names of a real SM7_QV100 map, values drawn at random), for
40 sims over 4 configs, kernels of 10 names; then measures:

1. writing: kernel results folded and written per second, with and without their maps
   becoming rows, against writing the maps as a column of JSON text instead; and the long
   table's own rows per second (`stats_rows.rows` and the insert alone);
2. one kernel's full map, and one sim's: made again from their rows, and, as the other way
   to keep them, read from a column of their JSON text;
3. an aggregate over every row: the L2 hit rate per config and kernel name, with names in
   `stat_names` (joined) and, for comparison, in a DuckDB ENUM column;
4. the `stats` catalogue;
5. the stats routes (`projections/queries/stats.py`): a run's catalogue of names, everything
   and a search, checked against counting distinct kernel indices over every row; and a
   stat's values per kernel and config, one stat and a per-unit table (`[*]`).
"""

from __future__ import annotations

import argparse
import functools
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cascade_core import events as ev  # noqa: E402
from cascade_core import packed_stats  # noqa: E402
from cascade_sim import logparse  # noqa: E402
from projections import projector, stats_rows  # noqa: E402
from projections.database import incoming  # noqa: E402
from projections.queries import stats, stats_maps  # noqa: E402
from projections.queries.runs import run_summary  # noqa: E402
from projections.rows import KernelRow  # noqa: E402
from tests.support import LOGS, stats_json  # noqa: E402

CONFIGS = ["SM61_TITANX", "SM7_QV100", "SM86_RTX3070", "SM61_TITANX_B"]
SIMS_PER_CONFIG = 10
KERNEL_NAMES = [f"_Z{i}kernel_{i}v" for i in range(10)]
BATCH = 64
L2 = ("L2_total_cache_accesses", "L2_total_cache_misses")

HIT_RATE = """SELECT s.gpu_config, k.name, 1 - sum(v.value) FILTER (WHERE n.name = 'L2_total_cache_misses')
        / sum(v.value) FILTER (WHERE n.name = 'L2_total_cache_accesses') AS l2_hit_rate
    FROM kernel_stats v JOIN stat_names n ON n.id = v.stat JOIN kernels k ON k.seq = v.seq JOIN sims s ON s.id = k.sim_id
    WHERE n.name IN ('L2_total_cache_accesses', 'L2_total_cache_misses')
    GROUP BY s.gpu_config, k.name"""
HIT_RATE_ENUM = """SELECT s.gpu_config, k.name, 1 - sum(v.value) FILTER (WHERE v.stat = 'L2_total_cache_misses')
        / sum(v.value) FILTER (WHERE v.stat = 'L2_total_cache_accesses') AS l2_hit_rate
    FROM kernel_stats_enum v JOIN kernels k ON k.seq = v.seq JOIN sims s ON s.id = k.sim_id
    WHERE v.stat IN ('L2_total_cache_accesses', 'L2_total_cache_misses')
    GROUP BY s.gpu_config, k.name"""


def real_names(count: int) -> list[str]:
    """The first `count` names of a real SM7_QV100 map, the L2 totals among them."""
    log = (LOGS / "combo-vec-mm-xz__SM7_QV100.log").read_text()
    start = log.index("kernel_name = ")
    end = log.index("\n", log.index("\ngpgpu_silicon_slowdown = ", start) + 1)
    names = [n for n in logparse.parse_stats(log[start:end]) if n not in ("kernel_name", *L2)]
    return ["kernel_name", *L2, *names[: count - 3]]


Map = dict[str, float | str]


def random_maps(names: list[str], kernels: int) -> list[Map]:
    """Maps of these names, numbers at random (a few non-finite, as real maps have)."""
    rng = random.Random(13)
    maps = []
    for k in range(kernels):
        stats: dict[str, float | str] = {"kernel_name": KERNEL_NAMES[k % len(KERNEL_NAMES)]}
        accesses = float(rng.randrange(1, 100_000))
        stats[L2[0]], stats[L2[1]] = accesses, float(rng.randrange(0, int(accesses) + 1))
        for name in names[3:]:
            stats[name] = math.nan if rng.random() < 0.02 else float(rng.randrange(0, 10_000))
        maps.append(stats)
    return maps


def events(maps: list[Map]) -> list[ev.AnyEvent]:
    at = datetime.now(UTC)
    sims = [ev.SimSpec(sim_id=f"sim-{c}-{r}", gpu_config=config, replica=r) for c, config in enumerate(CONFIGS) for r in range(SIMS_PER_CONFIG)]
    entries = [ev.ConfigCount(gpu_config=config, count=SIMS_PER_CONFIG) for config in CONFIGS]
    out: list[ev.AnyEvent] = [ev.RunCreated(id="run", at=at, run_id="run-1", trace_id="t", entries=entries, sims=sims, kernels_total=len(maps))]
    for s in sims:
        out.append(ev.SimClaimed(id=f"claim-{s.sim_id}", at=at, run_id="run-1", sim_id=s.sim_id, attempt=1, runner_id="r", host="h"))
        out.append(
            ev.SimLaunched(id=f"launch-{s.sim_id}", at=at, run_id="run-1", sim_id=s.sim_id, attempt=1, launcher_ref="1", host="h", config_digests={})
        )
    for k, stats in enumerate(maps):
        sim = sims[k % len(sims)]
        out.append(
            ev.KernelFinished(
                id=f"k-{k}", at=at, run_id="run-1", sim_id=sim.sim_id, attempt=1, kernel_index=k // len(sims), uid=k // len(sims) + 1,
                name=KERNEL_NAMES[k % len(KERNEL_NAMES)], gpu_sim_cycle=1000, gpu_sim_insn=2000, gpu_ipc=2.0, sim_time_ns=1000.0,
                stats=packed_stats.from_mapping(stats), stats_naming=2,
            )
        )  # fmt: skip
    return out


def build(db: Path, history: list[ev.AnyEvent], *, stats: bool) -> float:
    """Fold and write `history` in batches, as a replay does; seconds spent on its kernels."""
    con = projector.connect(db)
    cache = projector.RowCache()
    kernels_at = next(i for i, e in enumerate(history) if isinstance(e, ev.KernelFinished))
    projector.apply(con, list(enumerate(history[:kernels_at], 1)), cache=cache)
    write_stats = projector._write_stats
    if not stats:
        projector._write_stats = lambda *args: None
    try:
        started = time.perf_counter()
        items = list(enumerate(history, 1))[kernels_at:]
        for i in range(0, len(items), BATCH):
            projector.apply(con, items[i : i + BATCH], cache=cache)
        elapsed = time.perf_counter() - started
    finally:
        projector._write_stats = write_stats
    con.execute("CHECKPOINT")
    con.close()
    return elapsed


def timed(run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and best of `repeat` runs, in ms, after one to warm up."""
    run()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times), min(times)


def maps_as_text(db: Path, maps: list[Map], seqs: list[int]) -> float:
    """The other way to keep the maps: as their JSON text, a row per kernel, as the read model
    did before kernel_stats. Writes them in batches, as the projector would; returns seconds."""
    con = projector.connect(db)
    con.execute("CREATE TABLE IF NOT EXISTS kernel_maps (seq BIGINT, stats VARCHAR)")
    started = time.perf_counter()
    for i in range(0, len(maps), BATCH):
        batch = pa.table({"seq": pa.array(seqs[i : i + BATCH], pa.int64()), "stats": pa.array([stats_json(m).decode() for m in maps[i : i + BATCH]])})
        con.execute("BEGIN TRANSACTION")
        with incoming(con, batch):
            con.execute("INSERT INTO kernel_maps SELECT * FROM incoming")
        con.execute("COMMIT")
    elapsed = time.perf_counter() - started
    con.execute("CHECKPOINT")
    con.close()
    return elapsed


def main(kernels: int, stat_count: int, repeat: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="cascade-stats-bench-"))
    try:
        maps = random_maps(real_names(stat_count), kernels)
        history = events(maps)
        rows = kernels * stat_count
        print(f"{kernels:,} kernels x {stat_count:,} stats = {rows:,} rows; maps of {sum(len(stats_json(m)) for m in maps) / kernels / 1e3:.0f} KB as JSON")

        without = build(tmp / "without.duckdb", history, stats=False)
        with_rows = build(tmp / "readmodel.duckdb", history, stats=True)
        con = projector.connect(tmp / "readmodel.duckdb")
        seqs = [s for (s,) in con.execute("SELECT seq FROM kernels ORDER BY seq").fetchall()]
        con.close()
        as_text = maps_as_text(tmp / "readmodel.duckdb", maps, seqs)
        print(f"fold and write kernel results, maps not kept: {kernels / without:,.0f} kernels/s ({without:.1f} s)")
        print(f"fold and write kernel results, maps as rows:  {kernels / with_rows:,.0f} kernels/s ({with_rows:.1f} s); "
              f"the rows {(with_rows - without) / kernels * 1e3:.2f} ms per kernel, {rows / (with_rows - without) / 1e6:.2f} M rows/s")
        print(f"the maps as text instead (a column of JSON):  {as_text / kernels * 1e3:.2f} ms per kernel")
        long_table_rate(tmp, maps)

        con = projector.connect(tmp / "readmodel.duckdb")
        cursor = con.cursor()
        names = stats_maps.Names()
        picks = random.Random(7).sample(seqs, repeat + 1)
        turn = iter(range(10**9))

        def from_rows() -> object:
            return stats_maps.kernel_map(cursor, picks[next(turn) % len(picks)], names)

        def from_text() -> object:
            return cursor.execute("SELECT stats FROM kernel_maps WHERE seq = ?", [picks[next(turn) % len(picks)]]).fetchall()

        ((text,),) = cursor.execute("SELECT stats FROM kernel_maps WHERE seq = ?", [picks[0]]).fetchall()
        assert stats_maps.kernel_map(cursor, picks[0], names) == text.encode(), "a map made again is the map as it came"
        for label, run, times in (("made again from its rows", from_rows, repeat), ("as JSON text in a column", from_text, 5)):
            median, best = timed(run, times)
            print(f"one kernel's full map, {label}: median {median:.2f} ms, best {best:.2f} ms")
        sim = seqs[: len(seqs) // 40 * 40 : 40]  # the kernels of one sim (every 40th result)
        started = time.perf_counter()
        stats_maps.kernel_maps(cursor, sim, names)
        made = time.perf_counter() - started
        started = time.perf_counter()
        cursor.execute("SELECT stats FROM kernel_maps WHERE seq IN (SELECT unnest(?))", [sim]).fetchall()
        print(f"one sim's {len(sim)} maps ({len(sim) * stat_count:,} values) made again: {made * 1e3:.0f} ms "
              f"({len(sim) * stat_count / made / 1e6:.2f} M values/s); as text: {(time.perf_counter() - started) * 1e3:.0f} ms")

        median, best = timed(lambda: cursor.execute(HIT_RATE).fetchall(), repeat)
        print(f"L2 hit rate per config and kernel name over {rows:,} rows, names joined from stat_names: median {median:.0f} ms, best {best:.0f} ms")
        enum_started = time.perf_counter()
        con.execute("CREATE TYPE stat_name AS ENUM (SELECT name FROM stat_names ORDER BY id)")
        con.execute("CREATE TABLE kernel_stats_enum AS SELECT v.seq, n.name::stat_name AS stat, v.value, v.text "
                    "FROM kernel_stats v JOIN stat_names n ON n.id = v.stat")  # fmt: skip
        print(f"  (the same rows with an ENUM of the names: made in {time.perf_counter() - enum_started:.1f} s)")
        median, best = timed(lambda: cursor.execute(HIT_RATE_ENUM).fetchall(), repeat)
        print(f"L2 hit rate per config and kernel name, names an ENUM column: median {median:.0f} ms, best {best:.0f} ms")
        assert sorted(cursor.execute(HIT_RATE).fetchall()) == sorted(cursor.execute(HIT_RATE_ENUM).fetchall())
        median, best = timed(lambda: cursor.execute("SELECT * FROM stats").fetchall(), max(3, repeat // 4))
        print(f"the stats catalogue (every name per config, and how many kernels have it): median {median:.0f} ms, best {best:.0f} ms")
        stats_routes(cursor, repeat)
        cursor.close()
        con.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# Per config and name, the kernel indices whose kernels have it, counted over every row.
DISTINCT_INDICES = """SELECT n.name, s.gpu_config, count(DISTINCT k.kernel_index)
    FROM kernel_stats v JOIN kernels k ON k.seq = v.seq JOIN sims s ON s.id = k.sim_id AND s.attempt = k.attempt JOIN stat_names n ON n.id = v.stat
    WHERE s.run_id = 'run-1' GROUP BY ALL"""


def stats_routes(cursor: duckdb.DuckDBPyConnection, repeat: int) -> None:
    """The stats routes' reads, as the API calls them."""
    run = run_summary(cursor, "run-1")
    assert run is not None
    everything = stats.stat_catalogue(cursor, run, "")
    counted: dict[str, dict[str, int]] = {}
    for name, config, kernels in cursor.execute(DISTINCT_INDICES).fetchall():
        counted.setdefault(name, {})[config] = kernels
    assert all(n.kernels == counted[n.name] for n in everything.names), "the catalogue counts as every row does"
    median, best = timed(lambda: cursor.execute(DISTINCT_INDICES).fetchall(), max(3, repeat // 4))
    print(f"a run's names per config with their kernel indices, counted distinct over every row: median {median:.0f} ms, best {best:.0f} ms")
    for label, q in (("every name", ""), ("a search, Miss_rate", "Miss_rate")):
        median, best = timed(functools.partial(stats.stat_catalogue, cursor, run, q), repeat)
        print(f"GET /api/runs/{{id}}/stats, {label}: median {median:.0f} ms, best {best:.0f} ms")
    for name in ("L2_total_cache_accesses", "L1D_cache_core[*].Miss_rate"):
        answer = stats.stat_values(cursor, run, name)
        median, best = timed(functools.partial(stats.stat_values, cursor, run, name), repeat if stats.ANY_INDEX not in name else max(3, repeat // 4))
        print(f"GET /api/runs/{{id}}/stats/values?name={name}: {len(answer.rows):,} rows{' (truncated)' if answer.truncated else ''}, "
              f"median {median:.0f} ms, best {best:.0f} ms")


def long_table_rate(tmp: Path, maps: list[Map]) -> None:
    """`stats_rows.rows` and the insert, on their own, over a batch at a time."""
    con = projector.connect(tmp / "rate.duckdb")
    names = stats_rows.StatNames()
    kernels = [
        KernelRow(sim_id="sim", attempt=1, kernel_index=i, uid=i + 1, name="k", gpu_sim_cycle=1, gpu_sim_insn=1, gpu_ipc=1.0, sim_time_ns=1.0, stats=packed_stats.from_mapping(m), seq=i + 1)
        for i, m in enumerate(maps[: BATCH * 20])
    ]
    made = inserted = 0.0
    count = 0
    for i in range(0, len(kernels), BATCH):
        batch = kernels[i : i + BATCH]
        started = time.perf_counter()
        rows = stats_rows.rows(con, batch, {k.seq for k in batch}, names)
        between = time.perf_counter()
        con.execute("BEGIN TRANSACTION")
        if names.added:
            projector._insert(con, "stat_names", names.added, dedupe=None)
        with incoming(con, rows):
            con.execute("INSERT INTO kernel_stats_hot SELECT * FROM incoming")
        con.execute("COMMIT")
        names.committed()
        made += between - started
        inserted += time.perf_counter() - between
        count += rows.num_rows
    con.close()
    print(f"the long table alone, {BATCH} kernels a batch: maps to Arrow rows {count / made / 1e6:.2f} M rows/s, "
          f"insert {count / inserted / 1e6:.2f} M rows/s, both {count / (made + inserted) / 1e6:.2f} M rows/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=10_000)
    parser.add_argument("--stats", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    main(args.kernels, args.stats, args.repeat)
