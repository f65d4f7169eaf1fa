from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import nats
import pytest

from cascade_nats.store import EventStore
from tests.projections.histories import lifecycle
from tests.projections.test_fold import dump
from tests.support import wait_until

CASCADE = [sys.executable, "-m", "cascade_http.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CASCADE_")}
    return {**clean, "CASCADE_TOKEN": "t0ken", **extra}


def run_cli(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CASCADE, *args], capture_output=True, text=True, timeout=120, env=env(**extra))


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def nats_servers_under(data_dir: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-fa", "nats-server"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(data_dir) in line]


@contextmanager
def serving(data_dir: Path, *args: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [*CASCADE, "serve", "--port", str(port), "--data-dir", str(data_dir), "--no-runner", *args],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/api/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"server did not start: {proc.stdout.read() if proc.stdout else ''}") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert "Traceback" not in out, out


def health(url: str) -> dict[str, int]:
    return json.loads(urllib.request.urlopen(url + "/api/health", timeout=5).read())  # type: ignore[no-any-return]


async def append_lifecycle(nats_url: str) -> int:
    nc = await nats.connect(nats_url)
    try:
        store = EventStore(nc)
        await store.ensure_stream()
        try:
            return (await store.append_facts(lifecycle()))[-1]
        finally:
            await store.close()
    finally:
        await nc.close()


def wait_projected(url: str, seq: int) -> None:
    wait_until(lambda: health(url)["projected_seq"] >= seq, 20)


def test_serve_starts_and_stops_its_nats_server_and_a_restart_keeps_the_read_model(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(data) as url:
        assert nats_servers_under(data), "the embedded nats-server runs under the data dir"
        last = asyncio.run(append_lifecycle((data / "nats.url").read_text()))
        # The dispatcher queues the lifecycle run's three sims for runners (none runs here).
        wait_projected(url, last + 3)
        stored = health(url)["stream_seq"]
        live = run_cli("replay", "--verify", "--url", url, "--data-dir", str(data))
        assert live.returncode == 0, live.stdout + live.stderr
        assert "equal to a fresh replay" in live.stdout
    assert not nats_servers_under(data), "no orphan nats-server after Ctrl-C"
    assert not (data / "nats.url").exists()
    before = dump(duckdb.connect(str(data / "readmodel.duckdb"), read_only=True))

    with serving(data) as url:
        assert health(url)["stream_seq"] == stored, "a restart adds no event: samples and queued sims are there"
        wait_projected(url, stored)
    after = dump(duckdb.connect(str(data / "readmodel.duckdb"), read_only=True))
    assert after == before
    assert {row[0]: row[3] for row in after["runs"]}["run-a"] == "cancelled"

    verify = run_cli("replay", "--verify", "--data-dir", str(data))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "equal to a fresh replay" in verify.stdout


def test_replay_builds_a_fresh_read_model_and_events_prints_history(tmp_path: Path, nats_url: str) -> None:
    last = asyncio.run(append_lifecycle(nats_url))
    db = tmp_path / "audit.duckdb"
    out = run_cli("replay", "--db", str(db), "--nats-url", nats_url)
    assert out.returncode == 0, out.stderr
    assert f"replayed {last} events" in out.stdout
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM sims").fetchone() == (3,)

    again = run_cli("replay", "--db", str(db), "--nats-url", nats_url)
    assert again.returncode == 2 and "exists" in again.stderr

    history = run_cli("events", "sim-a1", "--nats-url", nats_url)
    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()
    assert [line.split()[2] for line in lines] == [
        "sim.claimed.v1", "sim.launched.v1", "sim.kernel_finished.v1", "sim.heartbeat.v1", "sim.file_stored.v1", "sim.finished.v1"
    ]
    assert "stats={2 keys}" in lines[2], "a kernel's stats map is summed up, not shown as an object's repr"
    as_json = run_cli("events", "run-a", "--json", "--nats-url", nats_url)
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert records[0]["event"]["type"] == "run.created.v1"
    assert [r["seq"] for r in records] == sorted(r["seq"] for r in records)
    kernel = next(r["event"] for r in records if r["event"]["type"] == "sim.kernel_finished.v1")
    assert kernel["stats"] == {"gpu_sim_cycle": 1417.0, "note": "-nan%"}
    assert run_cli("events", "nope", "--nats-url", nats_url).returncode == 1


@pytest.mark.parametrize(
    "args, expected",
    [
        (["events"], "cascade events takes a trace, run or sim id, or --parked"),
        (["events", "run-a", "--parked"], "cascade events takes a trace, run or sim id, or --parked"),
        (["replay", "--db", "/nonexistent/audit.duckdb"], "--db /nonexistent/audit.duckdb: no directory /nonexistent"),
        (["events", "--parked", "--url", "http://127.0.0.1:1"], "http://127.0.0.1:1: unreachable"),
    ],
)
def test_events_and_replay_refuse_bad_input_in_one_line(args: list[str], expected: str) -> None:
    out = run_cli(*args, "--nats-url", "nats://127.0.0.1:1")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("cascade: error: "), out.stderr
    assert expected in out.stderr


@pytest.mark.parametrize(
    "args, extra, expected",
    [
        (["--data-dir", "/proc/cascade-data"], {}, "data dir /proc/cascade-data: not writable"),
        (["--nats-url", "nats://127.0.0.1:1"], {}, "NATS at nats://127.0.0.1:1: unreachable"),
        ([], {"CASCADE_PORT": "not-a-port"}, "CASCADE_PORT"),
        (["--accelsim-dir", "/tmp"], {}, "accelsim dir /tmp: not an Accel-Sim install"),
    ],
)
def test_bad_config_is_one_clear_line(tmp_path: Path, args: list[str], extra: dict[str, str], expected: str) -> None:
    out = run_cli("serve", "--data-dir", str(tmp_path / "d"), *args, **extra)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("cascade: error: "), out.stderr
    assert expected in out.stderr


def test_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--port", str(port))
    assert out.returncode == 2
    assert out.stderr == f"cascade: error: port {port} on 127.0.0.1: Address already in use\n"
