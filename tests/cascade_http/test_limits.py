"""Limits on every input, each refusal shown with its status, its message, and nothing stored:
trace uploads that expand too far once decompressed (compression bombs), JSON bodies over
their size, runs of too many sims or too big to record, and two Authorization headers."""

from __future__ import annotations

import gzip
import lzma
import re
import tarfile
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cascade_app.config import ConfigError, resolve
from cascade_core import events as ev
from cascade_core.limits import RATIO_FLOOR, Expansion
from cascade_nats import subjects
from cascade_nats.store import MAX_EVENT_BYTES
from tests.cascade_http import runs_world as w
from tests.cascade_http.asgi import AUTH, call
from tests.cascade_http.conftest import TOKEN, service
from tests.cascade_http.trace_archives import chunk_messages, files_of, history, stored, tar_of, upload

MiB = 1 << 20
VEC_FILES = files_of("vectoradd-100-32")
REFUSED = ["trace.upload_started.v1", "trace.failed.v1", "trace.deleted.v1"]


@pytest.fixture
def accelsim_dir(tmp_path: Path) -> Path:
    return w.reference_tree(tmp_path / "accel-sim")


def last_seq(client: TestClient) -> int:
    return client.portal.call(service(client).store.last_seq)  # type: ignore[union-attr]


def failures(client: TestClient, trace_id: str) -> list[str]:
    """The errors of the trace's failed events."""

    async def read() -> list[str]:
        return [s.event.error async for s in service(client).store.read(subjects.trace(trace_id)) if isinstance(s.event, ev.TraceFailed)]

    return client.portal.call(read)  # type: ignore[union-attr]


def assert_refused_upload(client: TestClient, trace_id: str, detail: str) -> None:
    """The upload was refused with `detail`, kept nothing, and its id is free again."""
    assert history(client, trace_id) == REFUSED
    assert failures(client, trace_id) == [detail]
    assert client.get(f"/api/traces/{trace_id}").status_code == 404
    assert client.get("/api/traces").json() == []
    assert stored(client) == {} and chunk_messages(client) == 0
    again = upload(client, tar_of(VEC_FILES), trace_id)
    assert (again.status_code, again.json()["state"]) == (202, "ready")


# --- decompression -----------------------------------------------------------------------------


def _member(name: str, size: int) -> bytes:
    """A tar header for a regular file of `size` bytes."""
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(tarfile.PAX_FORMAT)


def zeros_archive(codec: str, size: int, count: int = 1) -> bytes:
    """A compressed tar of the vector add trace and `count` files of `size` zero bytes (a
    multiple of 1 MiB): concatenated streams (read as one, as `gzip -d` and `xz -d` do), one
    per MiB, so building even a gigabyte costs no more than compressing one MiB."""
    pack = {"gzip": lambda data: gzip.compress(data, 9), "xz": lambda data: lzma.compress(data, preset=6)}[codec]
    files = b"".join(_member(n, len(d)) + d + bytes(-len(d) % 512) for n, d in VEC_FILES.items())
    one_mib = pack(bytes(MiB))
    zeros = b"".join(pack(_member(f"zeros-{i}.bin", size)) + one_mib * (size // MiB) for i in range(count))
    return pack(files) + zeros + pack(bytes(1024))


def test_the_issues_gigabyte_file_in_a_megabyte_gzip_is_refused_at_its_header(client: TestClient) -> None:
    service(client).settings.max_upload_bytes = 10_000_000
    body = zeros_archive("gzip", 1 << 30)
    assert len(body) < 1_100_000
    response = upload(client, body, "bomb", "gzip")
    detail = (
        "archive member 'zeros-0.bin' is 1073741824 bytes, over this server's limit of 40000000 bytes for a whole "
        "trace once decompressed (CASCADE_MAX_EXPANDED_BYTES)"
    )
    assert (response.status_code, response.json()) == (413, {"detail": detail})
    assert_refused_upload(client, "bomb", detail)


@pytest.mark.parametrize("codec", ["gzip", "xz"])
def test_a_gigabyte_of_zeros_in_small_files_is_refused_soon_past_the_ratio_floor(client: TestClient, codec: str) -> None:
    service(client).settings.max_upload_bytes = 10_000_000
    body = zeros_archive(codec, 8 * MiB, count=128)
    assert len(body) < 1_100_000
    response = upload(client, body, "bomb", codec)
    assert response.status_code == 413
    detail = response.json()["detail"]
    match = re.fullmatch(
        r"the upload expands more than 200-fold once decompressed \((\d+) bytes from its first (\d+)\), over this "
        r"server's limit of 200 \(CASCADE_MAX_EXPANSION_RATIO\); send it as a plain tar, or with each kernel file "
        r"xz-compressed on its own as the tracer writes them",
        detail,
    )
    assert match, detail
    expanded, compressed = map(int, match.groups())
    assert RATIO_FLOOR < expanded <= RATIO_FLOOR + MiB and expanded > 200 * compressed
    assert_refused_upload(client, "bomb", detail)


def test_small_archives_of_zeros_and_big_real_traces_at_gzips_ratio_are_taken(client: TestClient) -> None:
    small = zeros_archive("xz", 8 * MiB)  # 8 MiB from 2 KB: past any ratio, but under the floor
    assert upload(client, small, "zeros", "xz").json()["state"] == "ready"
    # 100 matrix multiply kernels, 18 MB of .traceg text: 58-fold in gzip, past the floor.
    kernel = files_of("matrixmul-32-32")["kernel-1.traceg"]
    files = {"kernelslist.g": b"".join(b"kernel-%d.traceg\n" % i for i in range(1, 101))}
    files |= {f"kernel-{i}.traceg": kernel for i in range(1, 101)}
    body = gzip.compress(tar_of(files), 6)
    assert sum(map(len, files.values())) > RATIO_FLOOR and sum(map(len, files.values())) > 50 * len(body)
    response = upload(client, body, "big", "gzip")
    assert (response.status_code, response.json()["state"], response.json()["kernel_count"]) == (202, "ready", 100)


def test_the_expanded_size_is_capped_at_four_times_the_upload_limit_unless_set(client: TestClient) -> None:
    settings = service(client).settings
    settings.max_upload_bytes = MiB
    files = VEC_FILES | {f"part-{i}.bin": bytes(MiB) for i in range(5)}  # 5 MiB, under the ratio floor
    body = tar_of(files, compression="gzip")
    assert len(body) < MiB
    response = upload(client, body, "parts", "gzip")
    detail = "the upload is over this server's limit of 4194304 bytes (CASCADE_MAX_EXPANDED_BYTES) once decompressed"
    assert (response.status_code, response.json()) == (413, {"detail": detail})
    assert_refused_upload(client, "parts", detail)

    settings.max_expanded_bytes = 8 * MiB
    assert upload(client, body, "parts-2", "gzip").json()["state"] == "ready"


# --- JSON bodies -------------------------------------------------------------------------------


def run_body(*entries: tuple[str, int], trace_id: str = "demo") -> dict[str, object]:
    return {"trace_id": trace_id, "entries": [{"gpu_config": c, "count": n} for c, n in entries]}


def assert_no_run(client: TestClient, seq: int) -> None:
    assert last_seq(client) == seq
    assert client.get("/api/runs").json() == []


def test_a_body_over_the_limit_is_refused_whole_or_streamed_without_being_read(client: TestClient) -> None:
    w.append(client, w.trace_events())
    seq = last_seq(client)
    big = b'{"trace_id": "' + b"x" * MiB + b'", "entries": []}'
    response = client.post("/api/runs", content=big, headers={"Content-Type": "application/json"})
    detail = f"the body is {len(big)} bytes, over this server's limit of 1048576 bytes (CASCADE_MAX_BODY_BYTES)"
    assert (response.status_code, response.json()) == (413, {"detail": detail})

    # A declared length over the limit: refused before any of the body is read.
    pieces = [b"x" * 65536] * 100
    declared = (AUTH, (b"content-type", b"application/json"), (b"content-length", str(100 * 65536).encode()))
    answer = call(client, "POST", "/api/runs", headers=declared, chunks=pieces)
    assert (answer.status, answer.body, answer.read) == (
        413,
        {"detail": "the body is 6553600 bytes, over this server's limit of 1048576 bytes (CASCADE_MAX_BODY_BYTES)"},
        0,
    )
    # No length: read until it is over the limit, and no further.
    answer = call(client, "POST", "/api/runs", headers=declared[:2], chunks=pieces)
    assert (answer.status, answer.body) == (413, {"detail": "the body is over this server's limit of 1048576 bytes (CASCADE_MAX_BODY_BYTES)"})
    assert answer.read == MiB // 65536 + 1
    assert_no_run(client, seq)

    service(client).settings.max_body_bytes = 2 * MiB
    assert client.post("/api/runs", content=big, headers={"Content-Type": "application/json"}).status_code == 422


def test_a_run_of_more_sims_than_the_limit_is_refused(client: TestClient) -> None:
    w.append(client, w.trace_events())
    seq = last_seq(client)
    response = client.post("/api/runs", json=run_body(*[("SM86_RTX3070", 64)] * 100))
    detail = (
        "the run asks for 6400 sims in 100 entries, more than this server's limit of 1024 sims per run "
        "(CASCADE_MAX_SIMS_PER_RUN); split it into smaller runs"
    )
    assert (response.status_code, response.json()) == (422, {"detail": detail})
    response = client.post("/api/runs", json=run_body(*[("SM86_RTX3070", 1)] * 5000))
    assert response.status_code == 422
    assert response.json()["detail"].startswith("the run asks for 5000 sims in 5000 entries, more than")
    # The reference's errors come first.
    response = client.post("/api/runs", json=run_body(*[("SM86_RTX3070", 64)] * 100, trace_id="nope"))
    assert (response.status_code, response.json()) == (404, {"detail": "trace nope not found"})
    assert_no_run(client, seq)

    run = client.post("/api/runs", json=run_body(*[("SM86_RTX3070", 64)] * 16))
    assert run.status_code == 201 and len(run.json()["sims"]) == 1024


def test_a_run_too_big_to_record_is_a_413_and_never_reaches_the_store(client: TestClient) -> None:
    """The last resort, for a server whose sim limit was raised past what one event holds."""
    w.append(client, w.trace_events())
    seq = last_seq(client)
    service(client).settings.max_sims_per_run = 10_000
    response = client.post("/api/runs", json=run_body(*[("SM86_RTX3070", 1)] * 5000))
    assert response.status_code == 413
    assert re.fullmatch(
        rf"the request is too large to record \(run.created.v1 is \d+ bytes, over the {MAX_EVENT_BYTES} limit\); make it smaller",
        response.json()["detail"],
    ), response.text
    assert_no_run(client, seq)


# --- authentication ----------------------------------------------------------------------------


def test_two_authorization_headers_are_refused_even_when_both_are_right(client: TestClient) -> None:
    w.append(client, w.trace_events())
    seq = last_seq(client)
    wrong = (b"authorization", b"Bearer not-the-token")
    detail = {"detail": "2 Authorization headers were sent; send exactly one"}
    for headers in ([AUTH, AUTH], [AUTH, wrong], [wrong, AUTH]):
        answer = call(client, "GET", "/api/runs", headers=headers)
        assert (answer.status, answer.body) == (401, detail)
    body = b'{"trace_id": "demo", "entries": [{"gpu_config": "SM86_RTX3070", "count": 1}]}'
    answer = call(client, "POST", "/api/runs", headers=[AUTH, wrong, (b"content-type", b"application/json")], chunks=[body])
    assert (answer.status, answer.body) == (401, detail)
    assert_no_run(client, seq)
    assert call(client, "GET", "/api/runs", headers=[(b"authorization", f"Bearer {TOKEN}".encode())]).status == 200


def test_the_openapi_document_lists_every_new_refusal(client: TestClient) -> None:
    paths = client.get("/api/openapi.json").json()["paths"]
    create = paths["/api/runs"]["post"]["responses"]
    assert "CASCADE_MAX_BODY_BYTES" in create["413"]["description"]
    assert "CASCADE_MAX_SIMS_PER_RUN" in create["422"]["description"]
    assert "more than one Authorization header" in create["401"]["description"]
    upload_413 = paths["/api/traces"]["post"]["responses"]["413"]["description"]
    assert "CASCADE_MAX_EXPANDED_BYTES" in upload_413 and "CASCADE_MAX_EXPANSION_RATIO" in upload_413


def test_the_limits_are_settings_with_their_defaults() -> None:
    defaults = resolve({}, {})
    assert defaults.expansion == Expansion(4 * 64 * 1024**3, 200.0)
    assert (defaults.max_body_bytes, defaults.max_sims_per_run) == (MiB, 1024)
    environ = {
        "CASCADE_MAX_UPLOAD_BYTES": "1000",
        "CASCADE_MAX_EXPANSION_RATIO": "50.5",
        "CASCADE_MAX_BODY_BYTES": "2048",
        "CASCADE_MAX_SIMS_PER_RUN": "10",
    }
    settings = resolve({}, environ)
    assert (settings.expansion, settings.max_body_bytes, settings.max_sims_per_run) == (Expansion(4000, 50.5), 2048, 10)
    assert resolve({}, environ | {"CASCADE_MAX_EXPANDED_BYTES": "3000"}).expansion == Expansion(3000, 50.5)
    with pytest.raises(ConfigError, match="^CASCADE_MAX_SIMS_PER_RUN: Expected `int` >= 1$"):
        resolve({}, {"CASCADE_MAX_SIMS_PER_RUN": "0"})


def test_the_read_models_memory_is_a_setting_of_at_least_64_mib() -> None:
    assert resolve({}, {}).db_memory_bytes is None  # projections.projector.DEFAULT_MEMORY
    assert resolve({"db_memory_bytes": 512 * MiB}, {"CASCADE_DB_MEMORY_BYTES": str(96 * MiB)}).db_memory_bytes == 512 * MiB
    assert resolve({}, {"CASCADE_DB_MEMORY_BYTES": str(96 * MiB)}).db_memory_bytes == 96 * MiB
    with pytest.raises(ConfigError, match=f"^CASCADE_DB_MEMORY_BYTES: Expected `int` >= {64 * MiB}$"):
        resolve({}, {"CASCADE_DB_MEMORY_BYTES": str(MiB)})


def test_a_querys_memory_is_a_setting_of_at_least_64_mib() -> None:
    assert resolve({}, {}).sql_memory_bytes == 512 * MiB
    assert resolve({}, {"CASCADE_SQL_MEMORY_BYTES": str(96 * MiB)}).sql_memory_bytes == 96 * MiB
    with pytest.raises(ConfigError, match=f"^CASCADE_SQL_MEMORY_BYTES: Expected `int` >= {64 * MiB}$"):
        resolve({}, {"CASCADE_SQL_MEMORY_BYTES": str(MiB)})
