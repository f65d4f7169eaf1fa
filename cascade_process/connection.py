"""The NATS connection a process keeps: reconnecting for as long as it takes."""

from __future__ import annotations

from cascade_nats import connect as client
from cascade_nats.access import Access
from cascade_nats.connect import NatsClient
from cascade_nats.supervise import ConnectionWatch, Supervision


async def connect_nats(access: Access, *, name: str = "cascade", supervision: Supervision | None = None) -> NatsClient:
    """A client that reconnects for as long as it takes (to any server of the cluster), its
    connection's state in `supervision`."""
    watch = ConnectionWatch(supervision or Supervision(), access.address)
    watch.client = nc = await client.connect(
        access, name=name, connect_timeout=5, max_reconnect_attempts=-1, reconnect_time_wait=0.5, allow_reconnect=True,
        error_cb=watch.error, disconnected_cb=watch.disconnected, reconnected_cb=watch.reconnected, closed_cb=watch.closed,
    )
    return nc
