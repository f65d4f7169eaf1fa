from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import duckdb
import httpx
import msgspec
import nats
import pytest

from cascade_core import events as ev
from cascade_nats.store import EventStore
from cascade_process import datadir
from cascade_process.serve import KEEP_ALIVE_S
from tests.cascade_http.served import CASCADE, children, clean_env, cli, health, nats_servers_under, serving
from tests.projections.histories import lifecycle
from tests.projections.test_fold import dump
from tests.support import TRACES, wait_until

TOKEN = "t0ken"


def env(**extra: str) -> dict[str, str]:
    return clean_env(**{"CASCADE_TOKEN": TOKEN, **extra})


def run_cli(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return cli(*args, env=env(**extra))


def one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("cascade: error: "), out.stderr
    return out.stderr.removeprefix("cascade: error: ").rstrip("\n")


async def append_lifecycle(nats_url: str, *, heartbeats_of_100k: int = 0) -> int:
    """The lifecycle history, and that many more heartbeats of run-a with 100 kB of log each."""
    events = lifecycle()
    beat = next(e for e in events if isinstance(e, ev.SimHeartbeat))
    events += [msgspec.structs.replace(beat, id=f"padding-{i}", log="x" * 100_000) for i in range(heartbeats_of_100k)]
    nc = await nats.connect(nats_url)
    try:
        store = EventStore(nc)
        await store.ensure_stream()
        try:
            return (await store.append_facts(events))[-1]
        finally:
            await store.close()
    finally:
        await nc.close()


def wait_projected(url: str, seq: int) -> None:
    wait_until(lambda: health(url)["projected_seq"] >= seq, 20)


def append_lifecycle_and_wait_dispatched(url: str, nats_url: str, *, heartbeats_of_100k: int = 0) -> int:
    """The stream's last sequence once the lifecycle is in, with the dispatcher's three launch
    requests for its run, and all of it projected. The requests may land among the lifecycle's
    own events, so the end is counted from where the stream stood, not added to the last append."""
    end = health(url)["stream_seq"] + len(lifecycle()) + heartbeats_of_100k + 3
    asyncio.run(append_lifecycle(nats_url, heartbeats_of_100k=heartbeats_of_100k))
    wait_until(lambda: (h := health(url))["stream_seq"] == end and h["projected_seq"] == end, 60)
    return end


def test_serve_starts_and_stops_its_nats_server_and_a_restart_keeps_the_read_model(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(data, "--no-runner", env=env()) as served:
        assert nats_servers_under(data), "the embedded nats-server runs under the data dir"
        assert (data / "service.json").stat().st_mode & 0o777 == 0o600
        assert served.service.api_url.startswith("http://127.0.0.1:") and not served.service.api_url.endswith(":0")
        # The dispatcher queues the lifecycle run's three sims for runners (none runs here).
        stored = append_lifecycle_and_wait_dispatched(served.url, served.nats_url)
        # No --url: the data dir's service file says where the server is.
        live = run_cli("replay", "--verify", "--data-dir", str(data))
        assert live.returncode == 0, live.stdout + live.stderr
        assert "equal to a fresh replay" in live.stdout
    assert not nats_servers_under(data), "no orphan nats-server after Ctrl-C"
    assert not (data / "service.json").exists()
    before = dump(duckdb.connect(str(data / "readmodel.duckdb"), read_only=True))

    with serving(data, "--no-runner", env=env()) as served:
        assert health(served.url)["stream_seq"] == stored, "a restart adds no event: samples and queued sims are there"
        wait_projected(served.url, stored)
    after = dump(duckdb.connect(str(data / "readmodel.duckdb"), read_only=True))
    assert after == before
    assert {row[0]: row[3] for row in after["runs"]}["run-a"] == "cancelled"

    verify = run_cli("replay", "--verify", "--data-dir", str(data))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "equal to a fresh replay" in verify.stdout


def test_a_second_serve_on_a_live_data_dir_fails_in_one_line_and_leaves_the_first_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(data, "--no-runner", env=env()) as first:
        nats_pids = children(first.process.pid)
        log = data / "jetstream" / "nats-server.log"
        log_inode, log_before = log.stat().st_ino, log.read_bytes()
        service_before = (data / "service.json").read_bytes()
        db_before = (data / "readmodel.duckdb").stat()

        second = run_cli("serve", "--data-dir", str(data), "--port", "0", "--no-runner")
        line = one_error_line(second)
        assert line.startswith(f"data dir {data}: in use by pid {first.process.pid} (")
        assert "cascade_cli serve" in line

        assert health(first.url)["stream_seq"] > 0
        assert children(first.process.pid) == nats_pids and len(nats_servers_under(data)) == 1
        assert log.stat().st_ino == log_inode and log.read_bytes().startswith(log_before)
        assert (data / "service.json").read_bytes() == service_before
        after = (data / "readmodel.duckdb").stat()
        assert (after.st_ino, after.st_mtime_ns) == (db_before.st_ino, db_before.st_mtime_ns)
        last = asyncio.run(append_lifecycle(first.nats_url))
        wait_projected(first.url, last)


def test_events_and_replay_on_a_live_data_dir_use_its_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(data, "--no-runner", env=env()) as served:
        last = asyncio.run(append_lifecycle(served.nats_url))
        log = data / "jetstream" / "nats-server.log"
        log_inode, log_before = log.stat().st_ino, log.read_bytes()

        history = run_cli("events", "sim-a1", "--data-dir", str(data))
        assert history.returncode == 0, history.stderr
        assert "sim.finished.v1" in [line.split()[2] for line in history.stdout.splitlines()]
        replayed = run_cli("replay", "--db", str(tmp_path / "audit.duckdb"), "--data-dir", str(data))
        assert replayed.returncode == 0, replayed.stderr
        assert int(replayed.stdout.split()[1]) >= last

        # A second nats-server on this store would have replaced its log and shown up here.
        assert log.stat().st_ino == log_inode and log.read_bytes().startswith(log_before)
        assert len(nats_servers_under(data)) == 1
        assert health(served.url)["stream_seq"] >= last


def test_events_and_serve_refuse_a_data_dir_held_by_a_process_that_serves_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "jetstream").mkdir(parents=True)
    with datadir.lock(data):
        events = one_error_line(run_cli("events", "x", "--data-dir", str(data)))
        assert events.startswith(f"data dir {data}: in use by pid {os.getpid()} (")
        assert events.endswith("which serves no NATS to share; pass --nats-url")
        serve = one_error_line(run_cli("serve", "--data-dir", str(data), "--port", "0"))
        assert serve.startswith(f"data dir {data}: in use by pid {os.getpid()} (")
        assert not nats_servers_under(data) and sorted(os.listdir(data)) == ["jetstream", "lock"]
    missing = one_error_line(run_cli("events", "x", "--data-dir", str(tmp_path / "nowhere")))
    assert missing == f"data dir {tmp_path / 'nowhere'}: does not exist; pass --data-dir, or --nats-url"


def test_replay_builds_a_fresh_read_model_and_events_prints_history(tmp_path: Path, nats_url: str) -> None:
    last = asyncio.run(append_lifecycle(nats_url))
    db = tmp_path / "audit.duckdb"
    # The URL carries the test server's password: in the environment, as a command line is public.
    out = run_cli("replay", "--db", str(db), CASCADE_NATS_URL=nats_url)
    assert out.returncode == 0, out.stderr
    assert f"replayed {last} events" in out.stdout
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM sims").fetchone() == (3,)

    again = run_cli("replay", "--db", str(db), CASCADE_NATS_URL=nats_url)
    assert again.returncode == 2 and "exists" in again.stderr

    history = run_cli("events", "sim-a1", CASCADE_NATS_URL=nats_url)
    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()
    assert [line.split()[2] for line in lines] == [
        "sim.claimed.v1", "sim.launched.v1", "sim.kernel_finished.v2", "sim.heartbeat.v1", "sim.file_stored.v1", "sim.finished.v1"
    ]
    assert "stats={5 keys}" in lines[2], "a kernel's stats map is summed up, not shown as an object's repr"
    as_json = run_cli("events", "run-a", "--json", CASCADE_NATS_URL=nats_url)
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert records[0]["event"]["type"] == "run.created.v1"
    assert [r["seq"] for r in records] == sorted(r["seq"] for r in records)
    kernel = next(r["event"] for r in records if r["event"]["type"] == "sim.kernel_finished.v2")
    appended = next(e for e in lifecycle() if isinstance(e, ev.KernelFinished))
    assert kernel["stats"] == json.loads(msgspec.json.encode(appended.stats)), "the map as it was appended"
    assert run_cli("events", "nope", CASCADE_NATS_URL=nats_url).returncode == 1


def test_events_over_a_stopped_data_dir_hold_it_while_their_server_runs_and_end_quietly_on_a_closed_pipe(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(data, "--no-runner", env=env()) as served:
        # Many times more than a pipe holds, so `events` is still writing when its reader goes.
        asyncio.run(append_lifecycle(served.nats_url, heartbeats_of_100k=10))
    reader = subprocess.Popen(
        [*CASCADE, "events", "run-a", "--json", "--data-dir", str(data)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env()
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert json.loads(reader.stdout.readline())["event"]["type"] == "run.created.v1"
    # Blocked on the full pipe, with a nats-server of its own over the store: the data dir is its.
    assert len(nats_servers_under(data)) == 1
    line = one_error_line(run_cli("serve", "--data-dir", str(data), "--port", "0"))
    assert line.startswith(f"data dir {data}: in use by pid {reader.pid} (") and "events run-a --json" in line

    reader.stdout.close()  # as `| head -1` does
    reader.wait(30)
    assert reader.stderr.read() == b""
    reader.stderr.close()
    assert reader.returncode == 128 + signal.SIGPIPE
    assert not nats_servers_under(data)
    with datadir.lock(data):
        pass


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
        ([], {"CASCADE_TOKEN": " \t"}, "CASCADE_TOKEN is set but empty; unset it to use the data dir's token file"),
    ],
)
def test_bad_config_is_one_clear_line(tmp_path: Path, args: list[str], extra: dict[str, str], expected: str) -> None:
    # Port 0 unless the case is about the port: 8000 may be taken, and would be the error.
    port = {"CASCADE_PORT": "0", **extra}
    line = one_error_line(run_cli("serve", "--data-dir", str(tmp_path / "d"), *args, **port))
    assert expected in line


@pytest.mark.parametrize(
    "content, mode, expected",
    [
        ("secret\n", 0o644, "readable or writable by others (mode 644); chmod 600 it, or delete it for a new token"),
        ("  \n", 0o600, "empty; put the token in it, or delete it for a new token"),
    ],
)
def test_an_unsafe_or_empty_token_file_stops_serve(tmp_path: Path, content: str, mode: int, expected: str) -> None:
    data = tmp_path / "d"
    data.mkdir(mode=0o700)  # as serve makes it: one open to others would be tightened, and logged
    (data / "token").write_text(content)
    (data / "token").chmod(mode)
    line = one_error_line(cli("serve", "--data-dir", str(data), "--port", "0"))
    assert line == f"token file {data / 'token'}: {expected}"
    assert not (data / "jetstream").exists()


def test_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--port", str(port))
    assert out.returncode == 2
    assert out.stderr == f"cascade: error: port {port} on 127.0.0.1: Address already in use\n"


def test_every_command_finds_the_server_and_its_token_the_same_way_and_says_where_it_looked(tmp_path: Path) -> None:
    data = tmp_path / "data"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with serving(data, "--no-runner") as served:  # no CASCADE_TOKEN: the token is made and kept in the data dir
        token_file = data / "token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        verify = cli("replay", "--verify", "--data-dir", str(data))
        assert verify.returncode == 0, verify.stdout + verify.stderr

        nothing = one_error_line(cli("replay", "--verify", "--url", served.url, cwd=elsewhere))
        assert nothing == (
            f"no API token: CASCADE_TOKEN is not set and {elsewhere / '.cascade' / 'token'} does not exist; "
            "set CASCADE_TOKEN, or pass --data-dir with the server's data dir"
        )
        wrong = one_error_line(cli("replay", "--verify", "--data-dir", str(data), env=env()))
        assert wrong == f"POST /api/replay/verify: 401 Invalid token (the server refused the token from CASCADE_TOKEN; unset it to use {token_file})"

        other = tmp_path / "other"
        other.mkdir()
        (other / "token").write_text("not-the-token\n")
        (other / "token").chmod(0o600)
        upload = one_error_line(cli("trace", "upload", str(TRACES / "vectoradd-100-32"), "--data-dir", str(other), "--url", served.url))
        assert upload.endswith(
            f": 401 Invalid token (the server refused the token from {other / 'token'}; "
            "set CASCADE_TOKEN to the server's token, or pass --data-dir with its data dir)"
        )
    with socket.socket() as bound:  # bound, never listening: connections to it are refused
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}"
        gone = one_error_line(cli("replay", "--verify", "--url", url, env=env()))
    assert gone == f"{url}: unreachable (Connection refused) (URL from --url)"


def test_serve_keeps_an_idle_connection_longer_than_clients_do() -> None:
    # Else a client's request on a connection the server is just closing gets a reset, which
    # httpx does not send again (a browser test failed so under load).
    assert KEEP_ALIVE_S > (httpx.Limits().keepalive_expiry or 0)  # httpx's default, 5 s
    assert KEEP_ALIVE_S > 15  # aiohttp's
