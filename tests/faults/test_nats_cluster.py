"""Cascade on a 3-node JetStream cluster (`tests/nats_cluster.py`): its streams get three
replicas, and the node `cascade serve` is connected to, killed -9 in the middle of a run of
several sims and started again later, costs nothing: every sim ends, no kernel is recorded
twice or lost, the read model equals a fresh replay, an event stream client saw each
event once (`invariants.check`), and each sim's log, read from its heartbeats on whichever
replica answers, is what the simulator printed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from tests.faults.cluster import AUTH, Cluster, wait_for
from tests.faults.invariants import check
from tests.faults.test_faults import record, started
from tests.nats_cluster import STREAMS, NatsCluster, replicas_of
from tests.support import LOGS

pytestmark = pytest.mark.timeout(60)  # it takes about 25 s; CI time matters


def test_the_node_serve_is_on_killed_mid_run_loses_nothing(tmp_path: Path, nats_cluster: NatsCluster) -> None:
    cluster = Cluster(tmp_path / "cascade", pace_s=1.5, nats_url=nats_cluster.url)
    try:
        cluster.serve(slots=2)
        cluster.upload()
        cluster.worker("w1", slots=2)
        assert asyncio.run(replicas_of(nats_cluster.url)) == dict.fromkeys(STREAMS, 3), "the cluster's size, by default"
        run_id, stream = started(cluster, sims=6)
        node = nats_cluster.serving("cascade")
        node.kill()
        killed = time.monotonic()
        wait_for(lambda: cluster.health()[0] == 200 and cluster.kernels_done(run_id) >= 4, 40, "no progress without the node")
        going_after = time.monotonic() - killed
        assert cluster.served is not None and cluster.served.process.poll() is None
        assert cluster.workers["w1"].poll() is None, cluster.log("w1")[-2000:]
        node.start()
        nats_cluster.wait_for_jetstream()
        run = cluster.wait_until_final(run_id, 60)
        assert run["state"] == "succeeded", run["sims"]
        printed = (LOGS / "combo-vec-mm-xz__SM61_TITANX.log").read_text()
        for sim in run["sims"]:
            assert httpx.get(f"{cluster.url}/api/sims/{sim['id']}/log", headers=AUTH, timeout=30).text == printed
        counted = check(cluster, [run_id], [stream])  # it stops the service
        record("nats-node-killed", going_again_after_s=round(going_after, 1), counted=counted)
    finally:
        cluster.close()
