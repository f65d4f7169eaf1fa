"""Split and reusing sims on the real simulator: wall time and accuracy against the sim run whole.

    CASCADE_ACCELSIM_DIR=/work/accelsim/accel-sim-framework .venv/bin/python bench/fast_sim_bench.py [--slots 2] [--only split|reuse|resume]

A service with a runner of `--slots` slots (in this process, on an embedded nats-server)
uploads matrixmul-x40 and the combo trace, then runs each split (matrixmul-x40 at K = 5, 10,
20, combo per kernel, each without warm-up and with the default warm-up of 2), each right
after a sequential run of the same trace, one run at a time, on SM61_TITANX. For each it
reports: the wall times from the run's creation until it finished, the simulators' CPU time
(user + sys of this process's finished children), the speed-up against the sequential run
before it, the issue's aim ratio (wall ÷ (sequential wall ÷ min(slots, chunks))), the
total-cycle error and the worst per-kernel cycle error against the sequential sim's kernels,
and the load average when each started: on a shared machine the wall times are only as good
as the load lets them be.

Then reuse (`"reuse": true`): matrixmul-x40, matrixmul-x40-files (the same launches as NVBit
writes them, a kernel file per launch with its own `-kernel id`), the combo trace, and
combo-repeat (the combo trace's kernelslist three times over, its own kernel files), each
right after a sequential run, with the same columns but for chunks: how many of the launches
were simulated (kernels without `reused_from`; a chunk's warm-up not counted); and
matrixmul-x40 and combo-repeat split too (K = 20 and 5, warm-up 2), each chunk reusing
within its own launches.

Then references (`--only reference`): matrixmul-x40 split (K = 10, warm-up 2) and reusing,
each followed by its reference (`POST /api/sims/{id}/reference`, asked once it has
finished, so the two never share the cores), with the comparison the service answers: each
one's wall time from its first launch to its end, the speed-up, the total and the worst
kernel's cycle error, the kernels exact, the instruction error, and whether both ran the same
config files.

Last, resume (`--only resume`, not run by default: it needs `cascade worker` processes):
matrixmul-x40 run whole by a worker, then again by a worker killed -9 once it finished
`--resume-after` kernels (10), and taken over by another that resumes at the first launch
not finished, after the default warm-up: the launch it resumed at, the wall time from the
run's creation (the lease the killed worker held, 2 s here, included), and the errors against
the sim run straight.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from starlette.testclient import TestClient  # noqa: E402

from cascade_app.config import Settings  # noqa: E402
from cascade_nats import server  # noqa: E402
from cascade_process.service import starlette_app  # noqa: E402
from tests.cascade_http.trace_archives import files_of, one_file_per_launch, tar_of  # noqa: E402
from tests.cascade_sim.world import worker  # noqa: E402

TOKEN = "bench"
CONFIG = "SM61_TITANX"
SPLITS: dict[str, list[dict[str, int]]] = {
    "matrixmul-x40": [{"kernels_per_chunk": k, "warmup": w} for k in (5, 10, 20) for w in (0, 2)],
    "combo-vec-mm-xz": [{"kernels_per_chunk": 1, "warmup": 0}, {"kernels_per_chunk": 1, "warmup": 2}],
}


def repeated(name: str, times: int) -> dict[str, bytes]:
    """A shared trace's files, its kernelslist.g `times` over."""
    files = files_of(name)
    return {**files, "kernelslist.g": files["kernelslist.g"] * times}


REUSES = {
    "matrixmul-x40": files_of("matrixmul-x40"),
    "matrixmul-x40-files": one_file_per_launch("matrixmul-x40"),  # as NVBit writes it: a file per launch, each its own -kernel id
    "combo-vec-mm-xz": files_of("combo-vec-mm-xz"),
    "combo-repeat": repeated("combo-vec-mm-xz", 3),
}
# Reuse in split sims too (each chunk within its own launches), K launches a chunk and the default warm-up.
REUSE_SPLITS = {"matrixmul-x40": [None, 20], "matrixmul-x40-files": [None], "combo-vec-mm-xz": [None], "combo-repeat": [None, 5]}


def upload(client: TestClient, name: str, files: dict[str, bytes]) -> None:
    response = client.post(f"/api/traces?id={name}", content=tar_of(files, top=name), headers={"Content-Type": "application/x-tar"})
    assert response.status_code == 202 and response.json()["state"] == "ready", response.text


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(client: TestClient, trace: str, **asked: object) -> dict[str, Any]:
    entry: dict[str, Any] = {"gpu_config": CONFIG, "count": 1, **asked}
    load = os.getloadavg()[0]
    cpu = children_cpu()
    started = time.perf_counter()
    response = client.post("/api/runs", json={"trace_id": trace, "entries": [entry]})
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    while (detail := client.get(f"/api/runs/{run_id}").json())["state"] == "active":
        time.sleep(0.2)
    wall = time.perf_counter() - started
    assert detail["state"] == "succeeded", detail["sims"][0]["error"]
    (sim,) = detail["sims"]
    kernels = client.get(f"/api/runs/{run_id}/kernels").json()
    chunks = len(sim["split"]["chunks"]) if sim.get("split") else 1
    return {"wall": wall, "cpu": children_cpu() - cpu, "load": load, "chunks": chunks, "cycles": [k["gpu_sim_cycle"] for k in kernels],
            "total": sim["latest"]["gpu_tot_sim_cycle"], "simulated": sum("reused_from" not in k for k in kernels), "sim_id": sim["id"]}


def errors(r: dict[str, Any], whole: dict[str, Any]) -> str:
    """The total-cycle error and the worst kernel's, of run `r` against the sequential one."""
    worst = max(((s - q) / q for s, q in zip(r["cycles"], whole["cycles"], strict=True)), key=abs)
    return f"{r['total']:,.0f} | {(r['total'] - whole['total']) / whole['total']:+.3%} | {worst:+.2%}"


def splits(client: TestClient, slots: int) -> None:
    print("| trace | K | W | chunks | sequential wall s | split wall s | speed-up | aim ratio | sequential CPU s | split CPU s "
          "| total cycles | total err | worst kernel err | load1 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for trace, asked in SPLITS.items():
        upload(client, trace, files_of(trace))
        for split in asked:
            # The sequential run just before each split one, so both see about the same load.
            whole, r = run(client, trace), run(client, trace, split=split)
            ideal = whole["wall"] / min(slots, r["chunks"])
            print(
                f"| {trace} | {split['kernels_per_chunk']} | {split['warmup']} | {r['chunks']} | {whole['wall']:.1f} | {r['wall']:.1f} "
                f"| {whole['wall'] / r['wall']:.2f}× | {r['wall'] / ideal:.2f} | {whole['cpu']:.1f} | {r['cpu']:.1f} "
                f"| {errors(r, whole)} | {whole['load']:.1f}, {r['load']:.1f} |",
                flush=True,
            )


def reuses(client: TestClient) -> None:
    print("| trace | K | launches | simulated | sequential wall s | reuse wall s | speed-up | sequential CPU s | reuse CPU s "
          "| total cycles | total err | worst kernel err | load1 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for trace, files in REUSES.items():
        upload(client, f"{trace}-r", files)  # an id of its own: the split runs may have uploaded it
        for k in REUSE_SPLITS[trace]:
            split = {} if k is None else {"split": {"kernels_per_chunk": k, "warmup": 2}}
            whole, r = run(client, f"{trace}-r"), run(client, f"{trace}-r", reuse=True, **split)
            print(
                f"| {trace} | {k or '-'} | {len(r['cycles'])} | {r['simulated']} | {whole['wall']:.1f} | {r['wall']:.1f} "
                f"| {whole['wall'] / r['wall']:.2f}× | {whole['cpu']:.1f} | {r['cpu']:.1f} | {errors(r, whole)} "
                f"| {whole['load']:.1f}, {r['load']:.1f} |",
                flush=True,
            )


# Fast sims measured by their references (`POST /api/sims/{id}/reference`), asked for once each
# has finished, so the two never share the cores.
REFERENCED = {"split K=10, W=2": {"split": {"kernels_per_chunk": 10, "warmup": 2}}, "reuse": {"reuse": True}}


def referenced(client: TestClient) -> None:
    print("| matrixmul-x40 | fast wall s | reference wall s | speed-up | total cycles | reference cycles | total err "
          "| worst kernel err (launch) | exact kernels | insn err | same config | load1 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    upload(client, "x40-ref", files_of("matrixmul-x40"))
    for name, asked in REFERENCED.items():
        load = os.getloadavg()[0]
        fast = run(client, "x40-ref", **asked)
        response = client.post(f"/api/sims/{fast['sim_id']}/reference")
        assert response.status_code == 200, response.text
        path = f"/api/sims/{fast['sim_id']}/reference"
        while (c := client.get(path).json())["reference"]["state"] not in ("succeeded", "failed", "cancelled"):
            time.sleep(0.2)
        assert c["reference"]["state"] == "succeeded", c["reference"]
        t = c["totals"]
        print(
            f"| {name} | {c['fast']['wall_s']:.1f} | {c['reference']['wall_s']:.1f} | {c['speedup']:.2f}× | {t['gpu_sim_cycle']:,} "
            f"| {t['reference_gpu_sim_cycle']:,} | {t['cycle_error_pct']:+.3f} % | {t['worst_cycle_error_pct']:+.2f} % "
            f"({t['worst_kernel_launch_uid']}) | {t['exact']} of {t['kernels']} | {t['insn_error_pct']:+.3f} % "
            f"| {c['same_config']} | {load:.1f}, {os.getloadavg()[0]:.1f} |",
            flush=True,
        )


def resumes(client: TestClient, nats_url: str, accelsim: Path, tmp: Path, after: int) -> None:
    print("| trace | killed after | resumed at | warm-up | sequential wall s | resumed wall s | total cycles | total err | worst kernel err | load1 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    trace = "matrixmul-x40"
    upload(client, f"{trace}-s", files_of(trace))
    lease = {"lease_s": 2}
    with worker(nats_url, accelsim, tmp / "w0", **lease):
        whole = run(client, f"{trace}-s")
    load = os.getloadavg()[0]
    started = time.perf_counter()
    response = client.post("/api/runs", json={"trace_id": f"{trace}-s", "entries": [{"gpu_config": CONFIG, "count": 1}]})
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    with worker(nats_url, accelsim, tmp / "w1", **lease) as first:
        while client.get(f"/api/runs/{run_id}").json()["sims"][0]["kernels_done"] < after:
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait()
    with worker(nats_url, accelsim, tmp / "w2", **lease):
        while (detail := client.get(f"/api/runs/{run_id}").json())["state"] == "active":
            time.sleep(0.2)
    wall = time.perf_counter() - started
    (sim,) = detail["sims"]
    assert detail["state"] == "succeeded", sim["error"]
    (resumed,) = sim["resumed"]
    kernels = client.get(f"/api/runs/{run_id}/kernels").json()
    assert [k["kernel_launch_uid"] for k in kernels] == list(range(1, 41))
    r = {"cycles": [k["gpu_sim_cycle"] for k in kernels], "total": sim["latest"]["gpu_tot_sim_cycle"]}
    print(
        f"| {trace} | {after} | {resumed['first']} | {resumed['warmup']} | {whole['wall']:.1f} | {wall:.1f} | {errors(r, whole)} "
        f"| {whole['load']:.1f}, {load:.1f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--only", choices=("split", "reuse", "reference", "resume"), help="run only these (default: split, reuse and reference)")
    parser.add_argument("--resume-after", type=int, default=10, help="kernels the killed worker finishes (default 10)")
    args = parser.parse_args()
    accelsim = os.environ.get("CASCADE_ACCELSIM_DIR")
    if not accelsim:
        sys.exit("set CASCADE_ACCELSIM_DIR to a built Accel-Sim (see README.md)")
    print(f"{os.cpu_count()} cores, {args.slots} slots, config {CONFIG}, Accel-Sim at {accelsim}")
    with tempfile.TemporaryDirectory(prefix="cascade-fast-sim-") as tmp, server.running(Path(tmp) / "js") as nats:
        settings = Settings(
            token=TOKEN, data_dir=Path(tmp) / "data", nats_url=nats.url, accelsim_dir=Path(accelsim), runner_slots=args.slots, samples=False
        )
        if args.only == "resume":
            settings.runner = False  # the workers run the sims
        with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            if args.only == "resume":
                resumes(client, nats.url, Path(accelsim), Path(tmp), args.resume_after)
            if args.only in (None, "split"):
                splits(client, args.slots)
            if args.only in (None, "reuse"):
                reuses(client)
            if args.only in (None, "reference"):
                referenced(client)


if __name__ == "__main__":
    main()
