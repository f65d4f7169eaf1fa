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
- The stream ends with the run's final `run` event: at once after the snapshot of a run
  that has already ended (the snapshot shows it), after the catch-up that holds it, or when
  it is committed. A resume from at or past it has nothing to send: the route answers 204
  No Content, which tells an EventSource to stop reconnecting. Files a sim stores after its
  run ended are in the file lists, not in the stream.
- A client that falls too far behind (it stopped reading) has its stream ended
  (`projections.live`): it resumes with `Last-Event-ID` like any dropped connection.
- What needs attention is not in the stream: it is judged when the run is read (Get a run),
  from the time and the live runners, not from the events.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence

import msgspec
from sse_starlette import ServerSentEvent

from cascade_http.readmodel import read
from cascade_http.service import Cascade
from projections.fold import Change
from projections.live import LAGGED
from projections.queries import runs as q
from projections.rows import KernelRow, RunRow, SimFileRow, SimRow

KEEP_ALIVE_S = 15.0  # a comment line this often keeps proxies from closing a quiet stream

_encoder = msgspec.json.Encoder()


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


class _Encoded:
    """Each change encoded once however many streams send it: every subscriber of a run
    receives the same Change objects, so they are cached by identity (the cache holds the
    object, so its id cannot be reused while cached)."""

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


_encoded = _Encoded()


def _messages(changes: Sequence[Change], places: dict[str, q.Place]) -> tuple[bytes, bool]:
    """The messages of `changes` up to the run's end, and whether the end was among them."""
    parts = []
    for change in changes:
        parts.append(_encoded(change, places))
        if change.kind == "run":
            return b"".join(parts), True
    return b"".join(parts), False


def finished_before(run: RunRow, last_event_id: int | None) -> bool:
    """Whether a stream resumed from `last_event_id` has nothing left to send."""
    return last_event_id is not None and run.state != "active" and run.seq <= last_event_id


async def events(c: Cascade, run_id: str, last_event_id: int | None) -> AsyncIterator[bytes]:
    """The stream's bytes, for a run that exists."""
    # Subscribed before the read, so every change committed after it is queued.
    with c.projector.live.subscribe(run_id) as queue:
        if last_event_id is None:
            found = await read(c, q.stream_snapshot, run_id)
            assert found is not None, f"run {run_id} vanished"
            seen, detail, places = found
            yield message("snapshot", seen, detail)
            ended = detail.state != "active"
        else:
            caught = await read(c, q.changes_since, run_id, last_event_id)
            assert caught is not None, f"run {run_id} vanished"
            checkpoint, changes, run, places = caught
            seen = max(checkpoint, last_event_id)
            first, ended = _messages(changes, places)
            if first:
                yield first
            ended = ended or run.state != "active"
        while not ended:
            changes = await queue.get()
            if changes is LAGGED:
                return
            batch = [change for change in changes if change.seq > seen]
            if batch:
                data, ended = _messages(batch, places)
                yield data
