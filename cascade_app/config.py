"""Settings from flags and environment variables (flags win), and the checks that turn an
unusable setting into one clear line at start."""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
from pathlib import Path
from typing import Annotated

import msgspec

from cascade_core.limits import Expansion
from cascade_nats.access import Access, AccessError, parse

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_UPLOAD_BYTES = 64 * 1024**3
# Without its own setting, a trace may expand to this many times the largest body taken.
EXPANDED_PER_UPLOAD_BYTE = 4

Positive = Annotated[int, msgspec.Meta(ge=1)]
# How often the embedded nats-server syncs its store to disk: on every write, or after a
# duration (nats-server's own default is 2m; a power loss then loses what was acked since).
SyncInterval = Annotated[str, msgspec.Meta(pattern=r"^(always|[0-9]+(ms|s|m|h))$")]

# The data dir's secrets: the API token, and the password of the embedded nats-server's user.
TOKEN_FILE = "token"
NATS_PASSWORD_FILE = "nats-password"


class ConfigError(Exception):
    """A setting that cannot work; the message names it and says why."""


class Settings(msgspec.Struct, kw_only=True):
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    # Names clients reach serve by besides its address (a proxy's, a DNS name), comma-separated:
    # a request's Host must be one of them or of its own (`cascade_http.hosts`).
    allowed_hosts: str = ""
    token: str | None = None
    data_dir: Path = Path(".cascade")
    nats_url: str | None = None  # one URL, or several comma-separated (a cluster)
    # TLS and logins besides what a URL carries (user:password@, token@); `cascade_nats.access`
    nats_ca: Path | None = None
    nats_cert: Path | None = None
    nats_key: Path | None = None
    nats_nkey: Path | None = None
    nats_creds: Path | None = None
    replicas: Positive | None = None  # None: the cluster's size, up to 3 (1 for one server)
    nats_sync_interval: SyncInterval = "always"
    accelsim_dir: Path | None = None
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    max_expanded_bytes: Positive | None = None  # None: EXPANDED_PER_UPLOAD_BYTE x max_upload_bytes
    # Real traces expand up to 74-fold (a tar.xz of plain .traceg text), a gzip bomb 1032-fold
    # and an xz bomb thousands-fold, so a bomb is refused soon after it passes RATIO_FLOOR.
    max_expansion_ratio: Annotated[float, msgspec.Meta(ge=1)] = 200.0
    max_body_bytes: Positive = 1 << 20
    max_sims_per_run: Positive = 1024
    runner: bool = True
    runner_slots: int = os.cpu_count() or 1
    sim_timeout_s: float | None = None
    runner_lease_s: float = 30.0  # a runner that goes quiet this long loses its sims to another
    samples: bool = True  # load the sample traces and runs at start (those not loaded yet)
    # What one query of `POST /api/sql` may take: its time, and its answer's rows and bytes
    # (the answer is made whole before it is sent, so that a limit can still be answered).
    sql_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    sql_max_rows: Positive = 1_000_000
    sql_max_bytes: Positive = 64 << 20
    # ...and the memory of the process it runs in, past what it holds once started
    # (`projections.sql_process`): room for DuckDB's half of it and the answer being made.
    sql_memory_bytes: Annotated[int, msgspec.Meta(ge=64 << 20)] = 512 << 20
    # What the read model's DuckDB may hold in memory (`projections.projector.Memory`); None:
    # its DEFAULT_MEMORY, 64 MiB. At least 64 MiB: a batch of events is up to 8.
    db_memory_bytes: Annotated[int, msgspec.Meta(ge=64 << 20)] | None = None
    # Folders a trace may be added from where it lies (`cascade trace add --path`), separated
    # by os.pathsep; none by default, since the service reads what it is pointed at.
    shared_trace_roots: str = ""

    def __post_init__(self) -> None:
        # The simulator runs in a directory of its own, and a path is logged or stored for
        # later: every path derived from these must mean the same from anywhere.
        self.data_dir = absolute(self.data_dir)
        if self.accelsim_dir is not None:
            self.accelsim_dir = absolute(self.accelsim_dir)
        for field in NATS_FILES:
            if (path := getattr(self, field)) is not None:
                setattr(self, field, absolute(path))

    @property
    def db_path(self) -> Path:
        return self.data_dir / "readmodel.duckdb"

    @property
    def store_dir(self) -> Path:
        return self.data_dir / "jetstream"

    @property
    def expansion(self) -> Expansion:
        expanded = self.max_expanded_bytes or EXPANDED_PER_UPLOAD_BYTE * self.max_upload_bytes
        return Expansion(expanded, self.max_expansion_ratio)

    @property
    def allowed_host_names(self) -> frozenset[str]:
        return frozenset(name.strip().lower() for name in self.allowed_hosts.split(",") if name.strip())

    @property
    def shared_roots(self) -> list[Path]:
        """The folders traces may be added from, symbolic links resolved (`shared_traces`)."""
        return [absolute(Path(root)) for root in self.shared_trace_roots.split(os.pathsep) if root.strip()]

    @property
    def token_path(self) -> Path:
        return self.data_dir / TOKEN_FILE

    @property
    def nats_password_path(self) -> Path:
        return self.data_dir / NATS_PASSWORD_FILE

    @property
    def nats_files(self) -> dict[str, Path]:
        """The TLS and credential files set, by setting."""
        return {field: path for field in NATS_FILES if (path := getattr(self, field)) is not None}

    def nats_access(self) -> Access:
        """How to reach the configured NATS and log in there."""
        assert self.nats_url is not None
        files = {f"{field.removeprefix('nats_')}_file": path for field, path in self.nats_files.items()}
        try:
            return parse(self.nats_url, **files)
        except AccessError as err:
            raise ConfigError(str(err)) from err


NATS_FILES = ("nats_ca", "nats_cert", "nats_key", "nats_nkey", "nats_creds")


ENV = {
    "host": "CASCADE_HOST",
    "port": "CASCADE_PORT",
    "allowed_hosts": "CASCADE_ALLOWED_HOSTS",
    "token": "CASCADE_TOKEN",
    "data_dir": "CASCADE_DATA_DIR",
    "nats_url": "CASCADE_NATS_URL",
    "nats_ca": "CASCADE_NATS_CA",
    "nats_cert": "CASCADE_NATS_CERT",
    "nats_key": "CASCADE_NATS_KEY",
    "nats_nkey": "CASCADE_NATS_NKEY",
    "nats_creds": "CASCADE_NATS_CREDS",
    "replicas": "CASCADE_REPLICAS",
    "nats_sync_interval": "CASCADE_NATS_SYNC_INTERVAL",
    "accelsim_dir": "CASCADE_ACCELSIM_DIR",
    "max_upload_bytes": "CASCADE_MAX_UPLOAD_BYTES",
    "max_expanded_bytes": "CASCADE_MAX_EXPANDED_BYTES",
    "max_expansion_ratio": "CASCADE_MAX_EXPANSION_RATIO",
    "max_body_bytes": "CASCADE_MAX_BODY_BYTES",
    "max_sims_per_run": "CASCADE_MAX_SIMS_PER_RUN",
    "runner_slots": "CASCADE_RUNNER_SLOTS",
    "sim_timeout_s": "CASCADE_SIM_TIMEOUT",
    "runner_lease_s": "CASCADE_RUNNER_LEASE",
    "samples": "CASCADE_SAMPLES",
    "sql_timeout_s": "CASCADE_SQL_TIMEOUT",
    "sql_max_rows": "CASCADE_SQL_MAX_ROWS",
    "sql_max_bytes": "CASCADE_SQL_MAX_BYTES",
    "sql_memory_bytes": "CASCADE_SQL_MEMORY_BYTES",
    "db_memory_bytes": "CASCADE_DB_MEMORY_BYTES",
    "shared_trace_roots": "CASCADE_SHARED_TRACE_ROOTS",
}


def absolute(path: Path) -> Path:
    """`path` from the root, `~` expanded and symbolic links followed."""
    return path.expanduser().resolve()


def resolve(flags: dict[str, object], environ: os._Environ[str] | dict[str, str] = os.environ) -> Settings:
    """Flags that were given, else environment variables, else defaults."""
    if ENV["token"] in environ and not environ[ENV["token"]].strip():
        raise ConfigError(f"{ENV['token']} is set but empty; unset it to use the data dir's token file")
    values: dict[str, object] = {}
    for field, var in ENV.items():
        if environ.get(var):
            values[field] = environ[var]
    values.update({k: v for k, v in flags.items() if v is not None})
    try:
        return msgspec.convert(values, Settings, strict=False, dec_hook=_paths)
    except msgspec.ValidationError as err:
        field = str(err).rsplit("`$.", 1)[-1].rstrip("`")
        raise ConfigError(f"{ENV.get(field, field)}: {str(err).split(' - at')[0]}") from err


def _paths(type_: type, value: object) -> object:
    if type_ is Path and isinstance(value, str):
        return Path(value)
    raise NotImplementedError


def bind_port(host: str, port: int) -> socket.socket:
    """A socket listening on `host`:`port` (0: any free port), for the server to take over;
    connections made before it serves wait in the backlog instead of being refused."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as err:
        sock.close()
        raise ConfigError(f"port {port} on {host}: {err.strerror or err}") from err
    return sock


def url_of(sock: socket.socket) -> str:
    """The URL a local client reaches a listening socket at (loopback for "any address")."""
    host, port = sock.getsockname()[:2]
    if ipaddress.ip_address(host).is_unspecified:
        host = "::1" if ":" in host else "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def check_accelsim_dir(path: Path | None) -> None:
    if path is None:
        return
    if not (path / "gpu-simulator").is_dir():
        raise ConfigError(f"accelsim dir {path}: not an Accel-Sim install (no gpu-simulator/ inside)")


def read_secret(path: Path, what: str) -> str | None:
    """The secret stored in `path` (`what` it is, for messages), None if there is no such
    file. A file that others can read or write is refused rather than fixed: its secret may
    be known already."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise ConfigError(f"{what} file {path}: {err.strerror or err}") from err
    with os.fdopen(fd) as f:
        mode = os.fstat(fd).st_mode & 0o777
        if mode & 0o077:
            raise ConfigError(f"{what} file {path}: readable or writable by others (mode {mode:o}); chmod 600 it, or delete it for a new {what}")
        secret = f.read().strip()
    if not secret:
        raise ConfigError(f"{what} file {path}: empty; put the {what} in it, or delete it for a new {what}")
    return secret


def load_or_create_secret(path: Path, what: str) -> tuple[str, bool]:
    """The secret stored in `path`, generated on first use (URL-safe characters); True when
    just created."""
    secret = read_secret(path, what)
    if secret is not None:
        return secret, False
    secret = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return secret, True
