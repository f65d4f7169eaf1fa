"""Campaigns end to end: `POST /api/campaigns` and its routes, against a real server whose
runner drives the fake simulator. SM61_TITANX_B is a copy of SM61_TITANX (the fake replays
TITAN X's recording for it), SM61_BROKEN fails as a real Accel-Sim does on an option it does
not know. The values checked are read off the recording by hand:
combo-vec-mm-xz__SM61_TITANX.log ends with `gpu_tot_sim_cycle = 18448` and
`gpu_tot_ipc = 8.6891`, its three kernels' `gpu_sim_cycle` are 5534, 7506 and 5408."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cascade_cli.campaigns_cli import grid_arg
from tests.cascade_http.live import LiveServer
from tests.cascade_http.test_retry import post
from tests.cascade_http.test_runs_cli import AUTH, api, cascade, live
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.cascade_sim.world import TITANX, accelsim_tree, add_config_lines
from tests.support import wait_until

__all__ = ["live"]

TRACE_CONFIGS = Path("gpu-simulator/configs/tested-cfgs")
TOTAL_CYCLES = 18448.0
TOTAL_IPC = 8.6891


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = accelsim_tree(tmp_path / "accel-sim")
    for tested in (TITANX.parent, TRACE_CONFIGS):
        for copy in ("SM61_TITANX_B", "SM61_BROKEN"):
            shutil.copytree(root / tested / "SM61_TITANX", root / tested / copy)
    add_config_lines(root, "SM61_BROKEN", "-no_such_option 1")
    return root


def upload(live: LiveServer, trace_id: str) -> None:
    body = tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")
    response = httpx.post(f"{live.url}/api/traces?id={trace_id}", content=body, headers={**AUTH, "Content-Type": "application/x-tar"})
    assert response.status_code == 202 and response.json()["state"] == "ready", response.text


@pytest.fixture
def traces(live: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "0.02")
    upload(live, "combo")
    upload(live, "combo-b")
    yield live


def campaign(live: LiveServer, key: str) -> dict[str, Any]:
    return dict(api(live, f"/api/campaigns/{key}").json())


def ended(live: LiveServer, key: str) -> dict[str, Any]:
    wait_until(lambda: campaign(live, key)["state"] != "active", 90, f"campaign {key} ends")
    return campaign(live, key)


def table(live: LiveServer, key: str, stat: str, baseline: str = "") -> dict[tuple[str, str], dict[str, Any]]:
    answer = api(live, f"/api/campaigns/{key}/table?stat={stat}&baseline={baseline}").json()
    assert answer["stat"] == stat
    return {(row["trace_id"], row["config"]): row for row in answer["rows"]}


BODY = {
    "name": "l2-study",
    "tags": ["study", "l2"],
    "traces": ["combo", "combo-b"],
    "configs": ["SM61_TITANX", "SM61_TITANX_B"],
    "baseline": "SM61_TITANX",
}


def test_a_campaign_of_two_traces_on_two_configs_finishes_with_its_table_and_tops_up(traces: LiveServer) -> None:
    created = post(traces, "/api/campaigns", BODY)
    assert created.status_code == 201, created.text
    detail = created.json()
    assert (detail["name"], detail["tags"], detail["traces"], detail["configs"], detail["replicas"]) == (
        "l2-study", ["study", "l2"], ["combo", "combo-b"], ["SM61_TITANX", "SM61_TITANX_B"], 1
    )
    assert [(s["trace_id"], s["gpu_config"], s["replica"]) for s in detail["sims"]] == [
        ("combo", "SM61_TITANX", 0), ("combo", "SM61_TITANX_B", 0), ("combo-b", "SM61_TITANX", 0), ("combo-b", "SM61_TITANX_B", 0)
    ]
    done = ended(traces, "l2-study")
    assert done["state"] == "succeeded" and done["sim_counts"] == {"succeeded": 4}, [s.get("error") for s in done["sims"]]
    assert all(s["kernels_done"] == s["kernels_total"] == 3 for s in done["sims"])
    assert campaign(traces, detail["id"]) == done  # by id as by name

    cycles = table(traces, "l2-study", "gpu_tot_sim_cycle")
    assert list(cycles) == [("combo", "SM61_TITANX"), ("combo", "SM61_TITANX_B"), ("combo-b", "SM61_TITANX"), ("combo-b", "SM61_TITANX_B")]
    for row in cycles.values():
        assert (row["value"], row["baseline_value"], row["normalised"], row["sims"]) == (TOTAL_CYCLES, TOTAL_CYCLES, 1.0, 1)
    assert {row["value"] for row in table(traces, "l2-study", "gpu_tot_ipc").values()} == {TOTAL_IPC}
    # A per-kernel stat: the kernels' own values summed, 5534 + 7506 + 5408.
    assert {row["value"] for row in table(traces, "l2-study", "gpu_sim_cycle").values()} == {TOTAL_CYCLES}

    # Runs are named and tagged as their campaign, and found so.
    runs = api(traces, "/api/runs?tag=l2").json()
    assert sorted(r["id"] for r in runs) == sorted(done["runs"]) and {r["name"] for r in runs} == {"l2-study"}
    assert sorted(r["id"] for r in api(traces, "/api/runs?name=l2-study").json()) == sorted(done["runs"])
    assert api(traces, "/api/runs?tag=nothing").json() == []
    assert [c["name"] for c in api(traces, "/api/campaigns").json()] == ["l2-study"]

    # A top-up: a replica more of each cell, and a config whose sims fail, which count for nothing.
    topped = post(traces, "/api/campaigns/l2-study/entries", {"configs": ["SM61_BROKEN"], "replicas": 1})
    assert topped.status_code == 200, topped.text
    assert topped.json()["configs"] == ["SM61_TITANX", "SM61_TITANX_B", "SM61_BROKEN"]
    assert len(topped.json()["sims"]) == 12
    done = ended(traces, "l2-study")
    assert done["state"] == "failed" and done["sim_counts"] == {"succeeded": 8, "failed": 4}
    cycles = table(traces, "l2-study", "gpu_tot_sim_cycle", baseline="SM61_TITANX_B")
    assert cycles["combo", "SM61_TITANX"]["sims"] == 2 and cycles["combo", "SM61_TITANX"]["normalised"] == 1.0
    assert (cycles["combo-b", "SM61_BROKEN"]["value"], cycles["combo-b", "SM61_BROKEN"]["sims"]) == (None, 0)
    assert cycles["combo-b", "SM61_BROKEN"]["normalised"] is None

    # A retry runs the failed sims again, through their runs' own retry.
    retried = post(traces, "/api/campaigns/l2-study/retry")
    assert retried.status_code == 200, retried.text
    done = ended(traces, "l2-study")
    broken = [s for s in done["sims"] if s["gpu_config"] == "SM61_BROKEN"]
    assert len(broken) == 4 and all(s["state"] == "failed" for s in broken)
    for run_id in done["runs"]:
        sims = api(traces, f"/api/runs/{run_id}").json()["sims"]
        assert all(s.get("attempt") == 2 for s in sims if s["gpu_config"] == "SM61_BROKEN")

    # A new trace: a run on every config, with as many replicas as the others.
    upload(traces, "combo-c")
    more = post(traces, "/api/campaigns/l2-study/entries", {"traces": ["combo-c"]})
    assert more.status_code == 200, more.text
    assert more.json()["traces"] == ["combo", "combo-b", "combo-c"]
    assert len([s for s in more.json()["sims"] if s["trace_id"] == "combo-c"]) == 6


def test_a_campaign_is_cancelled_and_retried_as_a_whole(traces: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "60")
    assert post(traces, "/api/campaigns", {**BODY, "name": "slow"}).status_code == 201
    wait_until(lambda: campaign(traces, "slow")["sim_counts"].get("running"), 30, "a sim runs")
    cancelled = post(traces, "/api/campaigns/slow/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled", cancelled.text
    assert cancelled.json()["sim_counts"] == {"cancelled": 4}
    assert all(row["value"] is None for row in table(traces, "slow", "gpu_tot_sim_cycle").values())

    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "0.02")
    assert post(traces, "/api/campaigns/slow/retry").json()["state"] == "active"
    assert ended(traces, "slow")["sim_counts"] == {"succeeded": 4}


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ({**BODY, "traces": ["nowhere"]}, 404, "trace nowhere not found"),
        ({**BODY, "configs": ["SM61_TITANX", "SM61_NOPE"]}, 422, "unknown GPU config SM61_NOPE"),
        ({**BODY, "traces": []}, 422, "traces"),
        ({**BODY, "traces": ["combo", "combo"]}, 422, "traces named more than once: combo"),
        ({**BODY, "baseline": "SM7_QV100"}, 422, "baseline SM7_QV100 is not one of the campaign's configs"),
        ({**BODY, "name": "no spaces"}, 422, "String should match pattern"),
        ({**BODY, "base": "SM61_TITANX"}, 422, "a grid goes with a base config, and a base with a grid"),
        ({**BODY, "configs": []}, 422, "a campaign needs configs, or a base and a grid"),
        ({**BODY, "base": "SM61_TITANX", "grid": {"-gpgpu_max_cycle": []}}, 422, "each with at least one value"),
        ({**BODY, "base": "SM61_TITANX", "grid": {"-no_such_option": ["1"]}}, 422, "-no_such_option"),
        ({**BODY, "base": "SM61_NOPE", "grid": {"-gpgpu_max_cycle": ["0"]}}, 422, "unknown GPU config SM61_NOPE"),
        ({**BODY, "extra": 1}, 422, "Extra inputs are not permitted"),
    ],
)
def test_a_bad_campaign_is_refused_and_makes_nothing(traces: LiveServer, body: dict[str, Any], status: int, detail: str) -> None:
    refused = post(traces, "/api/campaigns", body)
    assert refused.status_code == status, refused.text
    assert detail in refused.text
    assert api(traces, "/api/campaigns").json() == [] and api(traces, "/api/runs").json() == []


def test_a_campaign_name_is_taken_once_and_top_ups_and_tables_refuse_clearly(traces: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "60")
    assert post(traces, "/api/campaigns", BODY).status_code == 201
    again = post(traces, "/api/campaigns", {**BODY, "traces": ["combo"]})
    assert again.status_code == 409 and "a campaign named l2-study exists already" in again.text
    assert len(api(traces, "/api/runs").json()) == 2

    for body, detail in [
        ({}, "the top-up adds nothing"),
        ({"traces": ["combo"]}, "has traces combo already"),
        ({"configs": ["SM61_TITANX"]}, "has configs SM61_TITANX already"),
        ({"configs": ["SM61_NOPE"]}, "unknown GPU config SM61_NOPE"),
    ]:
        refused = post(traces, "/api/campaigns/l2-study/entries", body)
        assert refused.status_code == 422 and detail in refused.text, refused.text
    assert len(campaign(traces, "l2-study")["sims"]) == 4
    assert post(traces, "/api/campaigns/nowhere/entries", {"replicas": 1}).status_code == 404
    assert httpx.get(f"{traces.url}/api/campaigns/nowhere", headers=AUTH).status_code == 404
    no_stat = httpx.get(f"{traces.url}/api/campaigns/l2-study/table", headers=AUTH)
    assert no_stat.status_code == 422 and "stat is required" in no_stat.text
    bad = httpx.get(f"{traces.url}/api/campaigns/l2-study/table?stat=gpu_tot_ipc&baseline=SM7_QV100", headers=AUTH)
    assert bad.status_code == 422 and "baseline SM7_QV100 is not one of" in bad.text
    post(traces, "/api/campaigns/l2-study/cancel")


def test_cascade_sweep_and_campaign_show_and_list(traces: LiveServer) -> None:
    made = cascade(
        traces, "sweep", "--name", "cli-study", "--trace", "combo", "--trace", "combo-b", "--config", "SM61_TITANX",
        "--config", "SM61_TITANX_B", "--tag", "cli", "--baseline", "SM61_TITANX",
    )
    assert made.returncode == 0, made.stderr
    assert re.fullmatch(r"campaign cli-study \(campaign-[0-9a-f]+\): 2 runs, 4 sims\n", made.stdout), made.stdout
    ended(traces, "cli-study")
    shown = cascade(traces, "campaign", "show", "cli-study")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("campaign  cli-study  (campaign-") and lines[0].endswith("succeeded  (4 succeeded)")
    assert sum(" succeeded " in line and "3/3" in line for line in lines) == 4
    assert "gpu_tot_sim_cycle, mean of succeeded sims, normalised to SM61_TITANX" in lines
    assert [line.split() for line in lines if line.startswith("combo")][-2:] == [
        ["combo", "18.4", "k", "(1.000)", "18.4", "k", "(1.000)"], ["combo-b", "18.4", "k", "(1.000)", "18.4", "k", "(1.000)"]
    ]
    ipc = cascade(traces, "campaign", "show", "cli-study", "--stat", "gpu_tot_ipc", "--json")
    assert ipc.returncode == 0 and '"value":8.6891' in ipc.stdout.splitlines()[1]
    listed = cascade(traces, "campaign", "list")
    assert listed.stdout.splitlines()[1].split()[:6] == ["cli-study", "succeeded", "2", "2", "1", "4"]
    runs = cascade(traces, "runs", "--tag", "cli", "--json")
    assert {r["name"] for r in json.loads(runs.stdout)} == {"cli-study"} and len(json.loads(runs.stdout)) == 2
    grid = cascade(traces, "sweep", "--name", "cli-grid", "--trace", "combo", "--base", "SM61_TITANX", "--grid", "gpgpu_max_cycle=0|0")
    assert grid.returncode == 2 and "values of -gpgpu_max_cycle named more than once" in grid.stderr, grid.stderr
    grid = cascade(traces, "sweep", "--name", "cli-grid", "--trace", "combo", "--base", "SM61_TITANX", "--grid", "-gpgpu_max_cycle=0", "--json")
    assert grid.returncode == 2 and "expected one argument" in grid.stderr  # argparse's: hence the leading - may be left out
    grid = cascade(traces, "sweep", "--name", "cli-grid", "--trace", "combo", "--base", "SM61_TITANX", "--grid", "gpgpu_max_cycle=0", "--json")
    assert grid.returncode == 0 and json.loads(grid.stdout)["configs"] == ["SM61_TITANX-cli-grid-1"], grid.stderr
    run = cascade(traces, "run", "show", json.loads(runs.stdout)[0]["id"])
    assert "name     cli-study" in run.stdout.splitlines() and "tags     cli" in run.stdout.splitlines()


def test_a_grid_over_a_base_makes_a_variant_per_point(traces: LiveServer) -> None:
    """-gpgpu_max_cycle 0 replays vectoradd's whole recording; 1000 the one that stops at
    that limit, a sim cut short, which counts in no cell. vectoradd-100-32 on SM61_TITANX
    ends at gpu_tot_sim_cycle = 5534."""
    body = tar_of(files_of("vectoradd-100-32"), top="vectoradd-100-32")
    response = httpx.post(f"{traces.url}/api/traces?id=vec", content=body, headers={**AUTH, "Content-Type": "application/x-tar"})
    assert response.status_code == 202, response.text
    grid = {"name": "cycles", "traces": ["vec"], "configs": ["SM61_TITANX"], "base": "SM61_TITANX", "grid": {"-gpgpu_max_cycle": ["0", "1000"]}}
    created = post(traces, "/api/campaigns", {**grid, "baseline": "SM61_TITANX"})
    assert created.status_code == 201, created.text
    assert created.json()["configs"] == ["SM61_TITANX", "SM61_TITANX-cycles-1", "SM61_TITANX-cycles-2"]
    variant = api(traces, "/api/gpu-configs/SM61_TITANX-cycles-2").json()
    assert (variant["base"], variant["options"]) == ("SM61_TITANX", {"-gpgpu_max_cycle": "1000"})
    done = ended(traces, "cycles")
    assert done["sim_counts"] == {"succeeded": 3} and [s.get("cut_short", False) for s in done["sims"]] == [False, False, True]
    cycles = table(traces, "cycles", "gpu_tot_sim_cycle")
    assert [(r["config"], r["value"], r["normalised"], r["sims"]) for r in cycles.values()] == [
        ("SM61_TITANX", 5534.0, 1.0, 1), ("SM61_TITANX-cycles-1", 5534.0, 1.0, 1), ("SM61_TITANX-cycles-2", None, None, 0)
    ]


@pytest.mark.parametrize(
    ("given", "values"),
    [
        ("gpgpu_n_clusters=14,28", ["14", "28"]),
        ("-gpgpu_n_clusters=14|28", ["14", "28"]),
        # A cache config holds commas: a comma never splits one, so a single value is one point.
        ("gpgpu_cache:dl2=S:32:128:16,L:B:m:L:P,A:256:64,16:0,32", ["S:32:128:16,L:B:m:L:P,A:256:64,16:0,32"]),
        ("gpgpu_cache:dl2=S:32:128:16,L:B:m:L:P|S:64:128:16,L:B:m:L:P", ["S:32:128:16,L:B:m:L:P", "S:64:128:16,L:B:m:L:P"]),
    ],
)
def test_a_grid_argument_splits_at_commas_only_where_values_cannot_hold_them(given: str, values: list[str]) -> None:
    assert grid_arg(given) == ("-" + given.lstrip("-").partition("=")[0], values)
