"""Parking: what the projection cannot use is recorded, and the projection goes on past it.

A stored message is parked when it is no event (`ev.Unreadable`: not JSON, a type or version
this one does not know, an event on a subject it does not belong to), when the fold cannot
apply it (`Unfoldable`), or when DuckDB refuses its rows (a number past 64 bits). Its row in
`parked` (sequence, subject, type if it names one, error, when) is written in the transaction
that moves the checkpoint past it, so a restart does not meet it again and a replay parks
the same messages.

A batch is sorted out first: the messages that are no event are parked with the batch. One
that fails later cuts the batch: the part before it is applied with it parked, and the rest
is applied next, so no good event of the batch is lost.

A message missing from the stream is parked too (`lost`), once a later one shows the gap:
the stream takes no subject but the events' and none of its messages is ever deleted, so a
sequence the server does not deliver is a message it could not read back from its store (a
damaged block file, which it drops without a word). Its subject is lost with it; its row
names the messages stored around it.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec

from cascade_core import events as ev
from cascade_nats import subjects
from cascade_nats.firehose import Frame
from projections.rows import ParkedRow


class Batch(msgspec.Struct, frozen=True):
    """Stream messages from one sequence to `last_seq`: the events to apply, in order, and
    the messages among them already parked."""

    items: list[tuple[int, ev.AnyEvent]]
    parked: list[ParkedRow]
    last_seq: int


LOST = "lost: nats-server could not read it back from its store"


def sort_out(frames: Sequence[Frame], after: int | None = None) -> Batch:
    """The frames' events, and what is parked because it is none; with `after`, the frames
    being the whole stream's from the sequence after it on, also the messages missing
    among them (`lost`)."""
    batch = _sorted_out(frames)
    missing = [] if after is None else lost(frames, after)
    if not missing:
        return batch
    return Batch(batch.items, sorted(batch.parked + missing, key=operator.attrgetter("seq")), batch.last_seq)


def lost(frames: Sequence[Frame], after: int, up_to: int | None = None) -> list[ParkedRow]:
    """A row for each sequence missing from the frames read from the whole stream after
    `after`, naming the subjects stored around it; with `up_to`, the frames being all the
    stream delivers, those missing after them up to it too."""
    rows = []
    before_seq, before = after, "the messages before"
    for seq, subject, _ in [*frames, *([] if up_to is None else [(up_to + 1, b"", b"")])]:
        stored = f"{subject.decode(errors='replace')} (sequence {seq})" if subject else "the end of what the stream delivers"
        for missing in range(before_seq + 1, seq):
            rows.append(_row(missing, "", None, f"{LOST}; stored after {before} and before {stored}"))
        before_seq, before = seq, stored
    return rows


def _sorted_out(frames: Sequence[Frame]) -> Batch:
    seqs, stored_on, payloads = (list(map(operator.itemgetter(i), frames)) for i in range(3))  # each in C calls: batches are long
    try:
        events = ev.decode_all(payloads)
    except ev.Unreadable:
        return _one_by_one(frames)
    if not subjects.all_belong(events, stored_on):
        return _one_by_one(frames)
    return Batch(list(zip(seqs, events)), [], frames[-1][0])


def _one_by_one(frames: Sequence[Frame]) -> Batch:
    items: list[tuple[int, ev.AnyEvent]] = []
    parked: list[ParkedRow] = []
    for seq, subject, data in frames:
        try:
            items.append((seq, subjects.decode(subject, data)))
        except ev.Unreadable as err:
            parked.append(_row(seq, subject.decode(errors="replace"), err.event_type, err.error))
    return Batch(items, parked, frames[-1][0])


def park(batch: Batch, seq: int, error: str) -> tuple[Batch, Batch | None]:
    """`batch` cut at its event at `seq`, which is parked: the part up to and with it, and
    the rest if anything is left."""
    cut = next(i for i, (s, _) in enumerate(batch.items) if s == seq)
    event = batch.items[cut][1]
    row = _row(seq, subjects.of(event), ev.event_type(event), error)
    head = Batch(batch.items[:cut], [p for p in batch.parked if p.seq < seq] + [row], seq)
    rest = Batch(batch.items[cut + 1 :], [p for p in batch.parked if p.seq > seq], batch.last_seq)
    return head, rest if rest.items or rest.parked else None


def halves(batch: Batch) -> tuple[Batch, Batch]:
    """`batch` in two, each with at least one of its two or more events."""
    middle = len(batch.items) // 2
    first_of_second = batch.items[middle][0]
    first = Batch(batch.items[:middle], [p for p in batch.parked if p.seq < first_of_second], first_of_second - 1)
    second = Batch(batch.items[middle:], [p for p in batch.parked if p.seq > first_of_second], batch.last_seq)
    return first, second


def join(first: Batch | None, second: Batch | None) -> Batch | None:
    """Two batches that follow each other, as one."""
    if first is None or second is None:
        return first or second
    return Batch(first.items + second.items, first.parked + second.parked, second.last_seq)


def _row(seq: int, subject: str, event_type: str | None, error: str) -> ParkedRow:
    return ParkedRow(seq=seq, subject=subject, event_type=event_type, error=error, parked_at=datetime.now(UTC))
