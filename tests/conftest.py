"""Shared fixtures: a real nats-server with JetStream per test, and the shared Accel-Sim data."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client

from cascade_nats import server
from cascade_nats.store import EventStore
from tests.nats_cluster import NatsCluster
from tests.support import LOGS

# The fake simulator replays the shared recordings, wherever this checkout's shared/ is.
os.environ.setdefault("CASCADE_FAKE_ACCELSIM_LOGS", str(LOGS))




@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[server.EmbeddedNats]:
    """A fresh nats-server with JetStream, its store in the test's temp dir."""
    with server.running(tmp_path / "jetstream") as running:
        yield running


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    """A fresh 3-node JetStream cluster on loopback (`tests/nats_cluster.py`)."""
    nodes = NatsCluster(tmp_path / "nats-cluster")
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
def nats_url(nats_server: server.EmbeddedNats) -> str:
    return nats_server.url


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    client = await nats.connect(nats_url)
    yield client
    await client.close()


@pytest.fixture
async def store(nc: Client) -> AsyncIterator[EventStore]:
    s = EventStore(nc)
    await s.ensure_stream()
    yield s
    await s.close()
