"""The runner against the fake simulator, which replays the real simulator's recorded output."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_app.service import Cascade
from cascade_process.service import starlette_app
from cascade_sim.attempt import SIMULATOR_NICENESS
from tests.cascade_sim.world import (
    TITANX,
    accelsim_tree,
    add_config_lines,
    create_run,
    process_exists,
    relabel,
    store_trace,
    wait_run,
    worker,
)
from tests.support import TRACES, wait_until

TOKEN = "t"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return accelsim_tree(tmp_path / "accel-sim")


def serve(tmp_path: Path, nats_url: str, tree: Path, **overrides: object) -> TestClient:
    settings = Settings(
        token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=tree, runner=True, runner_slots=2, samples=False
    )
    for key, value in overrides.items():
        setattr(settings, key, value)
    return TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"})


@pytest.fixture
def client(tmp_path: Path, nats_url: str, tree: Path) -> Iterator[TestClient]:
    with serve(tmp_path, nats_url, tree) as c:
        yield c


def service(client: TestClient) -> Cascade:
    return client.app.state.cascade  # type: ignore[attr-defined,no-any-return]


def test_a_run_succeeds_with_every_kernel_of_the_recorded_log(client: TestClient) -> None:
    store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
    run = wait_run(client, create_run(client, "combo", "SM61_TITANX", count=2)["id"])
    assert run["state"] == "succeeded" and run["sim_counts"] == {"succeeded": 2}
    for sim in run["sims"]:
        assert (sim["kernels_done"], sim["kernels_total"], sim["exit_code"], sim["error"]) == (3, 3, 0, None)
        assert sim["launcher_ref"] and sim["started_at"] and sim["finished_at"]
        assert sim["latest"]["gpu_tot_sim_cycle"] is not None
    files = {f["name"] for f in client.get(f"/api/sims/{run['sims'][0]['id']}/files").json()}
    assert files == {"accelsim.log.gz", "exit-status.txt", "kernel-stats.csv", "gpgpu_inst_stats.txt"}


def test_a_create_answers_every_sim_as_created_however_fast_the_runner_takes_them(tmp_path: Path, nats_url: str, tree: Path) -> None:
    """The reference: "The response comes back before any sim has launched, so every sim is
    pending or launching". Read from the read model after the creation, the answer could
    show what the runners did since (running, attention); a fast simulator, many slots, a
    busy projector and creates in parallel make that likely, were it still read so
    (tests/cascade_http/test_runs.py shows the answer's source, deterministically)."""
    with serve(tmp_path, nats_url, tree, runner_slots=32) as client:
        store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
        store_trace(service(client), client, "x40", TRACES / "matrixmul-x40", "sm_61")
        # Forty kernels' results each, stats maps and all, keep the projector busy meanwhile.
        load = create_run(client, "x40", "SM61_TITANX", count=8)
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda _: create_run(client, "combo", "SM61_TITANX", count=8), range(12)))
        shown = {(s["state"], s.get("attention")) for answer in answers for s in answer["sims"]}
        assert shown <= {("pending", None), ("launching", None)}, shown
        assert {(a["state"], tuple(a["sim_counts"].items())) for a in answers} == {("active", (("pending", 8),))}
        for answer in [load, *answers]:
            assert wait_run(client, answer["id"], timeout=120)["sim_counts"] == {"succeeded": 8}


@pytest.mark.parametrize(
    "setup, config, expected_error, exit_code",
    [
        ("missing-icnt", "SM61_TITANX", "Could not open configuration file config_pascal_islip.icnt", 255),
        ("unknown-option", "SM61_TITANX", "GPGPU-Sim ** ERROR: Unknown Option: '-no_such_option'", 1),
        ("missing-traceg", "SM61_TITANX", "unsupported binary version: 0 (cat: ", 0),
        ("undefined-instruction", "SM7_QV100", "ERROR:  undefined instruction : XMAD.MRG Opcode: XMAD", 134),
        ("unsupported-binary-version", "SM90_TEST", "unsupported binary version: 90", 0),
    ],
)
def test_each_recorded_failure_ends_failed_with_the_simulators_error(
    tmp_path: Path, nats_url: str, tree: Path, setup: str, config: str, expected_error: str, exit_code: int
) -> None:
    trace, arch = TRACES / "vectoradd-100-32", "sm_61"
    if setup == "missing-icnt":
        (tree / TITANX / "config_pascal_islip.icnt").unlink()
    elif setup == "unknown-option":
        add_config_lines(tree, "SM61_TITANX", "-no_such_option 1")
    elif setup == "missing-traceg":
        trace = tmp_path / "broken"
        (trace).mkdir()
        (trace / "kernelslist.g").write_text((TRACES / "vectoradd-100-32" / "kernelslist.g").read_text())
    elif setup == "undefined-instruction":
        trace, arch = relabel(trace, tmp_path / "relabelled", 70), "sm_70"
    else:
        trace, arch = relabel(trace, tmp_path / "hopper", 90), "sm_90"
        (tree / TITANX.parent / "SM90_TEST").mkdir()
        for f in (tree / TITANX).iterdir():
            (tree / TITANX.parent / "SM90_TEST" / f.name).write_bytes(f.read_bytes())
    with serve(tmp_path, nats_url, tree) as client:
        store_trace(service(client), client, "t", trace, arch)
        run = wait_run(client, create_run(client, "t", config)["id"])
    (sim,) = run["sims"]
    assert run["state"] == "failed" and sim["state"] == "failed"
    assert sim["error"].startswith(expected_error), sim["error"]
    assert sim["exit_code"] == exit_code


def test_a_cycle_cap_succeeds_without_the_cut_kernel(tmp_path: Path, nats_url: str, tree: Path) -> None:
    add_config_lines(tree, "SM61_TITANX", "-gpgpu_max_cycle 1000")
    with serve(tmp_path, nats_url, tree) as client:
        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        run = wait_run(client, create_run(client, "v", "SM61_TITANX")["id"])
        (sim,) = run["sims"]
        assert (sim["state"], sim["kernels_done"], sim["kernels_total"], sim["exit_code"]) == ("succeeded", 0, 1, 0)
        assert client.get(f"/api/runs/{run['id']}/kernels").json() == []


def test_liveness_lines_update_the_latest_metrics(tmp_path: Path, nats_url: str, tree: Path) -> None:
    add_config_lines(tree, "SM61_TITANX", "-trace_enabled 1", "-trace_components LIVENESS", "-liveness_message_freq 0")
    with serve(tmp_path, nats_url, tree) as client:
        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        run = wait_run(client, create_run(client, "v", "SM61_TITANX")["id"])
    (sim,) = run["sims"]
    assert sim["state"] == "succeeded" and sim["kernels_done"] == 1


@pytest.mark.parametrize("who", ["user", "someone else"])
def test_sigterm_mid_kernel_is_cancelled_when_we_cancel_and_failed_otherwise(
    tmp_path: Path, nats_url: str, tree: Path, monkeypatch: pytest.MonkeyPatch, who: str
) -> None:
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "30")
    with serve(tmp_path, nats_url, tree) as client:
        store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
        run_id = create_run(client, "combo", "SM61_TITANX")["id"]
        running = wait_run(client, run_id, until="running")
        pid = int(running["sims"][0]["launcher_ref"])
        asked = time.monotonic()
        if who == "user":
            assert client.post(f"/api/runs/{run_id}/cancel").json()["state"] == "cancelled"
        else:
            os.kill(pid, signal.SIGTERM)
        while process_exists(pid):
            assert time.monotonic() - asked < 2, "SIGTERM within 2 s, and the process reaped"
            time.sleep(0.02)
        run = wait_run(client, run_id)
        (sim,) = run["sims"]
        if who == "user":
            assert (run["state"], sim["state"], sim["error"]) == ("cancelled", "cancelled", None)
        else:
            assert (run["state"], sim["state"], sim["exit_code"]) == ("failed", "failed", 143)
            assert sim["error"] == "killed by signal 15 (SIGTERM)"
        wait_until(lambda: not list((tmp_path / "data" / "runner" / "sims").glob("*")), 10, "no leftover working directory")


def test_the_wall_time_limit_fails_a_sim_saying_so(tmp_path: Path, nats_url: str, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "30")
    with serve(tmp_path, nats_url, tree, sim_timeout_s=1.5) as client:
        store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
        run = wait_run(client, create_run(client, "combo", "SM61_TITANX")["id"])
    (sim,) = run["sims"]
    assert sim["state"] == "failed"
    assert sim["error"] == "ran longer than the wall-time limit of 1.5 s (CASCADE_SIM_TIMEOUT)"


def test_a_killed_runner_loses_no_sim_and_records_no_kernel_twice(tmp_path: Path, nats_url: str, tree: Path) -> None:
    with serve(tmp_path, nats_url, tree, runner=False, runner_lease_s=2.0) as client:
        store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
        with worker(nats_url, tree, tmp_path / "w1", lease_s=2, CASCADE_FAKE_ACCELSIM_PACE="1.5") as first:
            run_id = create_run(client, "combo", "SM61_TITANX")["id"]
            wait_until(lambda: client.get(f"/api/runs/{run_id}").json()["sims"][0]["kernels_done"] >= 1, 30)
            first.send_signal(signal.SIGKILL)
            first.wait()
        # It resumes at the first launch the killed one did not finish: a range of launches
        # with no recording of its own, which the fake cuts from the whole trace's.
        with worker(nats_url, tree, tmp_path / "w2", lease_s=2):
            run = wait_run(client, run_id, timeout=60)
        (sim,) = run["sims"]
        assert (sim["state"], sim["kernels_done"]) == ("succeeded", 3)
        kernels = client.get(f"/api/runs/{run_id}/kernels").json()
        assert [(k["kernel_launch_uid"], k["gpu_sim_cycle"]) for k in kernels] == [(1, 5534), (2, 7506), (3, 5408)]
        history = client.portal.call(_claims, service(client), sim["id"])  # type: ignore[union-attr]
        assert [c.attempt for c in history] == [1, 2]
        assert history[0].runner_id != history[1].runner_id
        assert history[1].resume is not None and sim["resumed"] == [{"attempt": 2, "first": history[1].resume.first, "warmup": history[1].resume.warmup}]


def test_a_killed_runners_chunk_runs_again_and_the_finished_chunks_are_kept(tmp_path: Path, nats_url: str, tree: Path) -> None:
    split = {"kernels_per_chunk": 1, "warmup": 0}
    with serve(tmp_path, nats_url, tree, runner=False, runner_lease_s=2.0) as client:
        store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
        with worker(nats_url, tree, tmp_path / "w1", slots=1, lease_s=2, CASCADE_FAKE_ACCELSIM_PACE="1.5") as first:
            body = {"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": 1, "split": split}]}
            run_id = client.post("/api/runs", json=body).json()["id"]
            # Chunk 1 finished; chunk 2 printed its kernel and is still running: killed there.
            wait_until(lambda: client.get(f"/api/runs/{run_id}").json()["sims"][0]["kernels_done"] >= 2, 30)
            first.send_signal(signal.SIGKILL)
            first.wait()
        with worker(nats_url, tree, tmp_path / "w2", slots=2, lease_s=2):
            run = wait_run(client, run_id, timeout=60)
        (sim,) = run["sims"]
        assert (sim["state"], sim["kernels_done"]) == ("succeeded", 3)
        assert [(c["state"], c["attempt"]) for c in sim["split"]["chunks"]] == [("succeeded", 1), ("succeeded", 2), ("succeeded", 1)]
        kernels = client.get(f"/api/runs/{run_id}/kernels").json()
        assert [k["kernel_launch_uid"] for k in kernels] == [1, 2, 3]
        assert [k["gpu_sim_cycle"] for k in kernels] == [5534, 7506, 5535]  # the recorded chunks, without warm-up
        claims = client.portal.call(_claims, service(client), sim["id"])  # type: ignore[union-attr]
        assert sorted((c.chunk, c.attempt) for c in claims) == [(0, 1), (1, 1), (1, 2), (2, 1)]


def test_after_the_allowed_attempts_a_lost_sim_fails_saying_the_runner_was_lost(tmp_path: Path, nats_url: str, tree: Path) -> None:
    with serve(tmp_path, nats_url, tree, runner=False, runner_lease_s=1.5) as client:
        store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
        run_id = create_run(client, "combo", "SM61_TITANX")["id"]
        sim_id = client.get(f"/api/runs/{run_id}").json()["sims"][0]["id"]
        for attempt in range(1, 4):
            with worker(nats_url, tree, tmp_path / f"w{attempt}", lease_s=1.5, CASCADE_FAKE_ACCELSIM_PACE="30") as w:
                wait_until(lambda n=attempt: len(client.portal.call(_claims, service(client), sim_id)) >= n, 30)  # type: ignore[union-attr]
                w.send_signal(signal.SIGKILL)
                w.wait()
        with worker(nats_url, tree, tmp_path / "w4", lease_s=1.5):
            run = wait_run(client, run_id, timeout=30)
    (sim,) = run["sims"]
    assert sim["state"] == "failed"
    assert sim["error"].startswith("runner lost: ") and sim["error"].endswith("gave up after 3 attempts")


def test_two_runners_share_twelve_sims_each_run_exactly_once(tmp_path: Path, nats_url: str, tree: Path) -> None:
    with serve(tmp_path, nats_url, tree, runner=False) as client:
        store_trace(service(client), client, "v", TRACES / "vectoradd-100-32", "sm_61")
        with worker(nats_url, tree, tmp_path / "a", slots=2, CASCADE_FAKE_ACCELSIM_PACE="0.3"), worker(
            nats_url, tree, tmp_path / "b", slots=2, CASCADE_FAKE_ACCELSIM_PACE="0.3"
        ):
            run = wait_run(client, create_run(client, "v", "SM61_TITANX", count=12)["id"], timeout=90)
        assert run["sim_counts"] == {"succeeded": 12}
        claims = [c for sim in run["sims"] for c in client.portal.call(_claims, service(client), sim["id"])]  # type: ignore[union-attr]
        assert len(claims) == 12 and all(c.attempt == 1 for c in claims)
        assert len({c.runner_id for c in claims}) == 2, "both runners busy"


async def _claims(service: Cascade, sim_id: str) -> list:  # type: ignore[type-arg]
    from cascade_core import events as ev
    from cascade_nats import subjects

    return [item.event async for item in service.store.read(subjects.sim_history(sim_id)) if isinstance(item.event, ev.SimClaimed)]


def test_the_simulator_yields_the_cpu_in_a_process_group_of_its_own_within_the_runners_session(
    tmp_path: Path, nats_url: str, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A session of its own would be a scheduling group of its own (autogroups), where its
    # niceness does not make it yield to the service.
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "30")
    with serve(tmp_path, nats_url, tree) as client:
        store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
        run_id = create_run(client, "combo", "SM61_TITANX")["id"]
        pid = int(wait_run(client, run_id, until="running")["sims"][0]["launcher_ref"])
        niceness = os.getpriority(os.PRIO_PROCESS, pid)
        group, session = os.getpgid(pid), os.getsid(pid)
        client.post(f"/api/runs/{run_id}/cancel")
        assert niceness == min(19, os.getpriority(os.PRIO_PROCESS, 0) + SIMULATOR_NICENESS)
        assert (group, session) == (pid, os.getsid(0))
        wait_run(client, run_id)
