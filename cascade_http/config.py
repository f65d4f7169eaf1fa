"""Settings from flags and environment variables (flags win), and the checks that turn an
unusable setting into one clear line at start."""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

from typing import Annotated

import msgspec

from cascade_core.limits import Expansion

DEFAULT_MAX_UPLOAD_BYTES = 64 * 1024**3
# Without its own setting, a trace may expand to this many times the largest body taken.
EXPANDED_PER_UPLOAD_BYTE = 4

Positive = Annotated[int, msgspec.Meta(ge=1)]


class ConfigError(Exception):
    """A setting that cannot work; the message names it and says why."""


class Settings(msgspec.Struct, kw_only=True):
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    data_dir: Path = Path(".cascade")
    nats_url: str | None = None
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
    samples: bool = True

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


ENV = {
    "host": "CASCADE_HOST",
    "port": "CASCADE_PORT",
    "token": "CASCADE_TOKEN",
    "data_dir": "CASCADE_DATA_DIR",
    "nats_url": "CASCADE_NATS_URL",
    "accelsim_dir": "CASCADE_ACCELSIM_DIR",
    "max_upload_bytes": "CASCADE_MAX_UPLOAD_BYTES",
    "max_expanded_bytes": "CASCADE_MAX_EXPANDED_BYTES",
    "max_expansion_ratio": "CASCADE_MAX_EXPANSION_RATIO",
    "max_body_bytes": "CASCADE_MAX_BODY_BYTES",
    "max_sims_per_run": "CASCADE_MAX_SIMS_PER_RUN",
    "runner_slots": "CASCADE_RUNNER_SLOTS",
    "sim_timeout_s": "CASCADE_SIM_TIMEOUT",
    "runner_lease_s": "CASCADE_RUNNER_LEASE",
}


def resolve(flags: dict[str, object], environ: os._Environ[str] | dict[str, str] = os.environ) -> Settings:
    """Flags that were given, else environment variables, else defaults."""
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


def check_data_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{secrets.token_hex(4)}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ConfigError(f"data dir {path}: not writable ({err.strerror or err})") from err


def check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as err:
            raise ConfigError(f"port {port} on {host}: {err.strerror or err}") from err


def check_accelsim_dir(path: Path | None) -> None:
    if path is None:
        return
    if not (path / "gpu-simulator").is_dir():
        raise ConfigError(f"accelsim dir {path}: not an Accel-Sim install (no gpu-simulator/ inside)")


def load_or_create_token(data_dir: Path) -> tuple[str, bool]:
    """The data dir's stored token, generating it on first use; True when just created."""
    path = data_dir / "token"
    if path.exists():
        return path.read_text().strip(), False
    token = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token, True
