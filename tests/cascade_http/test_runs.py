"""The Runs API against its reference: each route replays the reference's example (same
request, same response shape and values where the reference shows them, same errors and
headers), on a real nats-server and DuckDB, with everything a runner does appended as events.

Read-only routes share one world built once (`world`); commands get a fresh service each.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from starlette.testclient import TestClient

from cascade_app.reads import read

from cascade_app.config import Settings
from cascade_core import events as ev
from cascade_core.gpu_configs import config_digest
from cascade_nats import deflated
from cascade_nats import server
from cascade_nats import subjects
from cascade_process.service import starlette_app
from tests.cascade_http import runs_world as w
from projections.queries import runs as q
from tests.cascade_http.conftest import TOKEN, service
from tests.cascade_http.reference import MORE_ITEMS, assert_shows, example, substitute, text_example, without_short_names

RUN = f"/api/runs/{w.RUN_ID}"
SIM = f"/api/sims/{w.SIMS[0]}"
SAMPLE_TRACE = "sample__facebook_opt-125m__h100-e2e"
SAMPLE_RUN = "run-sample-opt125m-h100-e2e"


@pytest.fixture
def accelsim_dir(tmp_path: Path) -> Path:
    return w.reference_tree(tmp_path / "accel-sim")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """Trace `demo` and run run-210d75c008c4 with both sims succeeded, files stored."""
    tmp = tmp_path_factory.mktemp("world")
    with server.running(tmp / "jetstream") as nats:
        with TestClient(starlette_app(w.settings(tmp, nats.url)), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            w.append(client, w.trace_events() + w.reference_run())
            w.store_reference_files(client)
            yield client


def sample_run() -> list[ev.Event]:
    """The reference's sample: a sample trace and its run, its one sim long succeeded."""
    created = w.at("06:50:10")
    sim_id = "sim-sample-opt125m-h100-e2e"
    return [
        *w.trace_events(SAMPLE_TRACE, arch="sm_90", started=created, ready=created, sample=True, step_timeline=False),
        w.run_created(SAMPLE_RUN, [(sim_id, "SM90_H100", 0)], trace_id=SAMPLE_TRACE, created=created, sample=True),
        *w.sim_life(SAMPLE_RUN, sim_id, launched=created + timedelta(seconds=1), files_at=created + timedelta(seconds=2),
                    finished=created + timedelta(seconds=3), kernels=0, files=()),
    ]


def create(client: TestClient, *entries: tuple[str, int], trace_id: str = "demo") -> Any:
    body = {"trace_id": trace_id, "entries": [{"gpu_config": c, "count": n} for c, n in entries]}
    response = client.post("/api/runs", json=body)
    assert response.status_code == 201, response.text
    return response.json()


# --- GPU configs ----------------------------------------------------------------------------


ADDED_TO_GPU_CONFIG = ("digest", "local", "runners")  # Cascade's fields after the reference's


def test_gpu_configs_are_listed_sorted_by_name(client: TestClient, accelsim_dir: Path) -> None:
    response = client.get("/api/gpu-configs")
    assert response.status_code == 200
    configs = response.json()
    assert [c["name"] for c in configs] == ["SM61_TITANX", "SM7_QV100", "SM80_A100", "SM86_RTX3070", "SM90_H100", "SM90_H200"]
    as_referenced = [{k: v for k, v in c.items() if k not in ADDED_TO_GPU_CONFIG} for c in configs]
    assert as_referenced[0] == {"name": "SM61_TITANX", "arch": "sm_61", "core_clock_mhz": 1417.0}
    assert_shows(as_referenced[1:], example("List GPU configs"))
    assert [list(c)[3:] for c in configs] == [list(ADDED_TO_GPU_CONFIG)] * len(configs)
    assert all(c["local"] and c["runners"] == [] for c in configs), "no runner is up"
    # sha256 over `sha256sum`'s lines for the files a sim of it copies
    files = [accelsim_dir / "gpu-simulator/gpgpu-sim/configs/tested-cfgs/SM61_TITANX" / f for f in ("gpgpusim.config", "config_pascal_islip.icnt")]
    files.append(accelsim_dir / "gpu-simulator/configs/tested-cfgs/SM61_TITANX/trace.config")
    lines = "".join(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.name}\n" for f in sorted(files, key=lambda f: f.name))
    assert configs[0]["digest"] == hashlib.sha256(lines.encode()).hexdigest()


def test_without_an_accelsim_dir_there_are_no_gpu_configs(settings: Settings) -> None:
    settings.accelsim_dir = None
    with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        assert client.get("/api/gpu-configs").json() == []


def test_every_route_needs_the_token(world: TestClient) -> None:
    for path in ("/api/gpu-configs", "/api/runs", RUN, f"{RUN}/kernels", f"{SIM}/log", f"{SIM}/files/kernel-stats.csv"):
        response = world.get(path, headers={"Authorization": "Bearer wrong"})
        assert response.status_code == 401, path
        assert response.json() == {"detail": "Invalid token"}


# --- create ---------------------------------------------------------------------------------


def test_create_answers_the_run_with_every_sim_pending(client: TestClient) -> None:
    w.append(client, w.trace_events())
    run = create(client, ("SM86_RTX3070", 2))
    assert run["id"].startswith("run-") and len(run["id"]) == 16
    fresh = {"run-210d75c008c4": run["id"], "2026-11-08T08:59:03.024065Z": run["created_at"]}
    fresh |= {ref: sim["id"] for ref, sim in zip(w.SIMS, run["sims"])}
    assert_shows(run, substitute(example("Create a run"), fresh))
    assert all(s["created_at"] == run["created_at"] for s in run["sims"])
    assert client.get(f"/api/runs/{run['id']}").json() == run


def test_a_run_as_created_has_every_sim_pending_whatever_the_log_holds_since(world: TestClient) -> None:
    """What a create answers: the run as its creation event left it, not as the read model
    shows it by the time it is read (its sims may have launched, run and finished by then)."""
    now = world.get(RUN).json()
    assert [s["state"] for s in now["sims"]] == ["succeeded", "succeeded"]
    assert world.portal is not None
    created = world.portal.call(read, service(world), q.run_as_created, w.run_created())
    answer = json.loads(msgspec.json.encode(created))
    assert (answer["state"], answer["sim_counts"]) == ("active", {"pending": 2})
    assert {k: v for k, v in answer.items() if k not in ("state", "sim_counts", "sims")} == {
        k: v for k, v in now.items() if k not in ("state", "sim_counts", "sims")
    }
    assert [(s["id"], s["gpu_config"], s["replica"], s["state"], s["kernels_done"], s["launcher_ref"]) for s in answer["sims"]] == [
        (s["id"], s["gpu_config"], s["replica"], "pending", 0, None) for s in now["sims"]
    ]
    assert not [s for s in answer["sims"] if "attention" in s or s["started_at"] or s["log_tail"]]


def test_create_rejects_a_trace_that_is_not_ready(client: TestClient) -> None:
    w.append(client, w.trace_events() + w.failed_trace("demo-failed") + w.trace_events("busy", ready=None))
    body = {"trace_id": "demo-failed", "entries": [{"gpu_config": "SM86_RTX3070", "count": 2}]}
    response = client.post("/api/runs", json=body)
    assert (response.status_code, response.json()) == (409, example("Create a run", "409 response"))
    response = client.post("/api/runs", json=body | {"trace_id": "busy"})
    assert (response.status_code, response.json()) == (409, {"detail": "trace busy is processing, not ready"})
    response = client.post("/api/runs", json=body | {"trace_id": "nope"})
    assert (response.status_code, response.json()) == (404, {"detail": "trace nope not found"})


def test_create_rejects_a_sample_trace(client: TestClient) -> None:
    w.append(client, sample_run())
    response = client.post("/api/runs", json={"trace_id": SAMPLE_TRACE, "entries": [{"gpu_config": "SM90_H100", "count": 1}]})
    assert response.status_code == 409
    assert response.json() == {"detail": f"trace {SAMPLE_TRACE} is a sample, which has no instruction traces"}


def test_create_rejects_configs_the_trace_cannot_run_on(client: TestClient) -> None:
    w.append(client, w.trace_events())
    entries = [{"gpu_config": "SM86_RTX3070", "count": 1}, {"gpu_config": "SM90_H100", "count": 1}]
    response = client.post("/api/runs", json={"trace_id": "demo", "entries": entries})
    assert (response.status_code, response.json()) == (422, example("Create a run", "422 response, arch mismatch"))
    entries[1] = {"gpu_config": "SM99_NOPE", "count": 1}
    response = client.post("/api/runs", json={"trace_id": "demo", "entries": entries})
    assert (response.status_code, response.json()) == (422, {"detail": "unknown GPU config SM99_NOPE: no live runner has it, nor this server's Accel-Sim install (configs offered for sm_86 traces: SM86_RTX3070; 5 more of other archs)"})
    assert client.get("/api/runs").json() == []


def test_create_validates_the_body_as_fastapi_does(client: TestClient) -> None:
    response = client.post("/api/runs", json={"trace_id": "demo", "entries": [{"gpu_config": "SM86_RTX3070", "count": 0}]})
    assert (response.status_code, response.json()) == (422, example("Create a run", "422 response, validation"))
    response = client.post("/api/runs", json={"trace_id": "demo", "entries": []})
    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "type": "too_short",
                "loc": ["body", "entries"],
                "msg": "List should have at least 1 item after validation, not 0",
                "input": [],
                "ctx": {"field_type": "List", "min_length": 1, "actual_length": 0},
            }
        ]
    }
    response = client.post("/api/runs", json={"entries": [{"gpu_config": "X", "count": 65}]})
    assert [(d["type"], d["loc"]) for d in response.json()["detail"]] == [
        ("missing", ["body", "trace_id"]),
        ("less_than_equal", ["body", "entries", 0, "count"]),
    ]
    response = client.post("/api/runs", content=b"\x80 not utf-8", headers={"Content-Type": "application/json"})
    assert (response.status_code, response.json()) == (400, {"detail": "There was an error parsing the body"})


# --- list, get ------------------------------------------------------------------------------


def test_runs_are_listed_newest_first(client: TestClient) -> None:
    w.append(client, w.trace_events() + sample_run() + w.reference_run())
    response = client.get("/api/runs")
    assert response.status_code == 200
    assert_shows(response.json(), example("List runs"))


def test_runs_listed_with_their_cycles_when_asked_and_a_wrong_ask_refused(world: TestClient) -> None:
    plain = world.get("/api/runs").json()
    assert [run["id"] for run in plain] == [w.RUN_ID] and "cycles" not in plain[0]
    (run,) = world.get("/api/runs?cycles=true").json()
    # The reference run's two sims of SM86_RTX3070 each finished at the same total.
    detail = world.get(RUN).json()
    totals = [s["latest"]["gpu_tot_sim_cycle"] for s in detail["sims"]]
    assert run == {**plain[0], "cycles": [{"gpu_config": "SM86_RTX3070", "sims": 2, "median": totals[0], "min": totals[0], "max": totals[0]}]}
    assert world.get("/api/runs?cycles=false").json() == plain
    for query, said in (("cycles=yes", "cycles must be true or false, not 'yes'"), ("cycle=true", "unknown query parameters 'cycle'")):
        response = world.get(f"/api/runs?{query}")
        assert response.status_code == 422 and said in response.json()["detail"], response.text


def test_a_runs_archive_holds_its_results_each_sims_log_and_its_files(world: TestClient) -> None:
    response = world.get(f"{RUN}/archive")
    assert response.status_code == 200, response.text
    assert (response.headers["content-type"], response.headers["content-disposition"]) == ("application/zip", f'attachment; filename="{w.RUN_ID}.zip"')
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    results = zipfile.ZipFile(io.BytesIO(world.get(f"{RUN}/results", params={"format": "zip"}).content))
    expected = {name: results.read(name) for name in results.namelist()}  # the results zip's files, as they are
    for sim in world.get(RUN).json()["sims"]:
        folder = f"{sim['gpu_config']}/r{sim['replica']}"
        expected[f"{folder}/simulator.log"] = world.get(f"/api/sims/{sim['id']}/log").content
        for file in world.get(f"/api/sims/{sim['id']}/files").json():
            expected[f"{folder}/files/{file['name']}"] = world.get(f"/api/sims/{sim['id']}/files/{file['name']}").content
    assert {name: archive.read(name) for name in archive.namelist()} == expected
    assert any(name.endswith("simulator.log") and data for name, data in expected.items())
    assert any("/files/" in name for name in expected)
    assert world.get("/api/runs/run-000000000000/archive").status_code == 404


def test_get_a_run(world: TestClient) -> None:
    response = world.get(RUN)
    assert response.status_code == 200
    assert_shows(response.json(), example("Get a run"))


def test_get_an_unknown_run(world: TestClient) -> None:
    response = world.get("/api/runs/run-000000000000")
    assert (response.status_code, response.json()) == (404, example("Get a run", "404 response"))
    for path in ("cancel", "comparison", "kernels", "step-timelines", "results", "files", "perfetto", "events"):
        method = world.post if path == "cancel" else world.get
        response = method(f"/api/runs/run-000000000000/{path}")
        assert (response.status_code, response.json()) == (404, {"detail": "run run-000000000000 not found"}), path


# --- cancel ---------------------------------------------------------------------------------


def _run_history(client: TestClient, run_id: str) -> list[str]:
    async def go() -> list[str]:
        return [ev.event_type(s.event) async for s in service(client).store.read(subjects.run(run_id))]

    assert client.portal is not None
    return client.portal.call(go)


def test_cancel_moves_unfinished_sims_to_cancelled_once(client: TestClient) -> None:
    w.append(client, w.trace_events())
    run = create(client, ("SM86_RTX3070", 1))
    response = client.post(f"/api/runs/{run['id']}/cancel")
    assert response.status_code == 200
    cancelled = response.json()
    sim = cancelled["sims"][0]
    assert sim["finished_at"] is not None
    fresh = {
        "run-b42541e17665": run["id"], "sim-57c51b464fc9": sim["id"], "2026-11-08T08:59:06.669870Z": run["created_at"],
        "2026-11-08T08:59:06.673285Z": sim["finished_at"], "64556": None,
    }
    assert_shows(cancelled, substitute(example("Cancel a run"), fresh))
    again = client.post(f"/api/runs/{run['id']}/cancel")
    assert (again.status_code, again.json()) == (200, cancelled)
    assert _run_history(client, run["id"]) == ["run.created.v1", "run.cancel_requested.v1"]


def test_racing_cancels_append_one_request(client: TestClient) -> None:
    w.append(client, w.trace_events())
    run = create(client, ("SM86_RTX3070", 3))
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: client.post(f"/api/runs/{run['id']}/cancel"), range(4)))
    assert {a.status_code for a in answers} == {200}
    assert all(a.json()["sim_counts"] == {"cancelled": 3} for a in answers)
    assert _run_history(client, run["id"]) == ["run.created.v1", "run.cancel_requested.v1"]


def test_cancel_keeps_finished_sims_and_leaves_sample_runs_alone(client: TestClient) -> None:
    w.append(client, w.trace_events() + sample_run() + [w.run_created()] + w.sim_life(w.RUN_ID, w.SIMS[0]))
    response = client.post(f"{RUN}/cancel")
    assert response.json()["state"] == "cancelled"
    assert response.json()["sim_counts"] == {"succeeded": 1, "cancelled": 1}
    assert [s["state"] for s in response.json()["sims"]] == ["succeeded", "cancelled"]
    before = client.get(f"/api/runs/{SAMPLE_RUN}").json()
    response = client.post(f"/api/runs/{SAMPLE_RUN}/cancel")
    assert (response.status_code, response.json()) == (200, before)
    assert _run_history(client, SAMPLE_RUN) == ["run.created.v1"]


def test_late_facts_of_a_cancelled_sim_change_nothing(client: TestClient) -> None:
    w.append(client, w.trace_events() + [w.run_created()])
    client.post(f"{RUN}/cancel")
    w.append(client, w.sim_life(w.RUN_ID, w.SIMS[0]))
    run = client.get(RUN).json()
    assert run["state"] == "cancelled"
    assert [s["state"] for s in run["sims"]] == ["cancelled", "cancelled"]
    assert client.get(f"{RUN}/kernels").json() == []


# --- comparison, kernels, step timelines ----------------------------------------------------


def test_comparison(world: TestClient) -> None:
    response = world.get(f"{RUN}/comparison")
    assert response.status_code == 200
    assert_shows(response.json(), example("Compare real and simulated time"))


def test_comparison_takes_medians_per_config_and_real_timing_by_kernel_id(client: TestClient) -> None:
    # Real timing rows listed out of kernel_id order; sims of two configs, one of which
    # finished fewer kernels, and three replicas of the other with different times.
    real = [900.0, 1100.0, 1300.0]
    events = w.trace_events(real_timing=real)
    listed = next(e for e in events if isinstance(e, ev.TraceRealTimingListed))
    events[events.index(listed)] = ev.TraceRealTimingListed(id=listed.id, at=listed.at, trace_id="demo", rows=listed.rows[::-1])
    sims = [("s0", "SM86_RTX3070", 0), ("s1", "SM86_RTX3070", 1), ("s2", "SM86_RTX3070", 2), ("q0", "SM7_QV100", 0)]
    events.append(w.run_created("run-m", sims))
    for sim_id, _, replica in sims:
        kernels = 1 if sim_id == "q0" else 3
        for index in range(kernels):
            kernel = w.kernel_finished("run-m", sim_id, index, w.at("08:59:04"), stats=False)
            events.append(kernel)
        events[-kernels:] = [_scaled(k, replica) for k in events[-kernels:]]
        events[-kernels:0] = w.sim_life("run-m", sim_id, kernels=0, files=())[:2]
    w.append(client, events)
    rows = client.get("/api/runs/run-m/comparison").json()
    assert rows["has_real_timing"] is True
    assert rows["configs"] == ["SM86_RTX3070", "SM7_QV100"]
    kernels = client.get("/api/runs/run-m/kernels").json()  # by config (entry order), replica, kernel
    assert [(k["sim_id"], k["kernel_index"]) for k in kernels] == [(s, i) for s in ("s0", "s1", "s2") for i in range(3)] + [("q0", 0)]
    times = [w.sim_time_ns(c) for c in (6174, 5923, 6216)]
    assert [without_short_names(r) for r in rows["rows"]] == [
        {"kernel_index": i, "kernel_name": w.KERNELS[i][1], "real_ns": real[i],
         "sim_ns": {"SM86_RTX3070": times[i] * 2, "SM7_QV100": times[i] if i == 0 else None}}
        for i in range(3)
    ]


def test_comparison_shows_repetitions_spread_cycles_and_scores(client: TestClient) -> None:
    # Kernel 1 measured in three passes, kernel 2 in two (the last pass stopped short), kernel 3
    # never; durations and GPU cycles both. One sim of one config, all three kernels finished.
    measured = {1: [(900.0, 1000.0), (1000.0, 1100.0), (1100.0, 1200.0)], 2: [(2000.0, 3000.0), (2000.0, 3000.0)]}
    rows = [
        ev.RealTiming(kernel_id=uid, kernel_name=f"_Z6kernelv{uid}", duration_ns=ns, repeat=repeat, cycles=cycles)
        for uid, passes in measured.items() for repeat, (ns, cycles) in enumerate(passes)
    ]
    events = [e for e in w.trace_events(real_timing=[1.0]) if not isinstance(e, ev.TraceRealTimingListed)]
    events.insert(-1, ev.TraceRealTimingListed(id=w.event_id(), at=events[0].at, trace_id="demo", rows=rows))
    events += [w.run_created("run-r", [("s0", "SM86_RTX3070", 0)], kernels_total=3), *w.sim_life("run-r", "s0", kernels=3, files=())]
    w.append(client, events)
    comparison = client.get("/api/runs/run-r/comparison").json()
    sim = [w.sim_time_ns(c) for c in (6174, 5923, 6216)]
    assert [without_short_names(r) for r in comparison["rows"]] == [
        {
            "kernel_index": 0, "kernel_name": w.KERNELS[0][1], "real_ns": 1000.0, "sim_ns": {"SM86_RTX3070": sim[0]},
            "real_ns_spread": {"repeats": 3, "min": 900.0, "max": 1100.0, "stddev": pytest.approx((20000 / 3) ** 0.5)},
            "real_cycles": 1100.0, "real_cycles_spread": {"repeats": 3, "min": 1000.0, "max": 1200.0, "stddev": pytest.approx((20000 / 3) ** 0.5)},
            "sim_cycles": {"SM86_RTX3070": 6174.0},
        },
        {
            "kernel_index": 1, "kernel_name": w.KERNELS[1][1], "real_ns": 2000.0, "sim_ns": {"SM86_RTX3070": sim[1]},
            "real_ns_spread": {"repeats": 2, "min": 2000.0, "max": 2000.0, "stddev": 0.0},
            "real_cycles": 3000.0, "real_cycles_spread": {"repeats": 2, "min": 3000.0, "max": 3000.0, "stddev": 0.0},
            "sim_cycles": {"SM86_RTX3070": 5923.0},
        },
        {"kernel_index": 2, "kernel_name": w.KERNELS[2][1], "real_ns": None, "sim_ns": {"SM86_RTX3070": sim[2]}, "sim_cycles": {"SM86_RTX3070": 6216.0}},
    ]
    # Scored over the two kernels with both values; every number is correlate()'s, tested on its own.
    assert comparison["correlation"]["SM86_RTX3070"]["kernels"] == 2
    assert comparison["correlation"]["SM86_RTX3070"]["err_pct"] == pytest.approx((abs(sim[0] - 1000) / 1000 + abs(sim[1] - 2000) / 2000) * 50)
    cycles = comparison["cycles_correlation"]["SM86_RTX3070"]
    assert (cycles["kernels"], cycles["agg_err_pct"], cycles["over"]) == (2, pytest.approx((6174 - 1100 + 5923 - 3000) / 4100 * 100), 2)
    assert list(comparison) == ["has_real_timing", "configs", "rows", "correlation", "cycles_correlation"]


def _scaled(kernel: ev.Event, replica: int) -> ev.Event:
    """Replica r takes (r + 1) times as long, so the median of three is the middle one."""
    assert isinstance(kernel, ev.KernelFinished)
    return ev.KernelFinished(**{**{f: getattr(kernel, f) for f in kernel.__struct_fields__}, "sim_time_ns": kernel.sim_time_ns * (replica + 1)})


def test_kernels(world: TestClient) -> None:
    response = world.get(f"{RUN}/kernels")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert_shows(response.json(), example("List a run's kernel timings"))


def test_step_timelines(world: TestClient) -> None:
    response = world.get(f"{RUN}/step-timelines")
    assert response.status_code == 200
    assert_shows(response.json(), example("List a run's step timing"))


def test_step_timelines_need_a_timeline_and_a_succeeded_sim(client: TestClient) -> None:
    w.append(client, w.trace_events("plain", step_timeline=False) + w.trace_events())
    sims = [("t0", "SM86_RTX3070", 0), ("t1", "SM86_RTX3070", 1)]
    w.append(client, [w.run_created("run-plain", sims, trace_id="plain"), *w.sim_life("run-plain", "t0", files=())])
    assert client.get("/api/runs/run-plain/step-timelines").json() == []
    w.append(client, [w.run_created("run-t", sims), *w.sim_life("run-t", "t0", files=(), outcome="failed")])
    w.append(client, w.sim_life("run-t", "t1", files=()))
    assert client.get("/api/runs/run-t/step-timelines").json() == []  # no step_timeline.json stored
    w.store_reference_files(client)
    assert [t["sim_id"] for t in client.get("/api/runs/run-t/step-timelines").json()] == ["t1"]
    assert "config_label" not in client.get("/api/runs/run-t/step-timelines").json()[0]


def test_step_timelines_of_one_config_of_two_digests_say_which(client: TestClient) -> None:
    w.append(client, w.trace_events())
    w.store_reference_files(client)
    sims = [("d0", "SM86_RTX3070", 0), ("d1", "SM86_RTX3070", 1)]
    w.append(client, [w.run_created("run-d", sims), *w.sim_life("run-d", "d0", files=())])
    assert "config_label" not in client.get("/api/runs/run-d/step-timelines").json()[0]
    edited = {"gpgpusim.config": "edited"}
    w.append(client, w.sim_life("run-d", "d1", files=(), config_digests=edited))
    labels = [f"SM86_RTX3070@{config_digest({'gpgpusim.config': 'abc'})[:6]}", f"SM86_RTX3070@{config_digest(edited)[:6]}"]
    timelines = client.get("/api/runs/run-d/step-timelines").json()
    assert [(t["sim_id"], t["gpu_config"], t["config_label"]) for t in timelines] == [("d0", "SM86_RTX3070", labels[0]), ("d1", "SM86_RTX3070", labels[1])]
    assert client.get("/api/runs/run-d/comparison").json()["configs"] == labels


# --- results, log, files, perfetto ----------------------------------------------------------


def test_run_results(world: TestClient) -> None:
    response = world.get(f"{RUN}/results")
    assert response.status_code == 200
    assert response.headers["content-disposition"] == f'attachment; filename="{w.RUN_ID}-results.json"'
    results = response.json()
    expected = example("Download run results")
    # The trace's metadata and kernels belong to the traces API: as it answers them.
    trace = results["trace"]
    assert list(trace)[-2:] == ["metadata", "kernels"]
    expected["trace"] |= {"metadata": trace["metadata"], "kernels": trace["kernels"]}
    assert_shows(results, expected)


def test_sim_results(world: TestClient) -> None:
    response = world.get(f"{SIM}/results")
    assert response.status_code == 200
    assert response.headers["content-disposition"] == f'attachment; filename="{w.SIMS[0]}-results.json"'
    assert_shows(response.json(), example("Download sim results"))
    response = world.get("/api/sims/sim-000000000000/results")
    assert (response.status_code, response.json()) == (404, {"detail": "sim sim-000000000000 not found"})


def _pages(client: TestClient, path: str, limit: int, field: str | None = None) -> tuple[list[Any], set[str]]:
    """Every page of `path` of `limit` kernels, by the Link headers from the first: their
    kernels end to end (those of `field` when a page is an object), and the totals they told."""
    url: str | None = f"{path}{'&' if '?' in path else '?'}limit={limit}"
    kernels: list[Any] = []
    totals = set()
    while url is not None:
        response = client.get(url)
        assert response.status_code == 200
        page = response.json() if field is None else response.json()[field]
        assert 0 < len(page) <= limit
        kernels += page
        totals.add(response.headers["x-total-count"])
        link = response.headers.get("link")
        url = None if link is None else link.removeprefix("<").removesuffix('>; rel="next"')
    return kernels, totals


def test_kernel_pages_add_up_to_the_whole_list(world: TestClient) -> None:
    whole = world.get(f"{RUN}/kernels")
    assert "x-total-count" not in whole.headers and "link" not in whole.headers  # no page asked: as ever
    assert len(whole.json()) == 12
    for limit in (1, 5, 12, 10000):
        assert _pages(world, f"{RUN}/kernels", limit) == (whole.json(), {"12"})
    tail = world.get(f"{RUN}/kernels?offset=10")  # from the offset on: the rest, and no next page
    assert (tail.json(), tail.headers["x-total-count"], tail.headers.get("link")) == (whole.json()[10:], "12", None)
    for offset in ("12", "9" * 5000):  # past the end, however far: an empty page
        past = world.get(f"{RUN}/kernels?offset={offset}&limit=3")
        assert (past.status_code, past.json(), past.headers["x-total-count"], past.headers.get("link")) == (200, [], "12", None)


def test_sim_result_pages_add_up_to_the_whole_and_keep_the_sims_totals(world: TestClient) -> None:
    whole = world.get(f"{SIM}/results").json()
    kernels, totals = _pages(world, f"{SIM}/results", 4, "kernels")
    assert (kernels, totals) == (whole["kernels"], {"6"})
    page = world.get(f"{SIM}/results?offset=2&limit=3")
    assert page.headers["content-disposition"] == f'attachment; filename="{w.SIMS[0]}-results.json"'
    assert page.headers["link"] == f'<http://testserver{SIM}/results?offset=5&limit=3>; rel="next"'
    assert page.json() == {**whole, "kernels": whole["kernels"][2:5]}


def test_sim_results_with_headline_stats_or_none(world: TestClient) -> None:
    whole = world.get(f"{SIM}/results").json()
    assert world.get(f"{SIM}/results?stats=all").json() == whole
    assert world.get(f"{SIM}/results?stats=none").json() == {**whole, "kernels": [{**k, "stats": {}} for k in whole["kernels"]]}
    headline = world.get(f"{SIM}/results?stats=headline&limit=2").json()
    kept = [{**k, "stats": {n: v for n, v in k["stats"].items() if n in q.HEADLINE_STATS}} for k in whole["kernels"][:2]]
    assert headline == {**whole, "kernels": kept}
    assert all({"gpu_sim_cycle", "gpu_sim_insn"} <= set(k["stats"]) for k in kept)  # those the reference's maps have


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("kernels?offset=-1", "offset must be a whole number from 0 or more, not '-1'"),
        ("kernels?offset=two", "offset must be a whole number from 0 or more, not 'two'"),
        ("kernels?limit=0", "limit must be a whole number from 1 to 10000, not '0'"),
        ("kernels?limit=10001", "limit must be a whole number from 1 to 10000, not '10001'"),
        ("kernels?limit=2.5", "limit must be a whole number from 1 to 10000, not '2.5'"),
        ("kernels?limit=", "limit must be a whole number from 1 to 10000, not ''"),
        ("kernels?offset=1&offset=2", "offset is given 2 times: give it once"),
        ("results?format=tar", "format must be one of json, zip, ndjson, not 'tar'"),
        ("results?format=ZIP", "format must be one of json, zip, ndjson, not 'ZIP'"),
    ],
)
def test_bad_page_and_format_parameters_are_refused(world: TestClient, query: str, detail: str) -> None:
    response = world.get(f"{RUN}/{query}")
    assert (response.status_code, response.json()) == (422, {"detail": detail})


def test_bad_sim_result_parameters_are_refused(world: TestClient) -> None:
    for query, detail in [
        ("stats=some", "stats must be one of none, headline, all, not 'some'"),
        ("limit=-3", "limit must be a whole number from 1 to 10000, not '-3'"),
        ("offset=%2B1", "offset must be a whole number from 0 or more, not '+1'"),
    ]:
        response = world.get(f"{SIM}/results?{query}")
        assert (response.status_code, response.json()) == (422, {"detail": detail})


def test_run_results_as_a_zip_hold_each_sims_results_as_its_route_answers(world: TestClient) -> None:
    response = world.get(f"{RUN}/results?format=zip")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/zip"
    assert response.headers["content-disposition"] == f'attachment; filename="{w.RUN_ID}-results.zip"'
    whole = world.get(f"{RUN}/results").json()
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert archive.testzip() is None
        sims = world.get(RUN).json()["sims"]
        files = {f"{s['gpu_config']}/r{s['replica']}/{s['id']}-results.json": s["id"] for s in sims}
        assert archive.namelist() == ["run.json", *files]
        for name, sim_id in files.items():
            assert archive.read(name) == world.get(f"/api/sims/{sim_id}/results").content
        outline = json.loads(archive.read("run.json"))
    assert outline == {**whole, "sims": [{**s, "kernels": []} for s in whole["sims"]]}


def test_run_results_as_ndjson_are_a_line_per_sim(world: TestClient) -> None:
    response = world.get(f"{RUN}/results?format=ndjson")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["content-disposition"] == f'attachment; filename="{w.RUN_ID}-results.ndjson"'
    assert response.content.split(b"\n") == [*(world.get(f"/api/sims/{s}/results").content for s in w.SIMS), b""]
    assert world.get(f"{RUN}/results?format=json").content == world.get(f"{RUN}/results").content


def test_sim_log(world: TestClient) -> None:
    response = world.get(f"{SIM}/log")
    assert response.status_code == 200
    media, shown, more = text_example("Download a sim's log")
    assert response.headers["content-type"] == f"{media}; charset=utf-8"
    assert response.headers["content-disposition"] == f'attachment; filename="{w.SIMS[0]}.log"'
    lines = response.text.split("\n")
    assert lines[-1] == ""  # every line ends in a newline
    assert lines[:-1] == w.log_lines()
    assert lines[: len(shown)] == shown and len(lines) - 1 == len(shown) + more


def test_log_of_a_retried_sim_is_its_last_attempts(client: TestClient) -> None:
    w.append(client, w.trace_events() + [w.run_created()])
    first = w.sim_life(w.RUN_ID, w.SIMS[0], lines=["first attempt"] * 3)
    w.append(client, first[:6])  # claimed, launched, a heartbeat, a kernel: then the runner is lost
    second = w.sim_life(w.RUN_ID, w.SIMS[0], attempt=2, lines=[f"second {i}" for i in range(10)], kernels=2, files=("exit-status.txt",))
    w.append(client, second[:1] + first[6:] + second[1:])  # the lost runner's facts arrive late
    assert client.get(f"{SIM}/log").text == "".join(f"second {i}\n" for i in range(10))
    kernels = client.get(f"{RUN}/kernels").json()
    assert [k["kernel_launch_uid"] for k in kernels] == [1, 2]
    assert [f["name"] for f in client.get(f"{SIM}/files").json()] == ["exit-status.txt"]
    sim = client.get(RUN).json()["sims"][0]
    assert (sim["state"], sim["kernels_done"], sim["log_tail"]) == ("succeeded", 2, [f"second {i}" for i in range(10)])


def test_log_streams_from_the_heartbeats_while_the_sim_runs_and_after_a_restart(settings: Settings) -> None:
    lines = [f"line {i} " + "x" * (i % 100) for i in range(6000)]  # heartbeats of ~130 KB, answers across socket reads
    life = w.sim_life(w.RUN_ID, w.SIMS[0], lines=lines)  # heartbeats between the kernels, on the same subject
    running = life[:6]
    logged = "".join(f"{deflated.log_text(e)}\n" for e in running if isinstance(e, ev.SimHeartbeat) and deflated.log_text(e))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(starlette_app(settings), headers=headers) as client:
        w.append(client, w.trace_events() + [w.run_created()] + running)
        assert client.get(f"{SIM}/log").text == logged
        w.append(client, life[6:])
        whole = client.get(f"{SIM}/log").text
    assert whole == "".join(f"{line}\n" for line in lines)
    (settings.data_dir / "readmodel.duckdb").unlink()  # started again, the read model replayed from the log
    with TestClient(starlette_app(settings), headers=headers) as client:
        c = service(client)

        async def caught_up() -> None:
            await c.projector.wait_for(await c.store.last_seq(), timeout=30.0)

        assert client.portal is not None
        client.portal.call(caught_up)
        assert client.get(f"{SIM}/log").text == whole


def test_log_is_refused_while_nats_does_not_answer(client: TestClient, nats_server: server.EmbeddedNats) -> None:
    w.append(client, w.trace_events() + [w.run_created()] + w.sim_life(w.RUN_ID, w.SIMS[0], lines=["a line"]))
    nats_server.stop()
    response = client.get(f"{SIM}/log")
    assert (response.status_code, response.headers["retry-after"]) == (503, "5")
    assert response.json()["detail"].startswith("a sim's log is read from the event log, in NATS, which does not answer now (")
    assert client.portal is not None
    client.portal.call(nats_server.restart)
    assert client.get(f"{SIM}/log").text == "a line\n"
    nc = service(client).store.nc
    for _ in range(200):  # nats-py back too, before the service closes its connection
        if nc.is_connected:
            break
        time.sleep(0.05)


def test_run_files(world: TestClient) -> None:
    response = world.get(f"{RUN}/files")
    assert response.status_code == 200
    files = response.json()
    assert_shows(files, example("List a run's output files"))
    assert [(f["sim_id"], f["name"]) for f in files] == [(s, n) for s in w.SIMS for n in sorted(w.FILES)]


def test_sim_files(world: TestClient) -> None:
    response = world.get(f"{SIM}/files")
    assert response.status_code == 200
    assert_shows(response.json(), example("List a sim's output files"))


def test_file_download(world: TestClient) -> None:
    response = world.get(f"{SIM}/files/kernel-stats.csv")
    assert response.status_code == 200
    media, shown, more = text_example("Download an output file")
    assert response.headers["content-type"] == media
    assert response.headers["content-disposition"] == 'attachment; filename="kernel-stats.csv"'
    assert response.content == w.file_bytes("kernel-stats.csv")
    lines = response.text.splitlines()
    assert lines[: len(shown)] == shown and len(lines) == len(shown) + more


def test_gz_file_stays_compressed(world: TestClient) -> None:
    response = world.get(f"{SIM}/files/perf_counter.csv.gz")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/gzip"
    assert "content-encoding" not in response.headers
    assert response.headers["content-length"] == "474373"
    assert response.content == w.file_bytes("perf_counter.csv.gz")


@pytest.mark.parametrize("name", ["nope.txt", "%2E%2E", "%2E", "a" * 129, "bad name.txt", "x:y", "kernel-stats.csv~"])
def test_a_missing_or_unlawful_file_name_is_not_found(world: TestClient, name: str) -> None:
    response = world.get(f"{SIM}/files/{name}")
    assert response.status_code == 404
    if name == "nope.txt":
        assert response.json() == example("Download an output file", "404 response, no such file")
    else:
        assert response.json() == {"detail": f"sim {w.SIMS[0]} has no file '{name.replace('%2E', '.')}'"}
    response = world.get("/api/sims/nope/files/kernel-stats.csv")
    assert (response.status_code, response.json()) == (404, {"detail": "sim nope not found"})


def test_perfetto(world: TestClient) -> None:
    response = world.get(f"{RUN}/perfetto")
    assert response.status_code == 200
    assert response.headers["content-disposition"] == f'attachment; filename="{w.RUN_ID}-perfetto.json"'
    trace = response.json()
    # The reference shows the kernel slices and their threads; the counters and the wall-clock
    # process are added events.
    wall = [e["pid"] for e in trace["traceEvents"] if e.get("name") == "process_name" and e["args"]["name"] == "Wall clock (runners)"]
    shown = [e for e in trace["traceEvents"] if e["ph"] in ("M", "X") and e["pid"] not in wall]
    assert_shows({**trace, "traceEvents": shown}, example("Download a Perfetto trace"))
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel"] == [
        f"k{uid} {short}" for _ in w.SIMS for uid, short in enumerate(("init_kernel", "copy_kernel", "mul_kernel", "add_kernel", "triad_kernel", "dot_kernel"), 1)
    ]
    # Both sims ran on runner-1 at once, from their launch to their end: a lane each.
    spans = [(e["ph"], e["tid"], e.get("args", {}).get("sim_id")) for e in trace["traceEvents"] if e["pid"] in wall and e["ph"] in "BE"]
    threads = [e["args"]["name"] for e in trace["traceEvents"] if e["pid"] in wall and e.get("name") == "thread_name"]
    assert spans == [("B", 1, w.SIMS[1]), ("E", 1, None), ("B", 2, w.SIMS[0]), ("E", 2, None)]
    assert threads == ["runner-1", "runner-1 · lane 2"]
    sims = {s["id"]: s for s in world.get(RUN).json()["sims"]}
    begin = {e["args"]["sim_id"]: e for e in trace["traceEvents"] if e["ph"] == "B"}
    origin = min(datetime.fromisoformat(s["started_at"]) for s in sims.values())
    for sim_id, e in begin.items():
        assert e["ts"] == (datetime.fromisoformat(sims[sim_id]["started_at"]) - origin) / timedelta(microseconds=1)
        assert e["args"]["finished_at"] == sims[sim_id]["finished_at"]


def test_reference_examples_trim_nothing_this_world_lacks() -> None:
    # The world reproduces every trimmed count: e.g. 12 kernels, 12 files, 10,691 log lines.
    kernels = example("List a run's kernel timings")
    assert kernels[-1] == {MORE_ITEMS: 9} and len(w.KERNELS) * len(w.SIMS) == 12
    assert len(w.log_lines()) == 10691
    assert json.loads(json.dumps(example("List a sim's output files")))[0]["size"] == w.FILES["accelsim.log.gz"][0]


def test_a_run_outlives_its_deleted_trace(client: TestClient) -> None:
    w.append(client, w.trace_events() + [w.run_created()] + w.sim_life(w.RUN_ID, w.SIMS[0], files=()))
    client.post(f"{RUN}/cancel")
    w.append(client, [ev.TraceDeleted(id=w.event_id(), at=w.at("09:00:00"), trace_id="demo")])
    assert client.get("/api/traces/demo").status_code == 404
    run = client.get(RUN).json()
    assert (run["state"], run["trace"]["id"], run["trace"]["state"]) == ("cancelled", "demo", "ready")
    results = client.get(f"{RUN}/results").json()
    assert (results["trace"]["metadata"]["status"], results["trace"]["kernels"]) == ("deleted", [])
    assert len(results["sims"][0]["kernels"]) == 6


def test_a_comparison_of_an_active_run_says_it_is_partial_until_every_config_has_every_kernel(client: TestClient) -> None:
    sims = ((w.SIMS[0], "SM86_RTX3070", 0), (w.SIMS[1], "SM7_QV100", 0))
    behind = w.sim_life(w.RUN_ID, w.SIMS[1], files=(), stats=False)
    w.append(client, w.trace_events() + [w.run_created(sims=sims, kernels_total=len(w.KERNELS))] + w.sim_life(w.RUN_ID, w.SIMS[0], files=()))
    w.append(client, behind[:6])  # claimed, launched, then two kernels, each after a heartbeat
    comparison = client.get(f"{RUN}/comparison").json()
    assert [sorted(k for k, ns in r["sim_ns"].items() if ns is not None) for r in comparison["rows"]] == (
        [["SM7_QV100", "SM86_RTX3070"]] * 2 + [["SM86_RTX3070"]] * 4
    )
    done = {"SM86_RTX3070": len(w.KERNELS), "SM7_QV100": 2}
    assert {k: comparison[k] for k in ("partial", "kernels_done", "kernels_compared", "kernels_total")} == {
        "partial": True, "kernels_done": done, "kernels_compared": 2, "kernels_total": len(w.KERNELS),
    }
    w.append(client, behind[6:-1])  # every kernel: the run is still active
    comparison = client.get(f"{RUN}/comparison").json()
    assert (comparison["partial"], comparison["kernels_compared"]) == (True, len(w.KERNELS))
    w.append(client, behind[-1:])
    assert client.get(RUN).json()["state"] == "succeeded"
    comparison = client.get(f"{RUN}/comparison").json()
    assert not {"partial", "kernels_done", "kernels_compared", "kernels_total"} & set(comparison), "a final answer is as it was"


def test_comparison_follows_every_new_kernel_and_a_retry(client: TestClient) -> None:
    first = w.sim_life(w.RUN_ID, w.SIMS[0], files=(), stats=False)
    w.append(client, w.trace_events() + [w.run_created()] + first[:6])  # two heartbeats, two kernels

    def rows() -> list[int]:
        return [r["kernel_index"] for r in client.get(f"{RUN}/comparison").json()["rows"]]

    assert rows() == [0, 1]
    w.append(client, first[6:8])
    assert rows() == [0, 1, 2]
    w.append(client, w.sim_life(w.RUN_ID, w.SIMS[0], attempt=2, files=(), stats=False)[:1])
    assert rows() == []  # the retry starts afresh
