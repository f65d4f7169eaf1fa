"""Reading the stream fast: an ordered push consumer received on a `Wire` of its own.

Replay and the projector want each message's stream sequence, subject and payload, several
hundred thousand a second; nats-py delivers about 50k. This keeps the ordered-consumer rules
itself: flow control answered, consumer sequence checked, and on a gap or a stall the consumer
is recreated from the last sequence it delivered. Consumers are created through the JetStream
API on the regular nats-py connection.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

from nats.aio.client import Client

from cascade_host import new_ids
from cascade_nats import _frames
from cascade_nats.connect import beside
from cascade_nats.wire import Message, Wire

Frame = tuple[int, bytes, bytes]  # stream sequence, subject, payload

_HEARTBEAT_S = 2.0


class FirehoseError(ConnectionError):
    pass


class Firehose:
    def __init__(self, *, nc: Client, stream: str, subject: str, start_seq: int, headers_only: bool = False) -> None:
        self.nc = nc
        self.stream = stream
        self.subject = subject
        self.next_seq = max(start_seq, 1)
        self.headers_only = headers_only  # each message's headers, and no payload: for its sequence and subject alone
        self._wire: Wire | None = None
        self._sid = b""
        self._consumer = ""
        self._consumer_seq = 0
        # The server said, by an idle heartbeat after the last message received, that it has
        # nothing more to send now.
        self._idle = False

    async def batches(self, *, until_caught_up: bool) -> AsyncGenerator[list[Frame], None]:
        """Yield every message from `start_seq` on, in stream order, as they arrive; with
        `until_caught_up`, stop after the message that left nothing pending, or once the
        server is idle: a message it cannot read back from its store (a damaged block) stays
        counted as pending, but never comes."""
        self._wire = await beside(self.nc)
        try:
            pending = await self._subscribe()
            if until_caught_up and pending == 0:
                return
            while True:
                try:
                    await self._wire.read(timeout=_HEARTBEAT_S * 3)
                    batch, pending, gap = self._received()
                except TimeoutError:
                    # No heartbeat for three periods: the consumer is gone; start it again.
                    pending = await self._subscribe()
                    continue
                except ConnectionError:
                    # The server dropped this connection: as a slow consumer when the reader
                    # paused to let the writes of what it had catch up, or a connection
                    # reset. What arrived whole was yielded; take it up again from there.
                    pending = await self._reconnected()
                    continue
                if gap:
                    pending = await self._subscribe()
                if batch:
                    yield batch
                if until_caught_up and (pending == 0 or self._idle):
                    return
        finally:
            self._wire.close()
            await self._delete_consumer()

    def _received(self) -> tuple[list[Frame], int, bool]:
        """The stream messages among what the wire received, the last one's pending count (-1:
        none came), and whether the consumer must be recreated. The stream's messages in order
        are cut by `_frames.take` in C (this is replay's hot path); the rest, one at a time, by
        the wire and `_take`."""
        assert self._wire is not None
        start = self.next_seq
        try:
            return self._taken(self._wire)
        except ConnectionError:
            # An error the server sent ends the connection: what this read took goes, and
            # the next consumer delivers it again from where the last yielded batch ended.
            self.next_seq = start
            raise

    def _taken(self, wire: Wire) -> tuple[list[Frame], int, bool]:
        batch: list[Frame] = []
        pending = -1
        while True:
            taken = len(batch)
            wire.pos, self._consumer_seq, taken_pending, stop = _frames.take(wire.buffer, wire.pos, self._sid, self._consumer_seq, batch)
            pending = taken_pending if taken_pending >= 0 else pending
            self._idle = self._idle and len(batch) == taken
            if stop == _frames.GAP:
                gap = True
                break
            message = wire.message() if stop == _frames.OTHER else None
            if message is None:
                gap = False
                break
            frames, one_pending, gap = self._take([message])
            batch += frames
            pending = one_pending if one_pending >= 0 else pending
            if gap:
                break
        if batch:
            self.next_seq = batch[-1][0] + 1
        return batch, pending, gap

    def _take(self, messages: list[Message]) -> tuple[list[Frame], int, bool]:
        """The stream messages among what arrived; whether the consumer must be recreated.
        Replay runs it on every message: its counters are locals, and ack subjects' numbers
        are made ints only where needed."""
        batch: list[Frame] = []
        append = batch.append
        pending = b"-1"
        gap = False
        mine = self._sid
        expected = self._consumer_seq + 1
        for sid, subject, reply, header_length, body in messages:
            if sid != mine:
                continue  # for a consumer already replaced
            if header_length and header_length == len(body) and body.startswith(b"NATS/1.0 100"):
                self._consumer_seq = expected - 1  # what a heartbeat's last delivered is checked against
                gap = self._control(body, reply.decode()) or gap
                continue
            sseq, cseq, pending = _position(reply)
            self._idle = False
            if int(cseq) != expected:
                gap = True
                break
            expected += 1
            append((int(sseq), subject, body[header_length:] if header_length else body))
        self._consumer_seq = expected - 1
        if batch:
            self.next_seq = batch[-1][0] + 1
        return batch, int(pending), gap

    async def _reconnected(self) -> int:
        """A new wire, and the consumer made again on it from `next_seq`; its pending count."""
        assert self._wire is not None
        self._wire.close()
        self._wire = await beside(self.nc)
        self._sid = b""  # the old subscription went with the old wire
        await self._delete_consumer()
        return await self._subscribe()

    async def _subscribe(self) -> int:
        """(Re)create the consumer from `next_seq`; returns how many messages it has pending."""
        assert self._wire is not None
        if self._sid:
            self._wire.unsubscribe(self._sid)
            await self._delete_consumer()
        inbox = new_ids.inbox("cascade")
        self._sid = self._wire.subscribe(inbox)
        await self._wire.writer.drain()
        config = {
            "deliver_subject": inbox,
            "deliver_policy": "by_start_sequence",
            "opt_start_seq": self.next_seq,
            "ack_policy": "none",
            "max_deliver": 1,
            "flow_control": True,
            "idle_heartbeat": int(_HEARTBEAT_S * 1e9),
            "filter_subject": self.subject,
            "mem_storage": True,
            "num_replicas": 1,
            "inactive_threshold": int(60e9),
            "headers_only": self.headers_only,
        }
        request = json.dumps({"stream_name": self.stream, "config": config}).encode()
        reply = await self.nc.request(f"$JS.API.CONSUMER.CREATE.{self.stream}", request, timeout=10)
        info = json.loads(reply.data)
        if "error" in info:
            raise FirehoseError(f"cannot create a consumer on {self.stream}: {info['error'].get('description')}")
        self._consumer = info["name"]
        self._consumer_seq = 0
        return int(info.get("num_pending", 0))

    async def _delete_consumer(self) -> None:
        try:
            await self.nc.request(f"$JS.API.CONSUMER.DELETE.{self.stream}.{self._consumer}", b"", timeout=5)
        except Exception:  # noqa: BLE001 - an ephemeral consumer also goes away on its own
            pass

    def _control(self, header: bytes, reply: str) -> bool:
        """Answer flow control and check heartbeats; True if the consumer must be recreated."""
        assert self._wire is not None
        if b"FlowControl" in header and reply:
            self._wire.publish(reply)
            return False
        stalled = False
        for line in header.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name == b"Nats-Consumer-Stalled":
                self._wire.publish(value.strip().decode())
                stalled = True
            elif name == b"Nats-Last-Consumer" and int(value) != self._consumer_seq:
                return True
        self._idle = not stalled
        return False


def _position(reply: bytes) -> tuple[bytes, bytes, bytes]:
    """Stream sequence, consumer sequence and pending count, as digits, from a JetStream ack
    subject: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending>, or
    with <domain>.<account> after ACK and a random token at the end."""
    tokens = reply.split(b".")
    if len(tokens) == 9:
        return tokens[5], tokens[6], tokens[8]
    return tokens[7], tokens[8], tokens[10]
