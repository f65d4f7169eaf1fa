"""Nobody gets in without the data dir's credentials: a real `cascade serve`'s embedded
nats-server refuses anonymous clients (nats-py and plain protocol) and wrong passwords, so
that a forged cancel cannot be published; every Cascade command logs in with the data dir's
password; the data dir and everything in it, the JetStream store included, is 0700/0600; and
neither the API token nor the NATS password shows up in a log, an API answer, a command's
output, a command line or a simulator's environment."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import stat
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import msgspec
import nats.errors
import pytest

from cascade_core import events as ev
from cascade_nats import subjects
from cascade_nats import server
from cascade_nats.access import parse
from cascade_nats.connect import connect
from cascade_nats.wire import Wire, WireError, redacted, without_credentials
from cascade_process import logs
from tests.cascade_http.served import api, children, clean_env, cli, health, serving
from tests.cascade_http.test_cli import one_error_line
from tests.cascade_http.test_secrets import every_event, get
from tests.cascade_sim.test_runner import serve as serve_in_process, service
from tests.cascade_sim.world import accelsim_tree, create_run, store_trace, wait_run, worker
from tests.support import TRACES, wait_until


def every_path(directory: Path) -> Iterator[Path]:
    yield directory
    for root, dirs, files in os.walk(directory):
        for name in (*dirs, *files):
            yield Path(root, name)


def open_to_others(directory: Path) -> dict[str, str]:
    """Every path in the directory that is not 0700 (a directory) or 0600 (a file)."""
    found = {}
    for path in every_path(directory):
        mode = path.lstat().st_mode
        if stat.S_IMODE(mode) != (0o700 if stat.S_ISDIR(mode) else 0o600):
            found[str(path.relative_to(directory))] = f"{stat.S_IMODE(mode):o}"
    return found


def environment(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode(errors="replace").partition("=")[::2] for entry in entries if entry)


def command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


async def refused(url: str) -> str:
    """Why nats-py may not connect to `url` (it must not)."""

    async def quiet(error: Exception) -> None:
        pass

    with pytest.raises(nats.errors.Error) as refusal:
        await connect(parse(url), allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=3, error_cb=quiet)
    return str(refusal.value)


def forge_cancel_anonymously(address: str, run_id: str) -> tuple[bytes, list[bytes]]:
    """A forged `run.cancel_requested` published over the plain protocol with no credentials:
    the server's greeting, and every line it answers until it closes the connection."""
    cancel = ev.RunCancelRequested(id=f"forged-{secrets.token_hex(4)}", at=datetime.now(UTC), run_id=run_id)
    payload = msgspec.json.encode(cancel)
    parts = urlsplit(address)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock, sock.makefile("rb") as answers:
        greeting = answers.readline()
        sock.sendall(
            b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'
            + f"HPUB {subjects.run(run_id)} 0 {len(payload)}\r\n".encode() + payload + b"\r\nPING\r\n"
        )
        return greeting, list(answers)


def test_a_served_data_dir_lets_in_only_its_own_user_and_shows_no_secret(tmp_path: Path) -> None:
    token = f"token-{secrets.token_urlsafe(18)}"
    data = tmp_path / "data"
    env = clean_env(CASCADE_TOKEN=token, CASCADE_FAKE_ACCELSIM_PACE="1")
    outputs: list[str] = []

    def run_cli(*args: str) -> str:
        out = cli(*args, "--data-dir", str(data), env=env)
        outputs.append(out.stdout + out.stderr)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    with serving(data, "--accelsim-dir", str(accelsim_tree(tmp_path / "accel-sim")), "--runner-slots", "1", env=env) as served:
        password = (data / "nats-password").read_text().strip()
        address = served.service.nats_url
        assert address == without_credentials(address) and password not in (data / "service.json").read_text()

        run_cli("trace", "upload", str(TRACES / "combo-vec-mm-xz"), "--id", "combo")
        run_id = api(served.url, token, "POST", "/api/runs", {"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]})["id"]

        def running_sim() -> str | None:
            return api(served.url, token, "GET", f"/api/runs/{run_id}")["sims"][0]["launcher_ref"]

        wait_until(running_sim, 30, "the sim did not start")
        sim = environment(int(running_sim() or 0))
        assert sim["CASCADE_FAKE_ACCELSIM_PACE"] == "1", "the simulator keeps the rest of the environment"
        assert "CASCADE_TOKEN" not in sim and not [v for v in sim.values() if token in v or password in v]
        (nats_pid,) = [pid for pid in children(served.process.pid) if "nats-server" in command_line(pid)]
        assert password not in command_line(nats_pid) and environment(nats_pid) == {}

        # Anonymous, or with a wrong password: refused, by nats-py and on the plain protocol.
        assert "Authorization Violation" in asyncio.run(refused(address))
        assert "Authorization Violation" in asyncio.run(refused(server.with_password(address, "wrong")))
        greeting, answers = forge_cancel_anonymously(address, run_id)
        assert greeting.startswith(b"INFO ") and b'"auth_required":true' in greeting
        assert answers == [b"-ERR 'Authorization Violation'\r\n"], "refused, and the connection closed"
        with pytest.raises(WireError, match=r"refused the connection \(Authorization Violation\)"):
            asyncio.run(Wire.open(address, parse(address)))

        for args, expected in [
            ([server.with_password(address, "wrong")], f"NATS at {address}: "
             "refused the connection (Authorization Violation); wrong user or password"),
            ([address], f"NATS at {address}: refused the connection (Authorization Violation); "
             "it needs a login: user:password@ or a token@ in the URL, --nats-nkey or --nats-creds"),
        ]:
            out = cli("events", run_id, "--nats-url", *args, env=env)
            outputs.append(out.stdout + out.stderr)
            assert one_error_line(out) == expected

        # Every command on the data dir logs in by itself, against the live server.
        assert "sim.launched.v1" in run_cli("events", run_id)
        wait_until(lambda: api(served.url, token, "GET", f"/api/runs/{run_id}")["state"] != "active", 60, "the run did not finish")
        assert api(served.url, token, "GET", f"/api/runs/{run_id}")["state"] == "succeeded", "the forged cancel never reached the log"
        stored = asyncio.run(every_event(served.nats_url))  # logged in as the data dir's user
        assert not [e for e in stored if b"run.cancel_requested" in e]
        answers_bodies = [get(served.url + path, {"Authorization": f"Bearer {token}"})[1] for path in (
            "/api/health", f"/api/runs/{run_id}", "/api/runs", "/api/runners", "/api/openapi.json", f"/api/runs/{run_id}/kernels",
        )]
        assert health(served.url)["projected_seq"] > 0

    # Stopped: `events` and `replay --db` start their own server, logged in the same way.
    assert "sim.finished.v1" in run_cli("events", run_id)
    audit = tmp_path / "audit.duckdb"
    assert run_cli("replay", "--db", str(audit)).startswith("replayed ")
    assert stat.S_IMODE(audit.stat().st_mode) == 0o600

    assert open_to_others(data) == {}
    assert (data / "jetstream" / "jetstream").is_dir() and (data / "runner").is_dir() and (data / "readmodel.duckdb").exists()
    texts = [served.text(), (data / "jetstream" / "nats-server.log").read_text(errors="replace"), *outputs]
    for secret in (password, token):
        assert not [text for text in texts if secret in text]
        assert not [body for body in answers_bodies if secret.encode() in body]




def test_a_worker_hands_its_simulator_none_of_its_secrets(tmp_path: Path, nats_url: str) -> None:
    tree = accelsim_tree(tmp_path / "accel-sim")
    token = f"token-{secrets.token_urlsafe(18)}"
    password = urlsplit(nats_url).password
    assert password, "the test server lets in only its user"
    with serve_in_process(tmp_path, nats_url, tree, runner=False) as client:
        store_trace(service(client), client, "combo", TRACES / "combo-vec-mm-xz", "sm_61")
        # The worker has the NATS URL with its password (CASCADE_NATS_URL) and a token in its environment.
        with worker(nats_url, tree, tmp_path / "w", CASCADE_FAKE_ACCELSIM_PACE="30", CASCADE_TOKEN=token) as process:
            run_id = create_run(client, "combo", "SM61_TITANX")["id"]
            running = wait_run(client, run_id, until="running")
            pid = int(running["sims"][0]["launcher_ref"])
            assert environment(process.pid)["CASCADE_NATS_URL"] == nats_url
            sim = environment(pid)
            assert sim["CASCADE_FAKE_ACCELSIM_PACE"] == "30"
            assert not {"CASCADE_TOKEN", "CASCADE_NATS_URL"} & set(sim)
            assert not [v for v in sim.values() if token in v or password in v]
            assert password not in command_line(pid) and password not in command_line(process.pid)
            assert client.post(f"/api/runs/{run_id}/cancel").json()["state"] == "cancelled"


def test_a_data_dir_an_older_version_left_open_is_made_private_once_and_its_secrets_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = clean_env(CASCADE_TOKEN="t0ken")
    with serving(data, "--no-runner", env=env):
        pass
    # As an older version left it: directories 0755, files 0644, but its token 0600.
    outside = tmp_path / "outside.txt"
    outside.write_text("not the data dir's")
    outside.chmod(0o644)
    (data / "link").symlink_to(outside)
    opened = 0
    for path in every_path(data):
        if path.is_symlink() or path.name in ("token", "nats-password"):
            continue
        path.chmod(0o755 if path.is_dir() else 0o644)
        opened += 1

    with serving(data, "--no-runner", env=env) as served:
        assert open_to_others(data) == {"link": "777"}, "all but the link, which is left alone"
    lines = [line for line in served.text().splitlines() if "open to others" in line]
    assert len(lines) == 1 and f"data dir {data}: {opened} files and directories were open to others" in lines[0], served.text()
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644, "a link's target outside is not the data dir's"
    again = cli("events", "nothing", "--data-dir", str(data), env=env)
    assert again.returncode == 1 and "open to others" not in again.stderr, "said once"

    # A secret that others could read is refused, not fixed: it may be known already.
    (data / "nats-password").chmod(0o644)
    expected = (f"NATS password file {data / 'nats-password'}: readable or writable by others (mode 644); "
                "chmod 600 it, or delete it for a new NATS password")
    assert one_error_line(cli("serve", "--data-dir", str(data), "--port", "0", env=env)) == expected
    assert one_error_line(cli("events", "x", "--data-dir", str(data), env=env)) == expected
    (data / "nats-password").chmod(0o600)
    (data / "nats-password").write_text("has spaces and @\n")
    assert one_error_line(cli("events", "x", "--data-dir", str(data), env=env)) == (
        f"NATS password file {data / 'nats-password'}: only letters, digits, - and _ can be in it; delete it for a new NATS password"
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        ("nats://cascade:s3cret@127.0.0.1:4222", "nats://[redacted]@127.0.0.1:4222"),
        ("at nats://a-token@host:1/x and tls://u:p@ss@h:2, done", "at nats://[redacted]@host:1/x and tls://[redacted]@h:2, done"),
        ('{"url":"nats://u:pw@h:1","mail":"x@y"}', '{"url":"nats://[redacted]@h:1","mail":"x@y"}'),
        ("nats://127.0.0.1:4222 user@host", "nats://127.0.0.1:4222 user@host"),
    ],
)
def test_urls_lose_their_credentials_in_text(text: str, expected: str) -> None:
    assert redacted(text) == expected


def test_a_logged_traceback_shows_no_credentials_or_token() -> None:
    try:
        raise ConnectionError("lost nats://cascade:s3cret@127.0.0.1:4222 serving GET /api/runs/r/events?token=t0ken")
    except ConnectionError:
        record = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "Exception in ASGI application", None, sys.exc_info())
    line = logs.RedactingFormatter(logs.FORMAT).format(record)
    assert "Traceback" in line and "s3cret" not in line and "t0ken" not in line
    assert "nats://[redacted]@127.0.0.1:4222" in line and "token=[redacted]" in line
