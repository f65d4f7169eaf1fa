"""Resume after a lost runner, end to end: `cascade worker` processes killed -9 mid-sim on a
real nats-server, the fake simulator replaying the real simulator's log of matrixmul-x40.

The worker that takes over runs only the launches left, after warm-up launches, which the fake
replays cut from the recording of the whole run (none has a recording of its own), so the cycles
of a resumed sim are the sequential run's: what is checked is that every route answers as for
the sim run straight, each kernel once, in order. What a resume costs in accuracy on the real
simulator is in bench/README.md (issue 16).
"""

from __future__ import annotations

import signal
from array import array
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cascade_app.service import Cascade
from cascade_core import events as ev
from cascade_core import split
from cascade_nats import subjects
from cascade_sim.sim_report import Kept, kept_by, packed
from cascade_sim.simulator import Stats
from tests.cascade_sim.test_runner import serve, service
from tests.cascade_sim.world import accelsim_tree, run_kernels, store_trace, wait_run, worker
from tests.support import TRACES, wait_until

UNCUT = {"CASCADE_FAKE_ACCELSIM_CUT": "0"}  # a range of launches with no recording fails
KERNEL_FIELDS = ("kernel_index", "kernel_launch_uid", "kernel_name", "gpu_sim_cycle", "gpu_sim_insn", "gpu_ipc", "sim_time_ns")
TOTALS = ("gpu_tot_sim_cycle", "gpu_tot_sim_insn", "gpu_tot_ipc")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return accelsim_tree(tmp_path / "accel-sim")


async def _claims(cascade: Cascade, sim_id: str) -> list[ev.SimClaimed]:
    return [item.event async for item in cascade.store.read(subjects.sim_history(sim_id)) if isinstance(item.event, ev.SimClaimed)]


def claims(client: TestClient, sim_id: str) -> list[ev.SimClaimed]:
    return client.portal.call(_claims, service(client), sim_id)  # type: ignore[union-attr,no-any-return]


def start(client: TestClient, trace_id: str, **asked: object) -> str:
    body = {"trace_id": trace_id, "entries": [{"gpu_config": "SM61_TITANX", "count": 1, **asked}]}
    response = client.post("/api/runs", json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]  # type: ignore[no-any-return]


def kernels_done(client: TestClient, run_id: str) -> int:
    return client.get(f"/api/runs/{run_id}").json()["sims"][0]["kernels_done"]  # type: ignore[no-any-return]


def results(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    """Every kernel of the run's sim with its stats map's totals, from the results route."""
    response = client.get(f"/api/runs/{run_id}/results")
    assert response.status_code == 200, response.text
    (sim,) = response.json()["sims"]
    return [{**{f: k[f] for f in KERNEL_FIELDS}, **{t: k["stats"][t] for t in TOTALS}} for k in sim["kernels"]]


def same_as_straight(client: TestClient, resumed: dict[str, Any], straight: dict[str, Any]) -> None:
    """Every route that tells a sim's kernels answers for the resumed sim as for the one run straight."""
    (r,), (s,) = resumed["sims"], straight["sims"]
    assert (r["state"], r["kernels_done"], r["latest"]["gpu_tot_sim_cycle"], r["latest"]["gpu_tot_sim_insn"]) == (
        "succeeded", 40, s["latest"]["gpu_tot_sim_cycle"], s["latest"]["gpu_tot_sim_insn"],
    )
    ks = run_kernels(client, resumed["id"])
    assert [k["kernel_launch_uid"] for k in ks] == list(range(1, 41)), "each launch once, in order"
    assert [{f: k[f] for f in KERNEL_FIELDS} for k in ks] == [{f: k[f] for f in KERNEL_FIELDS} for k in run_kernels(client, straight["id"])]
    assert results(client, resumed["id"]) == results(client, straight["id"])
    for name in ("gpu_tot_sim_cycle", "L2_total_cache_accesses", "L2_total_cache_misses"):  # each kernel's own, and the running totals
        values = [client.get(f"/api/runs/{run['id']}/stats/values", params={"name": name}).json()["rows"] for run in (resumed, straight)]
        assert [[(r["median"], r["running_total"]) for r in rows] for rows in values][0] == [(r["median"], r["running_total"]) for r in values[1]], name
    perfetto = [client.get(f"/api/runs/{run['id']}/perfetto").json() for run in (resumed, straight)]
    assert [[(e["name"], e.get("dur")) for e in p["traceEvents"] if e.get("ph") == "X"] for p in perfetto][0] == [
        [(e["name"], e.get("dur")) for e in p["traceEvents"] if e.get("ph") == "X"] for p in perfetto
    ][1]
    verified = client.post("/api/replay/verify", json={})
    assert verified.status_code == 200 and verified.json()["equal"], verified.text


def test_a_sim_whose_worker_is_killed_mid_sim_resumes_at_its_first_unfinished_kernel(tmp_path: Path, nats_url: str, tree: Path) -> None:
    with serve(tmp_path, nats_url, tree, runner=False, runner_lease_s=2.0) as client:
        store_trace(service(client), client, "x40", TRACES / "matrixmul-x40", "sm_61")
        with worker(nats_url, tree, tmp_path / "w1", lease_s=2, CASCADE_FAKE_ACCELSIM_PACE="0.4") as first:
            run_id = start(client, "x40")
            wait_until(lambda: kernels_done(client, run_id) >= 10, 60)
            first.send_signal(signal.SIGKILL)
            first.wait()
        with worker(nats_url, tree, tmp_path / "w2", lease_s=2):
            resumed = wait_run(client, run_id, timeout=90)
            straight = wait_run(client, start(client, "x40"), timeout=90)
        (sim,) = resumed["sims"]
        first_claim, second = claims(client, sim["id"])
        assert (first_claim.attempt, first_claim.resume, second.attempt) == (1, None, 2)
        assert second.resume is not None and second.resume.first > 10 and second.resume.warmup == 2
        assert sim["resumed"] == [{"attempt": 2, "first": second.resume.first, "warmup": 2}]
        assert [a["state"] for a in sim["attempts"]] == ["lost"]
        same_as_straight(client, resumed, straight)
        log = client.get(f"/api/sims/{sim['id']}/log").text
        marker = f"==== cascade: attempt 2 resumes a lost runner's at launch {second.resume.first}, after warm-up launches"
        assert marker in log and log.index("kernel_launch_uid = 1 ") < log.index(marker), "the lost attempt's lines, then where it resumed"
        assert log.count("kernel_launch_uid = ") == 40 + 2, "the lost attempt's kernels, then the warm-up's and the rest"


def test_a_chunk_whose_worker_is_killed_mid_chunk_resumes_at_its_own_first_unfinished_kernel(
    tmp_path: Path, nats_url: str, tree: Path
) -> None:
    split = {"kernels_per_chunk": 20, "warmup": 2}
    with serve(tmp_path, nats_url, tree, runner=False, runner_lease_s=2.0) as client:
        store_trace(service(client), client, "x40", TRACES / "matrixmul-x40", "sm_61")
        with worker(nats_url, tree, tmp_path / "w1", slots=2, lease_s=2, CASCADE_FAKE_ACCELSIM_PACE="0.4") as first:
            run_id = start(client, "x40", split=split)
            wait_until(lambda: all(c["kernels_done"] >= 3 for c in client.get(f"/api/runs/{run_id}").json()["sims"][0]["split"]["chunks"]), 60)
            first.send_signal(signal.SIGKILL)
            first.wait()
        with worker(nats_url, tree, tmp_path / "w2", slots=2, lease_s=2):
            resumed = wait_run(client, run_id, timeout=90)
            straight = wait_run(client, start(client, "x40"), timeout=90)
        (sim,) = resumed["sims"]
        by_chunk: dict[int | None, list[ev.SimClaimed]] = {}
        for claim in claims(client, sim["id"]):
            by_chunk.setdefault(claim.chunk, []).append(claim)
        for index, chunk in enumerate(sim["split"]["chunks"]):
            lost, taken_over = by_chunk[index]
            assert taken_over.resume is not None and lost.resume is None
            assert chunk["first"] + 3 <= taken_over.resume.first <= chunk["last"], "at its own first unfinished kernel"
            assert (chunk["state"], chunk["attempt"]) == ("succeeded", 2)
            assert chunk["resumed"] == [{"attempt": 2, "first": taken_over.resume.first, "warmup": 2}]
        same_as_straight(client, resumed, straight)


def test_a_retry_of_a_split_sim_runs_its_failed_chunk_again_and_keeps_the_finished_ones(
    tmp_path: Path, nats_url: str, tree: Path
) -> None:
    # Chunk 1 (launches 1-2) has no recording of its own and, not cut from the whole one,
    # fails; chunk 2 (launch 3 after 2 warm-up launches) is recorded.
    split = {"kernels_per_chunk": 2, "warmup": 2}
    with serve(tmp_path, nats_url, tree, runner=False) as client:
        store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
        with worker(nats_url, tree, tmp_path / "w1", slots=2, **UNCUT):
            run_id = start(client, "combo", split=split)
            failed = wait_run(client, run_id, timeout=60)
        (sim,) = failed["sims"]
        assert (failed["state"], sim["split"]["chunks"][0]["state"]) == ("failed", "failed")
        before = [(c["state"], c["attempt"]) for c in sim["split"]["chunks"]]
        with worker(nats_url, tree, tmp_path / "w2", slots=2):
            assert client.post(f"/api/runs/{run_id}/retry").status_code == 200
            retried = wait_run(client, run_id, timeout=60)
        (sim,) = retried["sims"]
        assert (retried["state"], sim["state"], sim["error"]) == ("succeeded", "succeeded", None)
        after = [(c["state"], c["attempt"]) for c in sim["split"]["chunks"]]
        assert after == [("succeeded", attempt + 1 if state != "succeeded" else attempt) for state, attempt in before]
        ran_again = sorted(c.chunk for c in claims(client, sim["id"]) if c.attempt > 1)
        assert ran_again == [i for i, (state, _) in enumerate(before) if state != "succeeded"], "only the failed or cancelled chunks"
        ks = run_kernels(client, run_id)
        assert [(k["kernel_launch_uid"], k["gpu_sim_cycle"]) for k in ks] == [(1, 5534), (2, 7506), (3, 5408)]
        verified = client.post("/api/replay/verify", json={})
        assert verified.status_code == 200 and verified.json()["equal"], verified.text


def test_what_a_lost_attempt_recorded_is_read_off_the_last_event_on_its_data_subject() -> None:
    common = {"id": "e", "at": datetime(2026, 12, 1, tzinfo=UTC), "run_id": "run-1", "sim_id": "sim-1", "chunk": 1}
    chunk = split.chunk_of(40, ev.Split(20, 2), 1)  # launches 21-40

    def beat(attempt: int) -> ev.SimHeartbeat:
        return ev.SimHeartbeat(
            **common,
            attempt=attempt,
            kernels_done=4,
            current_kernel="k",
            latest=ev.SimMetrics(gpu_tot_sim_cycle=29704.0, gpu_tot_sim_insn=4.0e6),
        )

    def kernel(attempt: int, stats: dict[str, float]) -> ev.KernelFinished:
        return ev.KernelFinished(
            **common, attempt=attempt, kernel_index=24, uid=25, name="k", gpu_sim_cycle=7426, gpu_sim_insn=10**6, gpu_ipc=134.7,
            sim_time_ns=1.0, stats=packed(Stats(tuple(stats), array("d", stats.values()).tobytes(), {})),
        )

    assert kept_by(beat(2), 2, chunk) == Kept(launches=4, gpu_tot_sim_cycle=29704.0, gpu_tot_sim_insn=4.0e6)
    # Its kernel result went out, its heartbeat not: the kernel's launch, and the totals in its map.
    assert kept_by(kernel(2, {"gpu_tot_sim_cycle": 37130.0, "gpu_tot_sim_insn": 5.0e6}), 2, chunk) == Kept(launches=5, gpu_tot_sim_cycle=37130.0, gpu_tot_sim_insn=5.0e6)
    # Another attempt's (the lost one recorded nothing), or a map without totals: nothing to carry on.
    assert kept_by(beat(1), 2, chunk) is None
    assert kept_by(kernel(2, {"gpu_sim_cycle": 7426.0}), 2, chunk) is None
    assert kept_by(None, 2, chunk) is None
