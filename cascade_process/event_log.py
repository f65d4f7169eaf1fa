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

    from nats.aio.client import Client

    from cascade_nats.server import EmbeddedNats
    from cascade_nats.store import EventStore

PASSWORD = "NATS password"
# The password goes into URLs (nats://cascade:PASSWORD@host:port) as it is.
URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")


class Nats(msgspec.Struct, frozen=True):
    url: str  # to connect with: the credentials included
    embedded: bool  # the data dir's own server, which lets in the data dir's password
    server: EmbeddedNats | None = None  # that server, when this process started it

    @property
    def address(self) -> str:
        """Where it is, without the credentials: for the service file."""
        from cascade_nats.wire import without_credentials

        return without_credentials(self.url)


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
        yield Nats(settings.nats_url, embedded=False)
        return
    password = _password(settings.nats_password_path, create=True)
    try:
        embedded = server.start(settings.store_dir, password=password)
    except server.NatsServerError as err:
        raise ConfigError(f"embedded nats-server (store {settings.store_dir}): {err}") from err
    try:
        yield Nats(embedded.url, embedded=True, server=embedded)
    finally:
        embedded.stop()


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
def for_reading(settings: Settings) -> Iterator[str]:
    """The URL of the NATS holding the data dir's events, for `replay` and `events`: the
    configured one, else the one of the server that holds the data dir, else a temporary
    embedded server over its store, with the data dir locked while it runs. Never a second
    server on a store a live one holds."""
    if settings.nats_url is not None:
        yield settings.nats_url
        return
    if not settings.data_dir.is_dir():
        raise ConfigError(f"data dir {settings.data_dir}: does not exist; pass --data-dir, or --nats-url")
    lock = datadir.try_lock(settings.data_dir)
    if lock is None:
        service = datadir.live_service(settings.data_dir)
        if service is None:
            holder = datadir.holder(settings.data_dir)
            raise ConfigError(f"data dir {settings.data_dir}: in use by {holder}, which serves no NATS to share; pass --nats-url")
        yield live_nats_url(settings.data_dir, service)
        return
    with lock:
        if not settings.store_dir.is_dir():
            raise ConfigError(f"data dir {settings.data_dir}: no events stored (no {settings.store_dir}); pass --data-dir, or --nats-url")
        with configured_or_embedded(settings) as nats:
            yield nats.url


async def check_nats(url: str) -> None:
    """Fail fast with one line if no NATS server greets us at `url`, or it refuses to let us in."""
    from cascade_nats.wire import Wire, WireError, redacted, without_credentials

    try:
        wire = await asyncio.wait_for(Wire.open(url), 3)
    except WireError as err:  # before OSError, which it is
        hint = ""
        if "Authorization Violation" in str(err):
            given = without_credentials(url) != url
            hint = "; wrong user or password" if given else "; it needs a user and password in the URL (user:password@host:port)"
        raise ConfigError(f"NATS at {err}{hint}") from err
    except (OSError, TimeoutError) as err:
        raise ConfigError(f"NATS at {redacted(url)}: unreachable ({getattr(err, 'strerror', None) or 'no answer'})") from err
    wire.close()


async def _connect_once(url: str) -> Client:
    from cascade_nats.connect import connect

    await check_nats(url)
    return await connect(url, name="cascade-cli", connect_timeout=3)


@contextlib.asynccontextmanager
async def open_store(url: str) -> AsyncIterator[EventStore]:
    from cascade_nats.store import EventStore

    nc = await _connect_once(url)
    store = EventStore(nc)
    try:
        await store.ensure_stream()
        yield store
    finally:
        await store.close()
        await nc.close()
