"""Live changes for run event streams: the projector publishes each committed batch's
changes here, and every subscriber of a run gets them in order."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

from projections.fold import Change


class Live:
    def __init__(self) -> None:
        self._subscribers: defaultdict[str, set[asyncio.Queue[list[Change]]]] = defaultdict(set)
        # Changes up to this sequence reach no stream: while the read model is rebuilt, every
        # stream goes on from past the old one's checkpoint (`rebuild.py`), and what the rebuild
        # makes of the events before it would only pile up in their queues.
        self.quiet_until = 0

    def publish(self, changes: list[Change]) -> None:
        if changes and changes[-1].seq <= self.quiet_until:
            return
        by_run: defaultdict[str, list[Change]] = defaultdict(list)
        for change in changes:
            if change.run_id in self._subscribers:
                by_run[change.run_id].append(change)
        for run_id, run_changes in by_run.items():
            for queue in self._subscribers.get(run_id, ()):
                queue.put_nowait(run_changes)

    @contextmanager
    def subscribe(self, run_id: str) -> Iterator[asyncio.Queue[list[Change]]]:
        queue: asyncio.Queue[list[Change]] = asyncio.Queue()
        self._subscribers[run_id].add(queue)
        try:
            yield queue
        finally:
            self._subscribers[run_id].discard(queue)
            if not self._subscribers[run_id]:
                del self._subscribers[run_id]
