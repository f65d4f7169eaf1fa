"""One process per data dir: an exclusive lock, and the service file that tells other
commands where the process holding it serves.

`<data dir>/lock` is flock()ed, without waiting, by the process that uses the data dir
(`cascade serve` for its life; `cascade replay` and `cascade events` while their temporary
nats-server runs), and holds that process's pid. While it serves, `cascade serve` also keeps
`<data dir>/service.json`. A service file tells the truth only while its lock is held, so
whoever takes the lock removes one that a dead process left behind.

Everything in a data dir is its owner's alone: directories 0700, files 0600. The commands
that write one set their umask so (`cli`), and whoever takes the lock tightens what an older
version left open, except the secrets (`token`, `nats-password`), which are refused rather
than fixed when others could read them (`config.read_secret`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import TracebackType

import msgspec

from cascade_app.config import NATS_PASSWORD_FILE, TOKEN_FILE, ConfigError

log = logging.getLogger("cascade")

LOCK = "lock"
SERVICE = "service.json"
SECRETS = (TOKEN_FILE, NATS_PASSWORD_FILE)
# Another command looking at the lock holds it shared for a moment; a start that meets it
# tries again rather than reporting that command as the owner.
LOCK_TRIES = 5
LOCK_RETRY_S = 0.04


class Service(msgspec.Struct, frozen=True, kw_only=True):
    """Where the process holding the data dir serves."""

    pid: int
    api_url: str
    nats_url: str  # where it is, never with credentials
    started_at: datetime
    # The data dir's own nats-server, which lets in the data dir's user and password
    # (`event_log`); otherwise the configured NATS, whose credentials are not kept here.
    nats_embedded: bool = False


class Lock:
    """A held data dir lock; closing the descriptor (or the process ending) releases it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def release(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def try_lock(directory: Path, what: str = "data dir") -> Lock | None:
    """The directory's lock (made with the directory if need be), or None when another
    process holds it. Whoever takes it removes a stale service file and makes the directory
    private (`make_private`)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as err:
        raise ConfigError(f"{what} {directory}: not writable ({err.strerror or err})") from err
    for attempt in range(LOCK_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if attempt == LOCK_TRIES - 1:
                os.close(fd)
                return None
            time.sleep(LOCK_RETRY_S)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    (directory / SERVICE).unlink(missing_ok=True)
    held = Lock(fd)
    try:
        opened = make_private(directory, what)
    except ConfigError:
        held.release()
        raise
    if opened:
        log.info("%s %s: %d files and directories were open to others (as older versions left them); made private (0700, 0600)", what, directory, opened)
    return held


def make_private(directory: Path, what: str = "data dir") -> int:
    """Take group's and others' access away from the directory and everything in it
    (symbolic links, and what they point to, aside); how many it changed. The secrets are
    left for their readers to refuse."""
    inside = (Path(root, name) for root, dirs, files in os.walk(directory) for name in (*dirs, *files))
    changed = 0
    for path in (directory, *inside):
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode) or not mode & 0o077 or (path.parent == directory and path.name in SECRETS):
            continue
        try:
            path.chmod(stat.S_IMODE(mode) & 0o700)
        except OSError as err:
            raise ConfigError(f"{what} {directory}: cannot make {path} private ({err.strerror or err})") from err
        changed += 1
    return changed


def lock(directory: Path, what: str = "data dir") -> Lock:
    """The directory's lock; a ConfigError naming the process that holds it otherwise."""
    held = try_lock(directory, what)
    if held is None:
        raise ConfigError(f"{what} {directory}: in use by {holder(directory)}")
    return held


def holder(directory: Path) -> str:
    """The process named in the directory's lock file: its pid and command line."""
    try:
        pid = int((directory / LOCK).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return "another process (that has not written its pid yet)"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ")
    except OSError:
        return f"pid {pid}"
    return f"pid {pid} ({command.decode(errors='replace')})"


def _held(directory: Path) -> int | None:
    """The pid of the process holding the directory's lock, None if no process does. Looking
    takes the lock shared for a moment, which fails while it is held."""
    try:
        fd = os.open(directory / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        content = os.read(fd, 32).split()
        return int(content[0]) if content and content[0].isdigit() else None
    finally:
        os.close(fd)
    return None


def live_service(directory: Path) -> Service | None:
    """The service of the process that holds the directory's lock; None if no process holds
    it, or the one holding it serves nothing (yet)."""
    pid = _held(directory)
    if pid is None:
        return None
    try:
        service = msgspec.json.decode((directory / SERVICE).read_bytes(), type=Service)
    except (OSError, msgspec.ValidationError, msgspec.DecodeError):
        return None
    return service if service.pid == pid else None


@contextlib.contextmanager
def published(directory: Path, service: Service) -> Iterator[None]:
    """`service.json` in the directory (mode 0600, replaced whole) for the block's duration.
    The caller holds the directory's lock."""
    path = directory / SERVICE
    partial = directory / f".{SERVICE}.{os.getpid()}"
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(msgspec.json.encode(service) + b"\n")
    os.replace(partial, path)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
