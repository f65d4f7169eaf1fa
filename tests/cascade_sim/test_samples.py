from __future__ import annotations

from pathlib import Path

import pytest

from starlette.testclient import TestClient

from cascade_app.config import Settings, resolve
from cascade_cli import main as cli
from cascade_core import events as ev
from cascade_process.service import starlette_app
from cascade_sim import samples
from cascade_sim.logparse import STATS_NAMING
from tests.support import wait_until

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


SAMPLE_TRACES = ("sample__vectoradd-100-32", "sample__combo-vec-mm-xz", samples.LLM_TRACE)
# Each table's sample rows (a deleted trace's row stays, marked deleted).
SAMPLE_ROWS = " UNION ALL ".join(
    f"SELECT '{table}', count(*) FROM {table} WHERE sample{' AND NOT deleted' if table == 'traces' else ''}"
    for table in ("traces", "runs", "sims", "kernels", "kernel_stats", "sim_log", "sim_files", "trace_files", "trace_kernels", "trace_real_timing")
)


def sample_rows(client: TestClient) -> dict[str, int]:
    answer = client.post("/api/sql", json={"sql": SAMPLE_ROWS})
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["rows"])


def test_deleting_a_sample_trace_removes_it_and_its_runs_for_good(tmp_path: Path, nats_url: str) -> None:
    with start(tmp_path, nats_url) as client:
        wait_until(lambda: (lambda h: h["projected_seq"] == h["stream_seq"])(client.get("/api/health").json()), 60, "the samples projected")
        assert all(sample_rows(client).values())
        for trace_id in SAMPLE_TRACES:
            assert client.delete(f"/api/traces/{trace_id}").status_code == 204
        assert client.get("/api/traces").json() == [] and client.get("/api/runs").json() == []
        assert client.get("/api/runs/run-sample-combo-titanx").status_code == 404
        assert not any(sample_rows(client).values())
        seq = client.get("/api/health").json()["stream_seq"]
    with start(tmp_path, nats_url) as client:  # samples on: those deleted are not loaded again
        assert client.get("/api/health").json()["stream_seq"] == seq
        assert client.get("/api/runs").json() == []
    (tmp_path / "data" / "readmodel.duckdb").unlink()
    with start(tmp_path, nats_url) as client:  # a read model made again from the log
        wait_until(lambda: client.get("/api/health").json()["projected_seq"] == seq, 60, "the log replayed")
        assert client.get("/api/health").json()["stream_seq"] == seq
        assert client.get("/api/runs").json() == [] and not any(sample_rows(client).values())
        assert client.get("/api/traces/sample__combo-vec-mm-xz").status_code == 404


def test_a_samples_derived_metrics_are_measured_against_the_options_its_log_shows(tmp_path: Path, nats_url: str) -> None:
    """No Accel-Sim here, so no config files: the options come from the sims' own logs (their
    option dump), which is what the simulator ran with in any case."""
    with start(tmp_path, nats_url) as client:
        derived = client.get("/api/runs/run-sample-combo-titanx/stats/derived").json()
    (titanx,) = derived["configs"]
    # -gpgpu_n_mem 12 x -gpgpu_n_mem_per_ctrlr 1 x -gpgpu_dram_buswidth 4 x
    # -dram_data_command_freq_ratio 4 x the DRAM clock 2500 MHz (-gpgpu_clock_domains 1417.0:1417.0:1417.0:2500.0)
    assert (titanx["options_from"], titanx["error"], titanx["dram_peak_gbps"], titanx["sms"]) == ("log", None, 480.0, 28)
    assert titanx["options"]["-gpgpu_clock_domains"] == "1417.0:1417.0:1417.0:2500.0"
    first = derived["kernels"][0]
    # vecAdd: 26 DRAM reads of 8 x 4 x 1 bytes in 5,534 cycles at 1,417 MHz; 10,516 instructions over 28 SMs.
    assert first["values"]["dram_read_bytes"] == 26 * 32
    assert first["values"]["dram_read_gbps"] == pytest.approx(26 * 32 / (5534 / 1417e6) / 1e9)
    assert first["values"]["ipc_per_sm"] == pytest.approx(10516 / 5534 / 28)
