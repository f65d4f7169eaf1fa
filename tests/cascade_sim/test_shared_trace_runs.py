"""Runs of a trace added from a shared path, on the runner in `serve` and the fake simulator:
the runner reads the files where they lie (its trace directory links to them), refuses a file
changed since the trace was added with the digest it had and the one it has, and says so when
it cannot see the path."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from starlette.testclient import TestClient

from cascade_core.object_names import digest
from cascade_sim.trace_cache import COMPLETE
from tests.cascade_sim.test_runner import serve
from tests.cascade_sim.world import accelsim_tree, create_run, wait_run
from tests.support import TRACES


def added(client: TestClient, folder: Path, trace_id: str) -> dict:  # type: ignore[type-arg]
    response = client.post("/api/traces/shared", json={"path": str(folder), "id": trace_id})
    assert response.status_code == 201, response.text
    return client.get(f"/api/traces/{trace_id}").json()  # type: ignore[no-any-return]


def test_runs_read_the_shared_trace_in_place_and_a_changed_file_fails_with_both_digests(tmp_path: Path, nats_url: str) -> None:
    tree = accelsim_tree(tmp_path / "accel-sim")
    shared = tmp_path / "shared"
    folder = shared / "combo"
    shutil.copytree(TRACES / "combo-vec-mm-xz", folder)
    with serve(tmp_path, nats_url, tree, shared_trace_roots=str(shared)) as client:
        added(client, folder, "combo")
        run = wait_run(client, create_run(client, "combo", "SM61_TITANX")["id"])
        assert run["state"] == "succeeded", run
        assert [(s["kernels_done"], s["error"]) for s in run["sims"]] == [(3, None)]
        # The runner's copy of the trace is links to the shared files: nothing was copied.
        linked = [p for p in (tmp_path / "data").rglob("kernel-1.traceg") if (p.parent / COMPLETE).exists()]
        assert len(linked) == 1 and linked[0].is_symlink() and linked[0].resolve() == folder / "kernel-1.traceg"

        kernel = folder / "kernel-1.traceg"
        before = digest(hashlib.sha256(kernel.read_bytes()))
        kernel.write_bytes(kernel.read_bytes() + b"\n")
        run = wait_run(client, create_run(client, "combo", "SM61_TITANX", fresh=True)["id"])
        assert run["state"] == "failed", run
        (sim,) = run["sims"]
        assert sim["error"] == (
            f"trace combo: {kernel} changed since the trace was added: it had digest {before}, it has {digest(hashlib.sha256(kernel.read_bytes()))}; "
            "add it again under another id to run what it holds now"
        )

        shutil.rmtree(folder)
        run = wait_run(client, create_run(client, "combo", "SM61_TITANX", fresh=True)["id"])
        (sim,) = run["sims"]
        assert sim["error"].startswith(f"trace combo lies at {folder}, which this runner (host ")
        assert sim["error"].endswith("cannot see: mount it at that path here, or upload the trace (cascade trace upload) so that runners fetch it")
