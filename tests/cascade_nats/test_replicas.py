"""Replicas of the event stream, the runners' bucket and the object store on a real 3-node
cluster: scaled up when asked, never down (an operator's R3 survives a start asking for
one), and saying what was found."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from cascade_nats.access import parse
from cascade_nats.connect import connect
from cascade_nats.objects import Objects
from cascade_nats.store import EventStore
from cascade_sim import registry
from tests.cascade_http.served import clean_env, cli
from tests.cascade_http.test_cli import one_error_line
from tests.nats_cluster import STREAMS, NatsCluster, replicas_of



async def ensure(url: str, replicas: int | None) -> dict[str, int]:
    """What serve's start does to the three streams; the replicas each has then."""
    nc = await connect(parse(url))
    store, objects = EventStore(nc), Objects(nc)
    try:
        await store.ensure_stream(replicas)
        await objects.ensure(replicas)
        await registry.bucket(store.js, replicas)
    finally:
        await store.close()
        await objects.close()
        await nc.close()
    return await replicas_of(url)


def test_streams_scale_up_and_never_down(nats_cluster: NatsCluster, caplog: pytest.LogCaptureFixture) -> None:
    url = nats_cluster.url
    assert asyncio.run(ensure(url, 1)) == dict.fromkeys(STREAMS, 1)
    assert asyncio.run(ensure(url, 3)) == dict.fromkeys(STREAMS, 3)
    with caplog.at_level(logging.INFO, "cascade"):
        assert asyncio.run(ensure(url, 1)) == dict.fromkeys(STREAMS, 3), "kept as scaled"
        assert asyncio.run(ensure(url, None)) == dict.fromkeys(STREAMS, 3)
    said = [r.getMessage() for r in caplog.records if r.name == "cascade"]
    assert said == [f"stream {name} has 3 replicas, more than the 1 asked for: kept at 3" for name in STREAMS]


def test_a_cluster_url_list_serves_commands_and_replicas_are_checked(nats_cluster: NatsCluster, tmp_path: Path) -> None:
    url = nats_cluster.url
    out = cli("events", "run-x", "--nats-url", url, env=clean_env())
    assert (out.returncode, out.stderr.strip()) == (1, "cascade: no events for 'run-x'"), out.stderr
    out = cli("serve", "--data-dir", str(tmp_path / "d1"), "--port", "0", "--replicas", "4", "--nats-url", url, env=clean_env())
    addresses = ",".join(node.address for node in nats_cluster.nodes)
    assert one_error_line(out) == f"--replicas 4: the NATS at {addresses} has 3 servers; a stream has at most one replica per server"
    out = cli("serve", "--data-dir", str(tmp_path / "d2"), "--port", "0", "--replicas", "2", env=clean_env())
    assert one_error_line(out) == "--replicas 2: the embedded nats-server has 1 server; a stream has at most one replica per server"
