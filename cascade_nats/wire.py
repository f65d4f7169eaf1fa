"""The NATS client protocol spoken directly, for the two bulk paths: reading the stream and
appending many events.

nats-py builds a message object, parses headers and schedules a callback per message, and
parses a PubAck object per publish: about 50k messages/s either way on this machine, most of
it spent on objects nobody needs. A `Wire` is a plain connection on which the caller writes
protocol lines in bulk and gets back each message as a tuple cut straight from the socket
buffer. Everything else (JetStream API requests, key-value, object metadata) stays on nats-py.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:  # imported only for its type: `access` imports `redacted` from here
    from cascade_nats.access import Access

# sid, subject, reply, header length, body (header then payload)
Message = tuple[bytes, bytes, bytes, int, bytes]

_CRLF = b"\r\n"
READ_SIZE = 1 << 20
# What comes between a URL's `://` and the last `@` of its authority: user and password, or
# a token. Greedy, so that an `@` in a password hides all of it.
_CREDENTIALS = re.compile(r"(?<=://)[^/\s\"']*@")
REDACTED = "[redacted]"


class WireError(ConnectionError):
    pass


def redacted(text: str) -> str:
    """`text` with the credentials of every URL in it replaced: `nats://[redacted]@host:port`."""
    return _CREDENTIALS.sub(f"{REDACTED}@", text)


def without_credentials(url: str) -> str:
    """Where `url` points, `nats://host:port`, without what logs in there."""
    return _CREDENTIALS.sub("", url)


class Wire:
    def __init__(self, *, url: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, info: dict[str, Any]) -> None:
        self.url = redacted(url)  # for messages
        self.reader = reader
        self.writer = writer
        self.info = info  # the server's INFO
        self._sids = 0
        # What arrived and is not read yet: from `pos` on (cut out as it is read, not before).
        self.buffer = b""
        self.pos = 0

    @classmethod
    async def open(cls, server: str, access: Access) -> Wire:
        """A connection to `server` (one of `access`'s, or one the cluster told of), logged in
        as `access` says: TLS when the server requires it or the URL is `tls://`."""
        parts = urlsplit(server)
        host = parts.hostname or "127.0.0.1"
        reader, writer = await asyncio.open_connection(host, parts.port or 4222)
        try:
            info = await _info(server, reader)
            try:
                if info.get("tls_required") or parts.scheme == "tls":
                    context = access.tls_context() or ssl.create_default_context()
                    await writer.start_tls(context, server_hostname=access.tls_name(host))
                await _handshake(server, access.login(info), reader, writer)
            except ssl.SSLError as err:  # TLS 1.3 tells of a missing client certificate only here, on the first read
                raise WireError(f"{server}: TLS handshake failed ({err.reason or err})") from err
        except BaseException:
            writer.close()  # refused, or cancelled mid-way (a service stopping): nothing is left open
            raise
        return cls(url=server, reader=reader, writer=writer, info=info)

    def subscribe(self, subject: str) -> bytes:
        """Subscribe; returns the subscription's id as it appears in messages."""
        self._sids += 1
        self.writer.write(f"SUB {subject} {self._sids}\r\n".encode())
        return str(self._sids).encode()

    def unsubscribe(self, sid: bytes) -> None:
        self.writer.write(b"UNSUB " + sid + _CRLF)

    def publish(self, subject: str, payload: bytes = b"", reply: str = "") -> None:
        head = f"PUB {subject} {reply} {len(payload)}\r\n" if reply else f"PUB {subject} {len(payload)}\r\n"
        self.writer.write(head.encode() + payload + _CRLF)

    def close(self) -> None:
        self.writer.close()

    async def read(self, timeout: float | None = None) -> None:
        """Wait for more to arrive, and add it to `buffer` (what is before `pos` was read and
        goes). Raises WireError on a closed connection, and TimeoutError if nothing arrives
        for `timeout` seconds."""
        piece = await asyncio.wait_for(self.reader.read(READ_SIZE), timeout)
        if not piece:
            raise WireError(f"{self.url} closed the connection")
        self.buffer = self.buffer[self.pos :] + piece
        self.pos = 0

    def message(self) -> Message | None:
        """The next message in `buffer`, past it; None when none is there whole. Answers the
        server's pings and raises WireError on an error on the way."""
        buf = self.buffer
        while True:
            eol = buf.find(_CRLF, self.pos)
            if eol < 0:
                return None
            line = buf[self.pos : eol]
            head = line.split(b" ")
            op = head[0]
            if op == b"HMSG" or op == b"MSG":
                hdr_len = int(head[-2]) if op == b"HMSG" else 0
                start, end = eol + 2, eol + 2 + int(head[-1])
                if end + 2 > len(buf):
                    return None
                self.pos = end + 2
                reply = head[3] if len(head) == (6 if op == b"HMSG" else 5) else b""
                return head[2], head[1], reply, hdr_len, buf[start:end]
            self.pos = eol + 2
            if op == b"PING":
                self.writer.write(b"PONG\r\n")
            elif op == b"-ERR":
                raise WireError(f"{self.url}: {line.decode(errors='replace')}")

    async def messages(self, timeout: float | None = None) -> AsyncIterator[list[Message]]:
        """What arrives, as it arrives: each socket read's complete messages in one list
        (`read`, `message`)."""
        while True:
            await self.read(timeout)
            batch: list[Message] = []
            while (message := self.message()) is not None:
                batch.append(message)
            yield batch


async def dial(servers: Sequence[str], access: Access, timeout: float = 5.0) -> Wire:
    """A Wire to the first of `servers` that lets us in. When none does, the error of the
    first that answered and refused (it says more than a closed port), else the last one's."""
    refused: WireError | None = None
    unreachable: OSError | None = None
    for server in servers:
        try:
            return await asyncio.wait_for(Wire.open(server, access), timeout)
        except WireError as err:  # before OSError, which it is
            refused = refused or err
        except OSError as err:  # TimeoutError too
            unreachable = err
    raise refused or unreachable or WireError(f"{access.address}: no server to connect to")


async def _info(server: str, reader: asyncio.StreamReader) -> dict[str, Any]:
    line = await reader.readline()
    if not line.startswith(b"INFO "):
        raise WireError(f"{server}: not a NATS server (it said {line[:80]!r})")
    try:
        info = json.loads(line[5:])
    except ValueError as err:
        raise WireError(f"{server}: an INFO that is no JSON ({line[:80]!r})") from err
    return info if isinstance(info, dict) else {}


async def _handshake(server: str, login: dict[str, str], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    connect: dict[str, object] = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True}
    connect |= {"lang": "python-cascade", "version": "1", "protocol": 1} | login
    writer.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
    await writer.drain()
    while (line := await reader.readline()) != b"PONG\r\n":
        if line.startswith(b"-ERR") or not line:
            # -ERR 'Authorization Violation'
            reason = line.decode(errors="replace").removeprefix("-ERR").strip(" '\r\n") or "no reason given"
            raise WireError(f"{server}: refused the connection ({reason})")
