"""`DELETE /api/runs/{id}`: refused while the run has unfinished sims, then the run is gone
from every route, list and table, campaigns' included, while its events stay in the log; a
deleted run is unknown to every command on it."""

from __future__ import annotations

import json

from starlette.testclient import TestClient

from cascade_core import events as ev
from tests.cascade_http import runs_world as w
from tests.cascade_http.test_runs import RUN, _run_history, create

CAMPAIGN = [
    ev.CampaignCreated(id="camp-created", at=w.at("09:00:00"), campaign_id="camp-1", name="study"),
    ev.CampaignRunsAdded(
        id="camp-runs", at=w.at("09:00:01"), campaign_id="camp-1", name="study", runs=[ev.CampaignRun(run_id=w.RUN_ID, trace_id="demo")]
    ),
]
TABLES = ("runs", "sims", "kernels", "kernel_stats", "sim_log", "sim_files", "campaign_runs")


def _rows(client: TestClient, table: str) -> int:
    answer = client.post("/api/sql", json={"sql": f"SELECT count(*) AS n FROM {table}", "format": "json"})
    assert answer.status_code == 200, answer.text
    return int(json.loads(answer.content)["rows"][0][0])


def test_a_finished_run_is_deleted_from_every_list_and_query_and_its_events_stay(client: TestClient) -> None:
    w.append(client, w.trace_events() + w.reference_run() + CAMPAIGN)
    assert all(_rows(client, table) for table in TABLES)
    assert client.get("/api/campaigns/study").json()["runs"] == [w.RUN_ID]

    deleted = client.delete(RUN)
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert {table: _rows(client, table) for table in TABLES} == {table: 0 for table in TABLES}
    assert client.get("/api/runs").json() == []
    assert client.get("/api/campaigns/study").json()["runs"] == []
    for path in (RUN, f"{RUN}/kernels", f"{RUN}/comparison", f"{RUN}/results", f"/api/sims/{w.SIMS[0]}", f"/api/sims/{w.SIMS[0]}/log"):
        assert client.get(path).status_code == 404, path
    assert client.get("/api/traces/demo").status_code == 200  # its trace stays
    assert _run_history(client, w.RUN_ID) == ["run.created.v1", "run.deleted.v1"]

    # Gone as an unknown run is: deleting again, cancelling, retrying, topping it up.
    for method, path, body in (
        ("DELETE", RUN, None), ("POST", f"{RUN}/cancel", None), ("POST", f"{RUN}/retry", None),
        ("POST", f"{RUN}/entries", {"entries": [{"gpu_config": "SM86_RTX3070", "count": 1}]}),
    ):
        answer = client.request(method, path, json=body)
        assert (answer.status_code, answer.json()) == (404, {"detail": f"run {w.RUN_ID} not found"}), path
    assert _run_history(client, w.RUN_ID) == ["run.created.v1", "run.deleted.v1"]
    assert client.delete("/api/runs/run-000000000000").status_code == 404


def test_an_active_run_is_refused_until_cancelled(client: TestClient) -> None:
    w.append(client, w.trace_events())
    run = create(client, ("SM86_RTX3070", 2))
    refused = client.delete(f"/api/runs/{run['id']}")
    assert (refused.status_code, refused.json()) == (409, {
        "detail": f"run {run['id']} is active (2 of its sims unfinished): cancel it first (POST /api/runs/{run['id']}/cancel, or cascade run "
        f"cancel {run['id']}), then delete it"
    })
    assert client.get(f"/api/runs/{run['id']}").status_code == 200
    assert client.post(f"/api/runs/{run['id']}/cancel").json()["state"] == "cancelled"
    assert client.delete(f"/api/runs/{run['id']}").status_code == 204
    assert client.get(f"/api/runs/{run['id']}").status_code == 404
    assert _run_history(client, run["id"]) == ["run.created.v1", "run.cancel_requested.v1", "run.deleted.v1"]
