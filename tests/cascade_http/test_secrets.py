"""The API token stays secret: a real `cascade serve`, asked with `?token=` (the run event
stream's way, for browsers) right and wrong, writes it into no log line, no error body, and
no event of the run it served."""

from __future__ import annotations

import asyncio
import secrets
import urllib.error
import urllib.request
from pathlib import Path

import nats

from cascade_nats.store import EventStore
from tests.cascade_http.served import api, clean_env, cli, serving
from tests.cascade_sim.world import accelsim_tree
from tests.support import TRACES


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=90) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read()


async def every_event(nats_url: str) -> list[bytes]:
    nc = await nats.connect(nats_url)
    store = EventStore(nc)
    try:
        return [data async for batch in store.raw(">", 1, until_caught_up=True) for _, _, data in batch]
    finally:
        await store.close()
        await nc.close()


def test_the_token_is_in_no_log_line_error_body_or_event(tmp_path: Path) -> None:
    good, bad = f"good-{secrets.token_urlsafe(18)}", f"bad-{secrets.token_urlsafe(18)}"
    data = tmp_path / "data"
    env = clean_env(CASCADE_TOKEN=good)
    with serving(data, "--accelsim-dir", str(accelsim_tree(tmp_path / "accel-sim")), env=env) as served:
        uploaded = cli("trace", "upload", str(TRACES / "vectoradd-100-32"), "--id", "va", "--data-dir", str(data), env=env)
        assert uploaded.returncode == 0, uploaded.stderr
        run_id = api(served.url, good, "POST", "/api/runs", {"trace_id": "va", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]})["id"]

        # Live from creation to the end of the run, authenticated by the query string alone.
        status, stream = get(f"{served.url}/api/runs/{run_id}/events?token={good}")
        assert status == 200 and b"event: run" in stream and b'"state":"succeeded"' in stream
        refused = {
            f"/api/runs/{run_id}/events?token={bad}": 401,
            f"/api/runs/{run_id}/events?since=1&token={bad}&x=1": 401,
            f"/api/runs/run-none/events?token={good}": 404,
            f"/api/runs?token={good}": 401,  # only the event stream takes a query token
        }
        answers = {path: get(served.url + path) for path in refused}
        assert {path: status for path, (status, _) in answers.items()} == refused
        bodies = [stream, *(body for _, body in answers.values())]
        events = asyncio.run(every_event(served.nats_url))

    logs = served.text() + (data / "jetstream" / "nats-server.log").read_text(errors="replace")
    assert logs.count("token=[redacted]") >= len(refused) + 1, logs  # the access log has every request
    for secret in (good, bad):
        assert secret not in logs
        assert not [body for body in bodies if secret.encode() in body]
        assert not [event for event in events if secret.encode() in event]
    assert len(events) > 20
