"""Retry and top-up end to end: `POST /api/runs/{id}/retry` and `POST /api/runs/{id}/entries`
through HTTP and the `cascade` command, against a real server whose runner drives the fake
simulator (SM61_BROKEN fails as a real Accel-Sim does on an option it does not know)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from cascade_cli.client import ApiClient
from cascade_core import events as ev
from cascade_nats import subjects
from tests.cascade_http.live import LiveServer
from tests.cascade_http.test_runs_cli import AUTH, api, cascade, live, tree, upload_combo
from tests.support import wait_until

__all__ = ["live", "tree"]  # the fixtures, shared with the runs CLI's tests


def post(live: LiveServer, path: str, body: object = None, headers: dict[str, str] | None = None) -> httpx.Response:
    content = None if body is None else json.dumps(body)
    return httpx.post(live.url + path, content=content, headers={**AUTH, "Content-Type": "application/json", **(headers or {})}, timeout=60)


def create(live: LiveServer, *entries: tuple[str, int], fresh: bool = False) -> str:
    """A run of the entries; with `fresh`, its sims all simulate rather than the first alone
    (the others taking its result)."""
    asked = {"fresh": True} if fresh else {}
    body = {"trace_id": "combo", "entries": [{"gpu_config": c, "count": n, **asked} for c, n in entries]}
    response = post(live, "/api/runs", body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def ended(live: LiveServer, run_id: str) -> dict[str, Any]:
    """The run once it is no longer active."""
    wait_until(lambda: api(live, f"/api/runs/{run_id}").json()["state"] != "active", 60, f"run {run_id} ends")
    return dict(api(live, f"/api/runs/{run_id}").json())


def by_config(detail: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(s["gpu_config"], s["replica"]): s for s in detail["sims"]}


def events_on(live: LiveServer, subject: str) -> list[ev.Event]:
    """The events on a subject, oldest first."""

    async def go() -> list[ev.Event]:
        return [item.event async for item in live.cascade.store.read(subject)]

    return anyio.run(go)


def run_events(live: LiveServer, run_id: str) -> list[str]:
    """The types of the events on the run's own subject, oldest first."""
    return [type(e).__name__ for e in events_on(live, subjects.run(run_id))]


@pytest.fixture
def combo(live: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "0.05")
    upload_combo(live)
    yield live


def test_retry_starts_a_new_attempt_of_each_failed_sim_and_keeps_the_attempts_before(combo: LiveServer) -> None:
    run_id = create(combo, ("SM61_TITANX", 1), ("SM61_BROKEN", 1))
    first = ended(combo, run_id)
    assert first["state"] == "failed"
    client = ApiClient(combo.url, "t")
    stream = f"/api/runs/{run_id}/events"
    end = [e.id for e in client.events(stream)][0]  # a stream opened on an ended run is its snapshot
    assert list(client.events(stream, end)) == [], "204: nothing more to come"
    broken = by_config(first)[("SM61_BROKEN", 0)]
    assert broken["state"] == "failed" and "attempt" not in broken and "attempts" not in broken  # the reference's shape

    retried = post(combo, f"/api/runs/{run_id}/retry")
    assert retried.status_code == 200, retried.text
    answer = retried.json()
    assert answer["state"] == "active"
    again = by_config(answer)[("SM61_BROKEN", 0)]
    assert again["state"] in ("pending", "launching", "running") and again["attempt"] == 2
    assert again["error"] is None and again["exit_code"] is None and again["kernels_done"] == 0
    assert again["attempts"] == [
        {
            "attempt": 1, "state": "failed", "error": broken["error"], "exit_code": broken["exit_code"], "runner_id": again["attempts"][0]["runner_id"],
            "host": again["attempts"][0]["host"], "started_at": broken["started_at"], "finished_at": broken["finished_at"],
        }
    ]
    assert by_config(answer)[("SM61_TITANX", 0)] == by_config(first)[("SM61_TITANX", 0)], "a succeeded sim is left as it was"
    # That a retry asked again while its sims wait or run changes nothing is decide_retry's rule
    # (tests/cascade_core/test_runs.py): here the broken sim fails again within a second, so a
    # second request could come before or after that.
    second = ended(combo, run_id)
    assert run_events(combo, run_id) == ["RunCreated", "RunRetryRequested"]
    assert second["state"] == "failed" and second["sim_counts"] == {"succeeded": 1, "failed": 1}
    # Resumed from the first end, the stream shows the retry and ends with the run's new end.
    resumed = [(e.event, json.loads(e.data)) for e in client.events(stream, end)]
    runs = [data["state"] for kind, data in resumed if kind == "run"]
    assert runs == ["active", "failed"] and resumed[-1][0] == "run"
    retried_sim = [data for kind, data in resumed if kind == "sim" and data["id"] == broken["id"]]
    assert retried_sim[0]["state"] == "pending" and retried_sim[-1]["state"] == "failed" and retried_sim[-1]["attempt"] == 2
    broken_again = by_config(second)[("SM61_BROKEN", 0)]
    assert broken_again["attempt"] == 2 and broken_again["error"] == broken["error"]
    assert [a["attempt"] for a in broken_again["attempts"]] == [1]
    log = httpx.get(f"{combo.url}/api/sims/{broken_again['id']}/log", headers=AUTH, timeout=30).text
    assert log.count("no_such_option") >= 1, "the log is the new attempt's"

    shown = cascade(combo, "run", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert f"  SM61_BROKEN r0 {broken['id']} attempt 1 failed: {' '.join(broken['error'].split())}" in shown.stdout.splitlines()


def test_retry_runs_a_cancelled_run_again(combo: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "60")
    run_id = create(combo, ("SM61_TITANX", 2))
    wait_until(lambda: api(combo, f"/api/runs/{run_id}").json()["sim_counts"].get("running"), 30, "a sim runs")
    cancelled = post(combo, f"/api/runs/{run_id}/cancel").json()
    assert cancelled["state"] == "cancelled"

    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "0.05")
    retried = cascade(combo, "run", "retry", run_id, "--watch")
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert retried.stdout.splitlines()[-1] == f"run {run_id} succeeded: 2 succeeded"
    detail = api(combo, f"/api/runs/{run_id}").json()
    assert [s["state"] for s in detail["sims"]] == ["succeeded", "succeeded"]
    for sim in detail["sims"]:
        assert [a["state"] for a in sim["attempts"]] == ["cancelled"]
        assert sim["attempt"] == sim["attempts"][0]["attempt"] + 1
    kernels = api(combo, f"/api/runs/{run_id}/kernels").json()
    assert sorted((k["sim_id"], k["kernel_index"]) for k in kernels) == sorted((s["id"], i) for s in detail["sims"] for i in range(3))

    nothing = cascade(combo, "run", "retry", run_id)
    assert nothing.returncode == 0 and nothing.stdout == f"run {run_id} succeeded: 2 succeeded\n"


def test_a_cancel_ends_the_attempts_it_cancelled_whatever_retries_follow(combo: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancel and retry while most sims wait for a runner (two slots, six sims): the requests
    queued before the cancel are dropped unclaimed, so each waiting sim is launched once, as
    the attempt the retry asked for, and each running one twice (its cancelled attempt
    stopped, then the retry's)."""
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "60")
    run_id = create(combo, ("SM61_TITANX", 6), fresh=True)
    wait_until(lambda: api(combo, f"/api/runs/{run_id}").json()["sim_counts"].get("running") == 2, 30, "two sims run")
    running = {s["id"] for s in api(combo, f"/api/runs/{run_id}").json()["sims"] if s["state"] == "running"}
    assert post(combo, f"/api/runs/{run_id}/cancel").json()["state"] == "cancelled"
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "0.05")
    assert post(combo, f"/api/runs/{run_id}/retry").status_code == 200
    detail = ended(combo, run_id)
    assert detail["state"] == "succeeded", detail
    for sim in detail["sims"]:
        life = events_on(combo, subjects.chunk(run_id, sim["id"], "life", None))
        launched = [e.attempt for e in life if isinstance(e, ev.SimLaunched)]
        finished = [(e.attempt, e.outcome) for e in life if isinstance(e, ev.SimFinished)]
        if sim["id"] in running:
            # The stopped attempt's end as its runner saw it; the cancel before it makes it
            # `cancelled` in every read.
            assert launched == [1, 2] and finished == [(1, "failed"), (2, "succeeded")], life
            assert sim["attempt"] == 2 and [a["state"] for a in sim["attempts"]] == ["cancelled"]
        else:
            assert launched == [1] and finished == [(1, "succeeded")], life
            assert "attempt" not in sim and "attempts" not in sim


def test_entries_top_a_run_up_once_per_idempotency_key(combo: LiveServer) -> None:
    run_id = create(combo, ("SM61_TITANX", 1))
    assert ended(combo, run_id)["state"] == "succeeded"

    body = {"entries": [{"gpu_config": "SM61_TITANX", "count": 2}, {"gpu_config": "SM61_BROKEN", "count": 1}]}
    added = post(combo, f"/api/runs/{run_id}/entries", body, {"Idempotency-Key": "top-up-1"})
    assert added.status_code == 200, added.text
    answer = added.json()
    assert answer["state"] == "active"
    assert answer["entries"] == [{"gpu_config": "SM61_TITANX", "count": 1}, *body["entries"]]
    assert sorted(by_config(answer)) == [("SM61_BROKEN", 0), ("SM61_TITANX", 0), ("SM61_TITANX", 1), ("SM61_TITANX", 2)]
    same = post(combo, f"/api/runs/{run_id}/entries", body, {"Idempotency-Key": "top-up-1"})
    assert same.status_code == 200 and len(same.json()["sims"]) == 4, "the same request again adds nothing"
    other = post(combo, f"/api/runs/{run_id}/entries", {"entries": [{"gpu_config": "SM61_TITANX", "count": 1}]}, {"Idempotency-Key": "top-up-1"})
    detail = f"Idempotency-Key top-up-1 was used with another body on run {run_id}: send the same body again, or this one with a new key"
    assert (other.status_code, other.json()) == (422, {"detail": detail})

    done = ended(combo, run_id)
    assert done["state"] == "failed" and done["sim_counts"] == {"succeeded": 3, "failed": 1}

    watched = cascade(combo, "run", "add", run_id, "SM61_TITANXx2", "--watch")
    assert watched.returncode == 1, watched.stdout + watched.stderr
    assert f"run {run_id} failed: " in watched.stdout
    assert api(combo, f"/api/runs/{run_id}").json()["sim_counts"] == {"succeeded": 5, "failed": 1}
    replicas = sorted(r for c, r in by_config(api(combo, f"/api/runs/{run_id}").json()) if c == "SM61_TITANX")
    assert replicas == [0, 1, 2, 3, 4]


def test_retry_and_entries_refuse_as_create_does(combo: LiveServer) -> None:
    run_id = create(combo, ("SM61_TITANX", 1))
    for path in ("/api/runs/run-nope/retry", "/api/runs/run-nope/entries"):
        missing = post(combo, path, {"entries": [{"gpu_config": "SM61_TITANX", "count": 1}]})
        assert (missing.status_code, missing.json()) == (404, {"detail": "run run-nope not found"})
    unknown = post(combo, f"/api/runs/{run_id}/entries", {"entries": [{"gpu_config": "SM99_NOPE", "count": 1}]})
    assert (unknown.status_code, unknown.json()) == (422, {"detail": "unknown GPU config SM99_NOPE: no live runner has it, nor this server's Accel-Sim install (configs offered for sm_61 traces: SM61_BROKEN, SM61_TITANX; 2 more of other archs)"})
    invalid = post(combo, f"/api/runs/{run_id}/entries", {"entries": [{"gpu_config": "SM61_TITANX", "count": 0}]})
    assert invalid.status_code == 422 and invalid.json()["detail"][0]["loc"] == ["body", "entries", 0, "count"]
    empty = post(combo, f"/api/runs/{run_id}/entries", {"entries": []})
    assert empty.status_code == 422
    assert len(api(combo, f"/api/runs/{run_id}").json()["sims"]) == 1, "a refused top-up adds nothing"

    failed = cascade(combo, "run", "add", run_id, "SM99_NOPE")
    detail = f"POST /api/runs/{run_id}/entries: 422 unknown GPU config SM99_NOPE: no live runner has it, nor this server's Accel-Sim install (configs offered for sm_61 traces: SM61_BROKEN, SM61_TITANX; 2 more of other archs)"
    assert (failed.returncode, failed.stdout, failed.stderr) == (2, "", f"cascade: error: {detail}\n")
