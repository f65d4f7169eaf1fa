"""Uploads as streams: chunked bodies over the size limit, clients that disconnect midway
(through the ASGI app directly, and over a real socket to a uvicorn server), and
`cascade trace upload` end to end against a real server."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import nats
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_nats.objects import BUCKET
from tests.cascade_http.asgi import AUTH, call
from tests.cascade_http.conftest import TOKEN, service
from tests.cascade_http.live import live_server
from tests.cascade_http.trace_archives import chunk_messages, files_of, history, stored, tar_of
from tests.support import TRACES

BODY = tar_of(files_of("matrixmul-32-32"))  # about 180 KB


def post_asgi(client: TestClient, trace_id: str, chunks: list[bytes], *, end: str) -> tuple[int, dict[str, Any]]:
    """POST `chunks` as a body without Content-Length straight into the app; `end` is
    "complete" or "disconnect"."""
    headers = (AUTH, (b"content-type", b"application/x-tar"))
    answer = call(client, "POST", "/api/traces", query=f"id={trace_id}", headers=headers, chunks=chunks, end=end)
    return answer.status, answer.body


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]



def test_chunked_upload_over_the_limit_is_413_and_keeps_nothing(client: TestClient) -> None:
    service(client).settings.max_upload_bytes = len(BODY) // 2
    status, body = post_asgi(client, "big", pieces(BODY, 16 * 1024), end="complete")
    assert status == 413
    assert body == {"detail": f"the upload is over this server's limit of {len(BODY) // 2} bytes (CASCADE_MAX_UPLOAD_BYTES)"}
    assert client.get("/api/traces/big").status_code == 404
    assert client.get("/api/traces").json() == []
    assert history(client, "big") == ["trace.upload_started.v1", "trace.failed.v1", "trace.deleted.v1"]
    assert stored(client) == {} and chunk_messages(client) == 0

    service(client).settings.max_upload_bytes = len(BODY)
    status, body = post_asgi(client, "big", pieces(BODY, 16 * 1024), end="complete")
    assert (status, body["state"]) == (202, "ready")


def test_a_client_that_disconnects_midway_leaves_a_failed_trace_and_no_chunks(client: TestClient) -> None:
    sent = pieces(BODY, 16 * 1024)[:6]
    status, body = post_asgi(client, "cut", sent, end="disconnect")
    trace = client.get("/api/traces/cut").json()
    assert trace["state"] == "failed"
    assert trace["error"] == (
        f"the upload was interrupted: the client disconnected after sending {sum(map(len, sent))} bytes; upload the trace again"
    )
    assert trace["metadata"]["files"] == []
    assert stored(client) == {} and chunk_messages(client) == 0


async def _chunks_and_objects(nats_url: str) -> tuple[int, int]:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(f"OBJ_{BUCKET}", subjects_filter=f"$O.{BUCKET}.>")
        by_subject = info.state.subjects or {}
        chunks = sum(n for s, n in by_subject.items() if s.startswith(f"$O.{BUCKET}.C."))
        return chunks, len([s for s in by_subject if s.startswith(f"$O.{BUCKET}.M.")])
    finally:
        await nc.close()


def _get(url: str, path: str) -> dict[str, Any]:
    request = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def _final_state(url: str, trace_id: str) -> dict[str, Any]:
    """The trace once it is ready or failed (it may not exist yet when asked first)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            trace = _get(url, f"/api/traces/{trace_id}")
        except urllib.error.HTTPError as error:
            assert error.code == 404
        else:
            if trace["state"] in ("ready", "failed"):
                return trace
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_over_a_real_socket_disconnects_and_chunked_bodies(settings: Settings) -> None:
    with live_server(settings) as live:
        host, port = live.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            head = (
                f"POST /api/traces?id=cut HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n"
                f"Content-Type: application/x-tar\r\nContent-Length: {len(BODY)}\r\n\r\n"
            )
            sock.sendall(head.encode() + BODY[: len(BODY) // 2])
        trace = _final_state(live.url, "cut")
        assert trace["state"] == "failed" and trace["error"].startswith("the upload was interrupted")
        chunks, _ = asyncio.run(_chunks_and_objects(settings.nats_url or ""))
        assert chunks == 0

        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-tar"}
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("POST", "/api/traces?id=chunked", body=iter(pieces(BODY, 10_000)), headers=headers, encode_chunked=True)
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())["state"]) == (202, "ready")
        conn.close()

        # A bad first member fails the upload at once; the client, still sending 8 MB, gets the answer.
        link = tarfile.TarInfo("kernel-1.traceg")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        bad = link.tobuf() + os.urandom(8 << 20)
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("POST", "/api/traces?id=link", body=iter(pieces(bad, 64 * 1024)), headers={**headers, "Content-Length": str(len(bad))})
        response = conn.getresponse()
        answer = json.loads(response.read())
        assert (response.status, answer["state"]) == (202, "failed")
        assert answer["error"] == "archive member 'kernel-1.traceg' is a symbolic link; a trace archive may hold only regular files and directories"
        conn.close()


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CASCADE_")}
    command = [sys.executable, "-m", "cascade_cli", "trace", "upload", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env={**clean, **env})


def test_cascade_trace_upload_end_to_end(settings: Settings, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(TRACES / "combo-vec-mm-xz", broken)
    (broken / "kernel-1.traceg").unlink()
    data_dir = tmp_path / "client-data"
    data_dir.mkdir()
    (data_dir / "token").write_text(TOKEN + "\n")
    (data_dir / "token").chmod(0o600)
    with live_server(settings) as live:
        done = cli(str(TRACES / "combo-vec-mm-xz"), "--id", "combo", "--url", live.url, CASCADE_TOKEN=TOKEN)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "trace combo: ready: 3 kernels, sm_61, 15243 bytes"
        assert "100.0%" in done.stderr  # the progress line's last state
        trace = _get(live.url, "/api/traces/combo")
        assert [k["name"] for k in trace["kernels"]] == ["_Z6vecAddIfEvPT_S1_S1_i", "_Z8mult_gpuIfEvPT_S1_S1_ii", "_Z6vecAddIfEvPT_S1_S1_i"]

        # Token from the data dir, URL from CASCADE_URL, an id the server makes up.
        done = cli(str(TRACES / "matrixmul-x40"), CASCADE_URL=live.url, CASCADE_DATA_DIR=str(data_dir))
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("trace trace-") and "40 kernels" in done.stdout

        taken = cli(str(TRACES / "vectoradd-100-32"), "--id", "combo", "--url", live.url, CASCADE_TOKEN=TOKEN)
        assert taken.returncode == 2
        assert taken.stderr.strip().endswith("409 trace combo already exists")

        failed = cli(str(broken), "--id", "broken", "--url", live.url, CASCADE_TOKEN=TOKEN)
        assert failed.returncode == 1
        assert "trace broken: failed: kernelslist.g line 4 names 'kernel-1.traceg', which is not in the trace" in failed.stderr

        # A damaged file early on ends the upload while the CLI is still sending the rest.
        (broken / "kernel-2.traceg.xz").write_bytes(b"\xfd7zXZ\x00 damaged")
        (broken / "zz-notes.bin").write_bytes(os.urandom(32 << 20))
        failed = cli(str(broken), "--id", "damaged", "--url", live.url, CASCADE_TOKEN=TOKEN)
        assert failed.returncode == 1
        assert "trace damaged: failed: kernel-2.traceg.xz is not valid xz data" in failed.stderr
