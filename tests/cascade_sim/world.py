"""What runner tests set up: Accel-Sim trees with the fake simulator, traces in the object
store, running `cascade worker` processes, and waiting on runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from cascade_app.service import Cascade
from cascade_core import events as ev
from cascade_formats.tracefiles import KernelLaunch, parse_kernelslist
from tests.support import TREE, stop

FAKE_SIMULATOR = Path(__file__).resolve().parents[1] / "fake_accelsim" / "accel-sim.out"
TITANX = Path("gpu-simulator/gpgpu-sim/configs/tested-cfgs/SM61_TITANX")


def accelsim_tree(root: Path) -> Path:
    """A copy of the shared Accel-Sim tree with the fake simulator where the real one goes."""
    shutil.copytree(TREE, root)
    binary = root / "gpu-simulator" / "bin" / "release" / "accel-sim.out"
    binary.parent.mkdir(parents=True)
    shutil.copy(FAKE_SIMULATOR, binary)
    binary.chmod(0o755)
    (binary.parent / "recorded").symlink_to(FAKE_SIMULATOR.parent / "recorded")  # its chunk logs
    return root


def add_config_lines(root: Path, config: str, *lines: str) -> None:
    path = root / "gpu-simulator/gpgpu-sim/configs/tested-cfgs" / config / "gpgpusim.config"
    path.write_text(path.read_text() + "\n" + "\n".join(lines) + "\n")


def store_trace(service: Cascade, client: TestClient, trace_id: str, directory: Path, arch: str) -> None:
    """A ready trace whose files are in the object store, as an upload leaves it; unlike an
    upload it checks nothing, so a test can store what validation would refuse (a file that
    went missing, a relabelled binary version)."""

    async def put() -> None:
        files = []
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            relative = path.relative_to(directory).as_posix()

            async def content(p: Path = path):  # type: ignore[no-untyped-def]
                yield p.read_bytes()

            stored = await service.objects.put(f"accelsim-traces/{trace_id}/{relative}", content())
            files.append(ev.StoredFile(relative, stored.size, stored.digest))
        entries = parse_kernelslist((directory / "kernelslist.g").read_text())
        kernels = sum(isinstance(e, KernelLaunch) for e in entries)
        at = datetime.now(UTC)
        for event in (
            ev.TraceUploadStarted(id=uuid.uuid4().hex, at=at, trace_id=trace_id, content_type="application/x-tar"),
            ev.TraceFilesStored(id=uuid.uuid4().hex, at=at, trace_id=trace_id, files=files),
            ev.TraceReady(
                id=uuid.uuid4().hex, at=at, trace_id=trace_id, trace_gpu_arch=arch, kernel_count=kernels,
                bytes=sum(f.bytes for f in files), suggested_sim_config=None, has_real_timing=False, has_step_timeline=False,
            ),
        ):
            await service.append(event)

    client.portal.call(put)  # type: ignore[union-attr]


def relabel(source: Path, target: Path, binary_version: int) -> Path:
    """A copy of a plain-text trace whose kernels claim another `-binary version`."""
    shutil.copytree(source, target)
    for kernel in target.glob("*.traceg"):
        kernel.write_text(kernel.read_text().replace("-binary version = 61", f"-binary version = {binary_version}"))
    return target


def create_run(client: TestClient, trace_id: str, config: str, count: int = 1, *, fresh: bool = False) -> dict:  # type: ignore[type-arg]
    """A run of `count` sims of the trace on `config`; `fresh` ones all simulate (else sims alike
    simulate once, the others taking the result: cascade_sim/result_cache.py)."""
    entry = {"gpu_config": config, "count": count, **({"fresh": True} if fresh else {})}
    response = client.post("/api/runs", json={"trace_id": trace_id, "entries": [entry]})
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def start_run(client: TestClient, trace_id: str, config: str = "SM61_TITANX", **asked: object) -> str:
    """The id of a new run of one sim of the trace on `config`, its entry asking for what
    else is `asked` (split, reuse), as the run echoes it."""
    entry = {"gpu_config": config, "count": 1, **asked}
    response = client.post("/api/runs", json={"trace_id": trace_id, "entries": [entry]})
    assert response.status_code == 201, response.text
    assert response.json()["entries"] == [entry]
    return response.json()["id"]  # type: ignore[no-any-return]


def run_kernels(client: TestClient, run_id: str) -> list[dict]:  # type: ignore[type-arg]
    return client.get(f"/api/runs/{run_id}/kernels").json()  # type: ignore[no-any-return]


def simulated_trace(client: TestClient, run_id: str) -> dict[str, Any]:
    """The run's Perfetto trace without its wall-clock process: what the simulator computed,
    the same however the sim was run."""
    trace: dict[str, Any] = client.get(f"/api/runs/{run_id}/perfetto").json()
    wall = {e["pid"] for e in trace["traceEvents"] if e.get("name") == "process_name" and e["args"]["name"] == "Wall clock (runners)"}
    return {**trace, "traceEvents": [e for e in trace["traceEvents"] if e["pid"] not in wall]}


def wait_run(client: TestClient, run_id: str, timeout: float = 60, until: str = "finished") -> dict:  # type: ignore[type-arg]
    """The run once it is finished (or, with `until="running"`, once a sim runs a kernel)."""
    deadline = time.monotonic() + timeout
    while True:
        run = client.get(f"/api/runs/{run_id}").json()
        if until == "finished" and run["state"] != "active":
            return run  # type: ignore[no-any-return]
        if until == "running" and any(s["state"] == "running" and s["current_kernel"] for s in run["sims"]):
            return run  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, run
        time.sleep(0.1)


@contextmanager
def worker(nats_url: str, accelsim_dir: Path, work_dir: Path, *, slots: int = 1, lease_s: float = 30, **env: str) -> Iterator[subprocess.Popen[str]]:
    """A `cascade worker` process on the given NATS, stopped (SIGKILL if need be) at the end.
    The URL, which carries the server's password, is in its environment: a command line is
    there for every local user to read."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cascade_cli", "worker", "--accelsim-dir", str(accelsim_dir),
         "--slots", str(slots), "--work-dir", str(work_dir)],
        env={**os.environ, "CASCADE_NATS_URL": nats_url, "CASCADE_RUNNER_LEASE": str(lease_s), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process
    finally:
        stop(process)
        process.communicate()


def process_exists(pid: int) -> bool:
    """True while the process exists, zombies included: a stopped sim must be reaped."""
    return Path(f"/proc/{pid}").exists()
