"""Fidelity: for every recording the fake simulator replays, a sim that replays it gives the
same results download and the same kernel-stats.csv, byte for byte, as the golden files in
tests/cascade_sim/golden/ (recorded before the stats tokenizer moved to compiled code).

Only what differs from one run of the test to the next is normalised: the run's and the sims'
ids (random), ISO timestamps, the sim's launcher_ref (the simulator's pid) and host, and the
test's temporary directory (in the error of a missing kernel file).
Everything else, the simulator's own wall-clock lines included, comes from the recording.

    CASCADE_RECORD_GOLDEN=1 .venv/bin/python -m pytest tests/cascade_sim/test_golden_results.py

writes the golden files afresh; do that only for a change that is meant to change answers,
and say so in its commit."""

from __future__ import annotations

import gzip
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_nats import server
from cascade_process.service import starlette_app
from tests.cascade_sim.world import TITANX, accelsim_tree, add_config_lines, relabel, store_trace, wait_run
from tests.support import LOGS, TRACES

GOLDEN = Path(__file__).resolve().parent / "golden"
RECORD = os.environ.get("CASCADE_RECORD_GOLDEN") == "1"
TOKEN = "t"
# A config's two folders: GPGPU-Sim's options and the trace-driven ones.
FOLDERS = (TITANX.parent, Path("gpu-simulator/configs/tested-cfgs"))


class Case(NamedTuple):
    recording: str  # the log of tests/support.LOGS the fake replays
    trace: str  # a trace of tests/support.TRACES, or one made by `traces` below
    arch: str  # what the trace says it is, so that it may run on the config
    config: str  # a config of the tree made by `configs` below


CASES = [
    Case("vectoradd-100-32__SM61_TITANX.log", "vectoradd-100-32", "sm_61", "SM61_TITANX"),
    Case("vectoradd-100-32__SM7_QV100.log", "vectoradd-100-32", "sm_70", "SM7_QV100"),
    Case("vectoradd-100-32__SM86_RTX3070.log", "vectoradd-100-32", "sm_86", "SM86_RTX3070"),
    Case("combo-vec-mm-xz__SM61_TITANX.log", "combo-vec-mm-xz", "sm_61", "SM61_TITANX"),
    Case("combo-vec-mm-xz__SM7_QV100.log", "combo-vec-mm-xz", "sm_70", "SM7_QV100"),
    Case("liveness-progress__SM61_TITANX.log", "vectoradd-100-32", "sm_61", "SM61_TITANX_LIVENESS"),
    Case("failures/max-cycle.stdout", "vectoradd-100-32", "sm_61", "SM61_TITANX_MAX_CYCLE"),
    Case("failures/missing-icnt.stdout", "vectoradd-100-32", "sm_61", "SM61_TITANX_NO_ICNT"),
    Case("failures/unknown-option.stdout", "vectoradd-100-32", "sm_61", "SM61_TITANX_UNKNOWN_OPTION"),
    Case("failures/missing-traceg.stdout", "missing-traceg", "sm_61", "SM61_TITANX"),
    Case("failures/undefined-instruction.stdout", "relabelled-70", "sm_70", "SM7_QV100"),
    Case("failures/unsupported-binary-version.stdout", "relabelled-90", "sm_90", "SM90_TEST"),
]
# failures/sigterm.stdout is the one shared log no sim replays: the fake does not print it
# (a SIGTERM'd sim is a paced replay killed where the timing says); its block is read by the
# completeness test (test_stats_names.py).


def test_every_replayable_recording_has_a_case() -> None:
    replayable = {str(p.relative_to(LOGS)) for p in LOGS.rglob("*") if p.suffix in (".log", ".stdout")} - {"failures/sigterm.stdout"}
    assert sorted(c.recording for c in CASES) == sorted(replayable)


def configs(tree: Path) -> None:
    """The variants of SM61_TITANX the recordings need, each as a config of its own (the fake
    tells a variant by its options), and SM90_TEST, a config of an arch the build lacks."""
    for name, lines in {
        "SM61_TITANX_LIVENESS": ["-trace_enabled 1", "-trace_components LIVENESS", "-liveness_message_freq 0"],
        "SM61_TITANX_MAX_CYCLE": ["-gpgpu_max_cycle 1000"],
        "SM61_TITANX_NO_ICNT": [],
        "SM61_TITANX_UNKNOWN_OPTION": ["-no_such_option 1"],
        "SM90_TEST": [],
    }.items():
        for folder in FOLDERS:
            shutil.copytree(tree / folder / "SM61_TITANX", tree / folder / name)
        if lines:
            add_config_lines(tree, name, *lines)
    (tree / TITANX.parent / "SM61_TITANX_NO_ICNT" / "config_pascal_islip.icnt").unlink()


def traces(root: Path) -> dict[str, Path]:
    made = {name: TRACES / name for name in ("vectoradd-100-32", "combo-vec-mm-xz")}
    made["missing-traceg"] = root / "missing-traceg"
    made["missing-traceg"].mkdir(parents=True)
    shutil.copy(TRACES / "vectoradd-100-32" / "kernelslist.g", made["missing-traceg"])
    made["relabelled-70"] = relabel(TRACES / "vectoradd-100-32", root / "relabelled-70", 70)
    made["relabelled-90"] = relabel(TRACES / "vectoradd-100-32", root / "relabelled-90", 90)
    return made


class Downloads(NamedTuple):
    results: bytes
    kernel_stats_csv: bytes | None  # None when the sim stored none


@pytest.fixture(scope="module")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Downloads]]:
    """Every case's downloads, from one service whose runner replays them all."""
    tmp = tmp_path_factory.mktemp("golden")
    tree = accelsim_tree(tmp / "accel-sim")
    configs(tree)
    made = traces(tmp / "traces")
    with server.running(tmp / "jetstream") as nats:
        settings = Settings(
            token=TOKEN, data_dir=tmp / "data", nats_url=nats.url, accelsim_dir=tree, runner=True, runner_slots=2, samples=False
        )
        with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            service = client.app.state.cascade  # type: ignore[attr-defined]
            runs = {}
            for case in CASES:
                trace_id = f"{case.trace}-{case.arch}"
                if client.get(f"/api/traces/{trace_id}").status_code == 404:
                    store_trace(service, client, trace_id, made[case.trace], case.arch)
                created = client.post("/api/runs", json={"trace_id": trace_id, "entries": [{"gpu_config": case.config, "count": 1}]})
                assert created.status_code == 201, created.text
                runs[case.recording] = created.json()["id"]
            out = {}
            for recording, run_id in runs.items():
                run = wait_run(client, run_id, timeout=90)
                ids = {run_id: "run-0", **{s["id"]: f"sim-{i}" for i, s in enumerate(run["sims"])}, str(tmp): "<tmp>"}
                results = client.get(f"/api/runs/{run_id}/results")
                assert results.status_code == 200
                csv = client.get(f"/api/sims/{run['sims'][0]['id']}/files/kernel-stats.csv")
                out[recording] = Downloads(
                    normalised(results.content, ids), normalised(csv.content, ids) if csv.status_code == 200 else None
                )
            yield out


# A timestamp as the API writes it, and the fields that name the simulator's process.
TIMESTAMP = re.compile(rb'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"')
PROCESS = re.compile(rb'"(launcher_ref|host)":"[^"]*"')


def normalised(body: bytes, ids: dict[str, str]) -> bytes:
    for actual, placeholder in ids.items():
        body = body.replace(actual.encode(), placeholder.encode())
    body = TIMESTAMP.sub(b'"<time>"', body)
    return PROCESS.sub(rb'"\1":"<\1>"', body)


def golden_path(recording: str, what: str) -> Path:
    return GOLDEN / f"{recording.replace('/', '__')}.{what}.gz"


@pytest.mark.parametrize("recording", [c.recording for c in CASES])
@pytest.mark.parametrize("what", ["results.json", "kernel-stats.csv"])
def test_downloads_equal_the_golden_files(downloads: dict[str, Downloads], recording: str, what: str) -> None:
    got = downloads[recording].results if what == "results.json" else downloads[recording].kernel_stats_csv
    path = golden_path(recording, what)
    if RECORD:
        GOLDEN.mkdir(exist_ok=True)
        if got is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(gzip.compress(got, 9, mtime=0))
    want = gzip.decompress(path.read_bytes()) if path.exists() else None
    if got != want:
        pytest.fail(first_difference(got, want))


def first_difference(got: bytes | None, want: bytes | None) -> str:
    if got is None or want is None:
        return f"got {'nothing' if got is None else len(got)} bytes, golden has {'nothing' if want is None else len(want)}"
    at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return f"first difference at byte {at} of {len(got)} (golden {len(want)}): got {got[at - 80 : at + 80]!r}, golden {want[at - 80 : at + 80]!r}"
