"""A minimal client of the Cascade API for the command line (no third-party HTTP library):
requests, downloads streamed to disk, and server-sent event streams."""

from __future__ import annotations

import http.client
import json
import select
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import msgspec

from cascade_app.config import ConfigError

READ_SIZE = 1 << 20
# The server sends a keep-alive comment every 15 s: this long without a byte, the stream is gone.
STREAM_IDLE_S = 60.0


class SendInterrupted(ConfigError):
    """The server stopped taking a streamed body and its answer could not be read."""


class Refused(ConfigError):
    """The server answered with an error status; `detail` is the API's text for it."""

    def __init__(self, message: str, *, status: int, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class Disconnected(ConfigError):
    """The server could not be reached, or the connection broke before the answer ended."""


COMMENT = ":"  # the `event` of a comment line, which no event type can be (a colon starts a comment)


class ServerEvent(msgspec.Struct, frozen=True):
    event: str
    id: str  # the stream's last event id when this event came ("" if none yet)
    data: str


class ApiClient:
    """`on_unauthorized` and `on_unreachable` say where the token and the URL came from, for
    the errors that are most likely their fault."""

    def __init__(self, url: str, token: str | None, *, on_unauthorized: str = "", on_unreachable: str = "") -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.on_unauthorized = on_unauthorized
        self.on_unreachable = on_unreachable

    def _refused(self, method: str, path: str, status: int, body: bytes) -> Refused:
        hint = f" ({self.on_unauthorized})" if status == 401 and self.on_unauthorized else ""
        detail = _detail(body)
        return Refused(f"{method} {path}: {status} {detail}{hint}", status=status, detail=detail)

    def _unreachable(self, reason: object) -> Disconnected:
        hint = f" ({self.on_unreachable})" if self.on_unreachable else ""
        return Disconnected(f"{self.url}: unreachable ({reason}){hint}")

    def open(
        self,
        method: str,
        path: str,
        body: bytes | Iterable[bytes] | None = None,
        headers: dict[str, str] | None = None,
        *,
        timeout: float = 600,
    ) -> http.client.HTTPResponse:
        """The response to a request, its body not read yet; an error status is a ConfigError
        with the API's detail."""
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=dict(headers or {}))
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            response: http.client.HTTPResponse = urllib.request.urlopen(request, timeout=timeout)
            return response
        except urllib.error.HTTPError as err:
            with err:
                raise self._refused(method, path, err.code, err.read()) from None
        except urllib.error.URLError as err:
            raise self._unreachable(getattr(err.reason, "strerror", None) or err.reason) from err
        except (OSError, http.client.HTTPException) as err:
            raise Disconnected(f"{self.url}: {err or type(err).__name__}") from err

    def request(
        self, method: str, path: str, body: bytes | Iterable[bytes] | None = None, headers: dict[str, str] | None = None
    ) -> bytes:
        with self.open(method, path, body, headers) as response:
            return guarded(f"{method} {path}", response.read)

    def post(self, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
        return self.request("POST", path, body, headers)

    def get(self, path: str) -> bytes:
        return self.request("GET", path)

    def download(self, path: str, target: Path) -> int:
        """Stream the answer to GET `path` into the file `target`, a megabyte at a time, and
        return its size. It is written beside it first and renamed once complete, so a
        broken download never leaves a file that looks whole."""
        partial = target.with_name(target.name + ".part")
        try:
            with self.open("GET", path) as response, partial.open("wb") as out:
                size = 0
                while piece := guarded(f"GET {path}", lambda: response.read(READ_SIZE)):
                    out.write(piece)
                    size += len(piece)
                if response.length:  # http.client ends a body cut short quietly
                    raise Disconnected(f"GET {path}: the connection closed {response.length} bytes before the end")
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
        return size

    def events(self, path: str, last_event_id: str = "", comments: bool = False) -> Iterator[ServerEvent]:
        """The server-sent events of GET `path` as they come, resumed after `last_event_id`
        if given, until the server ends the stream (at once if it answers 204 No Content),
        with its comments (the server's keep-alives) as COMMENT events if `comments`.
        A connection that breaks or goes quiet is Disconnected."""
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        with self.open("GET", path, headers=headers, timeout=STREAM_IDLE_S) as response:
            if response.status == 204:
                return
            lines = iter(lambda: guarded(f"GET {path}", response.readline), b"")
            yield from server_events((line.decode().rstrip("\r\n") for line in lines), last_event_id, comments)

    def send_stream(self, method: str, path: str, pieces: Iterable[bytes], length: int, headers: dict[str, str]) -> bytes:
        """Send a body of `length` bytes as `pieces` yields it, never holding it whole. With
        `Expect: 100-continue` the server can refuse before the body goes out, and an answer
        it gives while the body is still being sent is read rather than lost."""
        parts = urllib.parse.urlsplit(self.url + path)
        https = parts.scheme == "https"
        conn = (http.client.HTTPSConnection if https else http.client.HTTPConnection)(parts.netloc, timeout=600)
        try:
            conn.connect()
        except OSError as err:
            raise self._unreachable(err.strerror or err) from err
        try:
            conn.putrequest(method, f"{parts.path}?{parts.query}" if parts.query else parts.path, skip_accept_encoding=True)
            for name, value in {**headers, "Content-Length": str(length), "Expect": "100-continue"}.items():
                conn.putheader(name, value)
            if self.token:
                conn.putheader("Authorization", f"Bearer {self.token}")
            conn.endheaders()
            cut_off: OSError | None = None
            if https or _continue(conn):
                try:
                    for piece in pieces:
                        conn.send(piece)
                except (BrokenPipeError, ConnectionResetError) as err:
                    cut_off = err  # the server stopped reading: its answer should say why
            try:
                response = conn.getresponse()
                status, body = response.status, response.read()
            except OSError as err:
                if cut_off is None:
                    raise
                raise SendInterrupted(f"{method} {path}: the server closed the connection during the upload ({cut_off})") from err
        except OSError as err:
            raise ConfigError(f"{method} {path}: {err}") from err
        finally:
            conn.close()
        if status >= 400:
            raise self._refused(method, path, status, body)
        return body


def _continue(conn: http.client.HTTPConnection, wait_s: float = 5.0) -> bool:
    """After the headers: True to send the body (the server said 100 Continue, or nothing
    in time), False if it already gave its final answer."""
    sock = conn.sock
    if not select.select([sock], [], [], wait_s)[0]:
        return True
    head = sock.recv(64, socket.MSG_PEEK)
    if not head.startswith(b"HTTP/1.1 100"):
        return False
    end = head.find(b"\r\n\r\n")
    sock.recv(end + 4 if end >= 0 else len(head))
    return True


def guarded(request: str, read: Callable[[], bytes]) -> bytes:
    """What `read` reads of a response body, a broken connection turned into Disconnected."""
    try:
        return read()
    except (OSError, http.client.HTTPException) as err:
        raise Disconnected(f"{request}: the connection broke ({err or type(err).__name__})") from err


def server_events(lines: Iterable[str], last_event_id: str = "", comments: bool = False) -> Iterator[ServerEvent]:
    """The events in the lines of a text/event-stream, as the HTML standard reads them:
    comments skipped (or, if `comments`, each one a COMMENT event: a quiet stream's
    keep-alive tells its reader that time passed), `data` lines joined, the last `id`
    carried on; an event cut off before its blank line is not an event."""
    kind, last = "", last_event_id
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield ServerEvent(kind or "message", last, "\n".join(data))
            kind, data = "", []
            continue
        if line.startswith(":"):
            if comments:
                yield ServerEvent(COMMENT, last, line[1:].strip())
            continue
        name, colon, value = line.partition(":")
        value = value[1:] if colon and value.startswith(" ") else value
        if name == "event":
            kind = value
        elif name == "data":
            data.append(value)
        elif name == "id" and "\0" not in value:
            last = value


def _detail(body: bytes) -> str:
    """An error answer's detail on one line: the API's text, each validation issue as
    `where: what`, or the body itself."""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list) and all(isinstance(i, dict) for i in detail):
        return "; ".join(f"{'.'.join(map(str, i.get('loc', [])))}: {i.get('msg')}" for i in detail)
    return " ".join(body.decode(errors="replace").split())
