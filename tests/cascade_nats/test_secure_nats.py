"""Every connection Cascade makes, nats-py's and the bulk paths' (pipelined appends, the
firehose, the object store), to a real nats-server that speaks only TLS, checks client
certificates, and lets in by user and password, token, nkey or `.creds` (a user JWT of an
operator the test made); a wrong credential or CA ends a command with one clear line."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cascade_nats import subjects
from cascade_nats.access import Access, parse
from cascade_nats.connect import connect
from cascade_nats.objects import Objects
from cascade_nats.store import EventStore
from tests.cascade_http.served import clean_env, cli
from tests.cascade_http.test_cli import one_error_line
from tests.cascade_nats.test_store import heartbeat
from tests.faults.cluster import Cluster
from tests.nats_cluster import Node, single
from tests.secure_nats import Certificates, certificates, nkey, operator_mode

PASSWORD = "s3cret-pw"
TOKEN = "a-token-of-ours"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return certificates(tmp_path_factory.mktemp("certs"))


def tls(certs: Certificates) -> dict[str, Any]:
    """A server's TLS: its certificate, and a client certificate from our CA required."""
    return {"tls": {"cert_file": str(certs.server_cert), "key_file": str(certs.server_key), "ca_file": str(certs.ca), "verify": True}}


def client_tls(certs: Certificates) -> dict[str, Path]:
    return {"ca_file": certs.ca, "cert_file": certs.client_cert, "key_file": certs.client_key}


@pytest.fixture
def secured(tmp_path: Path, certs: Certificates, request: pytest.FixtureRequest) -> Iterator[tuple[Node, Access]]:
    """A TLS server that lets in one login (the test's parameter), and the Access of it."""
    login = request.param
    address = ""
    if login == "operator":
        config, creds = operator_mode(tmp_path)
        node = single(tmp_path / "nats", **tls(certs), **config)
        access = parse(f"tls://127.0.0.1:{node.port}", creds_file=creds, **client_tls(certs))
    else:
        seed, public = nkey()
        (tmp_path / "seed").write_text(seed + "\n")
        authorization = {
            "password": {"users": [{"user": "cascade", "password": PASSWORD}]},
            "token": {"token": TOKEN},
            "nkey": {"users": [{"nkey": public}]},
        }[login]
        node = single(tmp_path / "nats", authorization=authorization, **tls(certs))
        address = f"127.0.0.1:{node.port}"
        url = {"password": f"tls://cascade:{PASSWORD}@{address}", "token": f"tls://{TOKEN}@{address}", "nkey": f"tls://{address}"}[login]
        access = parse(url, nkey_file=tmp_path / "seed" if login == "nkey" else None, **client_tls(certs))
    try:
        yield node, access
    finally:
        node.stop()


@pytest.mark.parametrize("secured", ["password", "token", "nkey", "operator"], indirect=True)
def test_every_connection_logs_in_over_tls(secured: tuple[Node, Access]) -> None:
    _, access = secured

    async def use() -> None:
        nc = await connect(access)
        store, objects = EventStore(nc), Objects(nc)
        try:
            await store.ensure_stream()
            await objects.ensure()
            events = [heartbeat(i) for i in range(500)]
            assert len(await store.append_facts(events)) == 500  # the pipeline
            read = [s.event async for s in store.read(subjects.ALL)]  # the firehose
            assert read == events
            data = bytes(range(256)) * 4096  # a MiB: eight chunks, pipelined

            async def pieces() -> Any:
                yield data

            await objects.put("blob", pieces())
            assert await objects.read_all("blob") == data
        finally:
            await store.close()
            await objects.close()
            await nc.close()

    asyncio.run(use())


@pytest.mark.parametrize("secured", ["nkey"], indirect=True)
def test_a_wrong_credential_or_ca_is_one_line(secured: tuple[Node, Access], tmp_path: Path, certs: Certificates) -> None:
    node, access = secured
    address = f"tls://127.0.0.1:{node.port}"
    other_seed, _ = nkey()
    (tmp_path / "other-seed").write_text(other_seed)
    files = ["--nats-ca", str(certs.ca), "--nats-cert", str(certs.client_cert), "--nats-key", str(certs.client_key)]
    env = clean_env()
    out = cli("events", "run-x", "--nats-url", address, *files, "--nats-nkey", str(tmp_path / "other-seed"), env=env)
    assert one_error_line(out) == (
        f"NATS at {address}: refused the connection (Authorization Violation); the nkey seed in {tmp_path / 'other-seed'} is not one it accepts"
    )
    # Our own certificate as the CA: the server's is not signed by it.
    wrong_ca = ["--nats-ca", str(certs.client_cert), *files[2:]]
    out = cli("events", "run-x", "--nats-url", address, *wrong_ca, "--nats-nkey", str(tmp_path / "seed"), env=env)
    assert one_error_line(out) == f"NATS at {address}: TLS handshake failed (CERTIFICATE_VERIFY_FAILED); its certificate is not signed by a CA we trust (--nats-ca)"
    # No client certificate: the server wants one.
    out = cli("events", "run-x", "--nats-url", address, "--nats-ca", str(certs.ca), "--nats-nkey", str(tmp_path / "seed"), env=env)
    assert one_error_line(out) == f"NATS at {address}: TLS handshake failed (TLSV13_ALERT_CERTIFICATE_REQUIRED); it wants a client certificate (--nats-cert and --nats-key)"
    # Right: the command gets as far as finding no events.
    out = cli("events", "run-x", "--nats-url", address, *files, "--nats-nkey", str(tmp_path / "seed"), env=env)
    assert (out.returncode, out.stderr.strip().splitlines()[-1]) == (1, "cascade: no events for 'run-x'")


def test_serve_and_a_remote_worker_run_sims_over_tls(tmp_path: Path, certs: Certificates) -> None:
    """`cascade serve` logs in with a password, a `cascade worker` with an nkey, both over
    TLS with client certificates: uploads, launches, kernels, files and the read model go
    through every connection kind."""
    seed, public = nkey()
    (tmp_path / "seed").write_text(seed + "\n")
    users = [{"user": "cascade", "password": PASSWORD}, {"nkey": public}]
    node = single(tmp_path / "nats", authorization={"users": users}, **tls(certs))
    address = f"127.0.0.1:{node.port}"
    files = {"CASCADE_NATS_CA": str(certs.ca), "CASCADE_NATS_CERT": str(certs.client_cert), "CASCADE_NATS_KEY": str(certs.client_key)}
    cluster = Cluster(tmp_path / "cascade", pace_s=0.2, nats_url=f"tls://cascade:{PASSWORD}@{address}", nats_env=files)
    try:
        cluster.serve(runner=False)
        cluster.upload()
        cluster.worker("w1", CASCADE_NATS_URL=f"tls://{address}", CASCADE_NATS_NKEY=str(tmp_path / "seed"))
        run = cluster.wait_until_final(cluster.create_run(2), 60)
        assert run["state"] == "succeeded", cluster.log("w1")[-2000:]
        assert cluster.api("POST", "/api/replay/verify", {})["equal"]
        workers = [c for c in node.monitor("/connz?auth=true")["connections"] if c.get("name") == "cascade-worker"]
        assert [c.get("authorized_user") for c in workers] == [public], "the worker logged in with its nkey"
    finally:
        cluster.close()
        node.stop()
