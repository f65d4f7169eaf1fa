"""Split sims end to end: a real service and runner on a real nats-server, driving the fake
simulator, which replays per-chunk logs recorded from the real Accel-Sim
(tests/fake_accelsim/recorded).

The combo trace split per kernel with 2 warm-up launches is, by measurement, exact, so its
answers are compared with the sim run whole exactly: the sim's state, error, exit code,
kernel counts and totals (all but `sim_rate_ips`, the simulators' own speed); every kernel's
index, launch uid, name, cycles, instructions, IPC and time; the `gpu_tot_*` of each kernel's
stats map and the order of its keys; the run's comparison and Perfetto trace (ids aside).
What the chunks really change is not compared but checked for what it is: the log is each
chunk's own output (each prints its own configuration dump), chunk after chunk under a
marker line; the files are each chunk's, named for it; the rest of a stats map (counters
that run over a simulator's whole run) is each chunk's own. Without warm-up the cycles are
the real chunks' (a cold first kernel), as recorded.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_process.service import starlette_app
from projections.queries import stats
from tests.cascade_http.trace_archives import files_of, upload_ready
from tests.cascade_sim.world import accelsim_tree, simulated_trace, start_run, wait_run
from tests.cascade_sim.world import run_kernels as kernels

TOKEN = "split"
CONFIG = "SM61_TITANX"
# What each kernel of the combo trace takes on SM61_TITANX, run whole (docs/fast-sim-measurements.md, section 1).
COMBO_CYCLES = [5534, 7506, 5408]
# Per kernel, without warm-up: launch 3 starts cold (+127 cycles, docs/fast-sim-measurements.md, section 2).
COMBO_COLD_CYCLES = [5534, 7506, 5535]


@pytest.fixture
def client(tmp_path: Path, nats_url: str) -> Iterator[TestClient]:
    tree = accelsim_tree(tmp_path / "accel-sim")
    settings = Settings(token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=tree, runner_slots=3, samples=False)
    with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        upload_ready(client, files_of("combo-vec-mm-xz"), "combo")
        yield client


def run(client: TestClient, split: object = None, trace: str = "combo") -> str:
    return start_run(client, trace, CONFIG, **({} if split is None else {"split": split}))


SEQUENTIAL_SAME = ("gpu_config", "replica", "state", "error", "exit_code", "kernels_done", "kernels_total", "latest")


def test_a_split_sim_answers_every_route_as_the_sim_run_whole(client: TestClient) -> None:
    whole = wait_run(client, run(client))
    split = wait_run(client, run(client, {"kernels_per_chunk": 1, "warmup": 2}))
    assert (whole["state"], split["state"]) == ("succeeded", "succeeded"), [(s["error"], s.get("split")) for s in split["sims"]]
    (w,), (s,) = whole["sims"], split["sims"]
    # The sim: its state, progress and totals recomputed from the chunks' kernels.
    same = {k: w[k] for k in SEQUENTIAL_SAME}
    assert {k: s[k] for k in SEQUENTIAL_SAME} == {**same, "latest": {**same["latest"], "sim_rate_ips": s["latest"]["sim_rate_ips"]}}
    assert s["latest"]["gpu_tot_sim_cycle"] == sum(COMBO_CYCLES) == 18448
    assert "split" not in w
    assert s["split"]["kernels_per_chunk"] == 1 and s["split"]["warmup"] == 2
    assert [(c["first"], c["last"], c["warmup"], c["state"]) for c in s["split"]["chunks"]] == [
        (1, 1, 0, "succeeded"), (2, 2, 1, "succeeded"), (3, 3, 2, "succeeded")
    ]

    # The kernels: in order, with their launch uids, the numbers the sim run whole has.
    summary = ("kernel_index", "kernel_launch_uid", "kernel_name", "gpu_sim_cycle", "gpu_sim_insn", "gpu_ipc", "sim_time_ns")
    ws, ss = kernels(client, whole["id"]), kernels(client, split["id"])
    assert [{k: x[k] for k in summary} for x in ss] == [{k: x[k] for k in summary} for x in ws]
    assert [x["gpu_sim_cycle"] for x in ss] == COMBO_CYCLES

    # Results: the same kernels, and the sim's results say how it was split.
    results = client.get(f"/api/sims/{s['id']}/results").json()
    assert results["sim"]["split"] == s["split"]
    assert [k["kernel_launch_uid"] for k in results["kernels"]] == [1, 2, 3]
    # Its stats maps' running totals are the sim's, in the order the simulator printed them.
    whole_results = client.get(f"/api/sims/{w['id']}/results").json()
    totals = ("gpu_tot_sim_cycle", "gpu_tot_sim_insn", "gpu_tot_ipc")
    assert [{t: k["stats"][t] for t in totals} for k in results["kernels"]] == [
        {t: k["stats"][t] for t in totals} for k in whole_results["kernels"]
    ]
    assert [list(k["stats"]) for k in results["kernels"]] == [list(k["stats"]) for k in whole_results["kernels"]]
    # A page's running totals are still the sim's, over the kernels before the page too.
    for query in ("offset=1&limit=1", "offset=2", "stats=headline&offset=1&limit=2"):
        page = client.get(f"/api/sims/{s['id']}/results?{query}").json()["kernels"]
        first = int(query.split("offset=")[1].split("&")[0])
        assert [{t: k["stats"][t] for t in totals} for k in page] == [{t: k["stats"][t] for t in totals} for k in results["kernels"][first : first + len(page)]]
    assert results["totals"]["gpu_tot_sim_cycle"] == 18448
    # So are the stats routes' (kernel_stats rows hold each chunk's own sums).
    for total in totals:
        values = [client.get(f"/api/runs/{run_id}/stats/values", params={"name": total}).json()["rows"] for run_id in (split["id"], whole["id"])]
        assert [(r["kernel_index"], r["median"]) for r in values[0]] == [(r["kernel_index"], r["median"]) for r in values[1]], total
    # The derived metrics read each kernel's own values: a chunk's, past its warm-up, are the whole sim's.
    derived = [client.get(f"/api/runs/{run_id}/stats/derived").json() for run_id in (split["id"], whole["id"])]
    assert [k["values"] for k in derived[0]["kernels"]] == [k["values"] for k in derived[1]["kernels"]]
    assert derived[0]["configs"][0]["values"] == derived[1]["configs"][0]["values"]
    assert derived[0]["kernels"][2]["values"]["l2_hit_rate"] == 1.0  # the second vecAdd's 39 accesses all hit

    # The log: every chunk's output in chunk order, each under a line marking where it begins.
    log = client.get(f"/api/sims/{s['id']}/log").text
    marks = [line for line in log.splitlines() if line.startswith("==== cascade: chunk")]
    assert marks == [
        "==== cascade: chunk 1 of 3: launches 1-1 (attempt 1) ====",
        "==== cascade: chunk 2 of 3: launches 2-2, after warm-up launches 1-1 (attempt 1) ====",
        "==== cascade: chunk 3 of 3: launches 3-3, after warm-up launches 1-2 (attempt 1) ====",
    ]
    assert log.index("kernelslist.k1-1.g") < log.index(marks[1]) < log.index("kernelslist.w1_k2-2.g") < log.index(marks[2])
    assert log.count("GPGPU-Sim: *** exit detected ***") == 3

    # The run's comparison and Perfetto trace: the same, ids aside.
    def as_whole(path: str) -> object:
        text = client.get(path.format(split["id"])).text
        return json.loads(text.replace(split["id"], whole["id"]).replace(s["id"], w["id"]))

    assert as_whole("/api/runs/{}/comparison") == client.get(f"/api/runs/{whole['id']}/comparison").json()
    # The Perfetto trace but its wall-clock process: the sims ran at other times, the split one on chunks.
    drawn = json.dumps(simulated_trace(client, split["id"])).replace(split["id"], whole["id"]).replace(s["id"], w["id"])
    assert json.loads(drawn) == simulated_trace(client, whole["id"])
    # Its wall clock: each chunk's launch to end, on the runner that ran it.
    wall = [e for e in client.get(f"/api/runs/{split['id']}/perfetto").json()["traceEvents"] if e["pid"] == 2]
    threads = {e["tid"]: e["args"]["name"] for e in wall if e["ph"] == "M" and e["name"] == "thread_name"}
    begun = sorted((e for e in wall if e["ph"] == "B"), key=lambda e: e["args"]["chunk"])
    assert [(e["args"]["sim_id"], e["args"]["chunk"], e["name"]) for e in begun] == [(s["id"], i, f"SM61_TITANX replica 0 chunk {i + 1}") for i in range(3)]
    chunks = s["split"]["chunks"]
    assert [threads[e["tid"]].split(" · ")[0] for e in begun] == [c["runner_id"] for c in chunks]
    assert len([e for e in wall if e["ph"] == "E"]) == 3

    # Files: each chunk's own, named for it.
    names = sorted(f["name"] for f in client.get(f"/api/sims/{s['id']}/files").json())
    whole_names = sorted(f["name"] for f in client.get(f"/api/sims/{w['id']}/files").json())
    assert names == sorted(f"chunk{i:03d}.{name}" for i in (1, 2, 3) for name in whole_names)


def test_the_perfetto_trace_draws_the_real_logs_counters_and_the_traces_memcpys(client: TestClient) -> None:
    """The combo trace run whole on SM61_TITANX (1417 MHz): `total dram reads` prints 26, 282
    and 282 (running totals; no writes), so the kernels' own DRAM accesses are 26, 256 and 0,
    each of -gpgpu_dram_burst_length 8 x -gpgpu_dram_buswidth 4 x -gpgpu_n_mem_per_ctrlr 1
    bytes (its option dump); its kernelslist.g copies 3 x 400 bytes before launch 1 and
    2 x 4096 before launch 2."""
    whole = wait_run(client, run(client))
    events = client.get(f"/api/runs/{whole['id']}/perfetto").json()["traceEvents"]
    starts = [e["ts"] for e in events if e.get("cat") == "kernel"]
    ipc = [(e["ts"], e["args"]["ipc"]) for e in events if e.get("name") == "replica 0 IPC"]
    assert ipc == [*zip(starts, (10516 / 5534, 139264 / 7506, 10516 / 5408)), (pytest.approx(sum(COMBO_CYCLES) / 1417, abs=1e-3), 0.0)]
    dram = [e["args"]["gbps"] for e in events if e.get("name") == "replica 0 DRAM GB/s"]
    # bytes over nanoseconds: GB/s
    assert dram == pytest.approx([26 * 32 / (5534 / 1.417), 256 * 32 / (7506 / 1.417), 0.0, 0.0])
    memcpys = [(e["ts"], e["name"], e["args"]["bytes"], e["args"]["line"]) for e in events if e["ph"] == "i"]
    assert memcpys == [(starts[0], "MemcpyHtoD 400 B", 400, line) for line in (1, 2, 3)] + [
        (starts[1], "MemcpyHtoD 4.0 KB", 4096, line) for line in (5, 6)
    ]
    (thread,) = [e for e in events if e["ph"] == "M" and e["args"].get("name") == "replica 0 · Memcpy"]
    assert {e["tid"] for e in events if e["ph"] == "i"} == {thread["tid"]} != {1}


def test_without_warm_up_a_chunk_starts_cold(client: TestClient) -> None:
    split = wait_run(client, run(client, {"kernels_per_chunk": 1, "warmup": 0}))
    assert split["state"] == "succeeded"
    assert [x["gpu_sim_cycle"] for x in kernels(client, split["id"])] == COMBO_COLD_CYCLES
    assert split["sims"][0]["latest"]["gpu_tot_sim_cycle"] == sum(COMBO_COLD_CYCLES)


def test_auto_runs_a_trace_too_short_to_split_whole(client: TestClient) -> None:
    finished = wait_run(client, run(client, "auto"))
    assert finished["state"] == "succeeded" and "split" not in finished["sims"][0]


def test_cancel_stops_every_chunk(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    # Read by the simulator of each chunk as it starts, so kept until all three have: a chunk
    # started after it would end at once.
    os.environ["CASCADE_FAKE_ACCELSIM_PACE"] = "30"
    try:
        run_id = run(client, {"kernels_per_chunk": 1, "warmup": 0})
        deadline = time.monotonic() + 60
        while {c["state"] for c in client.get(f"/api/runs/{run_id}").json()["sims"][0]["split"]["chunks"]} != {"running"}:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        del os.environ["CASCADE_FAKE_ACCELSIM_PACE"]
    assert client.post(f"/api/runs/{run_id}/cancel").json()["state"] == "cancelled"
    deadline = time.monotonic() + 30
    while True:
        (sim,) = client.get(f"/api/runs/{run_id}").json()["sims"]
        if all(c["state"] == "cancelled" for c in sim["split"]["chunks"]) and not client.get("/api/runners").json()[0]["running"]:
            break
        assert time.monotonic() < deadline, sim
        time.sleep(0.2)
    assert sim["state"] == "cancelled"


def test_a_failed_chunk_fails_the_sim_with_its_error(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    # No chunk of 2 launches was recorded, and the fake is told not to cut one from the whole
    # recording: the simulator fails on k1-2 (w2_k3-3 is recorded).
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_CUT", "0")
    finished = wait_run(client, run(client, {"kernels_per_chunk": 2, "warmup": 2}))
    (sim,) = finished["sims"]
    assert finished["state"] == "failed" and sim["state"] == "failed"
    assert sim["error"].startswith("chunk 1 of 2: launches 1-2: "), sim["error"]
    states = {c["index"]: c["state"] for c in sim["split"]["chunks"]}
    assert states[0] == "failed"


def test_the_run_event_stream_shows_the_chunks_advance(client: TestClient) -> None:
    os.environ["CASCADE_FAKE_ACCELSIM_PACE"] = "1"  # each chunk's kernel a second before it ends
    try:
        run_id = run(client, {"kernels_per_chunk": 1, "warmup": 0})
        events: list[tuple[str, Any]] = []
        # Resumed from before the run: every change it had, as a client connected all along
        # received them. A fresh stream's snapshot would hide the kernels of the chunks (run
        # side by side, three slots) that ended before it, which a loaded machine makes likely.
        with client.stream("GET", f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "0"}) as response:
            fields: dict[str, str] = {}
            for line in response.iter_lines():
                if not line:
                    if "data" in fields:
                        events.append((fields["event"], json.loads(fields["data"])))
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    fields[name] = value
    finally:
        del os.environ["CASCADE_FAKE_ACCELSIM_PACE"]
    assert events[-1][0] == "run" and events[-1][1]["state"] == "succeeded"
    assert sorted(data["kernel_launch_uid"] for kind, data in events if kind == "kernel") == [1, 2, 3]
    chunk_states = [tuple(c["state"] for c in data["split"]["chunks"]) for kind, data in events if kind == "sim"]
    assert chunk_states[-1] == ("succeeded",) * 3
    assert any("succeeded" in states and set(states) != {"succeeded"} for states in chunk_states), chunk_states
    done = [data["kernels_done"] for kind, data in events if kind == "sim"]
    assert done == sorted(done) and done[-1] == 3


def test_matrixmul_x40_in_chunks_of_10_with_a_warm_up_is_off_where_the_real_simulator_is(client: TestClient) -> None:
    # docs/fast-sim-measurements.md, section 2: with W=1 every chunk's first kernel is warm; what is left is that
    # from its 30th launch on a long run's kernels take 18 cycles more (7,444 against 7,426),
    # which no chunk shorter than 30 launches reaches: −0.067 % in total, 29 of 40 exact.
    upload_ready(client, files_of("matrixmul-x40"), "x40")
    whole = wait_run(client, run(client, trace="x40"))
    split = wait_run(client, run(client, {"kernels_per_chunk": 10, "warmup": 1}, trace="x40"))
    ws, ss = kernels(client, whole["id"]), kernels(client, split["id"])
    assert [k["kernel_launch_uid"] for k in ss] == list(range(1, 41))
    assert [(k["kernel_name"], k["gpu_sim_insn"]) for k in ss] == [(k["kernel_name"], k["gpu_sim_insn"]) for k in ws]
    off = {k["kernel_launch_uid"]: k["gpu_sim_cycle"] - w["gpu_sim_cycle"] for k, w in zip(ss, ws) if k["gpu_sim_cycle"] != w["gpu_sim_cycle"]}
    assert off == {uid: -18 for uid in range(30, 41)}
    assert (whole["sims"][0]["latest"]["gpu_tot_sim_cycle"], split["sims"][0]["latest"]["gpu_tot_sim_cycle"]) == (297340, 297142)


# Counters GPGPU-Sim prints as totals since the simulator started, and a snapshot.
RUNNING_TOTALS = ("gpu_tot_sim_cycle", "gpu_tot_sim_insn", "L2_total_cache_accesses", "L2_total_cache_misses")


def own_and_running(client: TestClient, run_id: str, name: str) -> list[tuple[float, float]]:
    rows = client.get(f"/api/runs/{run_id}/stats/values", params={"name": name}).json()["rows"]
    assert [r["kernel_index"] for r in rows] == list(range(40)), name
    return [(r["median"], r["running_total"]) for r in rows]


def test_matrixmul_x40_split_and_reusing_give_each_kernels_own_values_and_the_running_totals_of_the_sim_run_whole(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The recorded chunks (K=10, W=1) and reusing run are the real simulator's: each chunk's
    # printed totals begin at its warm-up launch, the reusing run's leave out every reused
    # launch (at launch 40, 4,608 and 768 L2 accesses printed, against 15,360 run whole).
    upload_ready(client, files_of("matrixmul-x40"), "x40")
    whole = wait_run(client, run(client, trace="x40"))
    split = wait_run(client, run(client, {"kernels_per_chunk": 10, "warmup": 1}, trace="x40"))
    reused = wait_run(client, start_run(client, "x40", CONFIG, reuse=True))
    assert [r["state"] for r in (whole, split, reused)] == ["succeeded"] * 3
    for name in RUNNING_TOTALS:
        expected = own_and_running(client, whole["id"], name)
        for fast in (split, reused):
            got = own_and_running(client, fast["id"], name)
            # The sim's running totals are its kernels' own values summed in launch order.
            assert [total for _, total in got] == [sum(own for own, _ in got[: i + 1]) for i in range(40)], name
            if name == "gpu_tot_sim_cycle":
                # Where the real simulator's cycles differ (a long run's kernels take 18 cycles more
                # from launch 30 on: docs/fast-sim-measurements.md), within the reference's error.
                assert all(abs(g[1] - e[1]) <= 0.001 * e[1] for g, e in zip(got, expected)), (name, got[-1], expected[-1])
            else:
                assert got == expected, name
    # A ratio of running totals: each kernel's own, and over the launches up to it the ratio of
    # its parts' sums, as the sim run whole printed it (1.0, then 384 misses over 768 accesses).
    rates = own_and_running(client, whole["id"], "L2_total_cache_miss_rate")
    assert rates[:2] == [(1.0, 1.0), (0.0, 0.5)]
    for fast in (split, reused):
        got = own_and_running(client, fast["id"], "L2_total_cache_miss_rate")
        assert [own for own, _ in got] == [own for own, _ in rates]
        assert all(abs(g - e) <= 0.0001 for (_, g), (_, e) in zip(got, rates)), "the log prints four decimals"
    accesses = own_and_running(client, whole["id"], "L2_total_cache_accesses")
    assert accesses[0] == (384.0, 384.0) and accesses[-1] == (384.0, 15360.0)
    assert own_and_running(client, whole["id"], "L2_total_cache_misses")[1:3] == [(0.0, 384.0), (0.0, 384.0)]
    # Read 3 kernels at a time, the sums go on from one part to the next.
    names = [*RUNNING_TOTALS, "L2_total_cache_miss_rate"]
    at_once = {(fast["id"], name): own_and_running(client, fast["id"], name) for fast in (split, reused) for name in names}
    monkeypatch.setattr(stats, "GROUPS_AT_ONCE", 3)
    assert {(fast["id"], name): own_and_running(client, fast["id"], name) for fast in (split, reused) for name in names} == at_once
