"""A streamed answer that fails is never taken for a whole one (`UnbrokenStreamingResponse`,
every streamed read's: `readmodel.streamed`): failing before its first piece, it has an error
status; failing after, its connection closes without the body's end, which httpx, curl and the
CLI's client each report as a body cut short. Served by a real uvicorn, as `cascade serve` is."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_cli.client import ApiClient, Disconnected
from cascade_http.responses import UnbrokenStreamingResponse

PIECE = b"x" * 1000


class Broken(Exception):
    pass


def pieces(whole: int, then_fail: bool) -> Iterator[bytes]:
    for _ in range(whole):
        yield PIECE
    if then_fail:
        raise Broken("the read model ran out of memory")


async def answer(request: Request) -> Response:
    whole, fails = int(request.query_params["pieces"]), request.query_params.get("fails") == "1"
    return UnbrokenStreamingResponse(pieces(whole, fails), media_type="application/zip")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    app = Starlette(routes=[Route("/answer", answer)])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(15)


def test_a_whole_answer_and_an_empty_one_end_as_they_should(url: str) -> None:
    assert httpx.get(f"{url}/answer?pieces=3").content == PIECE * 3
    assert httpx.get(f"{url}/answer?pieces=0").content == b""


def test_a_failure_before_the_first_piece_is_an_error_status(url: str) -> None:
    answered = httpx.get(f"{url}/answer?pieces=0&fails=1")
    assert answered.status_code == 500


def test_a_failure_midway_is_a_body_cut_short_for_httpx_curl_and_the_cli(url: str, tmp_path: Path) -> None:
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        httpx.get(f"{url}/answer?pieces=3&fails=1")
    target = tmp_path / "export.zip"
    with pytest.raises(Disconnected, match="the connection broke"):
        ApiClient(url, None).download("/answer?pieces=3&fails=1", target)
    assert list(tmp_path.iterdir()) == [], "nothing that looks whole is left"
    curl = shutil.which("curl")
    if curl is not None:
        fetched = subprocess.run([curl, "-sS", "-o", str(target), f"{url}/answer?pieces=3&fails=1"], capture_output=True, text=True, timeout=30)
        assert fetched.returncode == 18, fetched.stderr  # CURLE_PARTIAL_FILE
