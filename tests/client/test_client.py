"""`cascade_client` against a live service: found as the command line finds it, a trace
uploaded from a directory and from an archive, a run created and waited for with its
progress bar, its results as pandas and polars DataFrames equal to the API's own answers,
SQL as a DataFrame, and the API's errors as exceptions saying what the API said."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pandas
import polars
import pytest

import cascade_client
from cascade_api.models import RunDetail
from tests.cascade_http.live import COPY, LiveServer, live_with_copy
from tests.cascade_http.served import clean_env, serving as serving_cli
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.support import TRACES

TOKEN = "client-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class World(msgspec.Struct):
    live: LiveServer
    client: cascade_client.Client
    run: RunDetail  # on SM61_TITANX, 2 replicas, and COPY: waited for by the client
    progress: str  # what the wait wrote


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with live_with_copy(tmp_path_factory.mktemp("client"), TOKEN, samples=False) as live:
        client = cascade_client.connect(url=live.url, token=TOKEN)
        trace = client.upload_trace(TRACES / "combo-vec-mm-xz", id="combo", progress=False)
        assert trace.state == "ready" and trace.kernel_count == 3
        run = client.create_run("combo", ["SM61_TITANX", COPY], replicas=2)
        out = io.StringIO()
        ended = run.wait(progress=True, out=out)
        yield World(live, client, ended, out.getvalue())


def api(world: World, path: str) -> Any:
    answer = httpx.get(world.live.url + path, headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_connect_finds_the_service_and_token_in_the_environment(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASCADE_URL", world.live.url)
    monkeypatch.setenv("CASCADE_TOKEN", TOKEN)
    client = cascade_client.connect()
    assert client.api.url == world.live.url
    assert [t.id for t in client.traces()] == ["combo"]
    assert {c.name for c in client.configs()} >= {"SM61_TITANX", COPY}

    monkeypatch.setenv("CASCADE_TOKEN", "wrong")
    with pytest.raises(cascade_client.Refused) as refused:
        cascade_client.connect().traces()
    assert refused.value.status == 401
    assert "the server refused the token from CASCADE_TOKEN" in str(refused.value)


def test_connect_finds_a_served_data_dir_and_its_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CASCADE_URL", "CASCADE_TOKEN", "CASCADE_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    with serving_cli(data, "--no-runner", env=clean_env()) as served:
        client = cascade_client.connect(data_dir=data)
        assert client.api.url == served.url
        assert client.traces() is not None  # the token file's token was taken
        monkeypatch.chdir(tmp_path)
        with pytest.raises(cascade_client.CascadeError, match=r"no API token: CASCADE_TOKEN is not set and .*\.cascade/token does not exist"):
            cascade_client.connect()  # ./.cascade, which no server holds


def test_an_archive_uploads_as_the_directory_does(world: World, tmp_path: Path) -> None:
    archive = tmp_path / "combo.tar.gz"
    archive.write_bytes(gzip.compress(tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")))
    trace = world.client.upload_trace(archive, id="combo-archive", progress=False)
    assert (trace.state, trace.kernel_count) == ("ready", 3)
    files = [[(f.key.rsplit("/", 1)[1], f.bytes) for f in world.client.trace(t).metadata.files] for t in ("combo-archive", "combo")]
    assert files[0] == files[1]

    with pytest.raises(cascade_client.CascadeError, match="neither a directory nor an archive"):
        world.client.upload_trace(tmp_path / "missing", progress=False)


def test_wait_shows_one_bar_redrawn_until_the_run_ended(world: World) -> None:
    assert world.run.state == "succeeded"
    redraws = world.progress.split("\r")
    assert redraws[0] == "" and world.progress.endswith("\n")
    assert redraws[-1].rstrip() == f"{world.run.id} [####################] 12/12 kernels  4 succeeded"

    quiet = io.StringIO()
    assert world.client.run(world.run.id).wait(out=quiet).state == "succeeded"  # an ended run: at once
    assert quiet.getvalue().endswith("4 succeeded\n")
    assert world.client.run(world.run.id).wait(progress=False, out=quiet).sims == world.run.sims
    assert quiet.getvalue().count("\n") == 1


def test_kernels_as_pandas_and_polars_are_the_apis_kernels(world: World) -> None:
    kernels = world.client.run(world.run.id).kernels()
    assert isinstance(kernels, pandas.DataFrame)
    sims = {s.id: s for s in world.run.sims}
    expected = sorted(
        (sims[k["sim_id"]].gpu_config, sims[k["sim_id"]].replica, k["kernel_index"], k["kernel_name"], k["gpu_sim_cycle"], k["sim_time_ns"])
        for k in api(world, f"/api/runs/{world.run.id}/kernels")
    )
    columns = ["gpu_config", "replica", "kernel_index", "name", "gpu_sim_cycle", "sim_time_ns"]
    assert list(kernels[columns].itertuples(index=False, name=None)) == expected
    assert list(kernels.columns[:3]) == ["sim_id", "gpu_config", "replica"]

    as_polars = world.client.run(world.run.id).kernels(to="polars")
    assert isinstance(as_polars, polars.DataFrame)
    assert as_polars.columns == list(kernels.columns)
    assert as_polars.select(columns).rows() == expected


def test_sims_comparison_and_stat_values_as_dataframes(world: World) -> None:
    run = world.client.run(world.run.id)
    sims = run.sims()
    assert sorted(zip(sims["gpu_config"], sims["replica"], sims["state"])) == sorted(
        (s.gpu_config, s.replica, "succeeded") for s in world.run.sims
    )

    comparison = run.comparison()
    answer = api(world, f"/api/runs/{world.run.id}/comparison")
    assert list(comparison.itertuples(index=False, name=None)) == [
        (r["kernel_index"], r["kernel_name"], r.get("kernel_short_name"), c, r["real_ns"], r["sim_ns"][c], r.get("real_cycles"), None)
        for r in answer["rows"]
        for c in answer["configs"]
    ]

    values = run.stat_values("gpu_sim_cycle", to="polars")
    answer = api(world, f"/api/runs/{world.run.id}/stats/values?name=gpu_sim_cycle")
    assert values.rows(named=True) == answer["rows"] and len(answer["rows"]) == 6


def test_sql_answers_a_dataframe_over_arrow(world: World) -> None:
    query = f"SELECT gpu_config, replica, gpu_tot_sim_cycle FROM sims WHERE run_id = '{world.run.id}' ORDER BY ALL"
    expected = [(s.gpu_config, s.replica, s.latest.gpu_tot_sim_cycle) for s in sorted(world.run.sims, key=lambda s: (s.gpu_config, s.replica))]
    frame = world.client.sql(query)
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame.itertuples(index=False, name=None)) == expected
    assert world.client.sql(query, to="polars").rows() == expected


def test_errors_say_what_the_api_said(world: World) -> None:
    with pytest.raises(cascade_client.Refused) as missing:
        world.client.run("run-000000000000")
    assert (missing.value.status, missing.value.detail) == (404, "run run-000000000000 not found")
    assert str(missing.value) == "GET /api/runs/run-000000000000: 404 run run-000000000000 not found"

    with pytest.raises(cascade_client.Refused) as bad_sql:
        world.client.sql("SELECT no_such_column FROM sims")
    assert bad_sql.value.status == 400 and "no_such_column" in bad_sql.value.detail

    with pytest.raises(cascade_client.Refused) as unknown:
        world.client.create_run("combo", "SM99_NOTHING")
    assert unknown.value.status == 422 and "SM99_NOTHING" in unknown.value.detail

    with pytest.raises(cascade_client.Refused) as bad_name:
        world.client.run(world.run.id).stat_values("a*b")
    assert bad_name.value.status == 422
