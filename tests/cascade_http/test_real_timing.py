"""Real timing attached to a trace (`PUT /api/traces/{id}/real-timing`) on a real nats-server
and DuckDB: the comparison of the trace's runs takes it up, with every repetition's spread
and plot-correlation.py's numbers per config; replacing it needs ?replace=true; and every
refusal leaves the trace's events as they were."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import pytest
from starlette.testclient import TestClient

from cascade_core import events as ev
from cascade_core.correlation import correlate
from cascade_formats import realtiming
from cascade_formats.kernel_names import short_name
from tests.cascade_http import runs_world as w
from tests.cascade_http.conftest import service
from tests.cascade_http.trace_archives import files_of, history, tar_of, upload

TIMING = Path(__file__).parents[1] / "cascade_formats" / "timing"
VEC_ADD, MULT = "_Z6vecAddIfEvPT_S1_S1_i", "_Z8mult_gpuIfEvPT_S1_S1_ii"
HEADER = "kernel_id,kernel_name,duration_ns\n"
# Two hardware passes over combo (vecAdd, mult_gpu, vecAdd): means 1100, 2000, 3800.
TWO_PASSES = HEADER + f"1,{VEC_ADD},1000\n2,{MULT},2000\n3,vecAdd,4000\n" + HEADER + f"1,{VEC_ADD},1200\n2,{MULT},2000\n3,vecAdd,3600\n"
# Simulated: config A finished all three kernels, B the first two.
SIM_NS = {"SM86_RTX3070": [1100.0, 2200.0, 3800.0], "SM7_QV100": [990.0, 1000.0]}
SIM_CYCLES = {"SM86_RTX3070": [4600, 8000, 4400], "SM7_QV100": [4580, 8298]}
UPLOADED = ["trace.upload_started.v1", "trace.files_stored.v1", "trace.kernels_listed.v1", "trace.ready.v1"]


def combo_run(client: TestClient) -> None:
    """Trace `combo` uploaded for real, and run `run-c` of it on two configs."""
    assert upload(client, tar_of(files_of("combo-vec-mm-xz")), "combo").json()["state"] == "ready"
    sims = [("a0", "SM86_RTX3070", 0), ("b0", "SM7_QV100", 0)]
    events: list[ev.Event] = [w.run_created("run-c", sims, trace_id="combo", kernels_total=3)]
    for sim_id, config, _ in sims:
        life = w.sim_life("run-c", sim_id, kernels=len(SIM_NS[config]), files=())
        kernels = iter(zip(SIM_NS[config], SIM_CYCLES[config]))
        events += [_timed(e, *next(kernels)) if isinstance(e, ev.KernelFinished) else e for e in life]
    w.append(client, events)


def _timed(kernel: ev.KernelFinished, ns: float, cycles: int) -> ev.KernelFinished:
    fields = {f: getattr(kernel, f) for f in kernel.__struct_fields__}
    return ev.KernelFinished(**{**fields, "sim_time_ns": ns, "gpu_sim_cycle": cycles})


def put(client: TestClient, trace_id: str, body: bytes | str, replace: str | None = None) -> httpx2.Response:
    params = {"replace": replace} if replace is not None else {}
    return client.put(f"/api/traces/{trace_id}/real-timing", params=params, content=body, headers={"Content-Type": "text/csv"})


def test_attached_timing_is_scored_per_config(client: TestClient) -> None:
    combo_run(client)
    assert client.get("/api/runs/run-c/comparison").json() == {
        "has_real_timing": False,
        "configs": ["SM86_RTX3070", "SM7_QV100"],
        "rows": [
            {"kernel_index": i, "kernel_name": w.KERNELS[i][1], "real_ns": None,
             "sim_ns": {"SM86_RTX3070": SIM_NS["SM86_RTX3070"][i], "SM7_QV100": (SIM_NS["SM7_QV100"] + [None])[i]},
             "kernel_short_name": short_name(w.KERNELS[i][1])}
            for i in range(3)
        ],
        # SM7_QV100 finished two kernels of three: totals over both configs are over two
        "partial": True, "kernels_done": {"SM86_RTX3070": 3, "SM7_QV100": 2}, "kernels_compared": 2, "kernels_total": 3,
    }

    response = put(client, "combo", TWO_PASSES)
    assert response.status_code == 200, response.text
    attached = response.json()
    assert attached["timing_id"].startswith("timing-")
    assert attached == {
        "trace_id": "combo", "timing_id": attached["timing_id"], "format": "cascade", "kernels": 3, "repeats": 2,
        "measures": ["duration_ns"], "replaced": None,
    }
    assert client.get("/api/traces/combo").json()["has_real_timing"] is True
    assert history(client, "combo") == [*UPLOADED, "trace.real_timing_listed.v1", "trace.real_timing_attached.v1"]

    comparison = client.get("/api/runs/run-c/comparison").json()
    assert comparison["has_real_timing"] is True
    assert [(r["real_ns"], r["real_ns_spread"]) for r in comparison["rows"]] == [
        (1100.0, {"repeats": 2, "min": 1000.0, "max": 1200.0, "stddev": 100.0}),
        (2000.0, {"repeats": 2, "min": 2000.0, "max": 2000.0, "stddev": 0.0}),
        (3800.0, {"repeats": 2, "min": 3600.0, "max": 4000.0, "stddev": 200.0}),
    ]
    assert all("real_cycles" not in r and "sim_cycles" not in r for r in comparison["rows"])
    assert "cycles_correlation" not in comparison
    scores = comparison["correlation"]
    # A: errors 0 %, 10 % over, 0 %. B, over the two kernels it finished: 10 % and 50 % under.
    a, b = scores["SM86_RTX3070"], scores["SM7_QV100"]
    assert (a["kernels"], a["err_pct"], a["err_under_1pct"], a["err_under_10pct"], a["over"], a["under"]) == (3, pytest.approx(10 / 3), 2, 2, 1, 0)
    assert (b["kernels"], b["err_pct"], b["agg_err_pct"], b["over"], b["under"]) == (2, pytest.approx(30.0), pytest.approx(1110 / 3100 * 100), 0, 2)
    for config, sims in SIM_NS.items():
        expected = correlate(zip([1100.0, 2000.0, 3800.0], sims))
        assert scores[config] == {f: getattr(expected, f) for f in expected.__struct_fields__}


def test_replacing_timing_needs_replace_true(client: TestClient) -> None:
    combo_run(client)
    first = put(client, "combo", TWO_PASSES).json()["timing_id"]
    client.get("/api/runs/run-c/comparison")  # cached with the first timing
    ncu = (TIMING / "ncu-details.csv").read_text()

    refused = put(client, "combo", ncu)
    assert (refused.status_code, refused.json()) == (
        409, {"detail": f"trace combo already has real timing ({first}); replace it with ?replace=true (cascade trace timing --replace)"}
    )
    unclear = put(client, "combo", ncu, "maybe")
    assert (unclear.status_code, unclear.json()) == (400, {"detail": "replace must be true or false, not 'maybe'"})
    replaced = put(client, "combo", ncu, "true").json()
    assert (replaced["format"], replaced["repeats"], replaced["measures"], replaced["replaced"]) == ("ncu", 1, ["duration_ns", "cycles"], first)

    comparison = client.get("/api/runs/run-c/comparison").json()
    rows = comparison["rows"]
    # ncu-details.csv: 3.23 us, 5.86 us, 3,104 ns; 4,580.50, 8,298 and 4,410 cycles; one pass, no spread.
    assert [(r["real_ns"], r["real_cycles"]) for r in rows] == [(3230.0, 4580.5), (5860.0, 8298.0), (3104.0, 4410.0)]
    assert all("real_ns_spread" not in r and "real_cycles_spread" not in r for r in rows)
    assert [r["sim_cycles"] for r in rows] == [
        {"SM86_RTX3070": 4600.0, "SM7_QV100": 4580.0}, {"SM86_RTX3070": 8000.0, "SM7_QV100": 8298.0}, {"SM86_RTX3070": 4400.0, "SM7_QV100": None},
    ]
    b = comparison["cycles_correlation"]["SM7_QV100"]
    assert (b["kernels"], b["err_under_1pct"], b["over"], b["under"]) == (2, 2, 0, 0)  # 4580 vs 4580.5, 8298 vs 8298
    assert comparison["correlation"]["SM86_RTX3070"]["kernels"] == 3
    assert history(client, "combo")[len(UPLOADED):] == ["trace.real_timing_listed.v1", "trace.real_timing_attached.v1"] * 2


def test_racing_attachments_attach_one(client: TestClient) -> None:
    combo_run(client)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: put(client, "combo", TWO_PASSES), range(4)))
    assert sorted(a.status_code for a in answers) == [200, 409, 409, 409]
    [won] = [a.json()["timing_id"] for a in answers if a.status_code == 200]
    kinds = history(client, "combo")[len(UPLOADED):]
    # A loser may have listed its rows before it lost; they are never attached.
    assert kinds.count("trace.real_timing_attached.v1") == 1 and set(kinds) <= {"trace.real_timing_listed.v1", "trace.real_timing_attached.v1"}
    with service(client).reader() as con:
        assert con.execute("SELECT real_timing FROM traces WHERE id = 'combo'").fetchall() == [(won,)]


def test_an_uploads_timing_is_replaced_the_same_way(client: TestClient) -> None:
    files = files_of("combo-vec-mm-xz") | {"real_timing.csv": (HEADER + f"1,{VEC_ADD},1\n2,{MULT},2\n").encode()}
    assert upload(client, tar_of(files), "combo").json()["has_real_timing"] is True
    assert put(client, "combo", TWO_PASSES).json()["detail"].startswith("trace combo already has real timing (upload);")
    assert put(client, "combo", TWO_PASSES, "true").json()["replaced"] == "upload"
    short = put(client, "combo", HEADER + f"1,{VEC_ADD},1000\n2,{MULT},2000\n", "true").json()  # ncu --launch-count 2
    assert (short["kernels"], short["repeats"]) == (2, 1)


def test_refusals_leave_the_trace_as_it_was(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    assert upload(client, tar_of(files_of("combo-vec-mm-xz")), "combo").json()["state"] == "ready"
    w.append(client, [*w.trace_events("sample", sample=True), *w.trace_events("busy", ready=None)])
    nsys = (TIMING / "nsys-cuda-gpu-trace.csv").read_bytes()
    cases: list[tuple[str, bytes | str, int, str]] = [
        ("nothing", nsys, 404, "trace nothing not found"),
        ("sample", nsys, 409, "trace sample is a sample that ships with Cascade; its real timing cannot be changed"),
        ("busy", nsys, 409, "trace busy is processing; real timing can be attached to a ready trace"),
        ("combo", HEADER, 422, "the timing file holds no kernel launches"),
        ("combo", nsys.replace(b",3104,", b",fast,"), 422, "the timing file line 18: Duration (ns) 'fast' is not a non-negative number"),
        ("combo", b"\xff\xfeI\x00D\x00", 422, "the timing file is not UTF-8 text (byte 0 is 0xff); save it as UTF-8"),
        (
            "combo", HEADER + f"1,{MULT},5\n", 422,
            f"the timing file line 2: launch 1 is '{MULT}', but the trace's kernel 1 is '{VEC_ADD}' (vecAdd); "
            "a pass holds the trace's launches in order, from its first",
        ),
    ]
    for trace_id, body, status, detail in cases:
        response = put(client, trace_id, body)
        assert (response.status_code, response.json()) == (status, {"detail": detail}), trace_id
    monkeypatch.setattr(realtiming, "MAX_BYTES", 1000)
    too_big = "the timing file is{} over this server's limit of 1000 bytes (the most of a timing file Cascade reads)"
    response = put(client, "combo", nsys)
    assert (response.status_code, response.json()) == (413, {"detail": too_big.format(f" {len(nsys)} bytes,")})
    streamed = client.put("/api/traces/combo/real-timing", content=iter([nsys[:600], nsys[600:]]))
    assert (streamed.status_code, streamed.json()) == (413, {"detail": too_big.format("")})
    assert history(client, "combo") == UPLOADED
    assert client.get("/api/traces/combo").json()["has_real_timing"] is False

    monkeypatch.undo()
    assert client.delete("/api/traces/combo").status_code == 204
    gone = put(client, "combo", nsys)
    assert (gone.status_code, gone.json()) == (404, {"detail": "trace combo not found"})
