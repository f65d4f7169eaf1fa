"""Limits on every input, each refusal shown with its status, its message, and nothing stored:
trace uploads that expand too far once decompressed (compression bombs)."""

from __future__ import annotations

import gzip
import lzma
import re
import tarfile

import pytest
from starlette.testclient import TestClient

from cascade_core import events as ev
from cascade_core import subjects
from cascade_core.limits import RATIO_FLOOR, Expansion
from cascade_http.config import ConfigError, resolve
from tests.cascade_http.conftest import service
from tests.cascade_http.trace_archives import chunk_messages, files_of, history, stored, tar_of, upload

MiB = 1 << 20
VEC_FILES = files_of("vectoradd-100-32")
REFUSED = ["trace.upload_started.v1", "trace.failed.v1", "trace.deleted.v1"]


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


# --- the document and the settings ------------------------------------------------------------


def test_the_openapi_document_lists_every_new_refusal(client: TestClient) -> None:
    paths = client.get("/api/openapi.json").json()["paths"]
    upload_413 = paths["/api/traces"]["post"]["responses"]["413"]["description"]
    assert "CASCADE_MAX_EXPANDED_BYTES" in upload_413 and "CASCADE_MAX_EXPANSION_RATIO" in upload_413


def test_the_limits_are_settings_with_their_defaults() -> None:
    defaults = resolve({}, {})
    assert resolve({}, {}).expansion == Expansion(4 * 64 * 1024**3, 200.0)
    environ = {"CASCADE_MAX_UPLOAD_BYTES": "1000", "CASCADE_MAX_EXPANSION_RATIO": "50.5"}
    assert resolve({}, environ).expansion == Expansion(4000, 50.5)
    assert resolve({}, environ | {"CASCADE_MAX_EXPANDED_BYTES": "3000"}).expansion == Expansion(3000, 50.5)
    with pytest.raises(ConfigError, match="^CASCADE_MAX_EXPANDED_BYTES: Expected `int` >= 1$"):
        resolve({}, {"CASCADE_MAX_EXPANDED_BYTES": "0"})
