"""One sim attempt's events, sent in order without making the output reader wait.

The reader hands events over as it parses them; a sender task ships whatever has piled up
as one pipelined append. Event ids are `<sim>.<attempt>.<n>`, so when an append fails it is
sent again, however long NATS takes to come back, without what of it was stored already.
While NATS is away or behind, the events wait here, up to `MAX_QUEUED` of them or
`MAX_QUEUED_BYTES` of stats and log text (deflated, as it is sent) besides the batch being sent; the output reader
waits for `room()` before it reads more, so past that the simulator's own pipe holds it back
rather than memory growing (the parser outruns a busy NATS: kernel results pile up within a
second's stall; bench/README.md, "Runner, with the tokenizer in C").
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from cascade_core import events as ev
from cascade_nats import subjects
from cascade_nats.store import EventStore
from cascade_nats.supervise import Supervision, retry

MAX_QUEUED = 256
MAX_QUEUED_BYTES = 2 << 20


def _size(event: ev.Event) -> int:
    """What makes an event big: a kernel's stats map, a heartbeat's log lines."""
    if isinstance(event, ev.KernelFinished):
        return 0 if event.stats is None else len(event.stats.names) + len(event.stats.values)
    if isinstance(event, ev.SimHeartbeat):
        return len(event.log) + len(event.log_deflated or b"")
    return 0


class EventSender:
    def __init__(self, *, store: EventStore, sim_id: str, attempt: int, supervision: Supervision) -> None:
        self.store = store
        self.supervision = supervision
        self.prefix = f"{sim_id}.{attempt}"
        self._count = 0
        self._queue: list[ev.Event] = []
        self._queued_bytes = 0
        self._wake = asyncio.Event()
        self._taken = asyncio.Event()
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

    @property
    def full(self) -> bool:
        """Whether as many events wait as may: emit no more that can wait (a heartbeat)."""
        return len(self._queue) >= MAX_QUEUED or self._queued_bytes > MAX_QUEUED_BYTES

    async def room(self) -> None:
        """Return once fewer than `MAX_QUEUED` events, of at most `MAX_QUEUED_BYTES`, wait."""
        while self.full:
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

    async def _append(self, batch: list[ev.Event]) -> None:
        """Store `batch`; after a failed try, only what it did not store."""
        tries = 0

        async def send() -> None:
            nonlocal batch, tries
            tries += 1
            if tries > 1:
                batch = await self._unsent(batch)
            if batch:
                await self.store.append_facts(batch, timeout=30)

        await retry(f"sim {self.prefix}: sending its events", send, self.supervision)

    async def _unsent(self, batch: list[ev.Event]) -> list[ev.Event]:
        """The events of `batch` not stored. They go out in order on one connection, so what
        a failed append stored on a subject is the batch's events up to the last one there;
        asking the stream, not its duplicate window, makes this hold after any outage."""
        stored = {}
        for subject in {subjects.of(e) for e in batch}:
            last = await self.store.last_on(subject)
            stored[subject] = self._number(last.event.id) if last is not None else 0
        return [e for e in batch if self._number(e.id) > stored[subjects.of(e)]]

    def _number(self, event_id: str) -> int:
        """n of one of this attempt's event ids `<sim>.<attempt>.<n>`; 0 for any other id."""
        head, _, n = event_id.rpartition(".")
        return int(n) if head == self.prefix and n.isdigit() else 0
