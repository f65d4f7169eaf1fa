"""A JetStream cluster of real nats-servers on loopback, as an operator configures one: a
config file per node (client port, monitoring port, cluster routes to the others, its own
store), one user with a password, nodes killed and started again by the test.

Ports are free ones picked when the cluster is made: the routes must name them up front.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from cascade_nats import subjects
from cascade_nats import server
from cascade_nats.access import parse
from cascade_nats.connect import connect
from cascade_nats.objects import BUCKET

USER = "cascade"
# Cascade's streams, in the order `cascade serve` makes them: events, object store, runners.
STREAMS = (subjects.STREAM, f"OBJ_{BUCKET}", f"KV_{subjects.RUNNERS_BUCKET}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Node:
    def __init__(self, name: str, directory: Path, port: int, http_port: int, route_port: int) -> None:
        self.name = name
        self.directory = directory
        self.port = port
        self.http_port = http_port
        self.route_port = route_port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def config(self) -> Path:
        return self.directory / "nats-server.conf"

    @property
    def log(self) -> Path:
        return self.directory / "nats-server.log"

    def start(self) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        self.process = subprocess.Popen(
            [server.binary(), "-c", str(self.config)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 20
        while b"Server is ready" not in (self.log.read_bytes()[offset:] if self.log.exists() else b""):
            assert self.process.poll() is None, f"{self.name} exited: {self.log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"{self.name} not ready: {self.log.read_text()[-2000:]}"
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, as a machine that loses power."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def monitor(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=5) as response:
            return json.loads(response.read())

    def write_config(self, **settings: Any) -> None:
        """Its config: where it listens, logs and stores, and `settings` (auth, TLS, routes)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        config = {
            "server_name": self.name,
            "host": "127.0.0.1",
            "port": self.port,
            "http": f"127.0.0.1:{self.http_port}",
            "log_file": str(self.log),
            "jetstream": {"store_dir": str(self.directory / "store")},
        }
        self.config.write_text(json.dumps(config | settings, indent=2) + "\n")

    def client_names(self) -> list[str]:
        """The names of the clients connected to this node."""
        return [c.get("name", "") for c in self.monitor("/connz?limit=1024")["connections"]]


def single(directory: Path, **settings: Any) -> Node:
    """One server, in no cluster, configured with `settings`, started."""
    node = Node("solo", directory, free_port(), free_port(), 0)
    node.write_config(**settings)
    node.start()
    return node


class NatsCluster:
    def __init__(self, directory: Path, size: int = 3) -> None:
        self.password = secrets.token_urlsafe(18)
        self.nodes = [Node(f"n{i}", directory / f"n{i}", free_port(), free_port(), free_port()) for i in range(size)]
        for node in self.nodes:
            routes = [f"nats-route://127.0.0.1:{other.route_port}" for other in self.nodes if other is not node]
            node.write_config(
                authorization={"user": USER, "password": self.password},
                cluster={"name": "cascade", "host": "127.0.0.1", "port": node.route_port, "routes": routes},
            )

    @property
    def url(self) -> str:
        """Every node, logged in, as `--nats-url` takes them."""
        return ",".join(server.with_password(node.address, self.password) for node in self.nodes)

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        self.wait_for_jetstream()

    def wait_for_jetstream(self, timeout: float = 30) -> None:
        """Until the nodes agree on a meta leader, and every node that runs sees all peers."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                running = [node for node in self.nodes if node.process is not None]
                if all(_meta_ready(node.monitor("/jsz"), len(self.nodes)) for node in running):
                    return
            except OSError:
                pass
            assert time.monotonic() < deadline, "JetStream cluster never formed"
            time.sleep(0.1)

    def serving(self, client_name: str) -> Node:
        """The node that the client named `client_name` is connected to."""
        found = [node for node in self.nodes if node.process is not None and client_name in node.client_names()]
        assert len(found) == 1, f"{client_name} is on {[n.name for n in found]}"
        return found[0]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


async def replicas_of(url: str) -> dict[str, int]:
    """The replicas each of Cascade's streams has."""
    nc = await connect(parse(url))
    try:
        js = nc.jetstream()
        return {name: (await js.stream_info(name)).config.num_replicas or 1 for name in STREAMS}
    finally:
        await nc.close()


def _meta_ready(jsz: dict[str, Any], size: int) -> bool:
    meta = jsz.get("meta_cluster") or {}
    return bool(meta.get("leader")) and len(meta.get("replicas") or []) == size - 1
