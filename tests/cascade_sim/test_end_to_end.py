"""Through HTTP, as a user: upload the combo trace, run it on SM61_TITANX x 3, watch the run's
event stream until it succeeds, then check every route against the recorded simulator log.

Runs against the fake simulator (which replays that log) and, when CASCADE_ACCELSIM_DIR
points at a built Accel-Sim, against the real binary too."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from cascade_app.config import Settings
from cascade_sim.logparse import KernelBlock, LogParser
from tests.cascade_http.live import LiveServer, live_server, sse_events
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.cascade_sim.world import accelsim_tree
from tests.support import LOGS, stats_json

TOKEN = "t"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RECORDED = (LOGS / "combo-vec-mm-xz__SM61_TITANX.log").read_text()
CLOCK_MHZ = 1417.0
# Lines whose values count wall-clock seconds: the only ones that differ between two runs.
WALL_CLOCK = re.compile(r"gpgpu_simulation_time|gpgpu_simulation_rate|gpgpu_silicon_slowdown|gpu_total_sim_rate")


def simulators() -> list[object]:
    real = os.environ.get("CASCADE_ACCELSIM_DIR")
    reason = "set CASCADE_ACCELSIM_DIR to a built Accel-Sim to run this against the real binary"
    if real and (Path(real) / "gpu-simulator" / "bin" / "release" / "accel-sim.out").exists():
        return ["fake", "real"]
    return ["fake", pytest.param("real", marks=pytest.mark.skip(reason=reason))]


@pytest.fixture(params=simulators())
def accelsim(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "real":
        return Path(os.environ["CASCADE_ACCELSIM_DIR"])
    return accelsim_tree(tmp_path / "accel-sim")


@pytest.fixture
def live(tmp_path: Path, nats_url: str, accelsim: Path) -> Iterator[LiveServer]:
    settings = Settings(
        token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=accelsim, runner=True, runner_slots=3, samples=False
    )
    with live_server(settings) as server:
        yield server


def recorded_kernels() -> list[dict[str, object]]:
    """Each kernel's summary and stats map from the recorded log, read whole; the map as the
    JSON answers show it (nan as "NaN")."""
    parser = LogParser()
    outputs = parser.feed(RECORDED) + parser.finish()
    return [{"uid": o.uid, "name": o.name, "cycles": o.gpu_sim_cycle, "insn": o.gpu_sim_insn, "ipc": o.gpu_ipc,
             "stats": json.loads(stats_json(o.stats.as_dict()))} for o in outputs if isinstance(o, KernelBlock)]


def without_wall_clock(stats: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in stats.items() if not WALL_CLOCK.match(k)}


def test_upload_run_watch_and_read_everything_back(live: LiveServer, accelsim: Path) -> None:
    expected = recorded_kernels()
    assert [k["uid"] for k in expected] == [1, 2, 3]

    async def scenario() -> tuple[dict, list]:  # type: ignore[type-arg]
        async with httpx.AsyncClient(base_url=live.url, headers=AUTH, timeout=60) as http:
            body = tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")
            uploaded = await http.post("/api/traces?id=combo", content=body, headers={"Content-Type": "application/x-tar"})
            assert uploaded.status_code == 202 and uploaded.json()["state"] == "ready", uploaded.text
            created = await http.post("/api/runs", json={"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": 3}]})
            assert created.status_code == 201, created.text
            run = created.json()
            seen = []
            with anyio.fail_after(120):
                async with http.stream("GET", f"/api/runs/{run['id']}/events") as stream:
                    async for event in sse_events(stream):
                        seen.append(event)
            return run, seen

    run, seen = anyio.run(scenario)
    assert seen[0].event == "snapshot"
    assert seen[-1].event == "run" and seen[-1].data["state"] == "succeeded"
    assert [e.position for e in seen] == sorted({e.position for e in seen}), "in stream order"
    assert sum(e.event == "kernel" for e in seen) == 9
    run_id = run["id"]

    with httpx.Client(base_url=live.url, headers=AUTH, timeout=60) as http:
        detail = http.get(f"/api/runs/{run_id}").json()
        assert detail["state"] == "succeeded" and detail["sim_counts"] == {"succeeded": 3}
        for sim in detail["sims"]:
            assert (sim["kernels_done"], sim["kernels_total"], sim["exit_code"]) == (3, 3, 0)

        kernels = http.get(f"/api/runs/{run_id}/kernels").json()
        assert len(kernels) == 9
        for kernel in kernels:
            want = expected[kernel["kernel_index"]]
            assert (kernel["kernel_launch_uid"], kernel["kernel_name"]) == (want["uid"], want["name"])
            assert (kernel["gpu_sim_cycle"], kernel["gpu_sim_insn"], kernel["gpu_ipc"]) == (want["cycles"], want["insn"], want["ipc"])
            assert kernel["sim_time_ns"] == want["cycles"] / CLOCK_MHZ * 1000

        comparison = http.get(f"/api/runs/{run_id}/comparison").json()
        assert [row["sim_ns"]["SM61_TITANX"] for row in comparison["rows"]] == [k["cycles"] / CLOCK_MHZ * 1000 for k in expected]

        results = http.get(f"/api/runs/{run_id}/results")
        assert results.headers["content-disposition"] == f'attachment; filename="{run_id}-results.json"'
        by_sim = {}
        for sim in results.json()["sims"]:
            by_sim[sim["sim"]["id"]] = sim["kernels"]
            for kernel, want in zip(sim["kernels"], expected, strict=True):
                stats = kernel["stats"]
                assert without_wall_clock(stats) == without_wall_clock(want["stats"])  # type: ignore[arg-type]
                assert len(stats) > 3800 and stats["gpu_occupancy"] == "NaN"  # every value of the block
                # The read model's columns, the download and the map say the same.
                assert (stats["kernel_name"], stats["kernel_launch_uid"]) == (kernel["kernel_name"], kernel["kernel_launch_uid"])
                assert (stats["gpu_sim_cycle"], stats["gpu_sim_insn"], stats["gpu_ipc"]) == (
                    kernel["gpu_sim_cycle"], kernel["gpu_sim_insn"], kernel["gpu_ipc"])
        listed = {(k["sim_id"], k["kernel_index"]): k for k in kernels}
        for sim_id, sim_kernels in by_sim.items():
            for kernel in sim_kernels:
                assert {**kernel, "stats": {}} == listed[(sim_id, kernel["kernel_index"])]

        sim_id = detail["sims"][0]["id"]
        names = [f["name"] for f in http.get(f"/api/sims/{sim_id}/files").json()]
        assert names == ["accelsim.log.gz", "exit-status.txt", "gpgpu_inst_stats.txt", "kernel-stats.csv"]
        stats_csv = list(csv.reader(io.StringIO(http.get(f"/api/sims/{sim_id}/files/kernel-stats.csv").text)))
        assert stats_csv[0] == ["uid", "name", "gpu_sim_cycle", "gpu_sim_insn", "ipc"]
        assert [(int(r[0]), int(r[2]), int(r[3]), float(r[4])) for r in stats_csv[1:]] == [
            (k["uid"], k["cycles"], k["insn"], k["insn"] / k["cycles"]) for k in expected  # type: ignore[operator]
        ]
        assert [(r[1], int(r[2])) for r in stats_csv[1:]] == [
            (k["stats"]["kernel_name"], k["stats"]["gpu_sim_cycle"]) for k in by_sim[sim_id]
        ]
        assert http.get(f"/api/sims/{sim_id}/files/exit-status.txt").text == "0\n"
        log_gz = http.get(f"/api/sims/{sim_id}/files/accelsim.log.gz")
        assert log_gz.headers["content-type"] == "application/gzip" and "content-encoding" not in log_gz.headers
        log = http.get(f"/api/sims/{sim_id}/log")
        assert log.headers["content-type"].startswith("text/plain")
        if accelsim.name == "accel-sim":  # the fake replays the recording byte for byte
            assert gzip.decompress(log_gz.content).decode() == RECORDED
            assert log.text.splitlines() == RECORDED.splitlines()
        else:
            assert len(log.text.splitlines()) == len(RECORDED.splitlines())
