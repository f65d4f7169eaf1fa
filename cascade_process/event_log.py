"""How a command reaches the event log: the NATS it names, the one of the server that holds
the data dir, or an embedded nats-server of its own over the data dir's store, started only
under the data dir's lock (`datadir`), so that no store ever has two servers.

The embedded server lets in only the data dir's user and password (`<data dir>/nats-password`,
made at its first start); every command on that data dir logs in with them. A URL that
carries credentials is used to connect and shown nowhere: messages show it redacted, and the
service file keeps only where the server is."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import msgspec

from cascade_app.config import NATS_PASSWORD_FILE, ConfigError, Settings, load_or_create_secret, read_secret
from cascade_process import datadir

if TYPE_CHECKING:  # imported when used: commands that need no NATS start faster
    from pathlib import Path

    from cascade_nats.access import Access
    from cascade_nats.connect import NatsClient
    from cascade_nats.server import EmbeddedNats
    from cascade_nats.store import EventStore

PASSWORD = "NATS password"
# The password goes into URLs (nats://cascade:PASSWORD@host:port) as it is.
URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")


class Nats(msgspec.Struct, frozen=True, kw_only=True):
    url: str  # to connect with: the credentials included
    access: Access  # the same, with the TLS and credential files set
    embedded: bool  # the data dir's own server, which lets in the data dir's password
    server: EmbeddedNats | None = None  # that server, when this process started it

    @property
    def address(self) -> str:
        """Where it is, without the credentials: for the service file."""
        return self.access.address


def embedded_access(url: str) -> Access:
    """How to log in to an embedded server (its URL carries the password)."""
    from cascade_nats.access import parse

    return parse(url)


def _password(path: Path, *, create: bool) -> str | None:
    password = load_or_create_secret(path, PASSWORD)[0] if create else read_secret(path, PASSWORD)
    if password is not None and not URL_SAFE.fullmatch(password):
        raise ConfigError(f"{PASSWORD} file {path}: only letters, digits, - and _ can be in it; delete it for a new {PASSWORD}")
    return password


@contextlib.contextmanager
def configured_or_embedded(settings: Settings) -> Iterator[Nats]:
    """The NATS to use: the configured one, else a fresh embedded server over the data dir's
    store, with the data dir's password, whose lock the caller holds."""
    from cascade_nats import server

    if settings.nats_url is not None:
        yield Nats(url=settings.nats_url, access=settings.nats_access(), embedded=False)
        return
    if settings.nats_files:
        raise ConfigError(f"{', '.join(f'--{f}'.replace('_', '-') for f in settings.nats_files)}: for a NATS of --nats-url; the embedded one needs none")
    password = _password(settings.nats_password_path, create=True)
    try:
        embedded = server.start(settings.store_dir, password=password, sync_interval=settings.nats_sync_interval)
    except server.NatsServerError as err:
        raise ConfigError(f"embedded nats-server (store {settings.store_dir}): {err}") from err
    try:
        yield Nats(url=embedded.url, access=embedded_access(embedded.url), embedded=True, server=embedded)
    finally:
        embedded.stop()


def serving_nats_url(directory: Path) -> str | None:
    """The URL of the NATS of the service holding `directory` (`live_nats_url`), or None when
    no live service holds it."""
    service = datadir.live_service(directory) if directory.is_dir() else None
    return None if service is None else live_nats_url(directory, service)


def live_nats_url(directory: Path, service: datadir.Service) -> str:
    """The URL to reach the NATS of the service holding `directory` with: its address, and
    for the embedded server the data dir's user and password."""
    from cascade_nats import server

    if not service.nats_embedded:
        return service.nats_url
    path = directory / NATS_PASSWORD_FILE
    password = _password(path, create=False)
    if password is None:
        raise ConfigError(f"{PASSWORD} file {path}: does not exist, but the server holding {directory} needs it; restart that server")
    return server.with_password(service.nats_url, password)


@contextlib.contextmanager
def for_reading(settings: Settings) -> Iterator[Access]:
    """The NATS holding the data dir's events, for `replay` and `events`: the
    configured one, else the one of the server that holds the data dir, else a temporary
    embedded server over its store, with the data dir locked while it runs. Never a second
    server on a store a live one holds."""
    if settings.nats_url is not None:
        yield settings.nats_access()
        return
    if not settings.data_dir.is_dir():
        raise ConfigError(f"data dir {settings.data_dir}: does not exist; pass --data-dir, or --nats-url")
    lock = datadir.try_lock(settings.data_dir)
    if lock is None:
        service = datadir.live_service(settings.data_dir)
        if service is None:
            holder = datadir.holder(settings.data_dir)
            raise ConfigError(f"data dir {settings.data_dir}: in use by {holder}, which serves no NATS to share; pass --nats-url")
        url = live_nats_url(settings.data_dir, service)
        # A NATS of its own: where the service file says, logged in with this command's files.
        yield embedded_access(url) if service.nats_embedded else msgspec.structs.replace(settings, nats_url=url).nats_access()
        return
    with lock:
        if not settings.store_dir.is_dir():
            raise ConfigError(f"data dir {settings.data_dir}: no events stored (no {settings.store_dir}); pass --data-dir, or --nats-url")
        with configured_or_embedded(settings) as nats:
            yield nats.access


async def check_nats(access: Access) -> int:
    """Fail fast with one line if no NATS server of `access` greets us, or the one that does
    refuses to let us in; the number of servers in its cluster otherwise."""
    from cascade_nats.access import AccessError
    from cascade_nats.replicas import cluster_size
    from cascade_nats.wire import WireError, dial

    try:
        wire = await asyncio.wait_for(dial(access.servers, access, timeout=3), 3 * len(access.servers))
    except AccessError as err:
        raise ConfigError(str(err)) from err
    except WireError as err:  # before OSError, which it is
        raise ConfigError(f"NATS at {err}{_hint(str(err), access)}") from err
    except (OSError, TimeoutError) as err:
        raise ConfigError(f"NATS at {access.address}: unreachable ({getattr(err, 'strerror', None) or 'no answer'})") from err
    wire.close()
    return cluster_size(wire.info)


def _hint(error: str, access: Access) -> str:
    """What to check when a server refused us."""
    if "CERTIFICATE_REQUIRED" in error:
        return "; it wants a client certificate (--nats-cert and --nats-key)"
    if "CERTIFICATE_VERIFY_FAILED" in error:
        return "; its certificate is not signed by a CA we trust (--nats-ca)"
    if "Authorization Violation" not in error and "Authentication" not in error:
        return ""
    if access.creds_file is not None:
        return f"; the creds file {access.creds_file} is not one it accepts"
    if access.nkey_file is not None:
        return f"; the nkey seed in {access.nkey_file} is not one it accepts"
    if access.user is not None:
        return "; wrong user or password"
    if access.token is not None:
        return "; wrong token"
    return "; it needs a login: user:password@ or a token@ in the URL, --nats-nkey or --nats-creds"


async def _connect_once(access: Access) -> NatsClient:
    from cascade_nats.connect import connect

    await check_nats(access)
    return await connect(access, name="cascade-cli", connect_timeout=3)


@contextlib.asynccontextmanager
async def open_store(access: Access) -> AsyncIterator[EventStore]:
    from cascade_nats.store import EventStore

    nc = await _connect_once(access)
    store = EventStore(nc)
    try:
        await store.ensure_stream()
        yield store
    finally:
        await store.close()
        await nc.close()
