"""`cascade_client` over issue 25's design-space routes (config variants, per-run options,
run names and tags, the result cache, campaigns and sweeps), written to the shared contracts
(notes/contracts25.md) while those routes were built on other branches: they pass once the
branches are merged.

The fake simulator replays recorded logs: SM61_TITANX's for SM61_TITANX and its copy, and for
vectoradd with `-gpgpu_max_cycle 1000` the recording of a sim cut short at that limit, which is
what a variant or per-run option of that value runs here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pandas
import polars
import pytest

import cascade_client
from tests.cascade_http.live import COPY, LiveServer, live_with_copy
from tests.support import TRACES, wait_until

TOKEN = "design-space-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MAX_CYCLE = {"-gpgpu_max_cycle": "1000"}
ENDED = "('succeeded', 'failed', 'cancelled')"


class World(msgspec.Struct):
    live: LiveServer
    client: cascade_client.Client


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with live_with_copy(tmp_path_factory.mktemp("client-design-space"), TOKEN, samples=False) as live:
        client = cascade_client.connect(url=live.url, token=TOKEN)
        client.upload_trace(TRACES / "combo-vec-mm-xz", id="combo", progress=False)
        client.upload_trace(TRACES / "vectoradd-100-32", id="vec", progress=False)
        yield World(live, client)


def api(world: World, path: str) -> Any:
    answer = httpx.get(world.live.url + path, headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def count(world: World, where: str) -> int:
    return int(world.client.sql(f"SELECT count(*) AS n FROM sims WHERE {where}", to="polars")["n"][0])


def settled(world: World) -> bool:
    """No sim of any run is unfinished."""
    return count(world, f"state NOT IN {ENDED}") == 0


def test_derive_config_makes_a_variant_that_runs_and_the_api_shows(world: World) -> None:
    variant = world.client.derive_config("SM61_TITANX_MAXC", "SM61_TITANX", MAX_CYCLE)
    assert (variant.name, variant.arch, variant.base, variant.options) == ("SM61_TITANX_MAXC", "sm_61", "SM61_TITANX", MAX_CYCLE)
    shown = world.client.config("SM61_TITANX_MAXC")
    assert (shown.name, shown.base, shown.options) == ("SM61_TITANX_MAXC", "SM61_TITANX", MAX_CYCLE)
    assert world.client.config("SM61_TITANX").base is None

    ended = world.client.create_run("vec", "SM61_TITANX_MAXC").wait(progress=False)
    assert ended.state == "succeeded"
    [sim] = ended.sims
    assert sim.gpu_config == "SM61_TITANX_MAXC" and sim.cut_short is not None


def test_a_variant_of_an_unknown_option_is_refused_with_the_apis_message(world: World) -> None:
    with pytest.raises(cascade_client.Refused) as refused:
        world.client.derive_config("SM61_TITANX_BAD", "SM61_TITANX", {"-no_such_option": "1"})
    assert refused.value.status == 422 and "-no_such_option" in refused.value.detail
    with pytest.raises(cascade_client.Refused) as missing:
        world.client.config("SM61_TITANX_BAD")
    assert missing.value.status == 404


def test_create_run_sends_name_tags_options_and_fresh_when_given(world: World) -> None:
    run = world.client.create_run("vec", "SM61_TITANX", name="capped-vec", tags=["capped", "vec"], options=MAX_CYCLE)
    detail: Any = run.detail  # name, tags and an entry's options are the other branches' fields
    assert (detail.name, detail.tags, detail.entries[0].options) == ("capped-vec", ["capped", "vec"], MAX_CYCLE)
    first = run.wait(progress=False)
    assert first.state == "succeeded" and first.sims[0].cut_short is not None
    assert [r.id for r in world.client.runs(name="capped-vec")] == [run.id]
    assert run.id in {r.id for r in world.client.runs(tag="capped")}
    assert run.id not in {r.id for r in world.client.runs(tag="no-such-tag")}

    # A sim cut short is never a source: the same options simulate again.
    capped: Any = world.client.create_run("vec", "SM61_TITANX", options=MAX_CYCLE).wait(progress=False)
    assert capped.state == "succeeded" and getattr(capped.sims[0], "cached_from", None) is None

    whole: Any = world.client.create_run("vec", "SM61_TITANX", fresh=True).wait(progress=False)
    assert whole.state == "succeeded" and getattr(whole.sims[0], "cached_from", None) is None
    again: Any = world.client.create_run("vec", "SM61_TITANX").wait(progress=False)
    source = again.sims[0].cached_from  # a sim whose result is known is not simulated again
    assert again.state == "succeeded" and source is not None
    assert world.client.sql(f"SELECT state FROM sims WHERE id = '{source}'", to="polars")["state"].to_list() == ["succeeded"]


def test_a_campaign_of_configs_answers_its_table_as_pandas_and_polars(world: World) -> None:
    campaign = world.client.create_campaign(
        "copies", traces=["combo", "vec"], configs=["SM61_TITANX", COPY], tags=["copies"], baseline="SM61_TITANX"
    )
    assert campaign.key == "copies"
    assert "copies" in {c.get("name") for c in world.client.campaigns()}
    assert world.client.campaign("copies").detail.get("name") == "copies"

    def finished() -> bool:
        rows = campaign.table("gpu_tot_sim_cycle", to="polars")
        return rows.height == 4 and rows["value"].null_count() == 0 and settled(world)

    wait_until(finished, 120, "the campaign's sims did not finish")
    answer = api(world, "/api/campaigns/copies/table?stat=gpu_tot_sim_cycle&baseline=SM61_TITANX")
    as_polars = campaign.table("gpu_tot_sim_cycle", baseline="SM61_TITANX", to="polars")
    assert isinstance(as_polars, polars.DataFrame)
    assert as_polars.rows(named=True) == answer["rows"]
    as_pandas = campaign.table("gpu_tot_sim_cycle", baseline="SM61_TITANX")
    assert isinstance(as_pandas, pandas.DataFrame)
    assert list(as_pandas.columns) == ["trace_id", "trace_name", "config", "value", "baseline_value", "normalised", "sims"]
    assert sorted(zip(as_pandas["trace_id"], as_pandas["config"])) == sorted(
        (trace, config) for trace in ("combo", "vec") for config in ("SM61_TITANX", COPY)
    )
    # The copy replays SM61_TITANX's logs: the same cycles, normalised to 1. The combo trace's
    # kernels take 5534 + 7506 + 5408 cycles on SM61_TITANX (its recorded log).
    assert set(as_pandas["normalised"]) == {1.0}
    assert set(as_pandas[as_pandas["trace_id"] == "combo"]["value"]) == {18448.0}


def test_a_sweep_makes_a_variant_per_point_of_its_grid(world: World) -> None:
    study = world.client.sweep("capped-sweep", traces=["vec"], base="SM61_TITANX", grid={"-gpgpu_max_cycle": ["1000"]}, tags=["sweep"])
    first = study.table("gpu_tot_sim_cycle", to="polars")
    assert first.height == 1
    [config] = first["config"].to_list()
    variant = world.client.config(config)
    assert (variant.base, variant.options) == ("SM61_TITANX", MAX_CYCLE)

    wait_until(lambda: count(world, f"gpu_config = '{config}' AND state IN {ENDED}") >= 1 and settled(world), 120, "the sweep did not finish")
    answer = api(world, "/api/campaigns/capped-sweep/table?stat=gpu_tot_sim_cycle")
    assert study.table("gpu_tot_sim_cycle", to="polars").rows(named=True) == answer["rows"]
    assert world.client.campaign("capped-sweep").table("gpu_tot_sim_cycle", to="polars").rows(named=True) == answer["rows"]


def test_an_unknown_campaign_is_a_404_with_the_apis_text(world: World) -> None:
    with pytest.raises(cascade_client.Refused) as missing:
        world.client.campaign("no-such-campaign")
    assert missing.value.status == 404 and "no-such-campaign" in str(missing.value)
