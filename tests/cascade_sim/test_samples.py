from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from cascade_app.config import Settings, resolve
from cascade_cli import main as cli
from cascade_core import events as ev
from cascade_process.service import starlette_app
from cascade_sim import samples
from cascade_sim.logparse import STATS_NAMING

TOKEN = "t"


def start(tmp_path: Path, nats_url: str) -> TestClient:
    settings = Settings(token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, runner=False, samples=True)
    return TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"})


def test_samples_load_once_and_every_route_has_real_numbers(tmp_path: Path, nats_url: str) -> None:
    with start(tmp_path, nats_url) as client:
        runs = client.get("/api/runs").json()
        seq = client.get("/api/health").json()["stream_seq"]
    assert {r["id"] for r in runs} == {"run-sample-vectoradd-titanx", "run-sample-combo-titanx", "run-sample-opt125m-h100-e2e"}
    assert all(r["sample"] and r["state"] == "succeeded" for r in runs)

    with start(tmp_path, nats_url) as client:  # a restart, or a second server, adds nothing
        assert client.get("/api/health").json()["stream_seq"] == seq
        combo = client.get("/api/runs/run-sample-combo-titanx").json()
        assert combo["sim_counts"] == {"succeeded": 3}
        assert combo["trace"]["kernel_count"] == 3 and combo["trace"]["trace_gpu_arch"] == "sm_61"
        kernels = client.get("/api/runs/run-sample-combo-titanx/kernels").json()
        assert [k["gpu_sim_cycle"] for k in kernels[:3]] == [5534, 7506, 5408]
        assert kernels[0]["sim_time_ns"] == 5534 / 1417.0 * 1000
        log = client.get("/api/sims/sim-sample-combo-titanx-0/log").text
        assert log.startswith("Accel-Sim [build accelsim-commit-73f9fac")
        results = client.get("/api/sims/sim-sample-combo-titanx-0/results").json()
        stats = results["kernels"][0]["stats"]  # every value of the recorded block, by naming 2
        assert len(stats) == 3814 and stats["Warp Occupancy Distribution.W0_Scoreboard"] == 1157.0
        assert stats["gpu_occupancy"] == "NaN"

        created = client.post("/api/runs", json={"trace_id": "sample__combo-vec-mm-xz", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]})
        assert created.status_code == 409, created.text
        before = client.get("/api/runs/run-sample-combo-titanx").json()
        assert client.post("/api/runs/run-sample-combo-titanx/cancel").json() == before

        llm = client.get("/api/runs/run-sample-opt125m-h100-e2e").json()
        assert llm["trace"]["has_step_timeline"] and llm["trace"]["has_real_timing"]
        (timeline,) = client.get("/api/runs/run-sample-opt125m-h100-e2e/step-timelines").json()
        coverage = timeline["simulated"]["summary"]["simulation"]["coverage"]
        assert (coverage["kernels"], coverage["simulated_kernels"]) == (683, 6)
        comparison = client.get("/api/runs/run-sample-opt125m-h100-e2e/comparison").json()
        assert comparison["has_real_timing"] and comparison["rows"][0]["real_ns"] == 5120.0


def test_sample_events_are_the_same_every_time() -> None:
    first, second = samples.samples(), samples.samples()
    assert first == second
    finished = [e for s in first for e in s.events if isinstance(e, ev.KernelFinished)]
    assert finished and {e.stats_naming for e in finished} == {STATS_NAMING}
    ids = [e.id for s in first for e in s.events]
    assert len(ids) == len(set(ids))


def test_no_samples_is_a_setting_of_serve(tmp_path: Path, nats_url: str) -> None:
    assert resolve({}, {}).samples and not resolve({}, {"CASCADE_SAMPLES": "false"}).samples
    assert not cli._settings(cli.build_parser().parse_args(["serve", "--no-samples"])).samples
    assert cli._settings(cli.build_parser().parse_args(["serve"])).samples
    settings = Settings(token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, runner=False, samples=False)
    with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        assert client.get("/api/runs").json() == [] and client.get("/api/traces").json() == []
