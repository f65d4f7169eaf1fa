"""A sim the simulator cut short at a limit it was given says so everywhere, as a user sees
it: a `cascade` process against a real server whose runner replays GPGPU-Sim's log of
vectoradd run with `-gpgpu_max_cycle 1000` (`failures/max-cycle.stdout`): its one launch cut
at 1,000 cycles, its stats block printed with no kernel name, and a normal exit."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cascade_app.config import Settings
from tests.cascade_http.live import LiveServer, live_server
from tests.cascade_http.test_runs_cli import AUTH, TOKEN, api, cascade
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.cascade_sim.world import TITANX, accelsim_tree, add_config_lines

MAX_CYCLE = "SM61_TITANX_MAX_CYCLE"  # the fake replays max-cycle.stdout for a config with the option
MAX_CYCLE_20K = "SM61_TITANX_MAX_CYCLE_20K"  # and matrixmul-x40's log cut at 20,000 cycles, in launch 3
MATMUL = "_Z8mult_gpuIfEvPT_S1_S1_ii"
VECADD = "_Z6vecAddIfEvPT_S1_S1_i"
SAID = (
    "stopped at its limit -gpgpu_max_cycle 1000: 0 of 1 launches simulated; "
    "launch 1, cut after 1000 cycles, is left out of every total"
)


@pytest.fixture
def live(tmp_path: Path, nats_url: str) -> Iterator[LiveServer]:
    tree = accelsim_tree(tmp_path / "accel-sim")
    for name, limit in ((MAX_CYCLE, 1000), (MAX_CYCLE_20K, 20000)):
        for folder in (tree / TITANX, tree / "gpu-simulator/configs/tested-cfgs/SM61_TITANX"):
            shutil.copytree(folder, folder.with_name(name))
        add_config_lines(tree, name, f"-gpgpu_max_cycle {limit}")
    settings = Settings(
        token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=tree, runner=True, runner_slots=2, samples=False
    )
    with live_server(settings) as server:
        body = tar_of(files_of("vectoradd-100-32"), top="vectoradd")
        response = httpx.post(f"{server.url}/api/traces?id=vectoradd", content=body, headers={**AUTH, "Content-Type": "application/x-tar"})
        assert response.status_code == 202 and response.json()["state"] == "ready", response.text
        yield server


def test_a_sim_cut_short_at_its_limit_says_so_on_every_route_and_in_no_total(live: LiveServer) -> None:
    watched = cascade(live, "run", "vectoradd", MAX_CYCLE, "SM61_TITANX", "--watch")
    assert watched.returncode == 0, watched.stdout + watched.stderr  # a limit reached, not a failure
    lines = watched.stdout.splitlines()
    run_id = lines[0]
    detail = api(live, f"/api/runs/{run_id}").json()
    cut = next(s for s in detail["sims"] if s["gpu_config"] == MAX_CYCLE)
    whole = next(s for s in detail["sims"] if s["gpu_config"] == "SM61_TITANX")
    assert (cut["state"], cut["error"], cut["kernels_done"], cut["kernels_total"]) == ("succeeded", None, 0, 1)
    assert cut["cut_short"] == {
        "limit_option": "-gpgpu_max_cycle",
        "limit_value": 1000,
        "kernels_done": 0,
        "kernels_total": 1,
        "partial": {"uid": 1, "name": VECADD, "gpu_sim_cycle": 1000, "gpu_sim_insn": 0},
        "said": SAID,
    }
    assert "cut_short" not in whole
    assert cut["latest"]["gpu_tot_sim_cycle"] is None, "the cut launch's cycles are in no total"
    assert (detail["sim_counts"], detail["cut_short"]) == ({"succeeded": 2}, 1)
    (summary,) = [r for r in api(live, "/api/runs").json() if r["id"] == run_id]
    assert summary["cut_short"] == 1
    # The runs list's cycles per config leave the cut sim out: its total is of fewer launches.
    # 5,534: gpu_tot_sim_cycle in vectoradd-100-32__SM61_TITANX.log, which the fake replays.
    (listed,) = [r for r in api(live, "/api/runs?cycles=true").json() if r["id"] == run_id]
    assert "cycles" not in summary and listed["cycles"] == [{"gpu_config": "SM61_TITANX", "sims": 1, "median": 5534, "min": 5534, "max": 5534}]

    # --watch: the sim's progress line, and the outcome.
    assert any(line.startswith(f"{MAX_CYCLE} r0  succeeded") and line.endswith(f"cut short: {SAID}") for line in lines)
    assert lines[-2:] == [f"run {run_id} succeeded: 2 succeeded, 1 cut short", f"  {MAX_CYCLE} r0 {cut['id']} cut short: {SAID}"]

    shown = cascade(live, "run", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout.splitlines()
    assert text[0] == f"run      {run_id}  succeeded  (2 succeeded, 1 cut short)"
    at = text.index("cut short (succeeded without simulating every launch; their totals cover the launches simulated):")
    assert text[at + 1] == f"  {MAX_CYCLE} r0 {cut['id']}: {SAID}"
    assert "1 cut short" in cascade(live, "runs").stdout

    results = api(live, f"/api/runs/{run_id}/results").json()
    by_config = {s["sim"]["gpu_config"]: s for s in results["sims"]}
    assert by_config[MAX_CYCLE]["sim"]["cut_short"] == cut["cut_short"] and results["run"]["cut_short"] == 1
    assert by_config[MAX_CYCLE]["kernels"] == [], "the cut launch is no kernel result"
    assert by_config[MAX_CYCLE]["totals"]["gpu_tot_sim_cycle"] in (None, 0)
    assert [k["sim_id"] for k in api(live, f"/api/runs/{run_id}/kernels").json()] == [whole["id"]]

    comparison = api(live, f"/api/runs/{run_id}/comparison").json()
    assert [row["sim_ns"].get(MAX_CYCLE) for row in comparison["rows"]] == [None], "no time for the cut launch"


def test_a_launch_cut_after_others_finished_is_in_no_total_and_the_others_are(live: LiveServer) -> None:
    body = tar_of(files_of("matrixmul-x40"), top="matrixmul-x40")
    response = httpx.post(f"{live.url}/api/traces?id=mm40", content=body, headers={**AUTH, "Content-Type": "application/x-tar"})
    assert response.status_code == 202 and response.json()["state"] == "ready", response.text
    watched = cascade(live, "run", "mm40", MAX_CYCLE_20K, "--watch")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    run_id = watched.stdout.splitlines()[0]
    (sim,) = api(live, f"/api/runs/{run_id}").json()["sims"]
    # The log: launches 1 and 2 of 7,528 and 7,426 cycles, launch 3 cut after 5,046.
    assert (sim["state"], sim["kernels_done"], sim["kernels_total"]) == ("succeeded", 2, 40)
    assert sim["cut_short"]["partial"] == {"uid": 3, "name": MATMUL, "gpu_sim_cycle": 5046, "gpu_sim_insn": 4352}
    assert (sim["cut_short"]["kernels_done"], sim["cut_short"]["limit_value"]) == (2, 20000)
    assert sim["latest"]["gpu_tot_sim_cycle"] == 7528 + 7426, "the cut launch's cycles are in no total"
    kernels = api(live, f"/api/runs/{run_id}/kernels").json()
    assert [(k["kernel_launch_uid"], k["gpu_sim_cycle"]) for k in kernels] == [(1, 7528), (2, 7426)]
