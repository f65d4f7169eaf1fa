"""A request must name this server in its Host (`cascade_http.hosts`): a page of another
site that points a name of its own at the server's address (DNS rebinding) is refused, on
the routes that need no token too."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings, resolve
from cascade_cli import main
from cascade_http.hosts import name_of, problem
from cascade_nats import server
from tests.cascade_http.live import LiveServer, live_server

REFUSED = "is not a name of this server; if it is one (a proxy's or a DNS name), start serve with it in --allowed-hosts (CASCADE_ALLOWED_HOSTS)"


def scope(*hosts: str, server: str | None = "127.0.0.1") -> dict[str, object]:
    return {"headers": [(b"host", h.encode()) for h in hosts], "server": None if server is None else (server, 8000)}


def test_a_host_is_its_name_without_port_or_brackets() -> None:
    assert [name_of(h) for h in ("LocalHost:8000", "[::1]:8000", "[::1]", "cascade.example", "::1")] == [
        "localhost", "::1", "::1", "cascade.example", "::1"
    ]


def test_the_names_taken_are_the_address_came_to_its_loopback_names_the_bind_host_and_the_allowed() -> None:
    local = Settings(allowed_hosts="Cascade.Example, gpu01")
    for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000", "cascade.example", "GPU01:443"):
        assert problem(scope(host), local) is None, host
    assert problem(scope("evil.example:8000"), local) == f"Host 'evil.example:8000' {REFUSED}"
    assert problem(scope("127.0.0.1.evil.example"), local) == f"Host '127.0.0.1.evil.example' {REFUSED}"
    assert problem(scope(), local) == "0 Host headers were sent; send exactly one, naming this server"
    assert problem(scope("localhost", "localhost"), local) == "2 Host headers were sent; send exactly one, naming this server"

    everywhere = Settings(host="0.0.0.0")
    assert problem(scope("10.1.2.3:8000", server="10.1.2.3"), everywhere) is None
    assert problem(scope("localhost:8000", server="10.1.2.3"), everywhere) == f"Host 'localhost:8000' {REFUSED}"
    assert problem(scope("0.0.0.0:8000", server="10.1.2.3"), everywhere) == f"Host '0.0.0.0:8000' {REFUSED}"
    assert problem(scope("localhost:8000", server="::ffff:127.0.0.1"), Settings(host="::")) is None
    assert problem(scope("gpu01.lan:8000", server="10.1.2.3"), Settings(host="gpu01.lan")) is None


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("hosts")
    with server.running(root / "jetstream") as nats:
        settings = Settings(token="t", data_dir=root / "data", nats_url=nats.url, runner=False, samples=False, allowed_hosts="cascade.example")
        with live_server(settings) as live:
            yield live


@pytest.mark.parametrize("path", ["/api/health", "/", "/static/js/main.js", "/api/runs"])
def test_a_served_request_with_another_host_is_refused_before_anything(served: LiveServer, path: str) -> None:
    port = httpx.URL(served.url).port
    with httpx.Client(base_url=served.url, headers={"Authorization": "Bearer t"}, timeout=30) as client:
        refused = client.get(path, headers={"Host": f"rebound.example:{port}"})
        assert (refused.status_code, refused.json()) == (400, {"detail": f"Host 'rebound.example:{port}' {REFUSED}"})
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "cascade.example"):
            assert client.get(path, headers={"Host": host}).status_code == 200, host


def test_a_test_client_is_served_as_the_server_it_names(client: TestClient) -> None:
    assert client.get("/api/health").status_code in (200, 503)
    assert client.get("/api/health", headers={"Host": "rebound.example"}).status_code == 400


def test_the_allowed_hosts_come_from_the_flag_or_the_environment() -> None:
    assert resolve({}, {"CASCADE_ALLOWED_HOSTS": "A.example, b.example,"}).allowed_host_names == {"a.example", "b.example"}
    flag = main._settings(main.build_parser().parse_args(["serve", "--allowed-hosts", "c.example"]))
    assert flag.allowed_host_names == {"c.example"} and Settings().allowed_host_names == frozenset()
