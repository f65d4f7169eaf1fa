"""The result cache end to end (cascade_sim/result_cache.py): a real service and runner on a
real nats-server, driving the fake simulator, which appends each start to a file
($CASCADE_FAKE_ACCELSIM_STARTS), so what was simulated is counted, not guessed.

A sim of the same trace contents, config files, build and settings as one that succeeded
takes its result and says so; it answers every route as that sim does, but for its times, which
are its own (it starts and finishes after it was created). `fresh` forces a run; a failed or cancelled sim, or another config file, is never taken.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_process.service import starlette_app
from tests.cascade_http.trace_archives import files_of, upload_ready
from tests.cascade_sim.world import add_config_lines, accelsim_tree, create_run, run_kernels, start_run, wait_run

TOKEN = "cache"
CONFIG = "SM61_TITANX"
NAMING = {"sim_id", "run_id"}  # what says which sim a kernel row is of


class World:
    def __init__(self, client: TestClient, tree: Path, starts: Path) -> None:
        self.client = client
        self.tree = tree
        self.starts = starts

    @property
    def simulated(self) -> int:
        """How many times the simulator was started."""
        return len(self.starts.read_text().splitlines()) if self.starts.exists() else 0

    def run(self, **asked: object) -> dict[str, Any]:
        return wait_run(self.client, start_run(self.client, "combo", CONFIG, **asked))

    def get(self, path: str) -> Any:
        response = self.client.get(path)
        assert response.status_code == 200, response.text
        return response.json() if response.headers["content-type"].startswith("application/json") else response.content


@pytest.fixture
def world(tmp_path: Path, nats_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    starts = tmp_path / "starts.txt"
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_STARTS", str(starts))
    tree = accelsim_tree(tmp_path / "accel-sim")
    settings = Settings(token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=tree, runner_slots=2, samples=False)
    with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        upload_ready(client, files_of("combo-vec-mm-xz"), "combo")
        yield World(client, tree, starts)


def _seconds(sim: dict[str, Any]) -> float:
    return (datetime.fromisoformat(sim["finished_at"]) - datetime.fromisoformat(sim["started_at"])).total_seconds()


def _unnamed(answer: Any) -> Any:
    """An answer without what names its sim and run, at any depth."""
    if isinstance(answer, dict):
        return {k: _unnamed(v) for k, v in answer.items() if k not in NAMING}
    return [_unnamed(v) for v in answer] if isinstance(answer, list) else answer


def test_a_second_run_of_the_same_trace_and_config_simulates_nothing_and_answers_every_route_the_same(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cascade.runner")
    first = world.run()
    assert first["state"] == "succeeded" and world.simulated == 1
    second = world.run()
    assert second["state"] == "succeeded"
    assert world.simulated == 1, "the second run took the first one's result"
    (a,), (b,) = first["sims"], second["sims"]
    assert "cached_from" not in a and b["cached_from"] == a["id"]
    same = ("state", "error", "exit_code", "kernels_done", "kernels_total", "latest", "log_tail")
    assert {k: b[k] for k in same} == {k: a[k] for k in same}
    created, started, finished = (datetime.fromisoformat(b[k]) for k in ("created_at", "started_at", "finished_at"))
    assert datetime.fromisoformat(a["finished_at"]) < created <= started <= finished

    assert _unnamed(run_kernels(world.client, second["id"])) == _unnamed(run_kernels(world.client, first["id"]))
    ra, rb = world.get(f"/api/sims/{a['id']}/results"), world.get(f"/api/sims/{b['id']}/results")
    assert rb["sim"]["cached_from"] == a["id"] and "cached_from" not in ra["sim"]
    assert _unnamed({k: v for k, v in rb.items() if k != "sim"}) == _unnamed({k: v for k, v in ra.items() if k != "sim"})
    assert world.get(f"/api/sims/{b['id']}/log") == world.get(f"/api/sims/{a['id']}/log")
    files_a, files_b = world.get(f"/api/sims/{a['id']}/files"), world.get(f"/api/sims/{b['id']}/files")
    assert [(f["name"], f["size"]) for f in files_b] == [(f["name"], f["size"]) for f in files_a]
    for f in files_a:
        assert world.get(f"/api/sims/{b['id']}/files/{f['name']}") == world.get(f"/api/sims/{a['id']}/files/{f['name']}")
    (taken,) = [r.getMessage() for r in caplog.records if "from the cache" in r.getMessage()]
    print(f"\nsimulated from launch to finish in {_seconds(a):.3f} s; taken in {_seconds(b):.3f} s; {taken}")


def test_fresh_forces_a_run_whose_result_is_then_the_one_taken(world: World) -> None:
    first = world.run()
    fresh = world.run(fresh=True)
    assert fresh["state"] == "succeeded" and world.simulated == 2
    assert "cached_from" not in fresh["sims"][0]
    third = world.run()
    assert world.simulated == 2 and third["sims"][0]["cached_from"] in {first["sims"][0]["id"], fresh["sims"][0]["id"]}


def test_a_failed_or_cancelled_sim_is_never_taken(world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # No recording to replay: the fake exits 1, as a simulator that fails.
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_LOGS", str(tmp_path / "no-logs"))
    failed = world.run()
    assert failed["state"] == "failed" and world.simulated == 1
    monkeypatch.delenv("CASCADE_FAKE_ACCELSIM_LOGS")

    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "1")
    run_id = start_run(world.client, "combo", CONFIG)
    wait_run(world.client, run_id, until="running")
    assert world.client.post(f"/api/runs/{run_id}/cancel").status_code == 200
    assert wait_run(world.client, run_id)["state"] == "cancelled" and world.simulated == 2
    monkeypatch.delenv("CASCADE_FAKE_ACCELSIM_PACE")

    ran = world.run()
    assert ran["state"] == "succeeded" and world.simulated == 3 and "cached_from" not in ran["sims"][0]


def test_another_config_file_or_other_settings_miss(world: World) -> None:
    world.run()
    world.run(reuse=True)
    assert world.simulated == 2, "reusing repeated kernels is another result"
    add_config_lines(world.tree, CONFIG, "# a comment: another file, the same options")
    changed = world.run()
    assert changed["state"] == "succeeded" and world.simulated == 3 and "cached_from" not in changed["sims"][0]


def test_replicas_launched_together_simulate_once(world: World) -> None:
    run = wait_run(world.client, create_run(world.client, "combo", CONFIG, count=3)["id"])
    assert run["state"] == "succeeded" and world.simulated == 1
    simulated = [s for s in run["sims"] if "cached_from" not in s]
    assert len(simulated) == 1
    assert sorted(s.get("cached_from", "") for s in run["sims"]) == ["", simulated[0]["id"], simulated[0]["id"]]


def test_a_split_sims_chunks_are_taken_chunk_by_chunk(world: World) -> None:
    split = {"kernels_per_chunk": 1, "warmup": 2}
    first = world.run(split=split)
    assert first["state"] == "succeeded" and world.simulated == 3, "a simulator per chunk"
    second = world.run(split=split)
    assert second["state"] == "succeeded" and world.simulated == 3
    (a,), (b,) = first["sims"], second["sims"]
    assert b["cached_from"] == a["id"] and [c["state"] for c in b["split"]["chunks"]] == ["succeeded"] * 3
    assert _unnamed(run_kernels(world.client, second["id"])) == _unnamed(run_kernels(world.client, first["id"]))
    assert world.get(f"/api/sims/{b['id']}/log") == world.get(f"/api/sims/{a['id']}/log")


def test_the_same_campaign_again_simulates_nothing_and_answers_the_same_table(world: World) -> None:
    upload_ready(world.client, files_of("vectoradd-100-32"), "vec")
    tables = []
    for name in ("study", "study-again"):
        body = {"name": name, "traces": ["combo", "vec"], "configs": [CONFIG], "replicas": 2}
        created = world.client.post("/api/campaigns", json=body)
        assert created.status_code == 201, created.text
        for run_id in created.json()["runs"]:
            assert wait_run(world.client, run_id)["state"] == "succeeded"
        tables.append(world.get(f"/api/campaigns/{name}/table?stat=gpu_tot_sim_cycle"))
        assert world.simulated == 2, "one sim of each trace simulated, in the first campaign only"
    first, again = ({k: v for k, v in table.items() if k != "campaign"} for table in tables)
    assert again == first and [row["sims"] for row in first["rows"]] == [2, 2]
    cached = world.get("/api/campaigns/study-again")["sims"]
    assert len(cached) == 4 and all(s.get("cached_from") for s in cached)


def test_a_deleted_runs_result_is_still_taken_with_its_files(world: World) -> None:
    # A result is still true once its run is deleted: a hit reads the source's events from
    # the log and references its stored files, both of which the deletion leaves.
    first = world.run()
    (a,) = first["sims"]
    files = {f["name"]: world.get(f"/api/sims/{a['id']}/files/{f['name']}") for f in world.get(f"/api/sims/{a['id']}/files")}
    log = world.get(f"/api/sims/{a['id']}/log")
    assert world.client.delete(f"/api/runs/{first['id']}").status_code == 204
    assert world.client.get(f"/api/sims/{a['id']}").status_code == 404

    second = world.run()
    (b,) = second["sims"]
    assert second["state"] == "succeeded" and world.simulated == 1 and b["cached_from"] == a["id"]
    assert {f["name"]: world.get(f"/api/sims/{b['id']}/files/{f['name']}") for f in world.get(f"/api/sims/{b['id']}/files")} == files
    assert world.get(f"/api/sims/{b['id']}/log") == log

    # A reference that took it: its wall time was the source's, which is gone, so unknown.
    fast = world.run(reuse=True, reference=True)
    assert fast["state"] == "succeeded"
    (ref,) = [s for s in fast["sims"] if s.get("reference_for")]
    assert ref["cached_from"] == a["id"]
    compared = world.get(f"/api/sims/{ref['reference_for']}/reference")
    assert compared["reference"]["wall_s"] is None and compared["speedup"] is None and compared["fast"]["wall_s"] > 0
