"""A run's live event stream (server-sent events).

Event ids say where in the log each event comes from. `<seq>.<k>` is the k-th event (from 0)
that the event at stream sequence `seq` caused, in the order the stream sends them: a sim's
success is its `sim` (`.0`) then the `run` it finished (`.1`); a cancel is one `sim` per sim
it cancelled, in the run's order, then the `run`. The snapshot's id is `<S>`, the checkpoint
it reflects: everything up to and including sequence S. Ids are unique and increase strictly
within a stream, by seq, then k. `Last-Event-ID: N.k` resumes after that event, `N` after
every event of sequence N. Any other value counts as no Last-Event-ID and gets a fresh
snapshot, not a 400: a client whose id is broken has lost its place, a snapshot gives it one
back, and an EventSource would stop reconnecting on a 400.

- A fresh stream subscribes to the projector's live changes first, then reads the run and the
  checkpoint S in one transaction: `snapshot` (a RunDetail, id S), then every change with a
  sequence past S, as soon as it is committed.
- A resumed stream sends exactly what a client connected all along received after the cut.
  It subscribes to live changes, notes the read model's checkpoint S, reads the run's subjects
  up to S from the log and folds them with the projector's own fold (`projections/fold.py`):
  each change is its row as it stood right after its event, numbered as the projector
  numbered it. It sends those past the cut, then the live changes past S.
- The stream ends with the run's final `run` event: at once after the snapshot of a run
  that has already ended (the snapshot shows it), after the catch-up that holds it, or when
  it is committed. A retry or a top-up makes an ended run active again, shown as a `run`
  event too: the stream then goes on to the next end. A resume from at or past it has nothing to send: the route answers 204
  No Content, which tells an EventSource to stop reconnecting. Files a sim stores after its
  run ended are in the file lists, not in the stream. A resume past an end the route's read
  did not show (a read model behind the client's id) ends once it comes to that end.
- A client that falls too far behind (it stopped reading) has its stream ended
  (`projections.live`): it resumes with `Last-Event-ID` like any dropped connection.
- What needs attention is not in the stream: it is judged when the run is read (Get a run),
  from the time and the live runners, not from the events.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from contextlib import aclosing
from typing import NamedTuple

import anyio
import msgspec

from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_api.models import Sim
from cascade_nats import subjects
from cascade_nats.firehose import Frame
from projections import parking
from projections.fold import Change, Rows, fold
from projections.live import LAGGED
from projections.queries import runs as q
from projections.queries.convert import from_row
from projections.queries.parked import parked_seqs
from projections.rows import KernelRow, RunRow, SimFileRow, SimRow

KEEP_ALIVE_S = 15.0  # a comment line this often keeps proxies from closing a quiet stream

Position = tuple[int, int]  # (seq, k): a stream resumed there sends the events after it
ALL_OF = sys.maxsize  # the k of a plain `N`: past every event of sequence N

_encoder = msgspec.json.Encoder()


def last_event_id(value: str | None) -> Position | None:
    """Where a `Last-Event-ID` resumes: `N.k` after that event, `N` after all of sequence N;
    None (a fresh stream) for anything else."""
    seq, dot, k = (value or "").strip().partition(".")
    if not _number(seq) or dot and not _number(k):
        return None
    return int(seq), int(k) if dot else ALL_OF


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def end_of(run: RunRow, sims: Iterable[SimRow]) -> Position | None:
    """The id of the run's final `run` event, from its rows; None while it is active.

    That event is the last change of the event that finished the run, after one `sim` per
    sim it finished (`projections/fold.py`); finished sims never change again, so they are
    the sims whose rows still carry that sequence."""
    if run.state == "active":
        return None
    return run.seq, sum(1 for s in sims if s.seq == run.seq)


def finished_before(run: RunRow, sims: Iterable[SimRow], after: Position | None) -> bool:
    """Whether a stream resumed after `after` has nothing left to send."""
    end = end_of(run, sims)
    return after is not None and end is not None and end <= after


def message(kind: str, event_id: str, payload: msgspec.Struct) -> bytes:
    # The data is one line: msgspec escapes every line break inside a JSON string. So the
    # message is put together here, in the field order sse_starlette writes, at a third of
    # what its general encoder costs (a catch-up encodes thousands).
    return b"id: %s\r\nevent: %s\r\ndata: %s\r\n\r\n" % (event_id.encode(), kind.encode(), _encoder.encode(payload))


class SimChange(Sim, frozen=True, kw_only=True, omit_defaults=True):
    """A `sim` event: the sim, and, when the change moved it to another state, its run's
    `sim_counts` after it (as the run's own `sim_counts` in Get a run and `run` events)."""

    run_sim_counts: dict[str, int] | None = None


def _payload(change: Change, places: dict[str, q.Place]) -> msgspec.Struct:
    row = change.row
    match row:
        case SimRow():
            sim = q.sim_from_row(row)
            return sim if change.sim_counts is None else from_row(SimChange, sim, run_sim_counts=dict(change.sim_counts))
        case KernelRow():
            return q.kernel_from_row(row)
        case SimFileRow():
            return q.file_from_row(row, places[row.sim_id])
        case RunRow():
            return q.run_from_row(row)
    raise TypeError(f"no SSE event for {type(row).__name__}")


def encode(change: Change, places: dict[str, q.Place]) -> bytes:
    return message(change.kind, f"{change.seq}.{change.k}", _payload(change, places))


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
        data = encode(change, places)
        self._cache[id(change)] = (change, data)
        if len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return data


_encoded = _Encoded()


class Sent(NamedTuple):
    data: bytes
    ended: bool  # the run's end was among the messages
    # After the changes, the run stands ended at or before the stream's position, and nothing
    # since made it active again: the stream has nothing more to send unless something does.
    over: bool


def messages(
    changes: Sequence[Change],
    places: dict[str, q.Place],
    after: Position,
    encoder: Callable[[Change, dict[str, q.Place]], bytes] = _encoded,
    over: bool = False,
) -> Sent:
    """The messages of the changes past `after` up to the run's end. The end is a `run` change
    past `after` that is not active: an earlier one was an end the run came back from (a retry
    or a top-up made it active again, which a `run` change shows too), and the route answers
    a stream resumed at its last end with 204. `over`: as `Sent.over`, before the changes."""
    parts = []
    again: set[int] | None = None  # the events that make the run active again, once needed
    for change in changes:
        row = change.row
        if (change.seq, change.k) <= after:
            if isinstance(row, RunRow):
                over = row.state != "active"
            continue
        if over:
            # While the run stands ended, only an event that makes it active again is sent
            # (its sims' changes come before its `run` change): any other, such as a file a
            # sim stored late, was in no stream, as every stream ended with the run.
            if again is None:
                again = {c.seq for c in changes if isinstance(c.row, RunRow) and c.row.state == "active"}
            if change.seq not in again:
                continue
        parts.append(encoder(change, places))
        if isinstance(row, RunRow):
            if row.state != "active":
                return Sent(b"".join(parts), ended=True, over=True)
            over = False
    return Sent(b"".join(parts), ended=False, over=over)


class CatchUp:
    """A resumed stream's catch-up: the run's history folded from the log as the projector
    folded it, batch by batch, into the messages of the changes past `after`. The messages
    the projector parked (`skip`, read from the read model up to its checkpoint) are left
    out, as they were from its fold. No I/O, so a worker thread can run it."""

    def __init__(self, after: Position, places: dict[str, q.Place], skip: frozenset[int]) -> None:
        self.after = after
        self.places = places
        self.skip = skip
        self.rows = Rows()
        self.ended = False
        self.over = False

    def __call__(self, frames: Sequence[Frame]) -> bytes:
        items = [item for item in parking.sort_out(frames).items if item[0] not in self.skip]
        folded = fold(self.rows, items)
        self.rows = folded.rows
        # One-off changes: the shared cache is for what every live stream sends.
        sent = messages(folded.changes, self.places, self.after, encode, self.over)
        self.ended, self.over = sent.ended, sent.over
        return sent.data


async def events(c: Cascade, run_id: str, after: Position | None, places: dict[str, q.Place]) -> AsyncIterator[bytes]:
    """The stream's bytes, for a run that exists, whose sims are at `places` (a run's sims
    are all there from its creation on)."""
    # Subscribed before the read, so every change committed after it is queued.
    with c.projector.live.subscribe(run_id) as queue:
        if after is None:
            found = await read(c, q.stream_snapshot, run_id)
            assert found is not None, f"run {run_id} vanished"
            checkpoint, detail = found
            yield message("snapshot", str(checkpoint), detail)
            after, ended = (checkpoint, ALL_OF), detail.state != "active"
        else:
            # The projector moves `applied` on and publishes that batch in one step of the
            # event loop: every batch past this checkpoint reaches the queue. (While the read
            # model is rebuilt, its checkpoint is the old one's, which reads show: the rebuild
            # publishes only what comes after it, `projections/rebuild.py`.)
            checkpoint = c.read_model.seq
            prefix = subjects.run_history(run_id).removesuffix(">")
            catch_up = CatchUp(after, places, await read(c, parked_seqs, prefix, checkpoint))
            async with aclosing(_caught_up(c, run_id, catch_up, checkpoint)) as caught:
                async for data in caught:
                    yield data
            # Over without the end sent: the run ended at or before `after`, which the route's
            # read did not show yet; nothing is left to send, as its 204 would have said.
            ended = catch_up.over
            after = max(after, (checkpoint, ALL_OF))
        while not ended:
            changes = await queue.get()
            if changes is LAGGED:
                return
            sent = messages(changes, places, after)
            if sent.data:
                yield sent.data
            ended = sent.over


async def _caught_up(c: Cascade, run_id: str, catch_up: CatchUp, checkpoint: int) -> AsyncGenerator[bytes, None]:
    """The catch-up's messages, from the run's subjects up to `checkpoint`, each batch folded
    in a worker thread as it arrives: a run's history can be long."""
    history = c.store.raw(subjects.run_history(run_id), 1, until_caught_up=True)
    async with aclosing(history):
        async for frames in history:
            within = [f for f in frames if f[0] <= checkpoint]
            if within:
                data = await anyio.to_thread.run_sync(catch_up, within)
                if data:
                    yield data
            if catch_up.ended or len(within) < len(frames):
                return
