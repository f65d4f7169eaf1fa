"""Runs of a trace added from a shared path, on the runner in `serve` and the fake simulator:
the runner reads the files where they lie (its trace directory links to them), refuses a file
changed since the trace was added with the digest it had and the one it has, and says so when
it cannot see the path."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from starlette.testclient import TestClient

from cascade_core.object_names import digest
from cascade_sim.trace_cache import COMPLETE
from tests.cascade_http.trace_archives import chunk_messages, stored
from tests.cascade_sim.test_runner import serve
from tests.cascade_sim.world import accelsim_tree, create_run, wait_run
from tests.support import TRACES


def added(client: TestClient, folder: Path, trace_id: str, *, copy: bool = False) -> dict:  # type: ignore[type-arg]
    response = client.post("/api/traces/shared", json={"path": str(folder), "id": trace_id, "copy": copy})
    assert response.status_code == 201, response.text
    return client.get(f"/api/traces/{trace_id}").json()  # type: ignore[no-any-return]


@contextlib.contextmanager
def serving_shared(tmp_path: Path, nats_url: str, folder: Path) -> Iterator[TestClient]:
    """`serve` with `folder`'s parent as its shared trace root, the combo trace copied into `folder`."""
    shutil.copytree(TRACES / "combo-vec-mm-xz", folder)
    with serve(tmp_path, nats_url, accelsim_tree(tmp_path / "accel-sim"), shared_trace_roots=str(folder.parent)) as client:
        yield client


def test_runs_read_the_shared_trace_in_place_and_a_changed_file_fails_with_both_digests(tmp_path: Path, nats_url: str) -> None:
    shared = tmp_path / "shared"
    folder = shared / "combo"
    with serving_shared(tmp_path, nats_url, folder) as client:
        added(client, folder, "combo")
        run = wait_run(client, create_run(client, "combo", "SM61_TITANX")["id"])
        assert run["state"] == "succeeded", run
        assert [(s["kernels_done"], s["error"]) for s in run["sims"]] == [(3, None)]
        # The runner's copy of the trace is links to the shared files: nothing was copied.
        linked = [p for p in (tmp_path / "data").rglob("kernel-1.traceg") if (p.parent / COMPLETE).exists()]
        assert len(linked) == 1 and linked[0].is_symlink() and linked[0].resolve() == folder / "kernel-1.traceg"
        # Its Perfetto trace's memcpys come from the kernelslist.g where it lies (none is stored).
        events = client.get(f"/api/runs/{run['id']}/perfetto").json()["traceEvents"]
        assert [e["args"]["line"] for e in events if e["ph"] == "i"] == [1, 2, 3, 5, 6]

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
        assert sim["error"].endswith(
            "cannot see: mount it at that path here, or add it again with a copy (cascade trace add --path DIR --copy), "
            "or upload it (cascade trace upload), so that runners fetch it"
        )


def test_a_trace_added_with_a_copy_is_fetched_by_a_runner_that_cannot_see_its_path(tmp_path: Path, nats_url: str) -> None:
    shared = tmp_path / "shared"
    folder = shared / "combo"
    with serving_shared(tmp_path, nats_url, folder) as client:
        added(client, folder, "combo", copy=True)
        # Runners that see the path still read it there, links and not copies.
        run = wait_run(client, create_run(client, "combo", "SM61_TITANX")["id"])
        assert run["state"] == "succeeded", run
        linked = [p for p in (tmp_path / "data").rglob("kernel-1.traceg") if (p.parent / COMPLETE).exists()]
        assert len(linked) == 1 and linked[0].is_symlink()

        # One that cannot (the folder gone from here) fetches the copy, as an upload's.
        moved = shared / "elsewhere"
        folder.rename(moved)
        run = wait_run(client, create_run(client, "combo", "SM61_TITANX", fresh=True)["id"])
        assert run["state"] == "succeeded", run
        assert [(s["kernels_done"], s["error"]) for s in run["sims"]] == [(3, None)]
        fetched = [p for p in (tmp_path / "data").rglob("kernel-1.traceg") if (p.parent / COMPLETE).exists() and not p.is_symlink()]
        assert len(fetched) == 1 and fetched[0].read_bytes() == (moved / "kernel-1.traceg").read_bytes()


def test_a_refused_copy_leaves_nothing_in_the_object_store(tmp_path: Path, nats_url: str) -> None:
    folder = tmp_path / "shared" / "broken"
    with serving_shared(tmp_path, nats_url, folder) as client:
        (folder / "kernelslist.g").write_text("kernel-404.traceg\n")  # names a kernel file the trace lacks
        response = client.post("/api/traces/shared", json={"path": str(folder), "id": "broken", "copy": True})
        assert response.status_code == 422, response.text
        assert client.get("/api/traces/broken").status_code == 404
        assert stored(client) == {} and chunk_messages(client) == 0
