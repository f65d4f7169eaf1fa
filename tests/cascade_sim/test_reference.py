"""Reference sims end to end: a real service and runner on a real nats-server, driving the fake
simulator, which replays the logs the real Accel-Sim printed for each kernelslist
(tests/fake_accelsim/recorded).

matrixmul-x40 is the measure: run whole, its launches take 7,528 cycles (the first, cold),
7,426, and from launch 30 on 7,444; a split or reusing sim of it gives 7,426 there (no run of
its simulator reaches 30 launches), so the fast sim is 18 cycles short on launches 30 to 40,
-0.242 % each and -0.067 % in total, and exact on the other 29, as on the real simulator.
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.cascade_http.trace_archives import files_of, upload_ready
from tests.cascade_sim.test_split import CONFIG, client
from tests.cascade_sim.world import start_run, wait_run

__all__ = ["client"]  # the fixture: a service and runner with the combo trace, shared with the split tests
SEQUENTIAL_CYCLES = [7528] + [7426] * 28 + [7444] * 11  # matrixmul-x40 run whole
FAST_CYCLES = [7528] + [7426] * 39  # split or reusing


def reference(client: TestClient, sim_id: str) -> dict[str, Any]:
    response = client.post(f"/api/sims/{sim_id}/reference")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def check_measured(compared: dict[str, Any], fast_id: str) -> None:
    """The comparison of a split or reusing sim of matrixmul-x40 with its reference, both done."""
    assert compared["sim_id"] == fast_id and compared["gpu_config"] == CONFIG
    assert compared["fast"]["state"] == compared["reference"]["state"] == "succeeded"
    kernels = compared["kernels"]
    assert [k["kernel_launch_uid"] for k in kernels] == list(range(1, 41))
    assert [k["gpu_sim_cycle"] for k in kernels] == FAST_CYCLES
    assert [k["reference_gpu_sim_cycle"] for k in kernels] == SEQUENTIAL_CYCLES
    errors = [k["cycle_error_pct"] for k in kernels]
    assert errors[:29] == [0.0] * 29 and errors[29:] == [pytest.approx((7426 - 7444) / 7444 * 100)] * 11
    assert {k["insn_error_pct"] for k in kernels} == {0.0}
    totals = compared["totals"]
    assert (totals["kernels"], totals["gpu_sim_cycle"], totals["reference_gpu_sim_cycle"], totals["exact"]) == (40, 297142, 297340, 29)
    assert totals["cycle_error_pct"] == pytest.approx((297142 - 297340) / 297340 * 100) and round(totals["cycle_error_pct"], 3) == -0.067
    assert totals["insn_error_pct"] == 0.0 and totals["gpu_sim_insn"] == totals["reference_gpu_sim_insn"]
    assert totals["worst_kernel_launch_uid"] == 30 and totals["worst_cycle_error_pct"] == errors[29]
    assert compared["same_config"] is True and compared["fast"]["config_digests"]
    fast_s, reference_s = compared["fast"]["wall_s"], compared["reference"]["wall_s"]
    assert fast_s > 0 and reference_s > 0 and compared["speedup"] == pytest.approx(reference_s / fast_s)


def test_a_reference_asked_for_after_a_split_sim_finished_measures_it(client: TestClient) -> None:
    upload_ready(client, files_of("matrixmul-x40"), "x40")
    run = wait_run(client, start_run(client, "x40", CONFIG, split={"kernels_per_chunk": 20, "warmup": 2}, reuse=True))
    (fast,) = run["sims"]
    comparison_before = client.get(f"/api/runs/{run['id']}/comparison").json()
    stat = f"/api/runs/{run['id']}/stats/values?name=gpu_sim_cycle"
    stat_before = client.get(stat).json()
    assert [r["replicas"] for r in stat_before["rows"]] == [1] * 40
    assert client.get(f"/api/sims/{fast['id']}/reference").status_code == 404

    asked = reference(client, fast["id"])
    ref_id = asked["reference"]["sim_id"]
    assert asked["reference"]["state"] in ("pending", "launching", "running") and asked["speedup"] is None
    assert asked["split"]["kernels_per_chunk"] == 20 and asked["reuse"] is True
    assert reference(client, fast["id"])["reference"]["sim_id"] == ref_id, "asking again answers the same reference"

    done = wait_run(client, run["id"])
    assert done["state"] == "succeeded" and done["sim_counts"] == {"succeeded": 2}
    assert done["entries"] == run["entries"], "a reference is no entry of the run"
    assert [s["id"] for s in done["sims"]] == [fast["id"], ref_id]
    ref = done["sims"][1]
    assert (ref["replica"], ref["reference_for"], ref.get("split"), ref.get("reuse")) == (1, fast["id"], None, None)
    assert "reference_for" not in done["sims"][0]
    assert client.get(f"/api/runs/{run['id']}/comparison").json() == comparison_before, "the reference is no replica"
    assert client.get(stat).json() == stat_before

    compared = client.get(f"/api/sims/{fast['id']}/reference").json()
    check_measured(compared, fast["id"])
    assert client.get(f"/api/sims/{ref_id}/reference").json() == compared, "a reference answers for its sim"
    assert reference(client, fast["id"]) == compared
    log = client.get(f"/api/sims/{ref_id}/log").text
    assert "==== cascade:" not in log, "the reference runs whole, reusing nothing"


def test_references_asked_for_at_creation_run_beside_their_sims(client: TestClient) -> None:
    upload_ready(client, files_of("matrixmul-x40"), "x40")
    entry = {"gpu_config": CONFIG, "count": 2, "reuse": True, "reference": True}
    created = client.post("/api/runs", json={"trace_id": "x40", "entries": [entry]})
    assert created.status_code == 201, created.text
    assert created.json()["entries"] == [entry]
    done = wait_run(client, created.json()["id"])
    assert done["state"] == "succeeded" and done["sim_counts"] == {"succeeded": 4}
    sims = done["sims"]
    assert [(s["replica"], s.get("reuse", False), s.get("reference_for")) for s in sims] == [
        (0, True, None), (1, True, None), (2, False, sims[0]["id"]), (3, False, sims[1]["id"])
    ]
    for fast in sims[:2]:
        check_measured(client.get(f"/api/sims/{fast['id']}/reference").json(), fast["id"])
    assert reference(client, sims[0]["id"])["reference"]["sim_id"] == sims[2]["id"]
    assert len(wait_run(client, done["id"])["sims"]) == 4, "asking for a reference a sim has adds none"


def test_what_can_have_no_reference_is_refused_with_why(client: TestClient) -> None:
    assert client.post("/api/sims/sim-000000000000/reference").json() == {"detail": "sim sim-000000000000 not found"}
    assert client.get("/api/sims/sim-000000000000/reference").status_code == 404
    whole = wait_run(client, start_run(client, "combo", CONFIG))
    sim_id = whole["sims"][0]["id"]
    refused = client.post(f"/api/sims/{sim_id}/reference")
    assert refused.status_code == 422 and refused.json() == {
        "detail": f"sim {sim_id} is neither split nor reusing repeated kernels: it runs whole and in sequence, as a "
        "reference would, so there is nothing to measure it against"
    }
    assert client.get(f"/api/sims/{sim_id}/reference").status_code == 422

    split = wait_run(client, start_run(client, "combo", CONFIG, split={"kernels_per_chunk": 1, "warmup": 2}))
    fast_id = split["sims"][0]["id"]
    ref_id = reference(client, fast_id)["reference"]["sim_id"]
    again = client.post(f"/api/sims/{ref_id}/reference")
    assert again.status_code == 422 and again.json() == {
        "detail": f"sim {ref_id} is the reference of sim {fast_id}; a reference has no reference of its own"
    }

    entry = {"gpu_config": CONFIG, "count": 1, "reference": True}
    created = client.post("/api/runs", json={"trace_id": "combo", "entries": [entry]})
    assert created.status_code == 422 and created.json() == {
        "detail": f"the entry of {CONFIG} asks for a reference but is neither split nor reusing repeated kernels: its "
        "sims run whole and in sequence already, as a reference would"
    }
    wait_run(client, split["id"])
