"""The read model for people: README's worked queries, `cascade sql` and `cascade export`, on
real projected runs: the fake simulator replays the combo trace's real SM61_TITANX log
through the real runner, and every number is checked against the log itself. The samples are
loaded, as on a fresh install: the queries leave them out."""

from __future__ import annotations

import importlib
import io
import json
import math
import re
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import msgspec
import pyarrow as pa
import pyarrow.parquet
import pytest

from cascade_api.models import SqlAnswer
from cascade_cli import main as cli
from cascade_sim import logparse
from projections import tables, version
from tests.cascade_http.live import COPY, LiveServer, live_with_copy
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.support import LOGS, stats_json, wait_until

TOKEN = "t"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
README = Path(__file__).parents[2] / "README.md"
EXAMPLE_RUNS = ("run-5d61b7c1ff41", "run-8de3220aa1c7")  # the run ids README's queries name


class World(msgspec.Struct):
    live: LiveServer
    runs: tuple[str, str]  # the first on SM61_TITANX and COPY, the second on SM61_TITANX


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with live_with_copy(tmp_path_factory.mktemp("data-cli"), TOKEN, samples=True) as live:
        body = tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")
        answer = httpx.post(f"{live.url}/api/traces?id=combo", content=body, headers={**AUTH, "Content-Type": "application/x-tar"}, timeout=60)
        assert answer.status_code == 202 and answer.json()["state"] == "ready", answer.text
        first = create(live, [{"gpu_config": "SM61_TITANX", "count": 1}, {"gpu_config": COPY, "count": 1}])
        second = create(live, [{"gpu_config": "SM61_TITANX", "count": 1}])
        for run in (first, second):
            wait_until(lambda: get(live, f"/api/runs/{run}")["state"] != "active", 90, f"run {run} did not finish")
            assert get(live, f"/api/runs/{run}")["state"] == "succeeded"
        yield World(live, (first, second))


def create(live: LiveServer, entries: list[dict[str, Any]]) -> str:
    answer = httpx.post(f"{live.url}/api/runs", json={"trace_id": "combo", "entries": entries}, headers=AUTH, timeout=30)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def get(live: LiveServer, path: str) -> Any:
    answer = httpx.get(live.url + path, headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def sql(live: LiveServer, query: str) -> list[list[Any]]:
    answer = httpx.post(f"{live.url}/api/sql", json={"sql": query}, headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    return msgspec.json.decode(answer.content, type=SqlAnswer).rows


def cascade(live: LiveServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"CASCADE_TOKEN": TOKEN, "CASCADE_URL": live.url, "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "cascade_cli", *args], capture_output=True, text=True, timeout=120, env=env)


def logged_kernels() -> list[dict[str, float | str]]:
    """Each stats block of the log the sims replayed, as the parser reads it."""
    log = (LOGS / "combo-vec-mm-xz__SM61_TITANX.log").read_text()
    blocks = re.findall(r"^kernel_name = .*?\ngpgpu_silicon_slowdown = [^\n]*", log, flags=re.S | re.M)
    assert len(blocks) == 3
    return [logparse.parse_stats(block) for block in blocks]


def own_values(stats: dict[str, float | str], before: dict[str, float | str] | None) -> dict[str, float]:
    """A block's numbers less the block before's (the first's as they are): each running
    total's per-kernel value."""
    earlier = {k: v for k, v in (before or {}).items() if not isinstance(v, str)}
    return {k: float(v) - float(earlier.get(k, 0.0)) for k, v in stats.items() if not isinstance(v, str)}


def logged_own_values() -> list[dict[str, float]]:
    blocks = logged_kernels()
    return [own_values(stats, blocks[i - 1] if i else None) for i, stats in enumerate(blocks)]


def worked_queries(runs: tuple[str, str]) -> list[str]:
    """README's worked queries, for these runs."""
    text = README.read_text()
    section = text[text.index("### Worked queries") : text.index("## Configuration")]
    queries = re.findall(r"```sql\n(.*?)```", section, flags=re.S)
    assert len(queries) == 3
    return [q.replace(EXAMPLE_RUNS[0], runs[0]).replace(EXAMPLE_RUNS[1], runs[1]) for q in queries]


def test_the_first_query_takes_medians_over_the_real_runs_only(world: World) -> None:
    # Over every sim, as a first look at the read model: the sample runs (SM61_TITANX's
    # vectoradd has vecAdd launches of another size) must not move SM61_TITANX's medians away
    # from its copy's, whose launches are all the same.
    text = README.read_text()
    found = re.search(r'duckdb audit\.duckdb "(.*?)"', text, flags=re.S)
    assert found, "README's first query"
    query = " ".join(found[1].split())
    assert "NOT s.sample" in query
    by_name: dict[str, list[tuple[float, float]]] = {}
    for stats in logged_kernels():
        by_name.setdefault(str(stats["kernel_name"]), []).append((float(stats["gpu_sim_cycle"]), float(stats["L2_BW"])))
    medians = {name: [statistics.median(c for c, _ in v), statistics.median(bw for _, bw in v)] for name, v in sorted(by_name.items())}
    expected = [[config, name, *m] for config in ("SM61_TITANX", COPY) for name, m in medians.items()]
    assert sql(world.live, query) == [[*row[:2], pytest.approx(row[2]), pytest.approx(row[3])] for row in expected]
    everything = sql(world.live, query.replace("AND NOT s.sample", ""))
    assert sql(world.live, "SELECT count(*) FROM sims WHERE sample") == [[7]]
    assert [r for r in everything if r[0] == COPY] == [r for r in sql(world.live, query) if r[0] == COPY]
    assert [r for r in everything if r[0] == "SM61_TITANX"] != [r for r in sql(world.live, query) if r[0] == "SM61_TITANX"]


def test_the_l2_hit_rate_per_config_is_the_logs(world: World) -> None:
    hit_rate, _, _ = worked_queries(world.runs)
    by_name: dict[str, list[float]] = {}
    for stats, own in zip(logged_kernels(), logged_own_values()):
        totals = by_name.setdefault(str(stats["kernel_name"]), [0, 0, 0])
        totals[0] += 1
        totals[1] += own["L2_total_cache_accesses"]
        totals[2] += own["L2_total_cache_misses"]
    expected = [[config, name, n, 1 - misses / accesses] for config in ("SM61_TITANX", COPY) for name, (n, accesses, misses) in sorted(by_name.items())]
    assert sql(world.live, hit_rate) == expected
    # By hand from the log: vecAdd's launches 1 and 3 had 39 L2 accesses each, 39 and 0 of them misses.
    assert [row[1:] for row in expected[:2]] == [["_Z6vecAddIfEvPT_S1_S1_i", 2, 0.5], ["_Z8mult_gpuIfEvPT_S1_S1_ii", 1, 0.0]]


def test_the_warp_stall_breakdown_per_kernel_is_the_logs(world: World) -> None:
    _, breakdown, _ = worked_queries(world.runs)
    expected = []
    for config in ("SM61_TITANX", COPY):
        for index, (stats, own) in enumerate(zip(logged_kernels(), logged_own_values())):
            states = {k.removeprefix("Warp Occupancy Distribution."): v for k, v in own.items() if k.startswith("Warp Occupancy Distribution.")}
            stall, idle, scoreboard = states.pop("Stall"), states.pop("W0_Idle"), states.pop("W0_Scoreboard")
            assert sorted(states) == sorted(f"W{n}" for n in range(1, 33))
            issuing = sum(states.values())
            share = round(stall / (stall + idle + scoreboard + issuing), 4)
            expected.append([config, 0, index, stats["kernel_name"], stall, idle, scoreboard, issuing, share])
    assert sql(world.live, breakdown) == expected
    assert expected[0][4:7] == [47.0, 599.0, 1157.0]  # as docs/stats-naming.md shows the first kernel's line
    # By hand from the log: the third launch's line less the second's, 47 stalled of 1,640 cycles.
    assert expected[2][4:] == [47.0, 596.0, 656.0, 341.0, 0.0287]


def test_ipc_per_kernel_name_across_two_runs_is_the_logs(world: World) -> None:
    _, _, ipc = worked_queries(world.runs)
    by_name: dict[str, list[float]] = {}
    for stats in logged_kernels():
        by_name.setdefault(str(stats["kernel_name"]), []).append(float(stats["gpu_ipc"]))
    mean = {name: sum(v) / len(v) for name, v in by_name.items()}
    assert sql(world.live, ipc) == [[name, pytest.approx(mean[name]), pytest.approx(mean[name]), 1.0] for name in sorted(mean)]


def test_results_downloads_carry_the_logs_maps_made_again_from_their_rows(world: World) -> None:
    maps = [json.loads(stats_json(stats)) for stats in logged_kernels()]
    results = get(world.live, f"/api/runs/{world.runs[0]}/results")
    for sim in results["sims"]:
        got = [kernel["stats"] for kernel in sim["kernels"]]
        assert [without_wall_clock(m) for m in got] == [without_wall_clock(m) for m in maps]
        assert [list(m) for m in got] == [list(m) for m in maps], "in the log's order"
    catalogue = sql(world.live, "SELECT gpu_config, count(*), min(kernels), max(kernels) FROM stats WHERE NOT sample GROUP BY ALL ORDER BY ALL")
    names = len(set().union(*maps))
    assert catalogue == [["SM61_TITANX", names, 2, 6], [COPY, names, 1, 3]]  # names of one kernel only: in 2 sims, 1


def without_wall_clock(stats: dict[str, Any]) -> dict[str, Any]:
    """A map without what the wall clock decided (the simulation's rate and time)."""
    return {k: v for k, v in stats.items() if not k.startswith(("gpgpu_simulation_time", "gpgpu_simulation_rate", "gpgpu_silicon_slowdown"))}


def test_cascade_sql_prints_a_table_or_writes_csv_json_and_parquet(world: World, tmp_path: Path) -> None:
    query = "SELECT kernel_index, name, gpu_ipc, NULL AS nothing FROM kernels WHERE sim_id IN (SELECT id FROM sims WHERE run_id = '{}') ORDER BY ALL"
    query = query.format(world.runs[1])
    done = cascade(world.live, "sql", query)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["kernel_index", "name", "gpu_ipc", "nothing"] and lines[-1] == "(3 rows)"
    assert lines[1].split() == ["0", "_Z6vecAddIfEvPT_S1_S1_i", "1.9003", "NULL"]
    for form in ("csv", "json", "parquet"):
        out = tmp_path / f"answer.{form}"
        done = cascade(world.live, "sql", query, "--format", form, "-o", str(out))
        assert done.returncode == 0 and done.stderr == f"{out}  {out.stat().st_size:,} bytes\n", done.stderr
    assert pyarrow.parquet.read_table(tmp_path / "answer.parquet").column("gpu_ipc").to_pylist()[0] == 1.9003
    assert (tmp_path / "answer.csv").read_text().splitlines()[1] == "0,\"_Z6vecAddIfEvPT_S1_S1_i\",1.9003,"
    assert msgspec.json.decode((tmp_path / "answer.json").read_bytes(), type=SqlAnswer).rows[0] == [0, "_Z6vecAddIfEvPT_S1_S1_i", 1.9003, None]
    done = cascade(world.live, "sql", query, "--format", "json")
    assert done.returncode == 0 and msgspec.json.decode(done.stdout, type=SqlAnswer).rows[2][0] == 2


def test_cascade_sql_says_why_a_query_is_refused(world: World) -> None:
    done = cascade(world.live, "sql", "DROP TABLE kernels")
    assert (done.returncode, done.stderr) == (2, "cascade: error: POST /api/sql: 400 only a SELECT is run here, and this is DROP\n")
    done = cascade(world.live, "sql", "SELECT * FROM read_csv('/etc/passwd')")
    assert done.returncode == 2 and done.stderr.startswith("cascade: error: POST /api/sql: 400 read_csv: queries read only the read model's tables")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_parquet_is_not_written_to_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert cli.main(["sql", "SELECT 1", "--format", "parquet", "--url", "http://127.0.0.1:9"]) == 2
    assert capsys.readouterr().err == "cascade: error: Parquet is binary: write it to a file with -o FILE, or pipe it to a program that reads it\n"


def test_an_export_is_parquet_that_pyarrow_and_duckdb_read_as_the_api_answers(world: World, tmp_path: Path) -> None:
    run = world.runs[0]
    out = tmp_path / "export"
    done = cascade(world.live, "export", run, "-o", str(out))
    assert done.returncode == 0, done.stderr
    files = sorted(p.name for p in out.iterdir())
    assert files == ["kernel_stats.parquet", "kernels.parquet", "runs.parquet", "sims.parquet", "timing.parquet"]
    assert done.stdout.splitlines() == [f"{out / name}  {(out / name).stat().st_size:,} bytes" for name in
                                        ("runs.parquet", "sims.parquet", "kernels.parquet", "kernel_stats.parquet", "timing.parquet")]  # fmt: skip
    read = {name.removesuffix(".parquet"): pyarrow.parquet.read_table(out / name) for name in files}
    detail = get(world.live, f"/api/runs/{run}")
    assert read["runs"].column("id").to_pylist() == [run] and read["runs"].column("state").to_pylist() == ["succeeded"]
    assert read["sims"].column("id").to_pylist() == [s["id"] for s in detail["sims"]]
    assert read["timing"].num_rows == 0  # the trace has no real timing
    listed = get(world.live, f"/api/runs/{run}/kernels")
    kernels = read["kernels"].to_pylist()
    assert [(k["sim_id"], k["kernel_index"], k["name"], k["gpu_ipc"]) for k in kernels] == sorted(
        (k["sim_id"], k["kernel_index"], k["kernel_name"], k["gpu_ipc"]) for k in listed
    )
    # kernel_stats: every value of every map the results download carries, by its name.
    values: dict[tuple[str, int], dict[str, Any]] = {}
    for row in read["kernel_stats"].to_pylist():
        value = row["text"] if row["text"] is not None else row["value"] if row["printed_total"] is None else row["printed_total"]
        values.setdefault((row["sim_id"], row["kernel_index"]), {})[row["stat"]] = "NaN" if isinstance(value, float) and math.isnan(value) else value
    results = get(world.live, f"/api/runs/{run}/results")
    assert values == {(k["sim_id"], k["kernel_index"]): k["stats"] for sim in results["sims"] for k in sim["kernels"]}
    assert read["kernel_stats"].schema.field("value").type == pa.float64()
    # DuckDB reads the files as they are (an in-memory database of the test's own).
    with duckdb.connect() as con:
        counted = con.execute(f"SELECT count(*), count(DISTINCT stat) FROM '{out / 'kernel_stats.parquet'}'").fetchall()
    assert counted == [(read["kernel_stats"].num_rows, len({k for m in values.values() for k in m}))]


@pytest.mark.parametrize("library", ["pandas", "polars"])
def test_pandas_and_polars_read_an_export(world: World, tmp_path: Path, library: str) -> None:
    module = importlib.import_module(library)  # both are in the test extras: a missing one fails
    assert cascade(world.live, "export", world.runs[1], "-o", str(tmp_path)).returncode == 0
    frame = module.read_parquet(tmp_path / "kernel_stats.parquet")
    assert len(frame) == sum(len(stats) for stats in logged_kernels())


# The combo trace's launches 1 to 3 as the log's L2 lines say (39, 423, 462 accesses; 39, 423,
# 423 misses), each less the launch before: each kernel's own accesses, misses and miss rate.
L2 = ("L2_total_cache_accesses", "L2_total_cache_misses", "L2_total_cache_miss_rate")
L2_OWN = [(39.0, 39.0, 1.0), (384.0, 384.0, 1.0), (39.0, 0.0, 0.0)]
L2_PRINTED = [(39.0, 39.0, 1.0), (423.0, 423.0, 1.0), (462.0, 423.0, 0.9156)]


def test_each_kernels_own_l2_values_on_every_route(world: World, tmp_path: Path) -> None:
    own = logged_own_values()
    assert [(o[L2[0]], o[L2[1]], o[L2[1]] / o[L2[0]]) for o in own] == L2_OWN
    run = world.runs[1]
    # GET /api/runs/{id}/stats/values: the kernel's own value, and the running total beside it.
    for i, name in enumerate(L2):
        rows = get(world.live, f"/api/runs/{run}/stats/values?name={name}")["rows"]
        assert [(r["kernel_index"], r["median"], r["min"], r["max"]) for r in rows] == [(k, v[i], v[i], v[i]) for k, v in enumerate(L2_OWN)]
        assert [r["running_total"] for r in rows] == [v[i] for v in L2_PRINTED]
    # SQL over kernel_stats: `value` the kernel's own, `printed_total` the log's.
    query = f"""SELECT k.kernel_index, n.name, v.value, v.printed_total FROM kernel_stats v JOIN stat_names n ON n.id = v.stat
        JOIN kernels k ON k.seq = v.seq JOIN sims s ON s.id = k.sim_id WHERE s.run_id = '{run}' AND n.name IN {L2} ORDER BY ALL"""
    expected = [[k, name, L2_OWN[k][i], L2_PRINTED[k][i]] for k in range(3) for i, name in sorted(enumerate(L2), key=lambda e: e[1])]
    assert sql(world.live, query) == expected
    # The export: the same rows.
    assert cascade(world.live, "export", run, "-o", str(tmp_path)).returncode == 0
    exported = pyarrow.parquet.read_table(tmp_path / "kernel_stats.parquet").to_pylist()
    assert sorted([r["kernel_index"], r["stat"], r["value"], r["printed_total"]] for r in exported if r["stat"] in L2) == expected


def test_an_export_needs_a_run_and_the_token(world: World) -> None:
    assert httpx.get(f"{world.live.url}/api/runs/run-nope/export", headers=AUTH).status_code == 404
    assert httpx.get(f"{world.live.url}/api/runs/{world.runs[0]}/export").status_code == 401
    answer = httpx.get(f"{world.live.url}/api/runs/{world.runs[0]}/export", headers=AUTH)
    assert answer.headers["content-type"] == "application/zip"
    assert answer.headers["content-disposition"] == f'attachment; filename="{world.runs[0]}-parquet.zip"'


def test_readme_documents_every_table_and_column() -> None:
    text = README.read_text()
    section = text[text.index("### Tables") : text.index("### Worked queries")]
    documented = dict(re.findall(r"^#### `(\w+)`\n(.*?)(?=^#### |\Z)", section, flags=re.S | re.M))
    with duckdb.connect() as con:
        con.execute(tables.CHECKPOINT_SQL)
        checkpoint = [name for (name,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'checkpoint'").fetchall()]
    every = {
        **{table: [field.name for field in tables.columns(row_type)] for table, row_type in tables.ROW_TYPES.items()},
        "checkpoint": checkpoint,
        version.TABLE: list(version.Version.__struct_fields__),
        "stats": ["gpu_config", "stat", "kernels", "sample"],
    }
    assert sorted(documented) == sorted(every), "a heading per table and view"
    missing = {table: [c for c in columns if f"`{c}`" not in documented[table]] for table, columns in every.items()}
    assert not {t: c for t, c in missing.items() if c}, "every column named in its table's paragraph"
