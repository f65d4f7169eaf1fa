"""Connecting nats-py's client: to the servers and with the login of an `Access`, which the
client keeps for the Wires opened beside it, and without leaking its socket.

`nats.connect()` makes a client and connects it; when the server refuses the login (or the
connection fails after the socket opened), it raises and leaves the socket open, for the
garbage collector to find, maybe after the event loop has closed ("ResourceWarning: loop is
closed"). Here a client that does not connect is closed before the error goes on.
"""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client

from cascade_nats.access import Access, parse, server_of
from cascade_nats.wire import Wire, dial


class NatsClient(Client):
    """nats-py's client, with the `Access` it logged in with."""

    def __init__(self, access: Access) -> None:
        super().__init__()
        self.access = access


async def connect(access: Access, **options: Any) -> NatsClient:
    client = NatsClient(access)
    try:
        await client.connect(**access.connect_options(), **options)
    except BaseException:
        await client.close()
        raise
    return client


def access_of(nc: Client) -> Access:
    """How `nc` logged in: its `Access`, or for a client connected otherwise (a test's), what
    its URLs carry."""
    if isinstance(nc, NatsClient):
        return nc.access
    return parse(",".join(url.geturl() for url in nc.servers))


async def beside(nc: Client) -> Wire:
    """A Wire to the server `nc` is connected to, else (while it reconnects) to any of the
    servers it knows, the ones the cluster told it of included: so a bulk path follows
    nats-py through a failover instead of dialling a node that is gone."""
    access = access_of(nc)
    current = [nc.connected_url] if nc.connected_url else []
    return await dial(list(dict.fromkeys(server_of(url) for url in [*current, *nc.servers])), access)
