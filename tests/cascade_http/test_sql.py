"""`POST /api/sql` on the reference's run: answers in every format, and each refusal, with
its status and what it says."""

from __future__ import annotations

import io
import math
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import msgspec
import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet
import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_api.models import SqlAnswer
from cascade_process.service import starlette_app
from cascade_core.refusals import TimedOut
from projections import sql_process, user_sql
from projections.projector import connect
from tests.cascade_http import runs_world as w
from tests.cascade_http.conftest import TOKEN

L2_HITS = "L2_cache_stats_breakdown[GLOBAL_ACC_R][HIT_0003]"


def serve(settings: Settings) -> Iterator[TestClient]:
    with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        w.append(client, [*w.trace_events(), *w.reference_run()])
        yield client


@pytest.fixture
def client(tmp_path: Path, nats_url: str) -> Iterator[TestClient]:
    yield from serve(w.settings(tmp_path, nats_url))


def sql(client: TestClient, query: str, form: str = "json") -> tuple[int, bytes]:
    answer = client.post("/api/sql", json={"sql": query, "format": form})
    return answer.status_code, answer.content


def detail(client: TestClient, query: str) -> tuple[int, str]:
    status, body = sql(client, query)
    return status, msgspec.json.decode(body)["detail"]


def test_a_select_is_answered_as_columns_and_rows(client: TestClient) -> None:
    status, body = sql(
        client,
        f"""SELECT k.sim_id, k.kernel_index, n.name AS stat, v.value, 'nan'::DOUBLE AS nan, [1.5, 2] AS list
            FROM kernel_stats v JOIN kernels k ON k.seq = v.seq JOIN stat_names n ON n.id = v.stat
            WHERE n.name = '{L2_HITS}' ORDER BY k.sim_id, k.kernel_index LIMIT 3""",
    )
    assert status == 200, body
    answer = msgspec.json.decode(body, type=SqlAnswer)
    assert [(c.name, c.type) for c in answer.columns] == [
        ("sim_id", "VARCHAR"), ("kernel_index", "BIGINT"), ("stat", "VARCHAR"), ("value", "DOUBLE"), ("nan", "DOUBLE"),
        ("list", "DECIMAL(11,1)[]"),
    ]  # fmt: skip
    # runs_world's maps hold i * uid under the i-th of these names (kernel 0 is uid 1): 3, 6, 9
    # printed, a breakdown's running total, so each kernel's own value is 3.
    assert answer.rows == [
        [w.SIMS[0], 0, L2_HITS, 3.0, "NaN", [1.5, 2.0]],
        [w.SIMS[0], 1, L2_HITS, 3.0, "NaN", [1.5, 2.0]],
        [w.SIMS[0], 2, L2_HITS, 3.0, "NaN", [1.5, 2.0]],
    ]


def test_the_catalogue_counts_the_kernels_that_have_each_stat(client: TestClient) -> None:
    status, body = sql(client, "SELECT gpu_config, stat, kernels FROM stats WHERE stat IN ('gpu_sim_cycle', 'kernel_name') ORDER BY stat")
    assert status == 200, body
    assert msgspec.json.decode(body, type=SqlAnswer).rows == [["SM86_RTX3070", "gpu_sim_cycle", 12], ["SM86_RTX3070", "kernel_name", 12]]


@pytest.mark.parametrize("form", ["csv", "arrow", "parquet"])
def test_an_answer_comes_as_csv_arrow_or_parquet(client: TestClient, form: str) -> None:
    status, body = sql(client, "SELECT kernel_index, name, gpu_ipc FROM kernels WHERE sim_id = 'sim-1047ddbdf5b1' ORDER BY kernel_index", form)
    assert status == 200, body
    read = {"csv": pyarrow.csv.read_csv, "arrow": lambda f: pa.ipc.open_stream(f).read_all(), "parquet": pyarrow.parquet.read_table}
    table = read[form](io.BytesIO(body))
    assert table.column_names == ["kernel_index", "name", "gpu_ipc"]
    assert table.column("gpu_ipc").to_pylist() == [k[3] for k in w.KERNELS]
    assert table.column("name").to_pylist() == [k[1] for k in w.KERNELS]


def test_the_answer_has_the_form_asked_for(client: TestClient) -> None:
    answer = client.post("/api/sql", json={"sql": "SELECT 1 AS one", "format": "parquet"})
    assert answer.headers["content-type"] == "application/vnd.apache.parquet"
    assert client.post("/api/sql", json={"sql": "SELECT 1 AS one"}).headers["content-type"] == "application/json"
    assert client.post("/api/sql", json={"sql": "SELECT 1 AS one", "format": "csv"}).text == "\"one\"\n1\n"


REFUSED = {
    # What reaches files or the network, by a function or by a file named as a table.
    "SELECT * FROM read_csv('/etc/passwd')": "read_csv: queries read only the read model's tables",
    "SELECT * FROM read_parquet('/tmp/x.parquet')": "read_parquet: queries read only",
    "SELECT * FROM read_json('/tmp/x.json')": "read_json: queries read only",
    "SELECT * FROM read_text('/etc/hostname')": "read_text: queries read only",
    "SELECT * FROM glob('/etc/*')": "glob: queries read only",
    "SELECT * FROM (SELECT 1) t, LATERAL (SELECT * FROM read_blob('/etc/hostname'))": "read_blob: queries read only",
    "SELECT * FROM '/etc/passwd'": "Catalog Error: Table with name /etc/passwd does not exist",
    "SELECT * FROM 'https://example.com/data.parquet'": 'Permission Error: Cannot access file "https://example.com/data.parquet"',
    # SQL of its own, or acting on the database.
    "SELECT * FROM query('SELECT 1')": "query: queries read only",
    "WITH c AS (SELECT * FROM checkpoint()) SELECT * FROM c": "checkpoint: queries read only",
    # Statements that are no SELECT.
    "COPY kernels TO '/tmp/kernels.csv'": "only a SELECT is run here, and this is COPY",
    "ATTACH '/tmp/other.duckdb' AS other": "only a SELECT is run here, and this is ATTACH",
    "INSTALL httpfs": "only a SELECT is run here, and this is LOAD",
    "LOAD httpfs": "only a SELECT is run here, and this is LOAD",
    "PRAGMA threads = 1": "only a SELECT is run here, and this is SET",
    "PRAGMA table_info('kernels')": "only a SELECT is run here, and this is PRAGMA",
    "SET threads = 1": "only a SELECT is run here, and this is SET",
    "CALL checkpoint()": "only a SELECT is run here, and this is CALL",
    "INSERT INTO stat_names VALUES (99999, 'x')": "only a SELECT is run here, and this is INSERT",
    "UPDATE runs SET state = 'failed'": "only a SELECT is run here, and this is UPDATE",
    "DELETE FROM kernels": "only a SELECT is run here, and this is DELETE",
    "CREATE TABLE t AS SELECT 1": "only a SELECT is run here, and this is CREATE",
    "DROP TABLE kernels": "only a SELECT is run here, and this is DROP",
    "EXPORT DATABASE '/tmp/x'": "only a SELECT is run here, and this is EXPORT",
    "SELECT 1; DROP TABLE kernels": "one statement at a time: this has 2",
    "SELECT 1; SELECT 2": "one statement at a time: this has 2",
    # What names the server's paths: settings, and the databases' files.
    "SELECT current_setting('temp_directory')": "current_setting: queries read only the read model's tables, not DuckDB's settings",
    "SELECT 1 WHERE CURRENT_SETTING('home_directory') <> ''": "current_setting: queries read only the read model's tables, not",
    "SELECT * FROM duckdb_settings()": "duckdb_settings: queries read only",
    "SELECT * FROM duckdb_databases()": "duckdb_databases: queries read only",
    "SELECT * FROM pragma_database_list()": "pragma_database_list: queries read only",
    "SELECT * FROM duckdb_temporary_files()": "duckdb_temporary_files: queries read only",
    "PRAGMA database_list": "only a SELECT is run here, and this is PRAGMA",
    # SQL that is wrong.
    "SELEKT 1": "Parser Error: syntax error at or near \"SELEKT\"",
    "SELECT nope FROM kernels": "Binder Error: Referenced column \"nope\" not found",
    "SELECT * FROM no_such_table": "Catalog Error: Table with name no_such_table does not exist",
}


@pytest.mark.parametrize("query", REFUSED)
def test_what_is_not_one_select_of_the_read_model_is_refused(client: TestClient, query: str) -> None:
    status, said = detail(client, query)
    assert (status, said[: len(REFUSED[query])]) == (400, REFUSED[query])
    # Nothing changed, and the read model still answers.
    assert sql(client, "SELECT count(*) FROM kernels")[1] == b'{"columns":[{"name":"count_star()","type":"BIGINT"}],"rows":[[12]]}'


def test_duckdb_itself_keeps_the_read_model_from_files_and_settings(tmp_path: Path) -> None:
    # What the route's check refuses first, the read model's database refuses too.
    with connect(tmp_path / "readmodel.duckdb") as con:
        for query in ("SELECT * FROM read_csv('/etc/passwd')", "COPY (SELECT 1) TO '/tmp/one.csv'", "LOAD httpfs"):
            with pytest.raises(duckdb.PermissionException, match="disabled"):
                con.execute(query)
        for setting in ("enable_external_access = true", "threads = 1"):
            with pytest.raises(duckdb.InvalidInputException, match="the configuration has been locked"):
                con.execute(f"SET {setting}")


def limited(tmp_path: Path, nats_url: str, **limits: float) -> Iterator[TestClient]:
    return serve(msgspec.structs.replace(w.settings(tmp_path, nats_url), **limits))


def test_a_query_past_its_time_is_stopped(tmp_path: Path, nats_url: str) -> None:
    for client in limited(tmp_path, nats_url, sql_timeout_s=0.5):
        status, said = detail(client, "SELECT count(*) FROM range(1000000000000) a JOIN range(1000) b ON a.range % 7 = b.range")
        assert (status, said) == (408, "the query ran past CASCADE_SQL_TIMEOUT (0.5 s) and was stopped")
        assert sql(client, "SELECT 1 AS one")[0] == 200


def test_an_answer_done_after_its_time_is_refused_though_no_interrupt_reached_it() -> None:
    # DuckDB works a constant expression out while planning the query, where its interrupt
    # does not reach: the answer comes, late, and is refused all the same, on a fast machine
    # as on a slow one.
    with duckdb.connect() as con:
        started = time.monotonic()
        with pytest.raises(TimedOut, match=r"ran past CASCADE_SQL_TIMEOUT \(0.01 s\)"):
            user_sql.answer(con, "SELECT length(md5(repeat('x', 20000000)))", "json", user_sql.Limits(seconds=0.01, rows=10, bytes=1000))
        assert time.monotonic() - started > 0.01
        assert user_sql.answer(con, "SELECT 1 AS one", "json", user_sql.Limits(seconds=5, rows=10, bytes=1000))  # the next one is answered


def test_an_answer_past_its_rows_or_bytes_is_refused(tmp_path: Path, nats_url: str) -> None:
    for client in limited(tmp_path, nats_url, sql_max_rows=100, sql_max_bytes=10_000):
        assert sql(client, "SELECT * FROM range(100)")[0] == 200
        assert detail(client, "SELECT * FROM range(101)") == (
            422, "the answer has more than 100 rows (CASCADE_SQL_MAX_ROWS); add a LIMIT, or aggregate",
        )  # fmt: skip
        for form in ("json", "csv", "parquet"):
            # 20 rows of 3,200 random hex digits, which no format compresses much.
            status, body = sql(client, "SELECT string_agg(md5(random()::VARCHAR), '') FROM range(2000) GROUP BY range % 20", form)
            said = msgspec.json.decode(body)["detail"]
            assert status == 422 and said.endswith("bytes: over CASCADE_SQL_MAX_BYTES (10,000 bytes); ask for less, or aggregate"), said


def test_a_query_needs_the_token_and_a_body_that_fits(client: TestClient) -> None:
    assert client.post("/api/sql", json={"sql": "SELECT 1"}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/api/sql", json={"sql": "SELECT 1", "format": "xlsx"}).status_code == 422
    assert client.post("/api/sql", json={"sql": ""}).status_code == 422
    assert client.post("/api/sql", content=b"{").status_code == 422
    assert client.post("/api/sql", content=b"\xff\xfe{").status_code == 400
    assert client.post("/api/sql", json={"sql": "SELECT '" + "x" * (1 << 20) + "'"}).status_code == 413


def test_nonfinite_values_are_the_strings_stats_maps_use(client: TestClient) -> None:
    status, body = sql(client, "SELECT 'inf'::DOUBLE, '-inf'::FLOAT, 1.5::FLOAT, NULL::DOUBLE")
    assert status == 200, body
    assert msgspec.json.decode(body, type=SqlAnswer).rows == [["Infinity", "-Infinity", 1.5, None]]
    assert not any(isinstance(v, float) and math.isnan(v) for v in msgspec.json.decode(body)["rows"][0])


def peak_rss_since_reset() -> int:
    """This process's (serve's) peak resident bytes since `reset_peak_rss`."""
    status = Path("/proc/self/status").read_text()
    return next(int(line.split()[1]) << 10 for line in status.splitlines() if line.startswith("VmHWM:"))


def reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def largest_child_rss() -> int:
    """The peak resident bytes of the largest child process that ended: each query's."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss << 10


HOSTILE = {
    # The issue's: a gigabyte string DuckDB's memory limit does not see, built where no interrupt reaches.
    "SELECT length(repeat('x', 1000000000))": "the query needed more than CASCADE_SQL_MEMORY_BYTES (268,435,456 bytes)",
    # A 20-million-item list sorted as one value: gigabytes, and 20 s that ignore an interrupt.
    "SELECT len(list_sort(range(20000000)))": "the query needed more than CASCADE_SQL_MEMORY_BYTES (268,435,456 bytes)",
    # An answer of 100 GB: its first batch alone is 8 GB.
    "SELECT repeat('x', 1000000) FROM range(100000)": "the query needed more than CASCADE_SQL_MEMORY_BYTES (268,435,456 bytes)",
    # Within the memory, past the time, in one call no interrupt reaches.
    "SELECT length(md5(repeat('x', 100000000)))": "the query ran past CASCADE_SQL_TIMEOUT (0.3 s) and was stopped",
}


def test_hostile_queries_are_stopped_within_their_limits_and_serve_holds_none_of_it(tmp_path: Path, nats_url: str) -> None:
    for client in limited(tmp_path, nats_url, sql_timeout_s=0.3, sql_memory_bytes=256 << 20):
        before = sql(client, "SELECT count(*), sum(gpu_ipc) FROM kernels")
        for query, said in HOSTILE.items():
            reset_peak_rss()
            held = peak_rss_since_reset()
            started = time.monotonic()
            status, detail_said = detail(client, query)
            took = time.monotonic() - started
            assert (status, detail_said[: len(said)]) == (408 if "TIMEOUT" in said else 422, said), query
            # The time limit and the kill after its grace, with room for a loaded machine's start of the process.
            assert took < 0.3 + sql_process.KILL_GRACE_S + 3, (query, took)
            assert peak_rss_since_reset() - held < 64 << 20, query
            assert largest_child_rss() < 1 << 30, query
            assert sql(client, "SELECT count(*), sum(gpu_ipc) FROM kernels") == before


def test_a_query_leaves_no_copy_of_the_read_model_and_those_a_crash_left_go_at_start(tmp_path: Path, nats_url: str) -> None:
    settings = w.settings(tmp_path, nats_url)
    left = settings.db_path.parent / f".{settings.db_path.name}.sql-crashed"
    left.mkdir(parents=True)
    (left / settings.db_path.name).write_bytes(b"a copy a killed serve left")
    for client in serve(settings):
        assert not left.exists()
        assert sql(client, "SELECT count(*) FROM kernels")[0] == 200
        assert list(settings.db_path.parent.glob(f".{settings.db_path.name}.sql-*")) == []
