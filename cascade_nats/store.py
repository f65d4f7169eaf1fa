"""The event store: one file-backed JetStream stream holding every event.

- `append` is idempotent (the event id is the `Nats-Msg-Id`) and, given the sequence of
  the last event on the aggregate's subject, optimistic: a stale expectation raises
  `ConcurrencyError` instead of storing.
- `append_facts` sends many events pipelined (async publish) and waits for all their acks,
  for the runner's bulk output where there is nothing to decide.
- `read` / `tail` deliver stored events in stream order through an ordered consumer.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence

import msgspec
import nats.js.api as api
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.client import JetStreamContext

from cascade_core import events as ev
from cascade_core import subjects
from cascade_nats.firehose import Firehose, Frame

# The server's default max_payload is 1 MiB; events stay well under it, anything bigger is a
# file in the object store that an event refers to.
MAX_EVENT_BYTES = 512 * 1024
DUPLICATE_WINDOW_S = 120.0


class ConcurrencyError(Exception):
    """Another command appended to the aggregate first."""


class EventTooLarge(ValueError):
    pass


class StoreError(RuntimeError):
    pass


class _PubAck(msgspec.Struct):
    seq: int = 0
    duplicate: bool = False
    error: dict[str, object] | None = None


_ack_decoder = msgspec.json.Decoder(_PubAck)
_MAX_IN_FLIGHT = 8192


class _AckBatch:
    """Acks of one pipelined append, matched to their events by index."""

    def __init__(self, size: int) -> None:
        self.seqs = [0] * size
        self.acked = 0
        self.error: str | None = None
        self.done = asyncio.Event()
        self._progress = asyncio.Event()
        if size == 0:
            self.done.set()

    def record(self, index: int, ack: _PubAck) -> None:
        if self.seqs[index]:
            return
        if ack.error is not None:
            self.error = self.error or str(ack.error.get("description", ack.error))
            self.seqs[index] = -1
        else:
            self.seqs[index] = ack.seq
        self.acked += 1
        self._progress.set()
        if self.acked == len(self.seqs):
            self.done.set()

    async def wait_below(self, sent: int) -> None:
        while self.acked < sent:
            self._progress.clear()
            await self._progress.wait()


class Stored(msgspec.Struct, frozen=True):
    seq: int
    subject: str
    event: ev.Event


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
        self._inbox = nc.new_inbox()
        self._ack_sub: Subscription | None = None
        self._batches: dict[str, _AckBatch] = {}
        self._batch_ids = itertools.count()

    async def ensure_stream(self) -> None:
        config = api.StreamConfig(
            name=self.stream,
            subjects=[subjects.ALL],
            storage=api.StorageType.FILE,
            retention=api.RetentionPolicy.LIMITS,
            duplicate_window=DUPLICATE_WINDOW_S,
            allow_direct=True,
        )
        try:
            await self.js.add_stream(config)
        except nats.js.errors.BadRequestError:
            await self.js.update_stream(config)

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
        batch = _AckBatch(len(events))
        prefix = await self._ack_prefix()
        key = str(next(self._batch_ids))
        self._batches[key] = batch
        try:
            for i, event in enumerate(events):
                if i - batch.acked >= _MAX_IN_FLIGHT:
                    await asyncio.wait_for(batch.wait_below(i - _MAX_IN_FLIGHT // 2), timeout)
                await self.nc.publish(
                    subjects.of(event), _payload(event), reply=f"{prefix}.{key}.{i}", headers=_headers(event, None)
                )
            await asyncio.wait_for(batch.done.wait(), timeout)
        finally:
            del self._batches[key]
        if batch.error is not None:
            raise StoreError(batch.error)
        return batch.seqs

    async def _ack_prefix(self) -> str:
        if self._ack_sub is None:
            self._ack_sub = await self.nc.subscribe(
                f"{self._inbox}.*.*", cb=self._on_ack, pending_msgs_limit=-1, pending_bytes_limit=-1
            )
        return self._inbox

    async def _on_ack(self, msg: Msg) -> None:
        _, key, index = msg.subject.rsplit(".", 2)
        batch = self._batches.get(key)
        if batch is None:
            return
        if not msg.data:  # a status reply, such as 503: no stream takes this subject
            status = (msg.headers or {}).get("Status", "no status")
            batch.record(int(index), _PubAck(error={"description": f"no stream stored it (status {status})"}))
        else:
            batch.record(int(index), _ack_decoder.decode(msg.data))

    async def last_seq(self) -> int:
        info = await self.js.stream_info(self.stream)
        return info.state.last_seq

    async def last_on(self, subject: str) -> Stored | None:
        """The newest event on a subject, or None if it has none."""
        try:
            msg = await self.js.get_last_msg(self.stream, subject, direct=True)
        except nats.js.errors.NotFoundError:
            return None
        return Stored(msg.seq or 0, msg.subject, ev.decode(msg.data or b""))

    async def read(self, subject: str = subjects.ALL, start_seq: int = 1) -> AsyncIterator[Stored]:
        """Every stored event on `subject` from `start_seq` until none is pending, oldest first."""
        async for batch in self.raw(subject, start_seq, until_caught_up=True):
            for seq, subj, data in batch:
                yield Stored(seq, subj, ev.decode(data))

    def raw(self, subject: str, start_seq: int, *, until_caught_up: bool) -> AsyncIterator[list[Frame]]:
        """Undecoded (sequence, subject, payload) batches, as fast as the server sends them."""
        return Firehose(self.nc, self.stream, subject, start_seq).batches(until_caught_up=until_caught_up)
