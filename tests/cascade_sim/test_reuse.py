"""Reuse of repeated kernels end to end: a real service and runner on a real nats-server,
driving the fake simulator, which replays the logs the real Accel-Sim printed for the
kernelslists a reusing sim simulates (tests/fake_accelsim/recorded, `__reuse`).

combo-repeat (the combo trace's launches three times over: vecAdd, mult_gpu, vecAdd, ...)
reused is, by measurement, exact: each kernel's second occurrence is warm, as every later one
is in sequence. So its answers are compared with the sim run whole exactly, but for what
reuse adds: each reused kernel's `reused_from`, in its KernelStat and its stats map. What
reuse really changes is checked for what it is: only the launches simulated are in the
simulator's log, under a line saying which; the rest of a stats map (counters that run over
a simulator's whole run) is the simulated run's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_process.service import starlette_app
from tests.cascade_http.trace_archives import files_of, one_file_per_launch, upload_ready
from tests.cascade_sim.world import accelsim_tree, simulated_trace, wait_run
from tests.cascade_sim.world import run_kernels as kernels
from tests.cascade_sim.world import start_run as run

TOKEN = "reuse"
CONFIG = "SM61_TITANX"
# combo-repeat on SM61_TITANX, run whole (tests/fake_accelsim/recorded/MANIFEST.md).
REPEAT_CYCLES = [5534, 7506, 5408, 5408, 7426, 5408, 5408, 7426, 5408]
# Each launch's source: its own uid when simulated (1, 2, 3, 5), else its kernel's second occurrence.
REPEAT_SOURCES = [1, 2, 3, 3, 5, 3, 3, 5, 3]
SUMMARY = ("kernel_index", "kernel_launch_uid", "kernel_name", "gpu_sim_cycle", "gpu_sim_insn", "gpu_ipc", "sim_time_ns")
TOTALS = ("gpu_tot_sim_cycle", "gpu_tot_sim_insn", "gpu_tot_ipc")


@pytest.fixture
def client(tmp_path: Path, nats_url: str) -> Iterator[TestClient]:
    tree = accelsim_tree(tmp_path / "accel-sim")
    settings = Settings(token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=tree, runner_slots=2, samples=False)
    with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        combo = files_of("combo-vec-mm-xz")
        upload_ready(client, {**combo, "kernelslist.g": combo["kernelslist.g"] * 3}, "repeat")
        yield client


def results(client: TestClient, sim_id: str) -> dict[str, Any]:
    return client.get(f"/api/sims/{sim_id}/results").json()  # type: ignore[no-any-return]


def simulated(log: str) -> list[int]:
    """The uids of the stats blocks the simulator printed, as it numbered them."""
    return [int(line.split("=")[1]) for line in log.splitlines() if line.startswith("kernel_launch_uid = ")]


def test_a_reusing_sim_answers_every_route_as_the_sim_run_whole_with_its_reused_kernels_marked(client: TestClient) -> None:
    whole = wait_run(client, run(client, "repeat"))
    reused = wait_run(client, run(client, "repeat", reuse=True))
    assert (whole["state"], reused["state"]) == ("succeeded", "succeeded"), reused["sims"][0]["error"]
    (w,), (r,) = whole["sims"], reused["sims"]
    assert r["reuse"] is True and "reuse" not in w
    same = ("state", "error", "exit_code", "kernels_done", "kernels_total")
    assert {k: r[k] for k in same} == {k: w[k] for k in same}
    assert {k: r["latest"][k] for k in TOTALS} == {k: w["latest"][k] for k in TOTALS}
    assert r["latest"]["gpu_tot_sim_cycle"] == sum(REPEAT_CYCLES) == 54932

    # The kernels: in order, with their uids and the numbers the sim run whole has; the reused ones say whose.
    ws, rs = kernels(client, whole["id"]), kernels(client, reused["id"])
    assert [{k: x[k] for k in SUMMARY} for x in rs] == [{k: x[k] for k in SUMMARY} for x in ws]
    assert [x["gpu_sim_cycle"] for x in rs] == REPEAT_CYCLES
    assert [x.get("reused_from") for x in rs] == [None if s == u else s for u, s in enumerate(REPEAT_SOURCES, 1)]
    assert all("reused_from" not in x for x in ws)

    # Results: each stats map says whose result it is, and its running totals are the sim's.
    rr, wr = results(client, r["id"]), results(client, w["id"])
    assert rr["sim"]["reuse"] is True
    assert [k.get("reused_from") for k in rr["kernels"]] == [x.get("reused_from") for x in rs]
    assert [k["stats"].get("reused_from") for k in rr["kernels"]] == [x.get("reused_from") for x in rs]
    assert [{t: k["stats"][t] for t in TOTALS} for k in rr["kernels"]] == [{t: k["stats"][t] for t in TOTALS} for k in wr["kernels"]]
    marked = [k for k in rr["kernels"] if "reused_from" in k]
    assert [list(k["stats"]) for k in marked] == [[*w["stats"], "reused_from"] for w in wr["kernels"] if w["kernel_launch_uid"] in (4, 6, 7, 8, 9)]
    assert rr["totals"] == {**wr["totals"], "sim_rate_ips": rr["totals"]["sim_rate_ips"]}

    # The log: only the launches simulated, which the first line says, and a line where each is reused.
    log = client.get(f"/api/sims/{r['id']}/log").text
    assert simulated(log) == [1, 2, 3, 4] and simulated(client.get(f"/api/sims/{w['id']}/log").text) == list(range(1, 10))
    marks = [line for line in log.splitlines() if line.startswith("==== cascade:")]
    assert marks == [
        "==== cascade: reuse: launches 1-3, 5 simulated, 5 more reused, each taking the result of its kernel's second (warm) occurrence ====",
        "==== cascade: launch 4: the result of launch 3 reused ====",
        "==== cascade: launch 6: the result of launch 3 reused ====",
        "==== cascade: launch 7: the result of launch 3 reused ====",
        "==== cascade: launch 8: the result of launch 5 reused ====",
        "==== cascade: launch 9: the result of launch 3 reused ====",
    ]
    assert "kernelslist.reuse.g" in log and log.count("GPGPU-Sim: *** exit detected ***") == 1

    # The run's comparison and Perfetto trace: the same, ids aside.
    def as_whole(path: str) -> object:
        text = client.get(path.format(reused["id"])).text
        return json.loads(text.replace(reused["id"], whole["id"]).replace(r["id"], w["id"]))

    assert as_whole("/api/runs/{}/comparison") == client.get(f"/api/runs/{whole['id']}/comparison").json()
    # The Perfetto trace but its wall-clock process: the sims ran at other times.
    drawn = json.dumps(simulated_trace(client, reused["id"])).replace(reused["id"], whole["id"]).replace(r["id"], w["id"])
    assert json.loads(drawn) == simulated_trace(client, whole["id"])

    # Stats by name and SQL see the mark too.
    values = client.get(f"/api/runs/{reused['id']}/stats/values", params={"name": "reused_from"}).json()
    assert values, values
    sql = "SELECT uid, reused_from FROM kernels WHERE sim_id = '%s' ORDER BY uid" % r["id"]
    answer = client.post("/api/sql", json={"sql": sql}).json()
    assert [row[1] if isinstance(row, list) else row["reused_from"] for row in answer["rows"]] == [x.get("reused_from") for x in rs]


def test_reuse_on_matrixmul_x40_simulates_2_of_its_40_kernels_and_is_off_where_the_real_simulator_is(client: TestClient) -> None:
    # docs/fast-sim-measurements.md, section 3: launch 1 cold (7,528), launch 2 warm (7,426), reused for the
    # other 38; in sequence launches 30-40 take 7,444, so the total is -0.067 % off.
    upload_ready(client, files_of("matrixmul-x40"), "x40")
    whole = wait_run(client, run(client, "x40"))
    reused = wait_run(client, run(client, "x40", reuse=True))
    ws, rs = kernels(client, whole["id"]), kernels(client, reused["id"])
    assert [k["kernel_launch_uid"] for k in rs] == list(range(1, 41))
    assert [k.get("reused_from") for k in rs] == [None, None] + [2] * 38
    assert [k["gpu_sim_cycle"] for k in rs] == [7528] + [7426] * 39
    off = {k["kernel_launch_uid"]: k["gpu_sim_cycle"] - w["gpu_sim_cycle"] for k, w in zip(rs, ws) if k["gpu_sim_cycle"] != w["gpu_sim_cycle"]}
    assert off == {uid: -18 for uid in range(30, 41)}
    totals = (whole["sims"][0]["latest"]["gpu_tot_sim_cycle"], reused["sims"][0]["latest"]["gpu_tot_sim_cycle"])
    assert totals == (297340, 297142) and abs(totals[1] / totals[0] - 1) < 0.0007
    assert simulated(client.get(f"/api/sims/{reused['sims'][0]['id']}/log").text) == [1, 2]
    csv = client.get(f"/api/sims/{reused['sims'][0]['id']}/files/kernel-stats.csv").text
    assert len(csv.splitlines()) == 41, csv[:300]


def test_launches_each_in_a_file_of_its_own_as_nvbit_writes_them_are_one_kernel(client: TestClient) -> None:
    # matrixmul-x40 as a real tracer would have written it: kernel-1.traceg ... kernel-40.traceg.xz,
    # each file with its own `-kernel id`, plain and xz by turns; the same kernel all the same.
    # The fake replays matrixmul-x40's `__reuse` log: on the real simulator (73f9fac, SM61_TITANX)
    # this layout's kernelslist.reuse.g (kernel-1.traceg, kernel-2.traceg.xz) prints the same
    # stats blocks but for the paths, the `-kernel id` echoed and the wall-clock rates.
    files = one_file_per_launch("matrixmul-x40")
    assert len({files[f"kernel-{uid}.traceg"] for uid in range(1, 41, 2)}) == 20  # no two files alike, as stored
    upload_ready(client, files, "x40-files")
    reused = wait_run(client, run(client, "x40-files", reuse=True))
    assert reused["state"] == "succeeded", reused["sims"][0]["error"]
    rs = kernels(client, reused["id"])
    assert [k["kernel_launch_uid"] for k in rs] == list(range(1, 41))
    assert [k.get("reused_from") for k in rs] == [None, None] + [2] * 38
    assert [k["gpu_sim_cycle"] for k in rs] == [7528] + [7426] * 39
    log = client.get(f"/api/sims/{reused['sims'][0]['id']}/log").text
    assert simulated(log) == [1, 2]
    assert log.splitlines()[0] == (
        "==== cascade: reuse: launches 1-2 simulated, 38 more reused, each taking the result of its kernel's second (warm) occurrence ===="
    )


def test_a_trace_with_nothing_to_reuse_runs_whole(client: TestClient) -> None:
    upload_ready(client, files_of("combo-vec-mm-xz"), "combo")
    reused = wait_run(client, run(client, "combo", reuse=True))
    (sim,) = reused["sims"]
    assert reused["state"] == "succeeded" and sim["reuse"] is True
    assert [k.get("reused_from") for k in kernels(client, reused["id"])] == [None, None, None]
    log = client.get(f"/api/sims/{sim['id']}/log").text
    assert simulated(log) == [1, 2, 3] and "==== cascade:" not in log


@pytest.mark.parametrize(
    ("trace", "kernels_per_chunk", "per_chunk", "measured"),
    [
        # docs/fast-sim-measurements.md's split with W=2, each chunk reusing within its own launches: launch 1 cold, all else 7,426 (-0.067 %).
        ("x40", 20, [2, 4], {1, 2, 21, 22}),
        # Exact: chunk 2 warms up with launches 4 and 5, so its own first vecAdd (6) is warm.
        ("repeat", 5, [4, 5], {1, 2, 3, 5, 6, 7, 8}),
    ],
)
def test_a_split_sim_reuses_within_each_chunk(
    client: TestClient, trace: str, kernels_per_chunk: int, per_chunk: list[int], measured: set[int]
) -> None:
    if trace == "x40":
        upload_ready(client, files_of("matrixmul-x40"), "x40")
    whole = wait_run(client, run(client, trace))
    both = wait_run(client, run(client, trace, split={"kernels_per_chunk": kernels_per_chunk, "warmup": 2}, reuse=True))
    assert both["state"] == "succeeded", both["sims"][0]["error"]
    (w,), (s,) = whole["sims"], both["sims"]
    assert s["reuse"] is True and [c["state"] for c in s["split"]["chunks"]] == ["succeeded", "succeeded"]
    ws, ss = kernels(client, whole["id"]), kernels(client, both["id"])
    assert [k["kernel_launch_uid"] for k in ss] == [k["kernel_launch_uid"] for k in ws]
    assert {k["kernel_launch_uid"] for k in ss if "reused_from" not in k} == measured
    total = s["latest"]["gpu_tot_sim_cycle"]
    if trace == "x40":
        assert [k["gpu_sim_cycle"] for k in ss] == [7528] + [7426] * 39 and total == 297142
    else:
        assert [k["gpu_sim_cycle"] for k in ss] == [k["gpu_sim_cycle"] for k in ws] and total == w["latest"]["gpu_tot_sim_cycle"] == 54932
    # Each chunk's simulator ran its warm-up and the first two launches of each kernel among its own.
    log = client.get(f"/api/sims/{s['id']}/log").text
    assert [len(simulated(chunk)) for chunk in log.split("==== cascade: chunk ")[1:]] == per_chunk
    assert results(client, s["id"])["kernels"][-1]["stats"]["gpu_tot_sim_cycle"] == total


def test_a_reuse_that_is_no_flag_is_refused_as_fastapi_would(client: TestClient) -> None:
    response = client.post("/api/runs", json={"trace_id": "repeat", "entries": [{"gpu_config": CONFIG, "count": 1, "reuse": "maybe"}]})
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {
            "type": "bool_parsing",
            "loc": ["body", "entries", 0, "reuse"],
            "msg": "Input should be a valid boolean, unable to interpret input",
            "input": "maybe",
        }
    ]
