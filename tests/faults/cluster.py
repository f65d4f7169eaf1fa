"""What a fault scenario runs, as an operator runs it: `cascade serve` over a data dir (on its
embedded nats-server, or on a NATS the test started), `cascade worker` processes, and the
test's own clients: the API, and run event streams that stay connected through it all.

Everything lives under one temporary directory, so that what is left behind is found by it.
The fake simulator is paced (CASCADE_FAKE_ACCELSIM_PACE seconds per kernel) so that sims
last long enough to be hit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec

from cascade_nats import server
from cascade_process import datadir
from tests.cascade_http.served import CASCADE, Served, clean_env, start, stop
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.cascade_sim.world import accelsim_tree

TOKEN = "fault-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Cluster:
    def __init__(
        self,
        tmp: Path,
        *,
        pace_s: float = 1.0,
        lease_s: float = 3.0,
        external_nats: bool = False,
        nats_url: str | None = None,
        nats_env: dict[str, str] | None = None,
    ) -> None:
        self.tmp = tmp
        self.tree = accelsim_tree(tmp / "accel-sim")
        self.data_dir = tmp / "data"
        self.pace_s = pace_s
        self.lease_s = lease_s
        self.nats: server.EmbeddedNats | None = server.start(tmp / "nats") if external_nats else None
        self.external_url = nats_url  # a NATS the test runs itself (a cluster)
        self.nats_env = nats_env or {}  # its TLS and login settings, for every process
        self.served: Served | None = None
        self.serves = 0
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.streams: list[EventStream] = []

    # --- processes ----------------------------------------------------------------------

    def env(self, **extra: str) -> dict[str, str]:
        settings = {"CASCADE_TOKEN": TOKEN, "CASCADE_RUNNER_LEASE": str(self.lease_s), "CASCADE_FAKE_ACCELSIM_PACE": str(self.pace_s)}
        if self.nats is not None or self.external_url is not None:
            settings["CASCADE_NATS_URL"] = self.nats_url
        return clean_env(**(settings | self.nats_env | extra))

    def serve(self, *, runner: bool = True, slots: int = 2) -> Served:
        """Start `cascade serve` (again) over the data dir; returns once its API answers."""
        self.serves += 1
        args = ["serve", "--data-dir", str(self.data_dir), "--port", "0", "--accelsim-dir", str(self.tree)]
        args += ["--runner-slots", str(slots)] if runner else ["--no-runner"]
        self.served = start([*CASCADE, *args], self.data_dir, self.tmp / f"serve-{self.serves}.log", env=self.env())
        return self.served

    def kill_serve(self) -> None:
        assert self.served is not None
        self.served.process.send_signal(signal.SIGKILL)
        self.served.process.wait()
        self.served = None

    @property
    def nats_url(self) -> str:
        """The NATS of the cluster, logged in."""
        if self.nats is not None:
            return self.nats.url
        if self.external_url is not None:
            return self.external_url
        assert self.served is not None
        return self.served.nats_url

    def embedded_nats_pid(self) -> int:
        out = subprocess.run(["pgrep", "-f", "--", f"-sd {self.data_dir / 'jetstream'} "], capture_output=True, text=True).stdout.split()
        assert len(out) == 1, out
        return int(out[0])

    def worker(self, name: str, *, slots: int = 2, **env: str) -> subprocess.Popen[bytes]:
        args = ["worker", "--accelsim-dir", str(self.tree), "--slots", str(slots), "--work-dir", str(self.tmp / name)]
        with (self.tmp / f"{name}.log").open("ab") as out:
            process = subprocess.Popen([*CASCADE, *args], env=self.env(**({"CASCADE_NATS_URL": self.nats_url} | env)), stdout=out, stderr=subprocess.STDOUT)
        self.workers[name] = process
        return process

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def close(self) -> None:
        """Stop what is still running, as an operator would: workers, serve, NATS, and the
        test's streams."""
        for stream in self.streams:
            stream.stopping.set()
        for process in self.workers.values():
            stop(process)  # Ctrl-C, as for serve: it hands its sims back
        if self.served is not None:
            stop(self.served.process)
            self.served = None
        if self.nats is not None:
            self.nats.stop()
        for stream in self.streams:
            stream.join(30)

    # --- the API ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self.served is not None
        return self.served.url

    def api(self, method: str, path: str, body: object = None) -> Any:
        request = urllib.request.Request(
            self.url + path, method=method, data=None if body is None else json.dumps(body).encode(), headers={**AUTH, "Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def health(self) -> tuple[int, dict[str, Any]]:
        try:
            with urllib.request.urlopen(self.url + "/api/health", timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def upload(self, name: str = "combo-vec-mm-xz", trace_id: str = "combo") -> None:
        body = tar_of(files_of(name), top=name)
        request = urllib.request.Request(
            f"{self.url}/api/traces?id={trace_id}", method="POST", data=body, headers={**AUTH, "Content-Type": "application/x-tar"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            assert json.loads(response.read())["state"] == "ready"

    def create_run(self, count: int, trace_id: str = "combo", config: str = "SM61_TITANX") -> str:
        """A run of `count` fresh sims: each simulates (the faults are a simulator's), none
        taking another's result from the cache."""
        entry = {"gpu_config": config, "count": count, "fresh": True}
        run = self.api("POST", "/api/runs", {"trace_id": trace_id, "entries": [entry]})
        return str(run["id"])

    def run(self, run_id: str) -> dict[str, Any]:
        return self.api("GET", f"/api/runs/{run_id}")  # type: ignore[no-any-return]

    def wait_until_final(self, run_id: str, timeout: float) -> dict[str, Any]:
        return wait_for(lambda: (run := self.run(run_id))["state"] != "active" and run, timeout, f"run {run_id} still active")

    def kernels_done(self, run_id: str) -> int:
        return sum(s["kernels_done"] for s in self.run(run_id)["sims"])

    def stream(self, run_id: str) -> EventStream:
        """A client of the run's event stream from now on, resuming from its last event id
        whenever the connection breaks, wherever the service listens by then."""
        stream = EventStream(run_id, self.locate)
        self.streams.append(stream)
        stream.start()
        wait_for(lambda: stream.events, 30, "no snapshot")
        return stream

    def locate(self) -> str | None:
        service = datadir.live_service(self.data_dir)
        return None if service is None else service.api_url


def wait_for(condition: Callable[[], Any], timeout: float, message: str) -> Any:
    """`condition()` once it is truthy, polled; fails with `message` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except OSError:  # the service is away for a moment (killed, restarting)
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, message
        time.sleep(0.1)


class Received(msgspec.Struct, frozen=True):
    id: str
    event: str
    data: Any


class EventStream(threading.Thread):
    """One run's server-sent events, as a browser's EventSource takes them: each id kept as
    the opaque string it is, and sent back as Last-Event-ID after a break."""

    def __init__(self, run_id: str, locate: Callable[[], str | None]) -> None:
        super().__init__(name=f"sse-{run_id}", daemon=True)
        self.run_id = run_id
        self.locate = locate
        self.events: list[Received] = []
        self.connections = 0
        self.ended = threading.Event()
        self.stopping = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=httpx.Timeout(5, read=60)) as http:
            while not self.stopping.is_set() and not self.ended.is_set():
                url = self.locate()
                if url is None:
                    time.sleep(0.2)
                    continue
                try:
                    self._read(http, url)
                except (httpx.HTTPError, OSError):
                    time.sleep(0.2)

    def _read(self, http: httpx.Client, url: str) -> None:
        headers = {**AUTH, "Accept": "text/event-stream"}
        if self.events:
            headers["Last-Event-ID"] = self.events[-1].id
        with http.stream("GET", f"{url}/api/runs/{self.run_id}/events", headers=headers) as response:
            if response.status_code == 204:
                self.ended.set()
                return
            response.raise_for_status()
            self.connections += 1
            fields: dict[str, str] = {}
            for line in response.iter_lines():
                if self.stopping.is_set():
                    return
                if line:
                    if not line.startswith(":"):
                        name, _, value = line.partition(":")
                        fields[name] = value.removeprefix(" ")
                    continue
                if "data" in fields:
                    event = Received(fields["id"], fields.get("event", "message"), json.loads(fields["data"]))
                    self.events.append(event)
                    if event.event == "run" or (event.event == "snapshot" and event.data["state"] != "active"):
                        self.ended.set()
                fields = {}


def rss_mib(pid: int) -> float:
    """A process's resident memory."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def processes_under(directory: Path) -> list[str]:
    """Every live process whose command line names something under `directory`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in args:
            found.append(f"{entry.name} {args[:200]}")
    return found
