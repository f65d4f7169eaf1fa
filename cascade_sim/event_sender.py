"""One sim attempt's events, sent in order without making the output reader wait.

The reader hands events over as it parses them; a sender task ships whatever has piled up
as one pipelined append. Event ids are `<sim>.<attempt>.<n>`, so when an append fails it is
sent again, however long NATS takes to come back, without what of it was stored already.
While NATS is away or behind, the events wait here, up to `MAX_QUEUED` of them or
`MAX_QUEUED_BYTES` of stats and log text (deflated, as it is sent) besides the batch being sent; the output reader
waits for `room()` before it reads more, so past that the simulator's own pipe holds it back
rather than memory growing (the parser outruns a busy NATS: kernel results pile up within a
second's stall; bench/README.md, "Runner, with the tokenizer in C").

A kernel result's stats map names its set of names by digest alone (`cascade_core/packed_stats.py`):
before a batch goes out, each set it names that is not yet stored is, as its own
`stat_names.defined.v1` event, so the log holds a set before any result that names it. The
sets stored are known to every sender of a runner (`names_stored`), so each is sent once a
runner process; a result is made to hold the digest alone only here, as it goes out.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import msgspec

from cascade_core import events as ev
from cascade_core import packed_stats
from cascade_nats import subjects
from cascade_nats.store import EventStore
from cascade_nats.supervise import Supervision, retry

MAX_QUEUED = 256
MAX_QUEUED_BYTES = 2 << 20


def named(result: ev.KernelFinished, stored: set[str], at: datetime) -> tuple[ev.StatNamesDefined | None, ev.KernelFinished]:
    """The event of the set of names the result's map needs, to store first (None where the
    set is among the digests `stored`, or the map holds no digest), and the result as it is
    sent: its map holding the set's digest alone."""
    stats = result.stats
    if stats is None or not stats.names or not stats.names_digest:
        return None, result
    defined = None
    if stats.names_digest not in stored:
        defined = ev.StatNamesDefined(id=f"stat-names.{stats.names_digest}", at=at, digest=stats.names_digest, names=stats.names)
    return defined, msgspec.structs.replace(result, stats=packed_stats.without_names(stats))


def _size(event: ev.Event) -> int:
    """What makes an event big: a kernel's stats map, a heartbeat's log lines."""
    if isinstance(event, ev.KernelFinished):
        return 0 if event.stats is None else len(event.stats.names) + len(event.stats.values)
    if isinstance(event, ev.SimHeartbeat):
        return len(event.log) + len(event.log_deflated or b"")
    return 0


class EventSender:
    def __init__(
        self, *, store: EventStore, sim_id: str, attempt: int, supervision: Supervision, names_stored: set[str] | None = None
    ) -> None:
        """`names_stored`: the digests of the sets of stat names stored, shared by a runner's senders."""
        self.store = store
        self.supervision = supervision
        self.names_stored = set() if names_stored is None else names_stored
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
        """Store `batch`, each set of stat names it needs first; after a failed try, only what
        it did not store."""
        batch = [await self._named(e) if isinstance(e, ev.KernelFinished) else e for e in batch]
        tries = 0

        async def send() -> None:
            nonlocal batch, tries
            tries += 1
            if tries > 1:
                batch = await self._unsent(batch)
            if batch:
                await self.store.append_facts(batch, timeout=30)

        await retry(f"sim {self.prefix}: sending its events", send, self.supervision)

    async def _named(self, result: ev.KernelFinished) -> ev.KernelFinished:
        """The result as it is sent, once the set of names it needs is stored."""
        defined, sent = named(result, self.names_stored, self.now())
        if defined is not None:

            async def send() -> None:
                await self.store.append_facts([defined], timeout=30)

            await retry(f"sim {self.prefix}: storing a set of stat names", send, self.supervision)
            self.names_stored.add(defined.digest)
        return sent

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
