"""`cascade serve` and the other commands as a user runs them: subprocesses in a directory of
their choosing, the server found through its data dir's service file, never a fixed port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from cascade_app.config import ENV
from cascade_cli.locate import ENV_URL
from cascade_process import datadir, event_log

CASCADE = [sys.executable, "-m", "cascade_cli"]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without Cascade's settings (the fake simulator's stay)."""
    settings = {*ENV.values(), ENV_URL}
    return {**{k: v for k, v in os.environ.items() if k not in settings}, **extra}


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CASCADE, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env or clean_env())


class Served(msgspec.Struct, kw_only=True):
    process: subprocess.Popen[bytes]
    data_dir: Path
    service: datadir.Service
    output: Path  # everything the server printed, stdout and stderr

    @property
    def url(self) -> str:
        return self.service.api_url

    @property
    def nats_url(self) -> str:
        """Its NATS, logged in as every command on its data dir logs in."""
        return event_log.live_nats_url(self.data_dir, self.service)

    def text(self) -> str:
        return self.output.read_text(errors="replace")


def api(url: str, token: str, method: str, path: str, body: object = None) -> dict:  # type: ignore[type-arg]
    """A JSON request to the API with its token; the JSON answer."""
    request = urllib.request.Request(
        url + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def health(url: str) -> dict[str, int]:
    return json.loads(urllib.request.urlopen(url + "/api/health", timeout=5).read())  # type: ignore[no-any-return]


def start(command: list[str], data_dir: Path, output: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None) -> Served:
    """A `cascade serve` command, once its service file in `data_dir` is up and its API
    answers; what it prints goes to `output`."""
    with output.open("wb") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env or clean_env(), stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        service = datadir.live_service(data_dir)
        if service is not None and service.pid == process.pid:
            try:
                health(service.api_url)
                return Served(process=process, data_dir=data_dir, service=service, output=output)
            except OSError:
                pass
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise AssertionError(f"the server did not start: {output.read_text(errors='replace')}")
        time.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> int:
    """Ctrl-C, as a user stops it; SIGKILL only if it does not end."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


@contextmanager
def serving(data_dir: Path, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Iterator[Served]:
    """`cascade serve --data-dir DATA_DIR --port 0 ARGS`, stopped with Ctrl-C at the end,
    which it must survive cleanly."""
    command = [*CASCADE, "serve", "--data-dir", str(data_dir), "--port", "0", *args]
    served = start(command, data_dir, data_dir.parent / f"{data_dir.name}.serve.log", cwd=cwd, env=env)
    try:
        yield served
    finally:
        code = stop(served.process)
        assert code == 0, served.text()
        assert "Traceback" not in served.text(), served.text()


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def nats_servers_under(data_dir: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-fa", "nats-server"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if f" -sd {data_dir / 'jetstream'} " in line]
