"""Config variants end to end, with the fake simulator: a variant derived through the API runs
on a runner that has only its base, which fetches the variant's files with the launch (the
fake simulator replays the recording of the options it was given); options are checked
before anything runs; two configs differ option by option; a run entry's own options run
an unnamed variant of its config."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cascade_core import events as ev
from cascade_core.gpu_configs import config_digest
from cascade_core.object_names import config_file
from cascade_core.variants import unnamed_name
from cascade_nats import subjects
from tests.cascade_sim.test_placement import TESTED_CFGS, claims, offered, runner_with, without
from tests.cascade_sim.test_runner import serve, service
from tests.cascade_sim.world import accelsim_tree, store_trace, wait_run, worker
from tests.support import TRACES, wait_until

MAX_CYCLE = {"-gpgpu_max_cycle": "1000"}  # the fake replays the real simulator's log of this option
LIVENESS = {"-trace_enabled": "1", "-trace_components": "LIVENESS", "-liveness_message_freq": "0"}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return accelsim_tree(tmp_path / "accel-sim")


def only_titanx(tree: Path, target: Path) -> Path:
    others = [d.name for d in (tree / TESTED_CFGS[0]).iterdir() if d.name != "SM61_TITANX"]
    return without(tree, target, *others)


def derive(client: TestClient, name: str, options: dict[str, str], base: str = "SM61_TITANX") -> Any:
    return client.post("/api/gpu-configs", json={"name": name, "base": base, "options": options})


async def _launches(client: TestClient, sim_id: str) -> list[ev.SimLaunched]:
    history = service(client).store.read(subjects.sim_history(sim_id))
    return [item.event async for item in history if isinstance(item.event, ev.SimLaunched)]


def launched_files(client: TestClient, sim_id: str) -> dict[str, str]:
    """The config files' sha256 the sim's launch recorded, by name."""
    (launch,) = client.portal.call(_launches, client, sim_id)  # type: ignore[union-attr]
    return launch.config_digests


def stored(client: TestClient, sha256: str) -> bytes:
    data: bytes = client.portal.call(service(client).objects.read_all, config_file(sha256))  # type: ignore[union-attr]
    return data


def test_a_variant_runs_on_a_runner_that_has_only_its_base(tmp_path: Path, nats_url: str, tree: Path) -> None:
    with serve(tmp_path, nats_url, tree, runner=False) as client, worker(nats_url, only_titanx(tree, tmp_path / "titanx"), tmp_path / "w"):
        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        wait_until(lambda: offered(client, "SM61_TITANX") and any(c["runners"] for c in offered(client, "SM61_TITANX")), 30, "no worker")
        created = derive(client, "SM61_TITANX_MAXCYCLE", MAX_CYCLE)
        assert created.status_code == 201, created.text
        variant = created.json()
        assert {k: variant[k] for k in ("name", "arch", "core_clock_mhz", "base", "options")} == {
            "name": "SM61_TITANX_MAXCYCLE", "arch": "sm_61", "core_clock_mhz": 1417.0, "base": "SM61_TITANX", "options": MAX_CYCLE,
        }
        assert client.get("/api/gpu-configs/SM61_TITANX_MAXCYCLE").json() == variant
        again = derive(client, "SM61_TITANX_MAXCYCLE", MAX_CYCLE)
        assert (again.status_code, again.json()) == (201, variant), "the same variant again changes nothing"

        run = wait_run(client, client.post("/api/runs", json={"trace_id": "v", "entries": [{"gpu_config": "SM61_TITANX_MAXCYCLE", "count": 1}]}).json()["id"])
        (sim,) = run["sims"]
        assert (sim["state"], sim["gpu_config"]) == ("succeeded", "SM61_TITANX_MAXCYCLE"), sim
        assert [c.runner_id for c in claims(client, sim["id"])] == [runner_with(client, "SM61_TITANX")["id"]]
        # The simulator was given the variant's files: the launch recorded their digests, and
        # the fake replayed the recording of -gpgpu_max_cycle 1000 (stopped at the limit).
        files = launched_files(client, sim["id"])
        assert config_digest(files) == variant["digest"]
        config = stored(client, files["gpgpusim.config"]).decode()
        assert "-gpgpu_max_cycle 1000" in config.splitlines()
        base_config = (tree / TESTED_CFGS[0] / "SM61_TITANX" / "gpgpusim.config").read_bytes()
        assert files["gpgpusim.config"] != hashlib.sha256(base_config).hexdigest()
        assert (tmp_path / "w" / "configs" / variant["digest"] / "gpgpusim.config").read_text() == config
        assert sim["cut_short"]["limit_option"] == "-gpgpu_max_cycle", sim

        diff = client.get("/api/gpu-configs/SM61_TITANX/diff/SM61_TITANX_MAXCYCLE")
        assert diff.status_code == 200 and [d for d in diff.json() if d["option"] == "-gpgpu_max_cycle"] == diff.json()
        assert diff.json()[0]["b"] == "1000"
        assert client.get("/api/gpu-configs/SM61_TITANX_MAXCYCLE/options").json()["-gpgpu_max_cycle"] == "1000"


def test_a_run_entrys_own_options_run_an_unnamed_variant_of_its_config(tmp_path: Path, nats_url: str, tree: Path) -> None:
    with serve(tmp_path, nats_url, tree) as client:
        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        entry = {"gpu_config": "SM61_TITANX", "count": 1, "options": LIVENESS}
        response = client.post("/api/runs", json={"trace_id": "v", "entries": [entry]})
        assert response.status_code == 201, response.text
        assert response.json()["entries"] == [entry], "the entry shows its own options"
        run = wait_run(client, response.json()["id"])
        (sim,) = run["sims"]
        assert (sim["state"], sim["gpu_config"]) == ("succeeded", unnamed_name("SM61_TITANX", LIVENESS)), sim
        shown = client.get(f"/api/gpu-configs/{unnamed_name('SM61_TITANX', LIVENESS)}").json()
        assert (shown["base"], shown["options"]) == ("SM61_TITANX", LIVENESS)

        refused = client.post("/api/runs", json={"trace_id": "v", "entries": [{**entry, "options": {"-gpgpu_max_insn": "lots"}}]})
        assert (refused.status_code, refused.json()) == (422, {"detail": "option -gpgpu_max_insn: 'lots' is not an integer"})


def test_options_are_checked_before_anything_runs(tmp_path: Path, nats_url: str, tree: Path) -> None:
    with serve(tmp_path, nats_url, tree, runner=False) as client:
        unknown = derive(client, "SM61_TITANX_X", {"-gpgpu_warp_drive": "1"})
        assert unknown.status_code == 422
        assert unknown.json()["detail"].startswith("option -gpgpu_warp_drive: GPGPU-Sim does not know it")
        ipoly = derive(client, "SM61_TITANX_L2x2", {"-gpgpu_cache:dl2": "S:128:128:16,L:B:m:L:P,A:256:64,16:0,32"})
        assert ipoly.status_code == 422
        assert "IPOLY" in ipoly.json()["detail"] and "16, 32 or 64 sets" in ipoly.json()["detail"]
        assert ipoly.json()["detail"].startswith("option -gpgpu_cache:dl2: 128 sets")
        fine = derive(client, "SM61_TITANX_L2x2", {"-gpgpu_cache:dl2": "S:64:128:32,L:B:m:L:P,A:192:4,32:0,32"})
        assert fine.status_code == 201, fine.text
        assert derive(client, "SM61_TITANX_Y", MAX_CYCLE, base="SM99_NONE").status_code == 404
        taken = derive(client, "SM7_QV100", MAX_CYCLE)
        assert taken.status_code == 409 and "exists already" in taken.json()["detail"]
        assert [c["name"] for c in client.get("/api/gpu-configs").json()].count("SM61_TITANX_L2x2") == 1
        diff = client.get("/api/gpu-configs/SM61_TITANX_L2x2/diff/SM61_TITANX").json()
        assert diff == [{"option": "-gpgpu_cache:dl2", "a": "S:64:128:32,L:B:m:L:P,A:192:4,32:0,32", "b": "S:64:128:16,L:B:m:L:P,A:256:64,16:0,32"}]
        assert client.get("/api/gpu-configs/SM61_NOPE/diff/SM61_TITANX").status_code == 404
