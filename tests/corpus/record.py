"""Record an event corpus, or the tables the corpora replay to. Never run by the tests.

    .venv/bin/python -m tests.corpus.record events FILE   a new corpus from a live service (FILE must not exist)
    .venv/bin/python -m tests.corpus.record tables        every tables-v<n>.json again, from its events-v<n>.jsonl

A recorded corpus is what the events looked like when stored; it is never recorded again.
A change to what events hold (a new version of a type, a new field) records a corpus of its
own beside the others (`events-v3.jsonl`, added to `corpus.VERSIONS`), and all must go on
decoding. `tables` is for a deliberate change of what the read model holds (a row type, a
fold rule): the test fails until the dumps are made again, and the diff of the
`tables-v<n>.json` shows what the change did to the tables.

The live service runs the fake simulator (which replays recorded Accel-Sim output) through
the real runner on an embedded nats-server: the LLM-serving sample, an upload with real
timing and a `cascade.json`, real timing attached to a ready trace and replaced (at last by a
file with hardware counters), a run that succeeds and is topped up (another config and a
replica, with an idempotency key), one that fails in the simulator and is retried (failing
again), one cut short at the simulator's cycle limit, one cancelled mid-kernel, split sims (one
stitched from its chunks and given a reference after it finished, one failed in a chunk and
retried, one split "auto" that runs whole), a sim reusing repeated kernels with a reference asked for at
creation, a config variant, a run entry's own options, a named and tagged run, a campaign
over a grid (one of its sims taking a known result from the cache), a trace added from a shared path with a copy (run, then refused
once a file of it changed), an upload that fails, a deleted trace, a deleted run (the cancelled one), a Slurm job's end as
`cascade slurm` records it, and a sim a killed worker left, resumed by another.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import nats
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_core import slurm
from cascade_nats import server
from cascade_nats.store import EventStore
from cascade_process.service import starlette_app
from cascade_sim import samples
from tests.cascade_http.conftest import service
from tests.cascade_http.trace_archives import files_of, tar_of, upload
from tests.cascade_sim.world import TITANX, accelsim_tree, add_config_lines, create_run, wait_run, worker
from tests.corpus import corpus
from tests.support import LOGS, TRACES

TOKEN = "corpus"
TIMING_FILES = Path(__file__).parents[1] / "cascade_formats" / "timing"  # real timing files of the combo trace
BAD_CONFIG = "SM61_TITANX_BAD"  # a copy of SM61_TITANX with an option no simulator knows
MAX_CYCLE = "SM61_TITANX_MAX_CYCLE"  # a copy limited to 1,000 cycles: the fake replays failures/max-cycle.stdout
SCONTROL_TIMEOUT = "JobId=7 JobName=cascade-worker JobState=TIMEOUT Reason=TimeLimit Dependency=(null) ExitCode=0:15 RunTime=00:01:20"


def live(tmp: Path, nats_url: str) -> None:
    tree = accelsim_tree(tmp / "accel-sim")
    for folder in (tree / TITANX, tree / "gpu-simulator/configs/tested-cfgs/SM61_TITANX"):
        shutil.copytree(folder, folder.with_name(BAD_CONFIG))
        shutil.copytree(folder, folder.with_name(MAX_CYCLE))
    add_config_lines(tree, BAD_CONFIG, "-no_such_option 1")
    add_config_lines(tree, MAX_CYCLE, "-gpgpu_max_cycle 1000")
    shared = tmp / "shared"
    shutil.copytree(TRACES / "vectoradd-100-32", shared / "vectoradd")
    settings = Settings(
        token=TOKEN, data_dir=tmp / "data", nats_url=nats_url, accelsim_dir=tree, runner_slots=2, samples=False,
        shared_trace_roots=str(shared),
    )
    with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        # The LLM-serving sample (real timing, a step timeline); the runs below stand for the recorded ones.
        store, objects = service(client).store, service(client).objects
        client.portal.call(samples.load, store, objects, lambda: [samples.llm()])  # type: ignore[union-attr]  # a portal inside `with`

        vectoradd = files_of("vectoradd-100-32") | {
            "real_timing.csv": b"kernel_id,kernel_name,duration_ns\n1,_Z6vecAddIfEvPT_S1_S1_i,3232\n",
            "cascade.json": b'{"model": "vector add", "layers": ["add", 1], "source_gpu": "TITAN X (Pascal)"}',
        }
        _ready(client, tar_of(vectoradd), "vectoradd")
        topped_up = create_run(client, "vectoradd", "SM61_TITANX")["id"]
        assert wait_run(client, topped_up)["state"] == "succeeded"
        entries = {"entries": [{"gpu_config": BAD_CONFIG, "count": 1}, {"gpu_config": "SM61_TITANX", "count": 1}]}
        added = client.post(f"/api/runs/{topped_up}/entries", json=entries, headers={"Idempotency-Key": "corpus-top-up"})
        assert added.status_code == 200, added.text
        assert wait_run(client, topped_up)["state"] == "failed"
        failed = create_run(client, "vectoradd", BAD_CONFIG)["id"]
        assert wait_run(client, failed)["state"] == "failed"
        assert client.post(f"/api/runs/{failed}/retry").json()["state"] == "active"
        assert wait_run(client, failed)["state"] == "failed"
        cut = wait_run(client, create_run(client, "vectoradd", MAX_CYCLE)["id"])  # succeeds, cut short at its limit
        assert cut["state"] == "succeeded" and cut["sims"][0]["cut_short"]["partial"], cut

        _ready(client, tar_of(files_of("combo-vec-mm-xz")), "combo")
        # Real timing attached later: durations and cycles, then only cycles over two passes in its
        # place, then durations, cycles and hardware counters.
        _attach(client, "combo", "ncu-details.csv", replace=False)
        _attach(client, "combo", "ncu-cycles-2-passes.csv", replace=True)
        _attach(client, "combo", "ncu-counters-details.csv", replace=True)
        os.environ["CASCADE_FAKE_ACCELSIM_PACE"] = "30"  # read by the simulator the next run starts
        try:
            run_id = create_run(client, "combo", "SM61_TITANX")["id"]
            wait_run(client, run_id, until="running")
        finally:
            del os.environ["CASCADE_FAKE_ACCELSIM_PACE"]
        assert client.delete(f"/api/runs/{run_id}").status_code == 409  # active: cancel it first
        assert client.post(f"/api/runs/{run_id}/cancel").json()["state"] == "cancelled"
        _settled(client, run_id)
        assert client.delete(f"/api/runs/{run_id}").status_code == 204  # its events stay, its rows go

        # Split sims: combo per kernel after 2 warm-up launches; in chunks of 2, of which the
        # simulator fails the first (no such chunk was recorded); and "auto", which runs it whole.
        # The failed one is retried, its failed and stopped chunks again, and fails again.
        os.environ["CASCADE_FAKE_ACCELSIM_CUT"] = "0"  # a range of launches with no recording fails
        try:
            for split, state in (({"kernels_per_chunk": 1, "warmup": 2}, "succeeded"), ({"kernels_per_chunk": 2}, "failed"), ("auto", "succeeded")):
                entry = {"gpu_config": "SM61_TITANX", "count": 1, "split": split}
                response = client.post("/api/runs", json={"trace_id": "combo", "entries": [entry]})
                assert response.status_code == 201, response.text
                assert wait_run(client, response.json()["id"])["state"] == state
                time.sleep(2)  # a chunk stopped by the other's failure stores its files
                if split == {"kernels_per_chunk": 1, "warmup": 2}:  # its reference, asked for once it finished
                    (sim,) = wait_run(client, response.json()["id"])["sims"]
                    assert client.post(f"/api/sims/{sim['id']}/reference").status_code == 200
                    assert wait_run(client, response.json()["id"])["state"] == "succeeded"
                if state == "failed":
                    assert client.post(f"/api/runs/{response.json()['id']}/retry").json()["state"] == "active"
                    assert wait_run(client, response.json()["id"])["state"] == "failed"
                    time.sleep(2)
        finally:
            del os.environ["CASCADE_FAKE_ACCELSIM_CUT"]

        # Reuse: the combo trace three times over, each kernel's third and later launches
        # reused; with a reference, asked for at creation; fresh, simulated whatever the result
        # cache holds (the top-up's SM61_TITANX sim above took its run's first sim's result: `cached_from`).
        combo = files_of("combo-vec-mm-xz")
        _ready(client, tar_of({**combo, "kernelslist.g": combo["kernelslist.g"] * 3}), "repeat")
        entry = {"gpu_config": "SM61_TITANX", "count": 1, "reuse": True, "reference": True, "fresh": True}
        response = client.post("/api/runs", json={"trace_id": "repeat", "entries": [entry]})
        assert response.status_code == 201, response.text
        assert wait_run(client, response.json()["id"])["state"] == "succeeded"

        # Design-space exploration: a config variant, a run entry's own options (an unnamed
        # variant), a named and tagged run, and a campaign over a grid of one option with a
        # baseline, whose SM61_TITANX sim of vectoradd takes the first run's result.
        limit = {"-gpgpu_max_cycle": "1000"}
        variant = client.post("/api/gpu-configs", json={"name": "SM61_TITANX_CAPPED", "base": "SM61_TITANX", "options": limit})
        assert variant.status_code == 201, variant.text
        entry = {"gpu_config": "SM61_TITANX", "count": 1, "options": limit}
        response = client.post("/api/runs", json={"trace_id": "vectoradd", "entries": [entry], "name": "capped", "tags": ["corpus"]})
        assert response.status_code == 201, response.text
        assert wait_run(client, response.json()["id"])["state"] == "succeeded"
        body = {"name": "corpus-study", "tags": ["corpus"], "traces": ["vectoradd"], "configs": ["SM61_TITANX"],
                "base": "SM61_TITANX", "grid": {"-gpgpu_max_cycle": ["1000"]}, "baseline": "SM61_TITANX"}
        campaign = client.post("/api/campaigns", json=body)
        assert campaign.status_code == 201, campaign.text
        for run in campaign.json()["runs"]:
            assert wait_run(client, run)["state"] == "succeeded"

        # A trace added from a shared path, read in place: a run of it succeeds, and once one of
        # its files has changed another fails with the digest it had and the one it has.
        added_shared = client.post("/api/traces/shared", json={"path": str(shared / "vectoradd"), "id": "shared", "copy": True})
        assert added_shared.status_code == 201, added_shared.text
        assert wait_run(client, create_run(client, "shared", "SM61_TITANX", fresh=True)["id"])["state"] == "succeeded"
        with (shared / "vectoradd" / "kernel-1.traceg").open("ab") as kernel:
            kernel.write(b"\n")
        assert wait_run(client, create_run(client, "shared", "SM61_TITANX", fresh=True)["id"])["state"] == "failed"

        assert upload(client, tar_of({"README": b"no kernelslist.g here\n"}), "broken").status_code == 202
        _state(client, "broken", "failed")
        assert client.delete("/api/traces/broken").status_code == 204

        # A worker's Slurm job ended at its time limit, as scontrol said it (tests/slurm).
        end = slurm.parse_scontrol(SCONTROL_TIMEOUT, "7")
        assert end is not None
        runner = slurm.runner_id("cascade", "7")
        client.portal.call(store.append, slurm.ended(runner, end, event_id=f"{runner}.ended", at=datetime.now(UTC)))  # type: ignore[union-attr]

    # A worker killed -9 mid-sim, whose sim another worker resumes at its first unfinished
    # kernel: this server has no runner of its own, so only the workers take the sim.
    settings.runner, settings.runner_lease_s = False, 2.0
    with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        _ready(client, tar_of(files_of("matrixmul-x40")), "x40")
        with worker(nats_url, tree, tmp / "w1", lease_s=2, CASCADE_FAKE_ACCELSIM_PACE="0.2") as first:
            run_id = create_run(client, "x40", "SM61_TITANX")["id"]
            deadline = time.monotonic() + 60
            while client.get(f"/api/runs/{run_id}").json()["sims"][0]["kernels_done"] < 5:
                assert time.monotonic() < deadline, "the first worker finished no kernels"
                time.sleep(0.05)
            first.send_signal(signal.SIGKILL)
            first.wait()
        with worker(nats_url, tree, tmp / "w2", lease_s=2):
            (sim,) = wait_run(client, run_id, timeout=90)["sims"]
        assert sim["state"] == "succeeded" and sim["resumed"], sim


def _ready(client: TestClient, body: bytes, trace_id: str) -> None:
    assert upload(client, body, trace_id).status_code == 202
    _state(client, trace_id, "ready")


def _attach(client: TestClient, trace_id: str, timing_file: str, *, replace: bool) -> None:
    body = (TIMING_FILES / timing_file).read_bytes()
    params = {"replace": "true"} if replace else {}
    response = client.put(f"/api/traces/{trace_id}/real-timing", params=params, content=body, headers={"Content-Type": "text/csv"})
    assert response.status_code == 200, response.text


def _state(client: TestClient, trace_id: str, state: str) -> None:
    deadline = time.monotonic() + 60
    while (trace := client.get(f"/api/traces/{trace_id}").json())["state"] != state:
        assert time.monotonic() < deadline, trace
        time.sleep(0.1)


def _settled(client: TestClient, run_id: str) -> None:
    """Wait until the cancelled sim's runner has said all it will (its files and the end)."""
    deadline = time.monotonic() + 60
    while not client.get(f"/api/runs/{run_id}/files").json():
        assert time.monotonic() < deadline, "the cancelled sim stored no files"
        time.sleep(0.1)
    time.sleep(2)


async def stored(nats_url: str) -> list[bytes]:
    """Every message of the stream, in order, as corpus lines."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        last = (await js.stream_info("CASCADE")).state.last_seq
        out = []
        for seq in range(1, last + 1):
            msg = await js.get_msg("CASCADE", seq)
            out.append(corpus.encode_line(msg.subject or "", msg.data or b""))
        return out
    finally:
        await nc.close()


def record_events(path: Path) -> None:
    if path.exists():
        sys.exit(f"{path} exists: a recorded corpus is never recorded again (see this module's doc)")
    with tempfile.TemporaryDirectory(prefix="cascade-corpus-") as tmp, server.running(Path(tmp) / "js") as nats_server:
        live(Path(tmp), nats_server.url)
        path.write_bytes(b"\n".join(asyncio.run(stored(nats_server.url))) + b"\n")
    print(f"{path}: {len(corpus.lines(path))} events")


async def _replayed(nats_url: str, version: int, db: Path) -> dict[str, corpus.Table]:
    nc = await nats.connect(nats_url)
    store = EventStore(nc)
    try:
        await store.ensure_stream()
        return await corpus.replayed(store, corpus.recorded(version), db)
    finally:
        await store.close()
        await nc.close()


def record_tables() -> None:
    for version in corpus.VERSIONS:  # each into a stream of its own
        with tempfile.TemporaryDirectory(prefix="cascade-corpus-") as tmp, server.running(Path(tmp) / "js") as nats_server:
            dumped = asyncio.run(_replayed(nats_server.url, version, Path(tmp) / "replay.duckdb"))
        path = corpus.tables_file(version)
        path.write_bytes(msgspec.json.format(msgspec.json.encode(dumped), indent=1) + b"\n")
        print(f"{path}: {sum(len(t.rows) for t in dumped.values())} rows in {len(dumped)} tables")


if __name__ == "__main__":
    os.environ.setdefault("CASCADE_FAKE_ACCELSIM_LOGS", str(LOGS))  # as tests/conftest.py has it
    match sys.argv[1:]:
        case ["events", file]:
            record_events(Path(file))
        case ["tables"]:
            record_tables()
        case _:
            sys.exit(__doc__)
