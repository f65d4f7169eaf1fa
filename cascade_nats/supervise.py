"""Long-lived tasks that must not die with their first error.

Every loop a process keeps running (the projector, the dispatcher, a runner's request,
announce and cancel loops, each sim's lease keeper, the embedded nats-server's watcher) runs
under `supervise`, which starts it again after any Exception, waiting longer after each
failure in a row (capped exponential backoff), and keeps what is failing now in one
`Supervision` registry per process, which `/api/health` shows. A burst of failures is
logged once: the first failure with its traceback, then a summary every `SUMMARY_EVERY_S`
while it lasts, and one line when the task recovers: once it has run `HEALTHY_AFTER_S`
without failing. A one-shot operation that must happen however long NATS is away (sending a
sim's events, storing its files) goes through `retry`, the same but for recovering only by
succeeding.

Nothing here knows what the tasks do; cancelling a supervised task cancels it at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import msgspec

from cascade_nats.wire import redacted

if TYPE_CHECKING:
    from nats.aio.client import Client

log = logging.getLogger("cascade.supervise")
T = TypeVar("T")

BACKOFF_START_S = 0.1
BACKOFF_CAP_S = 2.0  # so that a task is back within seconds of what it needs coming back
HEALTHY_AFTER_S = 1.0
SUMMARY_EVERY_S = 300.0


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """A task failing now: its last error, since when, and how often it was started again."""

    task: str
    error: str
    since: datetime
    restarts: int


def describe(err: BaseException) -> str:
    """One line for an error (the one inside a task group's group), with any credentials in
    it taken out."""
    while isinstance(err, BaseExceptionGroup) and len(err.exceptions) == 1:
        err = err.exceptions[0]
    text = str(err).strip().splitlines()
    return redacted(f"{type(err).__name__}: {text[0]}" if text else type(err).__name__)


class Supervision:
    """What is failing in this process now, by task name."""

    def __init__(self) -> None:
        self._failing: dict[str, Failure] = {}

    def failing(self) -> list[Failure]:
        """The failing tasks, longest failing first."""
        return sorted(self._failing.values(), key=lambda f: (f.since, f.task))

    def fail(self, task: str, error: str, *, restarts: int = 0) -> None:
        since = self._failing[task].since if task in self._failing else datetime.now(UTC)
        self._failing[task] = Failure(task=task, error=error, since=since, restarts=restarts)

    def clear(self, task: str) -> None:
        self._failing.pop(task, None)


class _Burst:
    """One task's failures in a row: the backoff, the log lines, the registry entry."""

    def __init__(self, task: str, health: Supervision) -> None:
        self.task = task
        self.health = health
        self.restarts = 0
        self.started = 0.0
        self.logged = 0.0
        self.delay = BACKOFF_START_S

    def failed(self, err: Exception) -> float:
        """Record a failure; how long to wait before the next start."""
        now = time.monotonic()
        if not self.restarts:
            self.started = self.logged = now
            log.error("%s failed; trying again until it works", self.task, exc_info=err)
        elif now - self.logged >= SUMMARY_EVERY_S:
            self.logged = now
            log.warning("%s still failing: %d restarts in %.0f s, the last: %s", self.task, self.restarts, now - self.started, describe(err))
        self.restarts += 1
        self.health.fail(self.task, describe(err), restarts=self.restarts)
        delay, self.delay = self.delay, min(self.delay * 2, BACKOFF_CAP_S)
        return delay

    def recovered(self) -> None:
        if not self.restarts:
            return
        log.warning("%s recovered after %d restarts in %.1f s", self.task, self.restarts, time.monotonic() - self.started)
        self.health.clear(self.task)
        self.restarts = 0
        self.delay = BACKOFF_START_S


async def supervise(task: str, loop: Callable[[], Awaitable[object]], health: Supervision) -> None:
    """Run a long-lived `loop` until it returns, starting it again after every Exception it
    raises; it has recovered once it has run `HEALTHY_AFTER_S` without one. Cancelled, the
    task is no longer listed as failing."""
    await _run(task, loop, health, healthy_after=HEALTHY_AFTER_S)


async def retry(task: str, operation: Callable[[], Awaitable[T]], health: Supervision) -> T:
    """What `operation()` returns once it succeeds, trying it again after every Exception
    it raises: a one-shot task, which recovers only by succeeding."""
    return await _run(task, operation, health, healthy_after=None)


async def _run(task: str, run: Callable[[], Awaitable[T]], health: Supervision, *, healthy_after: float | None) -> T:
    burst = _Burst(task, health)
    loop = asyncio.get_running_loop()
    try:
        while True:
            settled = None
            if burst.restarts and healthy_after is not None:
                settled = loop.call_later(healthy_after, burst.recovered)
            try:
                result = await run()
            except Exception as err:  # noqa: BLE001 - whatever it was, the task must go on
                delay = burst.failed(err)
            else:
                burst.recovered()
                return result
            finally:
                if settled is not None:
                    settled.cancel()
            await asyncio.sleep(delay)
    finally:
        health.clear(task)


class ConnectionWatch:
    """A nats-py client's connection as the task `nats`: failing from the moment it drops
    until it is back, its reconnect attempts counted as restarts. Its callbacks take the
    place of nats-py's default, which logs a traceback per reconnect attempt."""

    TASK = "nats"

    def __init__(self, health: Supervision, address: str) -> None:
        self.health = health
        self.address = redacted(address)
        self.client: Client | None = None  # set once connected: closing it is no outage
        self.attempts = 0
        self._down_since: float | None = None
        self._logged = 0.0

    async def disconnected(self) -> None:
        if self.client is not None and self.client.is_closed:
            return
        if self._down_since is None:
            self._down_since = self._logged = time.monotonic()
            self.attempts = 0
            log.warning("lost the connection to NATS at %s; reconnecting", self.address)
            self.health.fail(self.TASK, f"disconnected from {self.address}; reconnecting")

    async def error(self, err: Exception) -> None:
        if self._down_since is None:
            log.warning("NATS at %s: %s", self.address, describe(err))
            return
        self.attempts += 1  # a reconnect attempt failed
        now = time.monotonic()
        if now - self._logged >= SUMMARY_EVERY_S:
            self._logged = now
            log.warning("NATS at %s still unreachable after %.0f s: %s", self.address, now - self._down_since, describe(err))
        self.health.fail(self.TASK, f"disconnected from {self.address}: {describe(err)}", restarts=self.attempts)

    async def reconnected(self) -> None:
        down = time.monotonic() - (self._down_since or time.monotonic())
        self._down_since = None
        log.warning("reconnected to NATS at %s after %.1f s", self.address, down)
        self.health.clear(self.TASK)

    async def closed(self) -> None:
        self.health.clear(self.TASK)
