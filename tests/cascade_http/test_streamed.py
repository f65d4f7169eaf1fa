"""A streamed answer from the read model whose client goes away midway: its generator, and
the cursor and read transaction it holds, are closed then, not when the garbage collector
comes (by then perhaps after the read model closed, which a browser test once met)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from cascade_http.readmodel import _closed_at_the_end
from cascade_http.responses import ClosingStreamingResponse


def test_a_streamed_answer_whose_client_goes_closes_its_generator_in_a_worker_thread() -> None:
    closed: list[str] = []

    def pieces() -> Iterator[bytes]:
        try:
            for _ in range(100):
                yield b"piece\n"
        finally:
            closed.append(threading.current_thread().name)

    response = ClosingStreamingResponse(_closed_at_the_end(pieces()), media_type="text/plain")  # type: ignore[arg-type]
    bodies: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            bodies.append(message["body"])
            if len(bodies) == 2:
                raise OSError("the client went away")

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError

    async def answer() -> None:
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "method": "GET", "path": "/", "headers": []}
        with pytest.raises(Exception):
            await response(scope, receive, send)  # type: ignore[arg-type]

    anyio.run(answer)
    assert len(bodies) == 2
    assert len(closed) == 1 and closed[0] != threading.main_thread().name, "closed at once, in a worker thread, not by the GC"
