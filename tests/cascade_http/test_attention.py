"""With no runner left, a run says so, and the queue depth counts what waits."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from starlette.testclient import TestClient

from cascade_cli.runs_text import run_text
from cascade_core import attention
from cascade_core import events as ev
from cascade_api.models import RunDetail
from tests.cascade_http import runs_world as w
from tests.cascade_http.test_runs import create

CONFIG = "SM86_RTX3070"
LACKING = f"no live runner has GPU config {CONFIG}"


def test_sims_no_runner_takes_or_whose_runner_is_gone_say_so_and_are_counted_waiting(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attention, "UNTAKEN_AFTER_S", 0.0)
    w.append(client, w.trace_events())
    run = create(client, (CONFIG, 2))
    first, second = (s["id"] for s in run["sims"])
    detail = client.get(f"/api/runs/{run['id']}").json()
    assert [s["attention"] for s in detail["sims"]] == [f"no runner has taken this for 0 s; {LACKING}"] * 2
    health = client.get("/api/health")
    assert health.status_code == 200
    assert (health.json()["queue_depth"], health.json()["runners"], health.json()["problems"]) == (2, 0, [])

    claim = ev.SimClaimed(id="claim", at=datetime.now(UTC), run_id=run["id"], sim_id=first, attempt=1, runner_id="vm-gone", host="h")
    w.append(client, [claim])
    sims = {s["id"]: s for s in client.get(f"/api/runs/{run['id']}").json()["sims"]}
    assert sims[first]["attention"] == f"runner vm-gone lost; {LACKING} to take over"
    assert sims[second]["attention"].startswith("no runner has taken this for ")
    assert client.get("/api/health").json()["queue_depth"] == 2, "a sim whose runner is gone waits too"
    shown = run_text(msgspec.json.decode(client.get(f"/api/runs/{run['id']}").content, type=RunDetail))
    assert shown[-3:-1] == [
        "2 sims may never finish unless someone acts:",
        f"  {CONFIG} r0 {first}: runner vm-gone lost; {LACKING} to take over",
    ], "cascade run show says it too"
    assert shown[-1].startswith(f"  {CONFIG} r1 {second}: no runner has taken this for ")

    cancelled = client.post(f"/api/runs/{run['id']}/cancel").json()
    assert [s.get("attention") for s in cancelled["sims"]] == [None, None], "a finished sim needs nothing"
    assert client.get("/api/health").json()["queue_depth"] == 0
