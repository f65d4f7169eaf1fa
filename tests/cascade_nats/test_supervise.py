"""The supervisor: what fails is started again with a growing pause, listed while it fails,
and logged once per burst."""

from __future__ import annotations

import logging

import anyio
import pytest

from cascade_nats import supervise as supervise_module
from cascade_nats.supervise import ConnectionWatch, Supervision, describe, retry, supervise

pytestmark = pytest.mark.anyio


async def test_a_failing_loop_is_started_again_listed_while_it_fails_and_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(supervise_module, "HEALTHY_AFTER_S", 0.2)
    health = Supervision()
    starts: list[float] = []
    listed: list[list[tuple[str, str, int]]] = []

    async def loop() -> None:
        starts.append(anyio.current_time())
        listed.append([(f.task, f.error, f.restarts) for f in health.failing()])
        if len(starts) <= 4:
            raise ConnectionRefusedError(111, "Connection refused at nats://cascade:secret@127.0.0.1:4222")
        await anyio.sleep(0.5)

    with caplog.at_level(logging.INFO, logger="cascade.supervise"):
        await supervise("projector", loop, health)
    assert len(starts) == 5
    pauses = [b - a for a, b in zip(starts, starts[1:])]
    assert pauses == sorted(pauses) and pauses[0] >= supervise_module.BACKOFF_START_S, "the pause grows"
    error = "ConnectionRefusedError: [Errno 111] Connection refused at nats://[redacted]@127.0.0.1:4222"
    assert listed[-1] == [("projector", error, 4)], "listed with its last error, no password in it"
    assert health.failing() == [], "recovered: no longer listed"
    lines = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert lines == [
        ("ERROR", "projector failed; trying again until it works", True),
        ("WARNING", lines[1][1], False),
    ]
    assert lines[1][1].startswith("projector recovered after 4 restarts in ")


async def test_a_loop_that_fails_again_before_it_settled_is_one_burst(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(supervise_module, "HEALTHY_AFTER_S", 10.0)
    health = Supervision()
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        await anyio.sleep(0.05)  # runs a while, not long enough to count as recovered
        if runs < 3:
            raise TimeoutError

    with caplog.at_level(logging.INFO, logger="cascade.supervise"):
        await supervise("dispatcher", flaky, health)  # ends by itself: done, and recovered
    assert [r.levelname for r in caplog.records] == ["ERROR", "WARNING"]
    assert health.failing() == []


async def test_retry_gives_what_the_operation_returns_once_it_succeeds_and_recovers_only_then(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(supervise_module, "HEALTHY_AFTER_S", 0.01)
    health = Supervision()
    tries = 0

    async def send() -> int:
        nonlocal tries
        tries += 1
        if tries == 1:
            raise OSError("down")
        await anyio.sleep(0.2)  # still trying, long past HEALTHY_AFTER_S
        assert [f.task for f in health.failing()] == ["sending"], "not recovered before it succeeds"
        return 42

    assert await retry("sending", send, health) == 42
    assert tries == 2 and health.failing() == []


async def test_a_cancelled_task_is_no_longer_listed() -> None:
    health = Supervision()

    async def broken() -> None:
        raise RuntimeError("no")

    with anyio.move_on_after(0.3):
        await supervise("watching sim-1", broken, health)
    assert health.failing() == []


async def test_a_lost_connection_is_listed_from_when_it_drops_until_it_is_back(caplog: pytest.LogCaptureFixture) -> None:
    health = Supervision()
    watch = ConnectionWatch(health, "nats://cascade:pw@127.0.0.1:4222")
    with caplog.at_level(logging.INFO, logger="cascade.supervise"):
        await watch.disconnected()
        for _ in range(3):
            await watch.error(ConnectionRefusedError(111, "Connect call failed"))
        (failure,) = health.failing()
        assert (failure.task, failure.restarts) == ("nats", 3)
        assert failure.error == "disconnected from nats://[redacted]@127.0.0.1:4222: ConnectionRefusedError: [Errno 111] Connect call failed"
        await watch.reconnected()
    assert health.failing() == []
    assert [r.getMessage().split(" at ")[0] for r in caplog.records] == ["lost the connection to NATS", "reconnected to NATS"]


def test_an_error_is_described_in_one_line_from_inside_its_group() -> None:
    group = ExceptionGroup("unhandled errors in a TaskGroup", [ConnectionResetError("reset\nmore")])
    assert describe(group) == "ConnectionResetError: reset"
    assert describe(TimeoutError()) == "TimeoutError"
