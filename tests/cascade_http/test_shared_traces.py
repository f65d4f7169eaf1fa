"""`POST /api/traces/shared` against a real nats-server and DuckDB, on copies of the real
traces in a folder the server allows: the trace is read where it lies and comes out ready,
its files' digests in the log and nothing in the object store; a path outside the roots, a
`..` out of one, a symbolic link out of one or to a folder, and files that are no trace are
refused with nothing appended."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_app.shared_traces import allowed_folder
from cascade_core import events as ev
from cascade_core.object_names import digest
from cascade_core.refusals import Invalid
from cascade_nats import subjects
from tests.cascade_http.conftest import service
from tests.cascade_http.trace_archives import history, stored
from tests.support import TRACES


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    root = tmp_path / "shared"
    root.mkdir()
    shutil.copytree(TRACES / "combo-vec-mm-xz", root / "combo")
    return root


@pytest.fixture
def settings(settings: Settings, shared: Path) -> Settings:
    settings.shared_trace_roots = str(shared)
    return settings


def add(client: TestClient, path: Path | str, trace_id: str | None = None) -> tuple[int, dict]:  # type: ignore[type-arg]
    response = client.post("/api/traces/shared", json={"path": str(path), **({"id": trace_id} if trace_id else {})})
    return response.status_code, response.json()


def stored_files(client: TestClient, trace_id: str) -> list[ev.StoredFile]:
    async def read() -> list[ev.StoredFile]:
        items = [s.event async for s in service(client).store.read(subjects.trace(trace_id))]
        return [f for e in items if isinstance(e, ev.TraceFilesStored) for f in e.files]

    return client.portal.call(read)  # type: ignore[union-attr,no-any-return]


def test_a_trace_is_added_where_it_lies_with_its_digests_and_nothing_stored(client: TestClient, shared: Path) -> None:
    status, trace = add(client, shared / "combo", "combo")
    assert status == 201, trace
    assert (trace["id"], trace["state"], trace["kernel_count"], trace["trace_gpu_arch"]) == ("combo", "ready", 3, "sm_61")
    assert trace["suggested_sim_config"] == "SM61_TITANX"
    assert history(client, "combo") == ["trace.path_added.v1", "trace.files_stored.v1", "trace.kernels_listed.v1", "trace.ready.v1"]
    folder = shared / "combo"
    expected = {p.name: (p.stat().st_size, digest(hashlib.sha256(p.read_bytes()))) for p in folder.iterdir()}
    assert {f.path: (f.bytes, f.digest) for f in stored_files(client, "combo")} == expected
    assert stored(client) == {}
    assert [t["id"] for t in client.get("/api/traces").json()] == ["combo"]
    # The id is taken now; a new one is made without ?id.
    assert add(client, folder, "combo") == (409, {"detail": "trace combo already exists"})
    status, other = add(client, str(folder) + "/")
    assert status == 201 and other["id"] != "combo"


def test_a_link_inside_the_root_to_a_file_is_read_through(client: TestClient, shared: Path) -> None:
    folder = shared / "linked"
    folder.mkdir()
    (folder / "kernelslist.g").symlink_to(shared / "combo" / "kernelslist.g")
    for name in ("kernel-1.traceg", "kernel-2.traceg.xz"):
        (folder / name).symlink_to(Path("..") / "combo" / name)
    status, trace = add(client, folder, "linked")
    assert (status, trace["state"], trace["kernel_count"]) == (201, "ready", 3)


def test_paths_out_of_the_roots_are_refused_with_nothing_appended(client: TestClient, shared: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    shutil.copytree(TRACES / "vectoradd-100-32", outside)
    refused = {
        "outside": outside,
        "dots": f"{shared}/../outside",
        "relative": "combo",
    }
    (shared / "to-outside").symlink_to(outside)
    refused["linked-folder"] = shared / "to-outside"
    escaping = shared / "escaping"
    shutil.copytree(TRACES / "vectoradd-100-32", escaping)
    (escaping / "kernel-1.traceg").unlink()
    (escaping / "kernel-1.traceg").symlink_to(outside / "kernel-1.traceg")
    refused["link-out"] = escaping
    dir_link = shared / "dir-link"
    shutil.copytree(TRACES / "vectoradd-100-32", dir_link)
    (dir_link / "more").symlink_to(shared / "combo")
    refused["link-to-folder"] = dir_link
    with_fifo = shared / "with-fifo"
    shutil.copytree(TRACES / "vectoradd-100-32", with_fifo)
    os.mkfifo(with_fifo / "pipe")
    refused["fifo"] = with_fifo
    details = {}
    for trace_id, path in refused.items():
        status, answer = add(client, path, trace_id)
        assert status == 422, (trace_id, answer)
        details[trace_id] = answer["detail"]
        assert history(client, trace_id) == []
    assert details["outside"] == f"{outside} is not under a shared trace root of this server ({shared})"
    assert details["dots"] == f"{shared}/../outside is not under a shared trace root of this server ({shared})"
    assert details["relative"].startswith("'combo' is not an absolute path")
    assert details["linked-folder"].startswith(f"{shared}/to-outside is not under a shared trace root")
    assert details["link-out"] == (
        f"{escaping} is not a trace Cascade can run: kernel-1.traceg is a symbolic link out of the shared trace root, "
        f"to {outside}/kernel-1.traceg"
    )
    assert details["link-to-folder"].endswith(f"more is a symbolic link to {shared}/combo, which is no regular file")
    assert details["fifo"] == f"{with_fifo} is not a trace Cascade can run: pipe is neither a regular file nor a folder"
    assert stored(client) == {}


def test_files_that_are_no_trace_are_refused_as_an_upload_would_be(client: TestClient, shared: Path) -> None:
    broken = shared / "broken"
    shutil.copytree(TRACES / "combo-vec-mm-xz", broken)
    (broken / "kernel-2.traceg.xz").unlink()
    status, answer = add(client, broken, "broken")
    assert status == 422
    assert answer["detail"] == (
        f"{broken} is not a trace Cascade can run: kernelslist.g line 7 names 'kernel-2.traceg.xz', which is not in the trace"
    )
    assert history(client, "broken") == []
    assert add(client, shared / "combo", "-bad")[0] == 422


def test_a_server_allows_no_shared_path_unless_its_operator_says_so() -> None:
    with pytest.raises(Invalid) as refused:
        allowed_folder("/work/shared/accelsim/traces/combo-vec-mm-xz", [])
    assert "--shared-trace-root DIR" in refused.value.detail and "CASCADE_SHARED_TRACE_ROOTS" in refused.value.detail


def test_openapi_documents_the_shared_trace_route(client: TestClient) -> None:
    post = client.get("/api/openapi.json").json()["paths"]["/api/traces/shared"]["post"]
    assert set(post["requestBody"]["content"]) == {"application/json"}
    assert {"201", "400", "401", "409", "413", "422"} <= set(post["responses"])
    assert "--shared-trace-root" in post["description"]
