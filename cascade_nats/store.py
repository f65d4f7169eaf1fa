"""The event store: one file-backed JetStream stream holding every event.

- `append` is idempotent (the event id is the `Nats-Msg-Id`) and, given the sequence of
  the last event on the aggregate's subject, optimistic: a stale expectation raises
  `ConcurrencyError` instead of storing.
- `append_facts` sends many events pipelined (async publish) and waits for all their acks,
  for the runner's bulk output where there is nothing to decide.
- `read` / `raw` deliver stored events in stream order through the firehose reader;
  `history` also the messages that are no event (`ev.Unreadable`), which `read` passes over.
- `at` delivers the messages at given sequences (direct gets, pipelined): a sim's log is
  read so from its heartbeats (`cascade_app/sim_logs.py`).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncGenerator, Iterable, Sequence

import msgspec
import nats.js.api as api
import nats.js.errors
from nats.aio.client import Client
from nats.js.client import JetStreamContext

from cascade_core import events as ev
from cascade_host import new_ids
from cascade_nats import subjects
from cascade_nats.connect import beside
from cascade_nats.firehose import Firehose, Frame
from cascade_nats.pipeline import Pipeline, PublishError
from cascade_nats.replicas import kept

# The server's default max_payload is 1 MiB; events stay well under it, anything bigger is a
# file in the object store that an event refers to.
MAX_EVENT_BYTES = 512 * 1024
DUPLICATE_WINDOW_S = 120.0
# Direct gets in flight at once when reading messages by sequence: enough to hide the round
# trips (more gained nothing, bench/README.md), few enough that the answers waiting stay a
# few MB however large the heartbeats.
DIRECT_WINDOW = 32


class ConcurrencyError(Exception):
    """Another command appended to the aggregate first."""


class EventTooLarge(ValueError):
    pass


class StoreError(RuntimeError):
    pass


class Stored(msgspec.Struct, frozen=True):
    seq: int
    subject: str
    event: ev.AnyEvent


class Unread(msgspec.Struct, frozen=True, kw_only=True):
    """A stored message that is no event, where a history has it (the projector parks it)."""

    seq: int
    subject: str
    error: str
    event_type: str | None


def _headers(event: ev.Event, expected_last_subject_seq: int | None) -> dict[str, str]:
    headers = {"Nats-Msg-Id": event.id}
    if expected_last_subject_seq is not None:
        headers["Nats-Expected-Last-Subject-Sequence"] = str(expected_last_subject_seq)
    return headers


def _payload(event: ev.Event) -> bytes:
    data = ev.encode(event)
    if len(data) > MAX_EVENT_BYTES:
        raise EventTooLarge(f"{ev.event_type(event)} is {len(data)} bytes, over the {MAX_EVENT_BYTES} limit")
    return data


class EventStore:
    def __init__(self, nc: Client, stream: str = subjects.STREAM) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=10.0)
        self.stream = stream
        self.pipeline = Pipeline(nc)

    async def ensure_stream(self, replicas: int | None = None) -> None:
        """Create the stream, or bring an existing one's config up to date; with `replicas`
        (None: as it is, one for a new stream), never fewer than it has (`replicas.kept`)."""
        config = api.StreamConfig(
            name=self.stream,
            subjects=[subjects.ALL],
            storage=api.StorageType.FILE,
            retention=api.RetentionPolicy.LIMITS,
            duplicate_window=DUPLICATE_WINDOW_S,
            allow_direct=True,
            num_replicas=replicas or 1,
        )
        try:
            await self.js.add_stream(config)
        except nats.js.errors.BadRequestError:  # it exists, configured otherwise
            info = await self.js.stream_info(self.stream)
            await self.js.update_stream(config.evolve(num_replicas=kept(self.stream, info.config.num_replicas or 1, replicas)))

    async def append(self, event: ev.Event, *, expected_last_subject_seq: int | None = None) -> int:
        """Store one event; returns its stream sequence (the original's, for a retry)."""
        subject = subjects.of(event)
        try:
            ack = await self.js.publish(
                subject, _payload(event), stream=self.stream, headers=_headers(event, expected_last_subject_seq)
            )
        except nats.js.errors.APIError as err:
            if err.err_code != 10071:  # JSStreamWrongLastSequenceErrF
                raise
            # The server checks the expected sequence before it deduplicates, so a retried
            # append of our own event lands here: it is stored already, not a conflict.
            last = await self.last_on(subject)
            if last is not None and last.event.id == event.id:
                return last.seq
            raise ConcurrencyError(str(err.description)) from err
        return ack.seq

    async def append_facts(self, events: Sequence[ev.Event], *, timeout: float = 10.0) -> list[int]:
        """Store events pipelined, in order; returns their sequences once all are acked.

        A failure raises after the rest were sent; sending the same events again is safe,
        since every event id is deduplicated."""
        messages = [(subjects.of(e), _payload(e), e.id) for e in events]
        try:
            return await self.pipeline.publish_all(messages, timeout)
        except PublishError as err:
            raise StoreError(str(err)) from err

    async def close(self) -> None:
        """Close the connection pipelined appends use (the nats-py client is the caller's)."""
        await self.pipeline.close()

    async def last_seq(self) -> int:
        info = await self.js.stream_info(self.stream)
        return info.state.last_seq

    async def last_on(self, subject: str) -> Stored | None:
        """The newest event on a subject, or None if it has none.

        If the newest message is no event, the event is the newest before it, and `seq` stays
        the subject's last sequence, the one an append after it must expect; `ev.Unreadable`
        if no message on the subject is an event."""
        try:
            msg = await self.js.get_last_msg(self.stream, subject, direct=True)
        except nats.js.errors.NotFoundError:
            return None
        seq = msg.seq or 0
        try:
            return Stored(seq, subject, subjects.decode(subject.encode(), msg.data or b""))
        except ev.Unreadable:
            readable = [item async for item in self.read(subject)]
            if not readable:
                raise
            return Stored(seq, subject, readable[-1].event)

    async def read(self, subject: str = subjects.ALL, start_seq: int = 1) -> AsyncGenerator[Stored, None]:
        """Every stored event on `subject` from `start_seq` until none is pending, oldest first."""
        async with contextlib.aclosing(self.history(subject, start_seq)) as items:
            async for item in items:
                if isinstance(item, Stored):
                    yield item

    async def history(self, subject: str = subjects.ALL, start_seq: int = 1) -> AsyncGenerator[Stored | Unread, None]:
        """Every stored message on `subject`, as `read` gives them, and those that are no event."""
        async with contextlib.aclosing(self.raw(subject, start_seq, until_caught_up=True)) as batches:
            async for batch in batches:
                for seq, subj, data in batch:
                    try:
                        event = subjects.decode(subj, data)
                    except ev.Unreadable as err:
                        yield Unread(seq=seq, subject=subj.decode(errors="replace"), error=err.error, event_type=err.event_type)
                        continue
                    yield Stored(seq, subj.decode(), event)

    async def at(self, seqs: Iterable[int], *, timeout: float = 10.0) -> AsyncGenerator[Frame, None]:
        """The stored messages at `seqs`, in that order, as (sequence, subject, payload).

        Direct gets pipelined on a Wire of their own, `DIRECT_WINDOW` in flight, each answer
        known by its reply subject's number; a replica may answer one it has not got yet
        (behind its leader) as missing, and that one is asked of the leader."""
        wanted = iter(seqs)
        wire = await beside(self.nc)
        try:
            inbox = new_ids.inbox("cascade")
            mine = wire.subscribe(f"{inbox}.*")
            direct = f"$JS.API.DIRECT.GET.{self.stream}"
            asked: deque[int] = deque()  # the sequences asked for and not yet yielded, in order
            first = 0  # the number of the oldest of them (requests are numbered from 0)
            subjects_of: dict[int, bytes | None] = {}  # answered, by number: the subject, None if missing
            payloads: dict[int, bytes] = {}

            def ask() -> None:
                while len(asked) < DIRECT_WINDOW and (seq := next(wanted, None)) is not None:
                    wire.publish(direct, b'{"seq":%d}' % seq, reply=f"{inbox}.{first + len(asked)}")
                    asked.append(seq)

            ask()
            if not asked:
                return
            await wire.writer.drain()
            async for messages in wire.messages(timeout=timeout):
                for sid, subject, _, header_length, body in messages:
                    if sid == mine:
                        n = int(subject.rpartition(b".")[2])
                        subjects_of[n] = _answered(body[:header_length])
                        payloads[n] = body[header_length:]
                while first in subjects_of:
                    found, payload, seq = subjects_of.pop(first), payloads.pop(first), asked.popleft()
                    first += 1
                    yield (seq, found, payload) if found is not None else await self._from_leader(seq)
                ask()
                if not asked:
                    return
                await wire.writer.drain()
        finally:
            wire.close()

    async def _from_leader(self, seq: int) -> Frame:
        try:
            msg = await self.js.get_msg(self.stream, seq)
        except nats.js.errors.NotFoundError as err:
            raise StoreError(f"{self.stream} has no message at sequence {seq}") from err
        return seq, (msg.subject or "").encode(), msg.data or b""

    def raw(self, subject: str, start_seq: int, *, until_caught_up: bool, headers_only: bool = False) -> AsyncGenerator[list[Frame], None]:
        """Undecoded (sequence, subject, payload) batches, as fast as the server sends them;
        with `headers_only`, each payload is the message's headers (which say its size)."""
        firehose = Firehose(nc=self.nc, stream=self.stream, subject=subject, start_seq=start_seq, headers_only=headers_only)
        return firehose.batches(until_caught_up=until_caught_up)


def _answered(header: bytes) -> bytes | None:
    """The stored subject a direct get's answer names (its headers); None for a message the
    server does not have."""
    status, *lines = header.split(b"\r\n")
    if status.startswith(b"NATS/1.0 404"):
        return None
    if status.strip() != b"NATS/1.0":
        raise StoreError(f"a direct get failed: {status.decode(errors='replace')}")
    for line in lines:
        name, _, value = line.partition(b":")
        if name == b"Nats-Subject":
            return value.strip()
    raise StoreError("a direct get answered without the message's subject")
