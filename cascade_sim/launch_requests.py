"""Where a runner takes launch requests from: the durable consumer of each of its configs'
requests (`dispatcher.ensure_launch_consumer`), each a `Source`, and what becomes of a request
once handled (`settle`). The consumer of requests from before placement by config is a
source too, behind its own adapter (`legacy_launches`), so the runner's loop sees one kind
of delivery: a request for one of its configs."""

from __future__ import annotations

import contextlib
import logging
from typing import Literal

import msgspec
from nats.aio.msg import Msg
from nats.js.client import JetStreamContext

from cascade_core import events as ev
from cascade_sim.dispatcher import consumed_event

log = logging.getLogger("cascade.runner")

ASK_S = 0.1  # how long a consumer is waited on for requests when asked
# What becomes of a request once handled: acknowledged, handed back for another runner, or
# left to the runner that holds its sim now (whose lease keeps it).
Handled = Literal["done", "hand back", "leave"]


class Delivery(msgspec.Struct, frozen=True):
    """A launch request as its consumer delivered it: `msg` is what settles it."""

    request: ev.SimQueued
    msg: Msg


async def deliveries(messages: list[Msg]) -> list[Delivery]:
    """The requests `messages` hold; a message that holds none is terminated."""
    delivered = []
    for msg in messages:
        request = consumed_event(msg)
        if request is None:
            await msg.term()
            continue
        assert isinstance(request, ev.SimQueued)  # nothing else belongs on a queued subject
        delivered.append(Delivery(request=request, msg=msg))
    return delivered


async def settle(request: ev.SimQueued, msg: Msg, handled: Handled) -> None:
    """Acknowledge a handled request (its latest delivery `msg`), or hand it back, or leave it
    to its lease."""
    try:
        if handled == "done":
            await msg.ack()
        elif handled == "hand back":
            await msg.nak(delay=1)
    except Exception as err:  # noqa: BLE001 - the connection is closing: the lease ends the request's wait
        log.warning("sim %s: its request could not be settled (%s); it comes back when its lease runs out", request.sim_id, err)


class Source:
    """A consumer of launch requests for one of this runner's configs."""

    def __init__(self, name: str, sub: JetStreamContext.PullSubscription) -> None:
        self.name = name
        self.sub = sub
        self.rung = False  # a request was published for it since it was last asked, or more may wait
        self.retired = False  # gone for good: a config's consumer never is

    async def take(self, count: int) -> list[Delivery]:
        """Up to `count` requests, as many as come within `ASK_S`."""
        return await deliveries(await self._fetch(count))

    async def _fetch(self, count: int) -> list[Msg]:
        self.rung = False
        try:
            messages = await self.sub.fetch(count, timeout=ASK_S)
        except TimeoutError:  # nothing to take (nats-py raises its own or asyncio's)
            return []
        self.rung = self.rung or len(messages) == count  # as many as asked for: there may be more
        return messages

    async def close(self) -> None:
        with contextlib.suppress(Exception):  # gone with its connection, if that is why it stops
            await self.sub.unsubscribe()
