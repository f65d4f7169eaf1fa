"""Reading the stream fast: an ordered push consumer received on a plain protocol connection.

nats-py builds a message object, parses headers and schedules a callback for every message it
delivers, which caps a reader at about 50k messages/s. Replay and the projector need several
times that, and they only want each message's stream sequence, subject and payload. So this
module speaks the (small, documented) NATS client protocol itself on its own connection, cuts
frames straight out of the socket buffer, and keeps the ordered-consumer rules: flow control
answered, consumer sequence checked, and on a gap or a stall the consumer is recreated from
the last sequence it delivered. Consumers are created through the JetStream API on the
regular nats-py connection.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from nats.aio.client import Client

Frame = tuple[int, bytes, bytes]  # stream sequence, subject, payload

_CRLF = b"\r\n"
_HEARTBEAT_S = 2.0


class FirehoseError(ConnectionError):
    pass


class Firehose:
    def __init__(self, nc: Client, stream: str, subject: str, start_seq: int) -> None:
        self.nc = nc
        self.url = nc.connected_url.geturl() if nc.connected_url else ""
        self.stream = stream
        self.subject = subject
        self.next_seq = max(start_seq, 1)
        self._writer: asyncio.StreamWriter | None = None
        self._reader: asyncio.StreamReader | None = None
        self._inbox = ""
        self._sid = 0
        self._consumer = ""
        self._consumer_seq = 0

    async def batches(self, *, until_caught_up: bool) -> AsyncIterator[list[Frame]]:
        """Yield every message from `start_seq` on, in stream order, as they arrive; with
        `until_caught_up`, stop after the message that left nothing pending."""
        await self._connect()
        try:
            pending = await self._subscribe()
            if until_caught_up and pending == 0:
                return
            async for batch, pending in self._frames():
                if batch:
                    yield batch
                if until_caught_up and pending == 0:
                    return
        finally:
            await self._close()

    async def _connect(self) -> None:
        parts = urlsplit(self.url if "://" in self.url else f"nats://{self.url}")
        if parts.scheme not in ("nats", ""):
            raise FirehoseError(f"the stream reader speaks plain nats://, not {parts.scheme}://")
        self._reader, self._writer = await asyncio.open_connection(parts.hostname or "127.0.0.1", parts.port or 4222)
        info = await self._reader.readline()
        if not info.startswith(b"INFO "):
            raise FirehoseError(f"unexpected greeting from {self.url}: {info[:80]!r}")
        connect: dict[str, object] = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True}
        connect |= {"lang": "python-cascade", "version": "1", "protocol": 1}
        if parts.username and parts.password:
            connect |= {"user": parts.username, "pass": parts.password}
        elif parts.username:
            connect["auth_token"] = parts.username
        self._writer.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        await self._writer.drain()
        while (line := await self._reader.readline()) != b"PONG\r\n":
            if line.startswith(b"-ERR") or not line:
                raise FirehoseError(f"{self.url} refused the connection: {line.decode(errors='replace').strip()}")

    async def _subscribe(self) -> int:
        """(Re)create the consumer from `next_seq`; returns how many messages it has pending."""
        assert self._writer is not None
        if self._sid:
            self._writer.write(f"UNSUB {self._sid}\r\n".encode())
            await self._delete_consumer()
        self._sid += 1
        self._inbox = f"_INBOX.cascade.{secrets.token_hex(8)}"
        self._writer.write(f"SUB {self._inbox} {self._sid}\r\n".encode())
        await self._writer.drain()
        config = {
            "deliver_subject": self._inbox,
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

    async def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            await self._delete_consumer()

    async def _frames(self) -> AsyncIterator[tuple[list[Frame], int]]:
        assert self._reader is not None and self._writer is not None
        buf = b""
        pending = -1
        while True:
            try:
                chunk = await asyncio.wait_for(self._reader.read(1 << 20), timeout=_HEARTBEAT_S * 3)
            except TimeoutError:
                # No heartbeat for three periods: the consumer is gone; start it again.
                pending = await self._subscribe()
                yield [], pending
                continue
            if not chunk:
                raise FirehoseError(f"{self.url} closed the connection")
            buf += chunk
            batch: list[Frame] = []
            pos = 0
            reset = False
            sid = str(self._sid).encode()
            while True:
                eol = buf.find(_CRLF, pos)
                if eol < 0:
                    break
                line = buf[pos:eol]
                head = line.split(b" ")
                op = head[0]
                if op == b"HMSG" or op == b"MSG":
                    hdr_len = int(head[-2]) if op == b"HMSG" else 0
                    start, end = eol + 2, eol + 2 + int(head[-1])
                    if end + 2 > len(buf):
                        break
                    pos = end + 2
                    if head[2] != sid:
                        continue  # a message for a consumer we already replaced
                    reply = head[3] if len(head) == (6 if hdr_len else 5) else b""
                    if start + hdr_len == end and buf.startswith(b"NATS/1.0 100", start):
                        reset = self._control(buf[start:end], reply.decode()) or reset
                        continue
                    sseq, cseq, pending = _position(reply)
                    if cseq != self._consumer_seq + 1:
                        reset = True
                        break
                    self._consumer_seq = cseq
                    self.next_seq = sseq + 1
                    batch.append((sseq, head[1], buf[start + hdr_len : end]))
                else:
                    pos = eol + 2
                    if op == b"PING":
                        self._writer.write(b"PONG\r\n")
                    elif op == b"-ERR":
                        raise FirehoseError(f"{self.url}: {line.decode(errors='replace')}")
            buf = buf[pos:]
            if reset:
                buf = b""
                pending = await self._subscribe()
            yield batch, pending

    def _control(self, header: bytes, reply: str) -> bool:
        """Answer flow control and check heartbeats; True if the consumer must be recreated."""
        assert self._writer is not None
        if b"FlowControl" in header and reply:
            self._writer.write(f"PUB {reply} 0\r\n\r\n".encode())
            return False
        for line in header.split(_CRLF):
            name, _, value = line.partition(b":")
            if name == b"Nats-Consumer-Stalled":
                self._writer.write(f"PUB {value.strip().decode()} 0\r\n\r\n".encode())
            elif name == b"Nats-Last-Consumer" and int(value) != self._consumer_seq:
                return True
        return False


def _position(reply: bytes) -> tuple[int, int, int]:
    """Stream sequence, consumer sequence and pending count from a JetStream ack subject."""
    if reply.count(b".") == 8:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending>
        _, sseq, cseq, _, pending = reply.rsplit(b".", 4)
        return int(sseq), int(cseq), int(pending)
    # $JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending>...
    tokens = reply.split(b".")
    return int(tokens[7]), int(tokens[8]), int(tokens[10])
