"""How many copies JetStream keeps of Cascade's streams: the event stream, the runners'
key-value bucket and the object store (each a stream on the server).

Unless told, as many as the cluster has servers, up to 3: one on a single server (the
embedded one), three on a cluster of three or more, so any one node can go. A stream that has
more than asked for (an operator scaled it up by hand) keeps them: a start never scales down.
"""

from __future__ import annotations

import logging
from typing import Any

from nats.js.client import JetStreamContext

log = logging.getLogger("cascade")

MOST = 3


def cluster_size(info: dict[str, Any]) -> int:
    """The servers of the cluster, as a server's INFO lists their client URLs (its own among
    them); 1 for a server in no cluster."""
    return max(len(set(info.get("connect_urls") or [])), 1)


def default(asked: int | None, size: int) -> int:
    return asked if asked is not None else min(size, MOST)


def kept(stream: str, have: int, asked: int | None) -> int:
    """The replicas `stream` is to have, with `have` now: what was asked unless that is fewer."""
    if asked is None or asked == have:
        return have
    if have > asked:
        log.warning("stream %s has %d replicas, more than the %d asked for: kept at %d", stream, have, asked, have)
        return have
    log.info("stream %s has %d replicas: scaling it to %d", stream, have, asked)
    return asked


async def scale(js: JetStreamContext, stream: str, asked: int | None) -> None:
    """Give an existing stream `asked` replicas, unless it has more."""
    if asked is None:
        return
    info = await js.stream_info(stream)
    have = info.config.num_replicas or 1
    if (replicas := kept(stream, have, asked)) != have:
        await js.update_stream(info.config.evolve(num_replicas=replicas))
