"""Configs and placement come from the runners: a launch request goes only to runners that
have its config, through that config's consumer; the configs a run may name are the
service's own and the live runners' (each with its digest), so a `serve` without an
Accel-Sim install runs sims on the workers; and requests from before placement by config
are drained from the old shared consumer, which is then deleted."""

from __future__ import annotations

import hashlib
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats.js.api as api
import nats.js.errors
import pytest
from starlette.testclient import TestClient

from cascade_core import attention
from cascade_core import events as ev
from cascade_core.gpu_configs import config_digest
from cascade_nats import subjects
from tests.cascade_sim.test_runner import _claims, serve, service
from tests.cascade_sim.world import FAKE_SIMULATOR, accelsim_tree, add_config_lines, create_run, relabel, store_trace, wait_run, worker
from tests.support import TRACES, wait_until

TESTED_CFGS = ("gpu-simulator/gpgpu-sim/configs/tested-cfgs", "gpu-simulator/configs/tested-cfgs")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return accelsim_tree(tmp_path / "accel-sim")


def without(tree: Path, target: Path, *configs: str) -> Path:
    """A copy of the Accel-Sim tree `tree` lacking `configs`."""
    shutil.copytree(tree, target, symlinks=True)
    for config in configs:
        for folder in TESTED_CFGS:
            shutil.rmtree(target / folder / config, ignore_errors=True)
    return target


def offered(client: TestClient, name: str) -> list[dict[str, Any]]:
    return [c for c in client.get("/api/gpu-configs").json() if c["name"] == name]


def runner_with(client: TestClient, config: str) -> dict[str, Any]:
    (runner,) = [r for r in client.get("/api/runners").json() if config in r["configs"]]
    return runner  # type: ignore[no-any-return]


def consumer(client: TestClient, name: str) -> api.ConsumerInfo:
    return client.portal.call(service(client).store.js.consumer_info, subjects.STREAM, name)  # type: ignore[union-attr,no-any-return]


def exists(client: TestClient, name: str) -> bool:
    try:
        consumer(client, name)
    except nats.js.errors.NotFoundError:
        return False
    return True


def claims(client: TestClient, sim_id: str) -> list[ev.SimClaimed]:
    return client.portal.call(_claims, service(client), sim_id)  # type: ignore[union-attr]


def test_a_serve_without_accelsim_runs_on_the_worker_that_has_the_config_and_only_there(tmp_path: Path, nats_url: str, tree: Path) -> None:
    titanx_only = without(tree, tmp_path / "titanx", "SM7_QV100")
    volta_only = without(tree, tmp_path / "volta", "SM61_TITANX")
    with serve(tmp_path, nats_url, tree, accelsim_dir=None) as client:
        c = service(client)
        store_trace(c, client, "v", TRACES / "vectoradd-100-32", "sm_61")
        store_trace(c, client, "q", relabel(TRACES / "vectoradd-100-32", tmp_path / "volta-trace", 70), "sm_70")
        assert client.get("/api/gpu-configs").json() == [], "no install here, no runner yet"
        refused = client.post("/api/runs", json={"trace_id": "v", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]})
        assert (refused.status_code, refused.json()) == (
            422, {"detail": "unknown GPU config SM61_TITANX: no live runner has it, nor this server's Accel-Sim install (configs offered for sm_61 traces: none)"}
        )
        with worker(nats_url, titanx_only, tmp_path / "a", slots=2), worker(nats_url, volta_only, tmp_path / "b", slots=2) as b:
            wait_until(lambda: offered(client, "SM61_TITANX") and offered(client, "SM7_QV100"), 30, "the workers did not announce their configs")
            a_id, b_id = runner_with(client, "SM61_TITANX")["id"], runner_with(client, "SM7_QV100")["id"]
            (titanx,) = offered(client, "SM61_TITANX")
            assert (titanx["local"], titanx["runners"]) == (False, [a_id])
            assert titanx["digest"] == config_digest(_file_digests(tree, "SM61_TITANX"))

            run = wait_run(client, create_run(client, "v", "SM61_TITANX", count=4)["id"], timeout=60)
            assert run["sim_counts"] == {"succeeded": 4}
            taken = [claim for sim in run["sims"] for claim in claims(client, sim["id"])]
            assert sorted((claim.runner_id, claim.attempt) for claim in taken) == [(a_id, 1)] * 4

            titanx_requests = consumer(client, subjects.launch_consumer("SM61_TITANX"))
            volta_requests = consumer(client, subjects.launch_consumer("SM7_QV100"))
            assert titanx_requests.delivered is not None and volta_requests.delivered is not None
            assert (titanx_requests.delivered.consumer_seq, titanx_requests.num_redelivered) == (4, 0), "each taken once: no nak"
            assert volta_requests.delivered.consumer_seq == 0, "the other worker was offered nothing"

            # (and fails in the simulator: the trace's Pascal instructions are not Volta's)
            volta = wait_run(client, create_run(client, "q", "SM7_QV100")["id"], timeout=60)
            assert [claim.runner_id for s in volta["sims"] for claim in claims(client, s["id"])] == [b_id]
            refused = client.post("/api/runs", json={"trace_id": "v", "entries": [{"gpu_config": "SM61_TITANX_2X_L2", "count": 1}]})
            assert refused.status_code == 422 and "no live runner has it" in refused.json()["detail"]
            assert b.poll() is None


def test_two_configs_of_one_name_that_differ_are_told_apart_and_runners_say_what_they_run(tmp_path: Path, nats_url: str, tree: Path) -> None:
    changed = without(tree, tmp_path / "changed")
    add_config_lines(changed, "SM61_TITANX", "# a copy with a note: its files differ, its options do not")
    with serve(tmp_path, nats_url, tree, runner=False) as client, worker(nats_url, changed, tmp_path / "w", slots=3):
        wait_until(lambda: len(offered(client, "SM61_TITANX")) == 2, 30, "the worker did not announce its configs")
        runner = runner_with(client, "SM61_TITANX")
        digests = {"here": config_digest(_file_digests(tree, "SM61_TITANX")), "worker": config_digest(_file_digests(changed, "SM61_TITANX"))}
        both: list[dict[str, Any]] = [
            {"name": "SM61_TITANX", "arch": "sm_61", "core_clock_mhz": 1417.0, "digest": digests["here"], "local": True, "runners": []},
            {"name": "SM61_TITANX", "arch": "sm_61", "core_clock_mhz": 1417.0, "digest": digests["worker"], "local": False, "runners": [runner["id"]]},
        ]
        assert offered(client, "SM61_TITANX") == sorted(both, key=lambda c: str(c["digest"])), "by name, then digest"
        names = [c["name"] for c in client.get("/api/gpu-configs").json()]
        assert names == sorted(names)
        assert runner["slots"] == 3 and runner["host"] and isinstance(runner["load"], float)
        assert runner["configs"] == [c["name"] for c in runner["gpu_configs"]]
        assert {c["name"]: c["digest"] for c in runner["gpu_configs"]}["SM61_TITANX"] == digests["worker"]
        binary = hashlib.sha256(FAKE_SIMULATOR.read_bytes()).hexdigest()
        assert runner["simulator"] == {"binary_digest": binary, "accel_sim_build": None, "gpgpu_sim_build": None}, "no sim ran yet"

        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        assert wait_run(client, create_run(client, "v", "SM61_TITANX")["id"], timeout=60)["state"] == "succeeded"
        wait_until(lambda: runner_with(client, "SM61_TITANX")["simulator"]["accel_sim_build"], 10, "the build was not announced")
        built = runner_with(client, "SM61_TITANX")["simulator"]
        assert built["accel_sim_build"].startswith("accelsim-commit-") and built["gpgpu_sim_build"].startswith("4.2.0 ")


def test_a_sim_whose_config_no_live_runner_has_waits_for_one_saying_so(
    tmp_path: Path, nats_url: str, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(attention, "UNTAKEN_AFTER_S", 0.0)
    lacking = without(tree, tmp_path / "lacking", "SM61_TITANX")
    with serve(tmp_path, nats_url, tree, runner=False) as client:
        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        with worker(nats_url, lacking, tmp_path / "w"):
            wait_until(lambda: client.get("/api/runners").json(), 30, "the worker did not announce itself")
            run_id = create_run(client, "v", "SM61_TITANX")["id"]  # this server has the config, no runner does
            time.sleep(3)
            (sim,) = client.get(f"/api/runs/{run_id}").json()["sims"]
            assert sim["state"] == "pending" and sim["attention"].endswith("; no live runner has GPU config SM61_TITANX")
        with worker(nats_url, tree, tmp_path / "w2"):
            assert wait_run(client, run_id, timeout=60)["state"] == "succeeded"
        assert consumer(client, subjects.launch_consumer("SM61_TITANX")).num_redelivered == 0


def requested_before_placement(client: TestClient, run: dict[str, Any]) -> str:
    """The run's sim, requested again as the versions before placement by config did, on the
    shared consumer they made."""
    c = service(client)
    legacy = api.ConsumerConfig(
        durable_name=subjects.LEGACY_LAUNCH_CONSUMER, filter_subject=subjects.LEGACY_LAUNCH_REQUESTS,
        ack_policy=api.AckPolicy.EXPLICIT, deliver_policy=api.DeliverPolicy.ALL, ack_wait=30, max_deliver=-1, max_ack_pending=10_000,
    )
    client.portal.call(c.store.js.add_consumer, subjects.STREAM, legacy)  # type: ignore[union-attr]
    (sim,) = run["sims"]
    old = ev.SimQueued(  # an id of its own: the event store would take it for the run's own request
        id=f"{sim['id']}.before-placement.queued", at=datetime.now(UTC), run_id=run["id"], sim_id=sim["id"], trace_id="v", gpu_config="SM61_TITANX", kernels_total=2
    )
    assert subjects.of(old) == subjects.sim(run["id"], sim["id"], "queued")
    client.portal.call(c.append, old)  # type: ignore[union-attr]
    return str(sim["id"])


def test_requests_from_before_placement_are_drained_and_their_consumer_deleted(tmp_path: Path, nats_url: str, tree: Path) -> None:
    """A run whose request is on the old shared consumer as well as its config's (its run
    dispatched again after the upgrade) runs once, and the old consumer goes once empty."""
    with serve(tmp_path, nats_url, tree, runner=False) as client:
        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        run = create_run(client, "v", "SM61_TITANX")
        sim_id = requested_before_placement(client, run)
        with worker(nats_url, tree, tmp_path / "w", slots=2):
            assert wait_run(client, run["id"], timeout=60)["state"] == "succeeded"
            wait_until(lambda: not exists(client, subjects.LEGACY_LAUNCH_CONSUMER), 20, "the drained consumer is still there")
        assert [claim.attempt for claim in claims(client, sim_id)] == [1], "run once"


def test_a_request_from_before_placement_that_no_live_runner_can_run_fails_its_sim(tmp_path: Path, nats_url: str, tree: Path) -> None:
    """The old shared consumer may hold a request for a config its runner lacks: with no
    live runner that has the config, its sim fails saying so, and the consumer is drained."""
    lacking = without(tree, tmp_path / "lacking", "SM61_TITANX")
    with serve(tmp_path, nats_url, tree, runner=False) as client:
        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        run = create_run(client, "v", "SM61_TITANX")  # this server has the config, no runner does
        requested_before_placement(client, run)
        with worker(nats_url, lacking, tmp_path / "w"):
            (sim,) = wait_run(client, run["id"], timeout=60)["sims"]
            assert (sim["state"], sim["error"]) == ("failed", "no runner has GPU config SM61_TITANX")
            wait_until(lambda: not exists(client, subjects.LEGACY_LAUNCH_CONSUMER), 20, "the drained consumer is still there")


def _file_digests(tree: Path, config: str) -> dict[str, str]:
    files = [p for folder in TESTED_CFGS for p in (tree / folder / config).iterdir() if p.is_file()]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}

