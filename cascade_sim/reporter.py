"""One sim attempt's events, sent in order without making the output reader wait.

The reader hands events over as it parses them; a sender task ships whatever has piled up
as one pipelined append. Event ids are `<sim>.<attempt>.<n>`, so when an append fails it is
sent again as it was, and whatever of it was already stored is not stored twice. Only when
NATS falls behind by more than MAX_QUEUED_BYTES of stats and log text does the reader wait
(`caught_up`): the parser outruns a busy NATS, and the kernel results piling up (with their
encodings, made a batch at a time) grew the runner's memory by 17 MB in a second's stall.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from cascade_core import events as ev
from cascade_nats.store import EventStore

log = logging.getLogger("cascade.runner")

RETRY_S = (0.5, 1, 2, 5, 10)
MAX_QUEUED_BYTES = 2 << 20


def _size(event: ev.Event) -> int:
    """What makes an event big: a kernel's stats map, a heartbeat's log lines."""
    if isinstance(event, ev.KernelFinished):
        return len(event.stats)
    return len(event.log) if isinstance(event, ev.SimHeartbeat) else 0


class Reporter:
    def __init__(self, store: EventStore, sim_id: str, attempt: int) -> None:
        self.store = store
        self.prefix = f"{sim_id}.{attempt}"
        self._count = 0
        self._queue: list[ev.Event] = []
        self._queued_bytes = 0
        self._wake = asyncio.Event()
        self._taken = asyncio.Event()  # set when the sender takes the queue
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    def next_id(self) -> str:
        self._count += 1
        return f"{self.prefix}.{self._count}"

    @staticmethod
    def now() -> datetime:
        return datetime.now(UTC)

    def emit(self, event: ev.Event) -> None:
        self._queue.append(event)
        self._queued_bytes += _size(event)
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._send())

    async def caught_up(self) -> None:
        """Wait until no more than MAX_QUEUED_BYTES are waiting to be sent (or the sender
        has stopped, which `flush` reports)."""
        while self._queued_bytes > MAX_QUEUED_BYTES and self._task is not None and not self._task.done():
            self._taken.clear()
            await self._taken.wait()

    async def flush(self) -> None:
        """Wait until everything emitted so far is stored."""
        if self._task is None:
            return
        self._closing = True
        self._wake.set()
        await self._task
        self._task = None
        self._closing = False

    async def _send(self) -> None:
        try:
            while True:
                if not self._queue:
                    if self._closing:
                        return
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                batch, self._queue, self._queued_bytes = self._queue, [], 0
                self._taken.set()
                await self._append(batch)
        finally:
            self._taken.set()

    async def _append(self, batch: list[ev.Event]) -> None:
        for delay in (*RETRY_S, None):
            try:
                await self.store.append_facts(batch, timeout=30)
                return
            except Exception as err:  # noqa: BLE001 - NATS down or slow: keep the facts, try again
                if delay is None:
                    raise
                log.warning("sending %d events of %s failed (%s); retrying in %ss", len(batch), self.prefix, err, delay)
                await asyncio.sleep(delay)
