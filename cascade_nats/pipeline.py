"""Pipelined JetStream publishing: many messages in flight, each ack matched to its message.

Messages go out as protocol frames on a `Wire` of the pipeline's own, and the acks come back
on one wildcard inbox, matched to their batch and index by the reply subject and read with a
byte search rather than a JSON object per ack. The messages and the bytes in flight are
bounded, so a fast producer waits for acks instead of growing buffers without limit, and
nats-server never holds more of a batch than it takes (it refuses a stream's messages with
"too many requests" past 128 MiB waiting to be stored: a 5 GB log's object, 1 GiB in flight,
was refused again and again). If the connection drops,
every batch in flight fails and the next one connects again: sending the same events again
is safe, since every event id is deduplicated.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import re
from collections.abc import Sequence

from nats.aio.client import Client

from cascade_host import new_ids
from cascade_nats.connect import beside
from cascade_nats.wire import Wire, WireError

MAX_IN_FLIGHT = 8192
MAX_IN_FLIGHT_BYTES = 8 << 20  # a batch's: several runners' batches share a stream's 128 MiB
_WRITE_AT = 256 << 10  # bytes of frames gathered before they are written
_DRAIN_AT = 4 << 20  # bytes waiting in the socket's buffer before a publisher yields to it


class PublishError(RuntimeError):
    pass


class Batch:
    """One pipelined publish: send with `publish`, then `await done()` for the sequences."""

    def __init__(self, *, pipeline: Pipeline, wire: Wire, key: str, timeout: float) -> None:
        self._pipeline = pipeline
        self._wire = wire
        self._reply = f"{pipeline.inbox}.{key}."
        self._timeout = timeout
        self.seqs: list[int] = []
        self.acked = 0
        self.error: str | None = None
        self._progress = asyncio.Event()
        self._out = bytearray()
        self._sent = 0  # payload bytes framed
        self._ends: list[int] = []  # `_sent` after each message

    async def publish(self, subject: str, payload: bytes, msg_id: str | None = None) -> None:
        if self.add(subject, payload, msg_id):
            await self.settle()

    def add(self, subject: str, payload: bytes, msg_id: str | None = None) -> bool:
        """Frame one message without waiting: True once the caller must `await settle()`
        (enough frames gathered to write, or as many in flight as allowed)."""
        index = len(self.seqs)
        self.seqs.append(0)
        reply = f"{self._reply}{index}"
        out = self._out
        if msg_id is None:
            out += f"PUB {subject} {reply} {len(payload)}\r\n".encode()
        else:
            header = f"NATS/1.0\r\nNats-Msg-Id: {msg_id}\r\n\r\n".encode()
            out += f"HPUB {subject} {reply} {len(header)} {len(header) + len(payload)}\r\n".encode()
            out += header
        out += payload
        out += b"\r\n"
        self._sent += len(payload)
        self._ends.append(self._sent)
        return len(out) >= _WRITE_AT or self._enough_acked() > self.acked

    def _enough_acked(self) -> int:
        """How many acks the batch must have to go on: with as many messages or bytes in flight
        as allowed, those that leave half of them in flight (acks come mostly in order)."""
        by_count = len(self.seqs) - MAX_IN_FLIGHT // 2 if len(self.seqs) - self.acked >= MAX_IN_FLIGHT else 0
        in_flight = self._sent - (self._ends[self.acked - 1] if self.acked else 0)
        by_bytes = bisect.bisect_right(self._ends, self._sent - MAX_IN_FLIGHT_BYTES // 2) if in_flight >= MAX_IN_FLIGHT_BYTES else 0
        return max(by_count, by_bytes)

    async def settle(self) -> None:
        """Write what is gathered; with too many messages or bytes in flight, wait until half are acked."""
        await self._flush()
        enough = self._enough_acked()
        if enough > self.acked:
            await asyncio.wait_for(self._acked(enough), self._timeout)

    async def _flush(self) -> None:
        # Frames go to the socket in large writes: a write per message costs a system call each.
        if self._out:
            self._wire.writer.write(bytes(self._out))
            self._out.clear()
            if self._wire.writer.transport.get_write_buffer_size() > _DRAIN_AT:
                await self._wire.writer.drain()

    async def done(self) -> list[int]:
        """Wait for every ack; the stream sequences in publish order."""
        await self._flush()
        await asyncio.wait_for(self._acked(len(self.seqs)), self._timeout)
        if self.error is not None:
            raise PublishError(self.error)
        return self.seqs

    def record(self, index: int, seq: int, error: str | None) -> None:
        if index >= len(self.seqs) or self.seqs[index]:
            return
        if error is not None:
            self.error = self.error or error
            self.seqs[index] = -1
        else:
            self.seqs[index] = seq
        self.acked += 1
        self._progress.set()

    def fail(self, error: str) -> None:
        self.error = self.error or error
        self.acked = len(self.seqs)
        self._progress.set()

    async def _acked(self, count: int) -> None:
        while self.acked < count:
            self._progress.clear()
            await self._progress.wait()


class Pipeline:
    """Publishing on a Wire beside `nc`, dialled again (where `nc` is by then) when it drops."""

    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self.inbox = new_ids.inbox("pipe")
        self._wire: Wire | None = None
        self._reader: asyncio.Task[None] | None = None
        self._batches: dict[bytes, Batch] = {}
        self._ids = itertools.count()
        self._connecting = asyncio.Lock()

    async def batch(self, timeout: float = 10.0) -> Batch:
        wire = await self._connected()
        key = str(next(self._ids))
        batch = Batch(pipeline=self, wire=wire, key=key, timeout=timeout)
        self._batches[key.encode()] = batch
        return batch

    def release(self, batch: Batch) -> None:
        """Stop matching acks to a batch that is done with."""
        self._batches.pop(batch._reply.rsplit(".", 2)[-2].encode(), None)

    async def publish_all(self, messages: Sequence[tuple[str, bytes, str | None]], timeout: float = 10.0) -> list[int]:
        batch = await self.batch(timeout)
        try:
            for subject, payload, msg_id in messages:
                if batch.add(subject, payload, msg_id):
                    await batch.settle()
            return await batch.done()
        finally:
            self.release(batch)

    async def _connected(self) -> Wire:
        async with self._connecting:
            if self._wire is None:
                wire = await beside(self.nc)
                try:
                    wire.subscribe(f"{self.inbox}.*.*")
                    await wire.writer.drain()
                except BaseException:
                    wire.close()
                    raise
                self._wire = wire
                self._reader = asyncio.create_task(self._read_acks(wire))
            return self._wire

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def _read_acks(self, wire: Wire) -> None:
        reason = "the pipeline was closed"
        try:
            async for messages in wire.messages():
                for _, subject, _, header_length, body in messages:
                    _, key, index = subject.rsplit(b".", 2)
                    batch = self._batches.get(key)
                    if batch is not None:
                        seq, error = _ack(body[header_length:], body[:header_length])
                        batch.record(int(index), seq, error)
        except (WireError, OSError) as err:
            reason = f"lost the connection to {wire.url}: {err}"
        finally:
            self._wire = None
            wire.close()
            for batch in list(self._batches.values()):
                batch.fail(reason)


def _ack(payload: bytes, header: bytes) -> tuple[int, str | None]:
    """The stream sequence of a JetStream publish ack, or why it failed."""
    if not payload:  # a status reply, such as 503: no stream takes this subject
        status = header[9:12].decode(errors="replace") if header.startswith(b"NATS/1.0 ") else "no status"
        return 0, f"no stream stored it (status {status})"
    if b'"error"' in payload:
        start = payload.find(b'"description":"')
        description = payload[start + 15 : payload.find(b'"', start + 15)] if start >= 0 else payload
        return 0, description.decode(errors="replace")
    found = _SEQ.search(payload)
    return (int(found[1]), None) if found else (0, f"an ack without a sequence: {payload[:80]!r}")


_SEQ = re.compile(rb'"seq":(\d+)')
