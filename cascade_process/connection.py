"""The NATS connection a process keeps: reconnecting for as long as it takes."""

from __future__ import annotations

from nats.aio.client import Client

from cascade_nats import connect as client
from cascade_nats.supervise import ConnectionWatch, Supervision
from cascade_nats.wire import without_credentials


async def connect_nats(url: str, *, name: str = "cascade", supervision: Supervision | None = None) -> Client:
    """A client that reconnects for as long as it takes, its connection's state in `supervision`."""
    watch = ConnectionWatch(supervision or Supervision(), without_credentials(url))
    watch.client = await client.connect(
        url, name=name, connect_timeout=5, max_reconnect_attempts=-1, reconnect_time_wait=0.5, allow_reconnect=True,
        error_cb=watch.error, disconnected_cb=watch.disconnected, reconnected_cb=watch.reconnected, closed_cb=watch.closed,
    )
    return watch.client
