"""A config is its contents: the configs an install offers are read again when their files
change, on the server and on its runner (no restart), and a run's replicas of one config
name that ran different files are never pooled (the comparison and the stats show them
apart, labelled `NAME@<first 6 hex of the digest>`)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cascade_core.gpu_configs import config_digest
from tests.cascade_sim.test_placement import TESTED_CFGS, offered
from tests.cascade_sim.test_runner import serve, service
from tests.cascade_sim.world import TITANX, accelsim_tree, create_run, run_kernels, store_trace, wait_run
from tests.support import TRACES, wait_until


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return accelsim_tree(tmp_path / "accel-sim")


def digest_of(tree: Path, name: str) -> str:
    """The digest of config `name`'s files (all a sim copies) as they are now, read here."""
    files = [f for folder in TESTED_CFGS for f in (tree / folder / name).iterdir()]
    return config_digest({f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files})


def announced(client: TestClient, name: str) -> list[str | None]:
    """The digests of config `name` the live runners announce."""
    return [c["digest"] for r in client.get("/api/runners").json() for c in r["gpu_configs"] if c["name"] == name]


def sim_ns(client: TestClient, run_id: str) -> dict[str, list[float]]:
    """Each sim's kernels' sim_time_ns, by sim id."""
    times: dict[str, list[float]] = {}
    for kernel in run_kernels(client, run_id):
        times.setdefault(kernel["sim_id"], []).append(kernel["sim_time_ns"])
    return times


def test_an_edited_config_is_read_again_and_its_replicas_are_never_pooled_with_the_old(tmp_path: Path, nats_url: str, tree: Path) -> None:
    with serve(tmp_path, nats_url, tree) as client:
        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        run_id = wait_run(client, create_run(client, "v", "SM61_TITANX")["id"])["id"]
        old = digest_of(tree, "SM61_TITANX")
        assert [c["digest"] for c in offered(client, "SM61_TITANX")] == [old]
        plain = client.get(f"/api/runs/{run_id}/comparison").json()
        assert (plain["configs"], "config_labels" in plain) == (["SM61_TITANX"], False)

        # Edited in place: the core clock doubled (the fake simulator prints the same cycles,
        # so the new replica's kernels take half the time).
        config = tree / TITANX / "gpgpusim.config"
        config.write_text(config.read_text().replace("-gpgpu_clock_domains 1417.0:", "-gpgpu_clock_domains 2834.0:"))
        new = digest_of(tree, "SM61_TITANX")
        assert new != old
        (local,) = [c for c in offered(client, "SM61_TITANX") if c["local"]]
        assert (local["digest"], local["core_clock_mhz"]) == (new, 2834.0), "the server reads it again at once"
        wait_until(lambda: announced(client, "SM61_TITANX") == [new], 30, "the runner did not announce the edited config")
        assert [(c["digest"], c["local"], len(c["runners"])) for c in offered(client, "SM61_TITANX")] == [(new, True, 1)]

        added = client.post(f"/api/runs/{run_id}/entries", json={"entries": [{"gpu_config": "SM61_TITANX", "count": 1}]})
        assert added.status_code == 200, added.text
        run = wait_run(client, run_id)
        assert run["sim_counts"] == {"succeeded": 2}
        by_replica = {s["replica"]: s["id"] for s in run["sims"]}
        times = sim_ns(client, run_id)
        (old_ns,), (new_ns,) = times[by_replica[0]], times[by_replica[1]]
        assert new_ns == pytest.approx(old_ns / 2)

        labels = [f"SM61_TITANX@{old[:6]}", f"SM61_TITANX@{new[:6]}"]
        comparison = client.get(f"/api/runs/{run_id}/comparison").json()
        assert comparison["configs"] == labels
        assert [row["sim_ns"] for row in comparison["rows"]] == [{labels[0]: old_ns, labels[1]: new_ns}], "each digest's own, never pooled"
        assert comparison["config_labels"] == {by_replica[0]: labels[0], by_replica[1]: labels[1]}
        assert set(comparison) == {"has_real_timing", "configs", "rows", "config_labels"}
        results = client.get(f"/api/runs/{run_id}/results").json()
        assert results["comparison"] == comparison
        values = client.get(f"/api/runs/{run_id}/stats/values", params={"name": "gpu_sim_cycle"}).json()
        assert (values["configs"], [(r["gpu_config"], r["replicas"]) for r in values["rows"]]) == (labels, [(labels[0], 1), (labels[1], 1)])
        (cycles,) = [n for n in client.get(f"/api/runs/{run_id}/stats", params={"q": "gpu_sim_cycle"}).json()["names"] if n["name"] == "gpu_sim_cycle"]
        assert cycles["kernels"] == {labels[0]: 1, labels[1]: 1}


def test_a_config_folder_added_while_serving_takes_a_run_at_once(tmp_path: Path, nats_url: str, tree: Path) -> None:
    with serve(tmp_path, nats_url, tree) as client:
        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        assert offered(client, "SM61_TITANX_COPY") == []
        for folder in TESTED_CFGS:
            shutil.copytree(tree / folder / "SM61_TITANX", tree / folder / "SM61_TITANX_COPY")

        typo = client.post("/api/runs", json={"trace_id": "v", "entries": [{"gpu_config": "SM61_TITANX_COP", "count": 1}]})
        assert (typo.status_code, typo.json()) == (
            422,
            {
                "detail": "unknown GPU config SM61_TITANX_COP: no live runner has it, nor this server's Accel-Sim install (configs "
                "offered for sm_61 traces: SM61_TITANX, SM61_TITANX_COPY; 2 more of other archs); did you mean SM61_TITANX_COPY?"
            },
        )
        run: dict[str, Any] = wait_run(client, create_run(client, "v", "SM61_TITANX_COPY")["id"])
        assert run["sim_counts"] == {"succeeded": 1}
        (copy,) = offered(client, "SM61_TITANX_COPY")
        assert (copy["digest"], copy["local"], len(copy["runners"])) == (digest_of(tree, "SM61_TITANX_COPY"), True, 1)
