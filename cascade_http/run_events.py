"""A run's live event stream (server-sent events).

Each SSE event's `id` is the stream sequence of the event that caused it, and the events of
one sequence (a `sim` and then the `run` it finished) go out together in one write.

- A fresh stream subscribes to the projector's live changes first, then reads the run and the
  checkpoint S in one transaction: `snapshot` (a RunDetail, id S), then every change with a
  sequence past S, as soon as it is committed.
- A stream resumed with `Last-Event-ID: N` sends no snapshot: the read model's rows changed
  after N (sims, kernels, files, then the run if it finished), each as it stands now, with
  the sequence that last changed it; then the live changes past both N and the catch-up's
  sequence. A sim that changed several times while the client was away is sent once, as it
  is now, so nothing is missed and nothing is sent twice.
- The stream ends with the run's final `run` event; a run already finished ends the stream
  after the snapshot (which shows it finished) or after the catch-up. A resume from at or
  past the final event gets 204 No Content, which tells an EventSource to stop reconnecting.
  Files a sim stores after its run finished are in the file lists, not in the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence

import msgspec
from sse_starlette import ServerSentEvent

from cascade_http.readmodel import read
from cascade_http.service import Cascade
from projections.fold import Change
from projections.queries import runs as q
from projections.rows import KernelRow, RunRow, SimFileRow, SimRow

_encoder = msgspec.json.Encoder()


class _Encoded:
    """Each change encoded once however many streams send it: every subscriber of a run
    receives the same Change objects, so they are cached by identity (a few thousand)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._cache: OrderedDict[int, tuple[Change, bytes]] = OrderedDict()

    def __call__(self, change: Change, places: dict[str, q.Place]) -> bytes:
        hit = self._cache.get(id(change))
        if hit is not None and hit[0] is change:
            return hit[1]
        data = message(change.kind, change.seq, _payload(change, places))
        self._cache[id(change)] = (change, data)
        if len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return data


encoded = _Encoded()


def message(kind: str, seq: int, payload: msgspec.Struct) -> bytes:
    return ServerSentEvent(data=_encoder.encode(payload).decode(), event=kind, id=str(seq)).encode()


def _payload(change: Change, places: dict[str, q.Place]) -> msgspec.Struct:
    row = change.row
    match row:
        case SimRow():
            return q.sim_from_row(row)
        case KernelRow():
            return q.kernel_from_row(row)
        case SimFileRow():
            return q.file_from_row(row, places[row.sim_id])
        case RunRow():
            return q.run_from_row(row)
    raise TypeError(f"no SSE event for {type(row).__name__}")


class Stream(msgspec.Struct):
    """What a stream starts from: its first message (snapshot or catch-up), the sequence
    it reflects, and whether the run has already ended."""

    first: bytes
    seq: int
    ended: bool
    places: dict[str, q.Place]


def _chunk(changes: Sequence[Change], places: dict[str, q.Place]) -> tuple[bytes, bool]:
    """The messages of `changes` (up to the run's end) and whether the run's end was among them."""
    parts = []
    for change in changes:
        parts.append(encoded(change, places))
        if change.kind == "run":
            return b"".join(parts), True
    return b"".join(parts), False


async def start(c: Cascade, run_id: str, last_event_id: int | None) -> Stream | None:
    """The stream's start, or None if there is no such run."""
    if last_event_id is None:
        found = await read(c, q.stream_snapshot, run_id)
        if found is None:
            return None
        seq, detail, places = found
        return Stream(message("snapshot", seq, detail), seq, detail.state != "active", places)
    caught = await read(c, q.changes_since, run_id, last_event_id)
    if caught is None:
        return None
    seq, changes, run, places = caught
    first, ended = _chunk(changes, places)
    return Stream(first, max(seq, last_event_id), ended or run.state != "active", places)


async def events(subscription: contextlib.ExitStack, queue: asyncio.Queue[list[Change]], stream: Stream) -> AsyncIterator[bytes]:
    """The stream's bytes: its start, then live changes until the run ends."""
    with subscription:
        if stream.first:
            yield stream.first
        if stream.ended:
            return
        while True:
            batch = [change for change in await queue.get() if change.seq > stream.seq]
            if not batch:
                continue
            data, ended = _chunk(batch, stream.places)
            yield data
            if ended:
                return

