"""A minimal client of the Cascade API for the command line (no third-party HTTP library)."""

from __future__ import annotations

import http.client
import json
import select
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable

from cascade_http.config import ConfigError


class SendInterrupted(ConfigError):
    """The server stopped taking a streamed body and its answer could not be read."""


class ApiClient:
    """`on_unauthorized` and `on_unreachable` say where the token and the URL came from, for
    the errors that are most likely their fault."""

    def __init__(self, url: str, token: str | None, *, on_unauthorized: str = "", on_unreachable: str = "") -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.on_unauthorized = on_unauthorized
        self.on_unreachable = on_unreachable

    def _refused(self, method: str, path: str, status: int, body: bytes) -> ConfigError:
        hint = f" ({self.on_unauthorized})" if status == 401 and self.on_unauthorized else ""
        return ConfigError(f"{method} {path}: {status} {_detail(body)}{hint}")

    def _unreachable(self, reason: object) -> ConfigError:
        hint = f" ({self.on_unreachable})" if self.on_unreachable else ""
        return ConfigError(f"{self.url}: unreachable ({reason}){hint}")

    def request(
        self, method: str, path: str, body: bytes | Iterable[bytes] | None = None, headers: dict[str, str] | None = None
    ) -> bytes:
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=dict(headers or {}))  # type: ignore[arg-type]
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                return response.read()  # type: ignore[no-any-return]
        except urllib.error.HTTPError as err:
            raise self._refused(method, path, err.code, err.read()) from err
        except urllib.error.URLError as err:
            raise self._unreachable(err.reason) from err

    def post(self, path: str) -> bytes:
        return self.request("POST", path, b"")

    def get(self, path: str) -> bytes:
        return self.request("GET", path)

    def send_stream(self, method: str, path: str, chunks: Iterable[bytes], length: int, headers: dict[str, str]) -> bytes:
        """Send a body of `length` bytes as `chunks` yields it, never holding it whole. With
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
                    for chunk in chunks:
                        conn.send(chunk)
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


def _detail(body: bytes) -> str:
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        detail = None
    return detail if isinstance(detail, str) else body.decode(errors="replace")
