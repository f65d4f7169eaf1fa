"""Trace archives built in tests, and looks into the object store behind a test client."""

from __future__ import annotations

import gzip
import io
import lzma
import re
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2
import nats.js.errors
from starlette.testclient import TestClient

from cascade_core.events import event_type
from cascade_core.object_names import TRACE_FILES
from cascade_nats import subjects
from tests.cascade_http.conftest import service
from tests.support import TRACES

MEDIA = {"tar": "application/x-tar", "gzip": "application/gzip", "xz": "application/x-xz"}


def files_of(name: str) -> dict[str, bytes]:
    """The files of a shared trace, by name."""
    return {p.name: p.read_bytes() for p in sorted((TRACES / name).iterdir())}


def one_file_per_launch(name: str) -> dict[str, bytes]:
    """A shared trace laid out as NVBit writes one: each launch's kernel file a file of its
    own, `kernel-<uid>.traceg` with `-kernel id = <uid>` (every even one xz-compressed,
    `.traceg.xz`), holding what the file it launched holds but for that line."""
    files = files_of(name)
    kernelslist: list[str] = []
    kernels: dict[str, bytes] = {}
    for line in files.pop("kernelslist.g").decode().splitlines():
        if line.endswith((".traceg", ".traceg.xz")):
            uid = len(kernels) + 1
            content = files[line] if line.endswith(".traceg") else lzma.decompress(files[line])
            content = re.sub(rb"^-kernel id = [0-9]+$", b"-kernel id = %d" % uid, content, count=1, flags=re.MULTILINE)
            line = f"kernel-{uid}.traceg" + (".xz" if uid % 2 == 0 else "")
            kernels[line] = lzma.compress(content, preset=0) if uid % 2 == 0 else content
        kernelslist.append(line)
    others = {path: data for path, data in files.items() if not path.endswith((".traceg", ".traceg.xz"))}
    return {**others, **kernels, "kernelslist.g": "\n".join(kernelslist).encode() + b"\n"}


def tar_of(files: Mapping[str, bytes], *, top: str | None = None, compression: str = "tar") -> bytes:
    """A tar stream holding `files` at its root, or under the folder `top` (with its entry)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if top is not None:
            info = tarfile.TarInfo(top)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return compress(out.getvalue(), compression)


def compress(data: bytes, compression: str) -> bytes:
    if compression == "gzip":
        return gzip.compress(data, compresslevel=1)
    if compression == "xz":
        return lzma.compress(data, preset=0)
    return data


def member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = linkname
    return info


def upload(client: TestClient, body: bytes, trace_id: str | None = "demo", compression: str = "tar", **headers: str) -> httpx2.Response:
    params = {"id": trace_id} if trace_id is not None else {}
    return client.post("/api/traces", params=params, content=body, headers={"Content-Type": MEDIA[compression], **headers})


def upload_dir(client: TestClient, directory: Path, trace_id: str) -> dict[str, Any]:
    files = {p.name: p.read_bytes() for p in sorted(directory.iterdir())}
    response = upload(client, tar_of(files), trace_id)
    assert response.status_code == 202, response.text
    return response.json()  # type: ignore[no-any-return]


def stored(client: TestClient) -> dict[str, int]:
    """Objects in the store under `accelsim-traces/`, name -> size."""

    async def names() -> dict[str, int]:
        try:
            infos = await service(client).objects.store.list()
        except nats.js.errors.NotFoundError:
            return {}
        return {i.name: i.size or 0 for i in infos if not i.deleted and i.name.startswith(TRACE_FILES)}

    return client.portal.call(names)  # type: ignore[union-attr]


def chunk_messages(client: TestClient) -> int:
    """Chunk messages in the object store's stream: none may outlive a failed upload."""

    async def count() -> int:
        objects = service(client).objects
        info = await objects.js.stream_info(objects.stream, subjects_filter=f"$O.{objects.bucket}.C.>")
        return sum((info.state.subjects or {}).values())

    return client.portal.call(count)  # type: ignore[union-attr]


def history(client: TestClient, trace_id: str) -> list[str]:
    """The types of the trace's events, oldest first."""

    async def read() -> list[str]:
        return [event_type(s.event) async for s in service(client).store.read(subjects.trace(trace_id))]

    return client.portal.call(read)  # type: ignore[union-attr]


def upload_ready(client: TestClient, files: Mapping[str, bytes], trace_id: str) -> None:
    """Upload a trace of these files, and wait until it is ready."""
    assert upload(client, tar_of(files), trace_id).status_code == 202
    deadline = time.monotonic() + 60
    while client.get(f"/api/traces/{trace_id}").json()["state"] != "ready":
        assert time.monotonic() < deadline
        time.sleep(0.1)
