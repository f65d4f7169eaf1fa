"""Live changes for run event streams: the projector publishes each committed batch's
changes here, and every subscriber of a run gets them in order.

A subscriber with batches waiting that would have more than `MAX_BEHIND_BYTES` of rows
waiting (a client that stopped reading) is let go: what it has waiting is dropped, it gets
`LAGGED`, and nothing more. Its stream then ends, and the client resumes from its last event
id out of the read model, so nothing is lost, while the server holds at most that much and
one batch for it. One batch alone never lets a subscriber go: a burst is not a stall.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import msgspec

from cascade_core.packed_stats import PackedStats
from projections.fold import Change

MAX_BEHIND_BYTES = 16 << 20
LAGGED: list[Change] = []  # told apart by identity: no published batch is empty
_ROW_BYTES = 256  # about what a row holds besides its texts


def weight(changes: list[Change]) -> int:
    """About how many bytes the changes' rows hold: their texts (log tails, kernel names,
    stats maps) are most of it."""
    total = 0
    for change in changes:
        total += _ROW_BYTES
        for value in msgspec.structs.astuple(change.row):
            if isinstance(value, str):
                total += len(value)
            elif isinstance(value, PackedStats):
                total += len(value.names) + len(value.values)
            elif isinstance(value, list):  # a log tail's lines, or a sim's past attempts
                total += sum(len(v) if isinstance(v, str) else _ROW_BYTES for v in value)
    return total


class Feed:
    """One subscriber's batches of changes."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[list[Change], int]] = asyncio.Queue()
        self.behind = 0  # bytes waiting, by `weight`

    def put(self, changes: list[Change], size: int) -> bool:
        """Queue a batch of `size` bytes; False, and only `LAGGED` left queued, when the
        subscriber is too far behind for it."""
        if not self._queue.empty() and self.behind + size > MAX_BEHIND_BYTES:
            while not self._queue.empty():
                self._queue.get_nowait()
            self.behind = 0
            self._queue.put_nowait((LAGGED, 0))
            return False
        self.behind += size
        self._queue.put_nowait((changes, size))
        return True

    async def get(self) -> list[Change]:
        """The next batch, in publishing order, or `LAGGED`."""
        changes, size = await self._queue.get()
        self.behind -= size
        return changes


class Live:
    def __init__(self) -> None:
        self._subscribers: defaultdict[str, set[Feed]] = defaultdict(set)
        # Changes up to this sequence reach no stream, and the projector makes none for them:
        # while the read model is rebuilt, every stream goes on from past the old one's
        # checkpoint (`rebuild.py`), and what the rebuild made of the events before it would
        # only pile up in their queues.
        self.quiet_until = 0

    def publish(self, changes: list[Change]) -> None:
        by_run: defaultdict[str, list[Change]] = defaultdict(list)
        for change in changes:
            if change.run_id in self._subscribers:
                by_run[change.run_id].append(change)
        for run_id, run_changes in by_run.items():
            feeds = self._subscribers[run_id]
            size = weight(run_changes)
            for feed in list(feeds):
                if not feed.put(run_changes, size):
                    feeds.discard(feed)

    @contextmanager
    def subscribe(self, run_id: str) -> Iterator[Feed]:
        feed = Feed()
        self._subscribers[run_id].add(feed)
        try:
            yield feed
        finally:
            self._subscribers[run_id].discard(feed)
            if not self._subscribers[run_id]:
                del self._subscribers[run_id]
