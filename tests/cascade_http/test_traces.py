"""Trace routes against a real nats-server and DuckDB: the shared traces upload and come out
ready, optional files set their fields, every kind of bad input ends in its own error with
nothing left in the object store, and list, get and delete behave as the reference says."""

from __future__ import annotations

import io
import json
import tarfile
from datetime import UTC, datetime
from importlib import resources

import pytest
from starlette.testclient import TestClient

from cascade_core import events as ev
from tests.cascade_http.conftest import service
from tests.cascade_http.trace_archives import (
    chunk_messages,
    files_of,
    history,
    member,
    stored,
    tar_of,
    upload,
)

VEC = ("_Z6vecAddIfEvPT_S1_S1_i", "1x1x1", "1024x1x1", "kernel-1.traceg")
MM = ("_Z8mult_gpuIfEvPT_S1_S1_ii", "1x1x1", "32x32x1", "kernel-1.traceg")
MM_XZ = (*MM[:3], "kernel-1.traceg.xz")
KERNELS = {
    "vectoradd-100-32": [VEC],
    "matrixmul-32-32": [MM],
    "matrixmul-x40": [MM_XZ] * 40,
    "combo-vec-mm-xz": [VEC, (*MM[:3], "kernel-2.traceg.xz"), VEC],
}
# (compression, top folder): every compression, both layouts
VARIANTS = [("tar", None), ("tar", "trace"), ("gzip", "trace"), ("xz", None)]



def assert_nothing_stored(client: TestClient) -> None:
    assert stored(client) == {}
    assert chunk_messages(client) == 0


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_shared_traces_upload_ready_with_arch_kernels_and_files(client: TestClient, name: str) -> None:
    files = files_of(name)
    for compression, top in VARIANTS:
        trace_id = f"{name}.{compression}.{top or 'root'}"
        response = upload(client, tar_of(files, top=top, compression=compression), trace_id, compression)
        assert response.status_code == 202, response.text
        trace = response.json()
        assert (trace["id"], trace["state"], trace["error"]) == (trace_id, "ready", None)
        assert trace["trace_gpu_arch"] == "sm_61"
        assert trace["suggested_sim_config"] == "SM61_TITANX"
        assert trace["kernel_count"] == len(KERNELS[name])
        assert trace["bytes"] == sum(len(data) for data in files.values())

        detail = client.get(f"/api/traces/{trace_id}").json()
        assert [(k["name"], k["grid"], k["block"], k["file"]) for k in detail["kernels"]] == KERNELS[name]
        assert [k["uid"] for k in detail["kernels"]] == list(range(1, len(KERNELS[name]) + 1))
        expected_files = [{"key": f"accelsim-traces/{trace_id}/{p}", "bytes": len(d)} for p, d in sorted(files.items())]
        assert detail["metadata"] == {
            "status": "ok",
            "files": expected_files,
            "trace_gpu_arch": "sm_61",
            "suggested_sim_config": "SM61_TITANX",
        }
        assert history(client, trace_id) == ["trace.upload_started.v1", "trace.files_stored.v1", "trace.kernels_listed.v1", "trace.ready.v1"]
        in_store = {k: v for k, v in stored(client).items() if k.startswith(f"accelsim-traces/{trace_id}/")}
        assert in_store == {f["key"]: f["bytes"] for f in expected_files}


def test_stored_files_read_back_byte_for_byte(client: TestClient) -> None:
    files = files_of("combo-vec-mm-xz")
    assert upload(client, tar_of(files, top="combo", compression="xz"), "combo", "xz").json()["state"] == "ready"

    async def read_all() -> dict[str, bytes]:
        objects = service(client).objects
        return {name: await objects.read_all(f"accelsim-traces/combo/{name}") for name in files}

    assert client.portal.call(read_all) == files  # type: ignore[union-attr]


TIMELINE = resources.files("cascade_sim.sample_data").joinpath("opt125m_h100_step_timeline.json").read_bytes()
REAL_TIMING = b'kernel_id,kernel_name,duration_ns\n2,"mult_gpu<float>(float*, float*, float*, int, int)",3071.5\n1,_Z8mult_gpuIfEvPT_S1_S1_ii,2950\n'
CASCADE_JSON = json.dumps({"model": "facebook/opt-125m", "layers": ["attn", 3], "source_gpu": "H100", "note": "kept"}).encode()


def test_optional_files_set_their_fields(client: TestClient) -> None:
    files = files_of("matrixmul-x40")  # 40 kernels: the sample timeline links uids 1 to 6
    extra = {"step_timeline.json": TIMELINE, "real_timing.csv": REAL_TIMING, "cascade.json": CASCADE_JSON}
    trace = upload(client, tar_of(files | extra, top="x40", compression="gzip"), "x40", "gzip").json()
    assert trace["state"] == "ready", trace["error"]
    assert (trace["has_step_timeline"], trace["has_real_timing"]) == (True, True)
    assert (trace["model"], trace["layers"], trace["source_gpu"]) == ("facebook/opt-125m", ["attn", 3], "H100")
    with service(client).reader() as con:
        rows = con.execute("SELECT kernel_id, kernel_name, duration_ns FROM trace_real_timing WHERE trace_id = 'x40' ORDER BY kernel_id").fetchall()
    assert rows == [(1, "_Z8mult_gpuIfEvPT_S1_S1_ii", 2950.0), (2, "mult_gpu<float>(float*, float*, float*, int, int)", 3071.5)]
    keys = [f["key"] for f in client.get("/api/traces/x40").json()["metadata"]["files"]]
    assert "accelsim-traces/x40/step_timeline.json" in keys

    plain = upload(client, tar_of(files), "plain").json()
    assert (plain["has_step_timeline"], plain["has_real_timing"], plain["model"], plain["layers"]) == (False, False, None, [])


def test_bad_optional_files_fail_the_trace_naming_the_problem(client: TestClient) -> None:
    files = files_of("combo-vec-mm-xz")  # 3 kernels
    cases = {
        "step_timeline.json": (TIMELINE, "step_timeline.json: steps[1].kernels[9].trace_kernel_uid must be between 1 and 3 (the trace's kernel count), got 4"),
        "real_timing.csv": (b"kernel_id,kernel_name,duration_ns\n1,k,12\n2,k,fast\n", "real_timing.csv line 3: duration_ns 'fast'"),
        "cascade.json": (b'{"model": 125}', "cascade.json: 'model' must be a string, not an integer"),
    }
    for i, (name, (data, error)) in enumerate(cases.items()):
        trace = upload(client, tar_of(files | {name: data}), f"bad-{i}").json()
        assert trace["state"] == "failed" and error in trace["error"], (name, trace["error"])
    assert_nothing_stored(client)


NESTED = b"[" * 20_000 + b"]" * 20_000  # the cascade.json: 40 KB, and a RecursionError to decode


def test_optional_files_past_their_bounds_fail_the_trace_naming_the_bound(client: TestClient) -> None:
    files = files_of("combo-vec-mm-xz")
    too_deep = "it nests arrays or objects inside one another too deeply to be read; flatten it"
    many_layers = json.dumps({"model": "m", "layers": ["\u0001" * 1000] * 100}).encode()  # 600 KB once escaped
    cases = [
        ("cascade.json", NESTED, f"cascade.json: {too_deep}"),
        ("step_timeline.json", b'{"note": ' + NESTED + b"}", f"step_timeline.json: {too_deep}"),
        ("real_timing.csv", b"kernel_id,kernel_name,duration_ns\n1," + b"k" * 200_000 + b",12\n", "real_timing.csv line 2: field larger than field limit"),
        ("cascade.json", many_layers, "cascade.json: 'model', 'layers' and 'source_gpu' come to 600,"),
    ]  # fmt: skip
    for i, (name, data, error) in enumerate(cases):
        answer = upload(client, tar_of(files | {name: data}), f"bound-{i}")
        assert answer.status_code == 202, answer.text
        trace = answer.json()
        assert trace["state"] == "failed" and error in trace["error"], (name, trace["error"])
        # Nothing half-made: the failed trace is deleted like any other, and its id taken again.
        assert client.delete(f"/api/traces/bound-{i}").status_code == 204
        assert upload(client, tar_of(files | {name: data}), f"bound-{i}").json()["error"] == trace["error"]
    assert_nothing_stored(client)
    layers = json.dumps({"layers": list(range(1000))}).encode()
    assert upload(client, tar_of(files | {"cascade.json": layers}), "fine").json()["state"] == "ready"


VEC_FILES = files_of("vectoradd-100-32")
VEC_HEADER = VEC_FILES["kernel-1.traceg"]


def _tar_members(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return out.getvalue()


def _with(extra: tarfile.TarInfo) -> bytes:
    regular = [(member(n, data=d), d) for n, d in VEC_FILES.items()]
    return _tar_members(*regular, (extra, b""))


def _corrupt_xz() -> bytes:
    data = bytearray(files_of("combo-vec-mm-xz")["kernel-2.traceg.xz"])
    data[len(data) // 2] ^= 0xFF
    return bytes(data)


def _pax_sized(size: str) -> bytes:
    """The vector add trace and a member whose pax header gives `size` as its size."""
    extra = member("kernel-9.traceg", data=b"x")
    extra.pax_headers = {"size": size}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in VEC_FILES.items():
            tar.addfile(member(name, data=data), io.BytesIO(data))
        tar.addfile(extra, io.BytesIO(b"x"))
    return out.getvalue()


def _two_archs() -> dict[str, bytes]:
    other = VEC_HEADER.replace(b"-binary version = 61", b"-binary version = 70")
    return {"kernelslist.g": b"kernel-1.traceg\nkernel-2.traceg\n", "kernel-1.traceg": VEC_HEADER, "kernel-2.traceg": other}


WHOLE = tar_of(VEC_FILES)


def _without_end(archive: bytes) -> bytes:
    """The archive cut right after its last file: no end-of-archive block."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        last = tar.getmembers()[-1]
    return archive[: last.offset_data + last.size + -last.size % 512]


BAD_UPLOADS: dict[str, tuple[bytes, str, str]] = {
    "not a tar": (b"hello, this is not a tar archive at all\n" * 30, "tar", "the upload is not a tar archive"),
    "gzip said, tar sent": (WHOLE, "gzip", "the upload is not gzip data"),
    "tar said, gzip sent": (tar_of(VEC_FILES, compression="gzip"), "tar", "it looks gzip-compressed, so send it with Content-Type application/gzip"),
    "truncated inside a file": (WHOLE[:1500], "tar", "the archive is truncated: it ends inside 'kernel-1.traceg' (988 of 12624 bytes present)"),
    "truncated between files": (_without_end(WHOLE), "tar", "the archive is truncated: it ends after 'kernelslist.g' without the end-of-archive block"),
    "truncated gzip": (tar_of(VEC_FILES, compression="gzip")[:-20], "gzip", "the upload is truncated"),
    "truncated xz": (tar_of(VEC_FILES, compression="xz")[:-30], "xz", "the upload is truncated"),
    "missing kernelslist.g": (tar_of({"kernel-1.traceg": VEC_HEADER}), "tar", "the archive has no kernelslist.g at its root"),
    "kernelslist.g too deep": (
        tar_of({"sub/kernelslist.g": VEC_FILES["kernelslist.g"], "kernel-1.traceg": VEC_HEADER}),
        "tar",
        "no kernelslist.g at its root or under its one top folder (found sub/kernelslist.g)",
    ),
    "kernel file missing": (
        tar_of({"kernelslist.g": VEC_FILES["kernelslist.g"] + b"kernel-2.traceg\n", "kernel-1.traceg": VEC_HEADER}),
        "tar",
        "kernelslist.g line 5 names 'kernel-2.traceg', which is not in the trace",
    ),
    "no binary version": (
        tar_of(VEC_FILES | {"kernel-1.traceg": VEC_HEADER.replace(b"-binary version = 61\n", b"")}),
        "tar",
        "kernel-1.traceg: header has no '-binary version' line",
    ),
    "two archs": (tar_of(_two_archs()), "tar", "kernel-1.traceg is sm_61 but kernel-2.traceg is sm_70"),
    "corrupt xz": (tar_of(files_of("combo-vec-mm-xz") | {"kernel-2.traceg.xz": _corrupt_xz()}), "tar", "kernel-2.traceg.xz is not valid xz data"),
    "cut xz": (
        tar_of(files_of("combo-vec-mm-xz") | {"kernel-2.traceg.xz": files_of("combo-vec-mm-xz")["kernel-2.traceg.xz"][:-40]}),
        "tar",
        "kernel-2.traceg.xz is truncated",
    ),
    "dot-dot": (_with(member("../escape", data=b"")), "tar", "archive member '../escape' is not allowed"),
    "absolute": (_with(member("/etc/cron.d/x")), "tar", "archive member '/etc/cron.d/x' is not allowed"),
    "symlink": (_with(member("kernel-9.traceg", tarfile.SYMTYPE, linkname="/etc/passwd")), "tar", "'kernel-9.traceg' is a symbolic link"),
    "hard link": (_with(member("again.traceg", tarfile.LNKTYPE, linkname="kernel-1.traceg")), "tar", "'again.traceg' is a hard link"),
    "device": (_with(member("null", tarfile.CHRTYPE)), "tar", "'null' is a character device"),
    "fifo": (_with(member("pipe", tarfile.FIFOTYPE)), "tar", "'pipe' is a fifo"),
    "pax size in other digits": (
        _pax_sized("²"), "tar", "the archive is damaged: the pax extended header after 'kernelslist.g' gives the size '²'"
    ),
    "pax size past int's digits": (
        _pax_sized("9" * 5000), "tar", f"the archive is damaged: the pax extended header after 'kernelslist.g' gives the size '{'9' * 40}'"
    ),
}


def test_each_bad_upload_fails_with_its_error_and_stores_nothing(client: TestClient) -> None:
    for i, (case, (body, compression, error)) in enumerate(BAD_UPLOADS.items()):
        response = upload(client, body, f"bad-{i}", compression)
        assert response.status_code == 202, (case, response.text)
        trace = response.json()
        assert trace["state"] == "failed", case
        assert error in trace["error"], (case, trace["error"])
        detail = client.get(f"/api/traces/bad-{i}").json()
        assert detail["metadata"]["files"] == [] and detail["kernels"] == [], case
        assert_nothing_stored(client)


def test_requests_refused_at_once_store_nothing(client: TestClient) -> None:
    body = tar_of(VEC_FILES)
    for bad_id in ("-dash", "a" * 65, "sp ace", "sl/ash", "ünï"):
        response = upload(client, body, bad_id)
        assert response.status_code == 422, bad_id
        assert response.json()["detail"].startswith("trace id ") and "is not valid" in response.json()["detail"]
    refused = client.post("/api/traces?id=demo", content=body, headers={"Content-Type": "application/zip"})
    assert refused.status_code == 415
    assert refused.json() == {
        "detail": "Content-Type 'application/zip' is not a trace archive; send a tar stream as application/x-tar, application/gzip or application/x-xz"
    }
    assert client.post("/api/traces?id=demo", content=body).status_code == 415
    service(client).settings.max_upload_bytes = len(body) - 1
    response = upload(client, body, "demo")
    assert response.status_code == 413
    assert response.json()["detail"] == f"the upload is {len(body)} bytes, over this server's limit of {len(body) - 1} bytes (CASCADE_MAX_UPLOAD_BYTES)"
    assert client.get("/api/traces").json() == []
    assert history(client, "demo") == []
    assert_nothing_stored(client)


def test_a_taken_id_is_refused_and_a_deleted_ones_id_is_free_again(client: TestClient) -> None:
    body = tar_of(VEC_FILES)
    assert upload(client, body, "demo").json()["state"] == "ready"
    before = stored(client)
    response = upload(client, tar_of(files_of("matrixmul-32-32")), "demo")
    assert (response.status_code, response.json()) == (409, {"detail": "trace demo already exists"})
    assert stored(client) == before
    assert client.delete("/api/traces/demo").status_code == 204
    again = upload(client, tar_of(files_of("matrixmul-32-32")), "demo").json()
    assert again["state"] == "ready" and again["kernel_count"] == 1
    assert client.get("/api/traces/demo").json()["kernels"][0]["name"] == MM[0]


def test_generated_ids(client: TestClient) -> None:
    first, second = (upload(client, tar_of(VEC_FILES), None).json() for _ in range(2))
    assert first["id"] != second["id"]
    assert all(t["id"].startswith("trace-") and t["state"] == "ready" for t in (first, second))


def test_layouts_root_one_top_folder_and_subfolders(client: TestClient) -> None:
    # A root layout whose first entry is a subfolder looks like a top folder at first.
    configs = {"configs/gpgpusim.config": b"-gpgpu_n_clusters 28\n", "configs/deep/x.icnt": b"icnt\n"}
    body = _tar_members(
        (member("configs/", tarfile.DIRTYPE), b""),
        *[(member(n, data=d), d) for n, d in configs.items()],
        *[(member(n, data=d), d) for n, d in VEC_FILES.items()],
    )
    trace = upload(client, body, "subdirs").json()
    assert trace["state"] == "ready", trace["error"]
    keys = [f["key"] for f in client.get("/api/traces/subdirs").json()["metadata"]["files"]]
    assert keys == [f"accelsim-traces/subdirs/{p}" for p in sorted([*configs, *VEC_FILES])]
    assert set(stored(client)) == set(keys)

    # Under one top folder with subfolders of its own, entries as `tar -cf t.tar ./demo` writes them.
    nested = {f"./demo/{n}": d for n, d in {**configs, **VEC_FILES}.items()}
    trace = upload(client, _tar_members(*[(member(n, data=d), d) for n, d in nested.items()]), "nested").json()
    assert trace["state"] == "ready", trace["error"]
    keys = [f["key"] for f in client.get("/api/traces/nested").json()["metadata"]["files"]]
    assert keys == [f"accelsim-traces/nested/{p}" for p in sorted([*configs, *VEC_FILES])]


def test_a_later_file_of_the_same_path_replaces_the_earlier(client: TestClient) -> None:
    broken = VEC_HEADER.replace(b"-binary version = 61\n", b"")
    body = _tar_members(
        (member("kernel-1.traceg", data=broken), broken), *[(member(n, data=d), d) for n, d in VEC_FILES.items()]
    )
    trace = upload(client, body, "twice").json()
    assert trace["state"] == "ready" and trace["bytes"] == sum(map(len, VEC_FILES.values()))
    assert len(stored(client)) == 2


def test_list_is_newest_first_and_leaves_out_deleted(client: TestClient) -> None:
    for trace_id in ("first", "second", "third"):
        upload(client, tar_of(VEC_FILES), trace_id)
    upload(client, b"not a tar" * 100, "failed-one")
    assert [t["id"] for t in client.get("/api/traces").json()] == ["failed-one", "third", "second", "first"]
    client.delete("/api/traces/second")
    assert [t["id"] for t in client.get("/api/traces").json()] == ["failed-one", "third", "first"]


def test_get_unknown_is_404(client: TestClient) -> None:
    response = client.get("/api/traces/nope")
    assert (response.status_code, response.json()) == (404, {"detail": "trace nope not found"})


def _append(client: TestClient, *events: ev.Event) -> None:
    for event in events:
        client.portal.call(service(client).append, event)  # type: ignore[union-attr]


def test_delete_removes_files_keeps_events_and_refuses_what_is_in_use(client: TestClient) -> None:
    upload(client, tar_of(files_of("combo-vec-mm-xz")), "demo")
    upload(client, tar_of(VEC_FILES), "other")
    at = datetime.now(UTC)
    _append(
        client,
        ev.RunCreated(
            id="run-1.created", at=at, run_id="run-1", trace_id="demo", entries=[ev.ConfigCount(gpu_config="SM61_TITANX", count=1)],
            sims=[ev.SimSpec(sim_id="sim-1", gpu_config="SM61_TITANX", replica=0)], kernels_total=3,
        ),
    )
    response = client.delete("/api/traces/demo")
    assert (response.status_code, response.json()) == (409, {"detail": "trace demo is used by active run run-1"})
    _append(client, ev.RunCancelRequested(id="run-1.cancel", at=datetime.now(UTC), run_id="run-1"))

    assert client.delete("/api/traces/demo").status_code == 204
    assert client.get("/api/traces/demo").status_code == 404
    assert [t["id"] for t in client.get("/api/traces").json()] == ["other"]
    assert all(key.startswith("accelsim-traces/other/") for key in stored(client))
    assert history(client, "demo")[-1] == "trace.deleted.v1"
    assert client.delete("/api/traces/demo").status_code == 404

    sample = ev.TraceUploadStarted(id="s.started", at=datetime.now(UTC), trace_id="sample-a", content_type="application/x-tar", sample=True)
    _append(client, sample)
    assert client.delete("/api/traces/sample-a").status_code == 204  # tests/cascade_sim/test_samples.py: with its runs


def test_every_trace_route_needs_the_token(client: TestClient) -> None:
    bare = {"Authorization": ""}
    routes = [("POST", "/api/traces?id=x"), ("GET", "/api/traces"), ("GET", "/api/traces/x"), ("DELETE", "/api/traces/x"), ("PUT", "/api/traces/x/real-timing")]
    for method, path in routes:
        response = client.request(method, path, headers=bare, content=b"" if method in ("POST", "PUT") else None)
        assert response.status_code == 401, (method, path)
        assert "detail" in response.json()
    wrong = client.get("/api/traces", headers={"Authorization": "Bearer wrong"})
    assert (wrong.status_code, wrong.json()) == (401, {"detail": "Invalid token"})


def test_openapi_documents_the_trace_routes(client: TestClient) -> None:
    paths = client.get("/api/openapi.json").json()["paths"]
    post = paths["/api/traces"]["post"]
    assert set(post["requestBody"]["content"]) >= {"application/x-tar", "application/gzip", "application/x-xz"}
    assert {"202", "401", "409", "413", "415", "422"} <= set(post["responses"])
    assert set(paths["/api/traces"]) == {"get", "post"}
    assert set(paths["/api/traces/{trace_id}"]) == {"get", "delete"}
    put = paths["/api/traces/{trace_id}/real-timing"]["put"]
    assert set(put["requestBody"]["content"]) == {"text/csv", "text/plain", "application/octet-stream"}
    assert {"200", "400", "401", "404", "409", "413", "422"} <= set(put["responses"])
    assert "204" in paths["/api/traces/{trace_id}"]["delete"]["responses"]
