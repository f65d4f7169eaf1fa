"""A TCP proxy in front of the test server whose connections a test can cut, to see the app
(or the CLI) come back from a dropped event stream; it keeps what went each way."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


class Proxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.links: list[socket.socket] = []
        self.traffic: list[tuple[bytearray, bytearray]] = []  # per connection: sent by the client, sent to it
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            sent, received = bytearray(), bytearray()
            with self.lock:
                self.links += [client, upstream]
                self.traffic.append((sent, received))
            for a, b, seen in ((client, upstream, sent), (upstream, client, received)):
                threading.Thread(target=self._pump, args=(a, b, seen), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, seen: bytearray) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
                seen += data
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def drop(self) -> None:
        """Cuts every open connection, as a network failure would."""
        with self.lock:
            links, self.links = self.links, []
        for s in links:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self.listener.close()
        self.drop()


@contextlib.contextmanager
def proxy_to(url: str) -> Iterator[Proxy]:
    host, port = url.removeprefix("http://").split(":")
    p = Proxy((host, int(port)))
    try:
        yield p
    finally:
        p.close()
