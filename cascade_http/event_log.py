"""How a command reaches the event log: the NATS it names, the one of the server that holds
the data dir, or an embedded nats-server of its own over the data dir's store, started only
under the data dir's lock (`datadir`), so that no store ever has two servers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

from cascade_http import datadir
from cascade_http.config import ConfigError, Settings

if TYPE_CHECKING:  # imported when used: commands that need no NATS start faster
    from nats.aio.client import Client

    from cascade_nats.store import EventStore


@contextlib.contextmanager
def configured_or_embedded(settings: Settings) -> Iterator[str]:
    """The NATS URL to use: the configured one, else a fresh embedded server over the data
    dir's store, whose lock the caller holds."""
    from cascade_nats import server

    if settings.nats_url is not None:
        yield settings.nats_url
        return
    try:
        embedded = server.start(settings.store_dir)
    except server.NatsServerError as err:
        raise ConfigError(f"embedded nats-server (store {settings.store_dir}): {err}") from err
    try:
        yield embedded.url
    finally:
        embedded.stop()


@contextlib.contextmanager
def for_reading(settings: Settings) -> Iterator[str]:
    """The NATS holding the data dir's events, for `replay` and `events`: the configured one,
    else the one of the server that holds the data dir, else a temporary embedded server
    over its store, with the data dir locked while it runs. Never a second server on a
    store a live one holds."""
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
        yield service.nats_url
        return
    with lock:
        if not settings.store_dir.is_dir():
            raise ConfigError(f"data dir {settings.data_dir}: no events stored (no {settings.store_dir}); pass --data-dir, or --nats-url")
        with configured_or_embedded(settings) as url:
            yield url


async def check_nats(url: str) -> None:
    """Fail fast with one line if no NATS server greets us at `url`."""
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"nats://{url}")
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port or 4222), 3)
        greeting = await asyncio.wait_for(reader.readline(), 3)
        writer.close()
    except (OSError, TimeoutError) as err:
        raise ConfigError(f"NATS at {url}: unreachable ({getattr(err, 'strerror', None) or 'no answer'})") from err
    if not greeting.startswith(b"INFO "):
        raise ConfigError(f"NATS at {url}: not a NATS server")


async def _connect_once(url: str) -> Client:
    import nats

    await check_nats(url)
    return await nats.connect(url, name="cascade-cli", connect_timeout=3)


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
