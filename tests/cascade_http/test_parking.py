"""Messages no consumer can use, published into a live service: each is parked, counted and
listed, every consumer goes on past it, a sim still runs to success, replay parks the same,
and the service starts again over the same data."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import anyio
import duckdb
import httpx
import nats
import pytest

from cascade_app.config import Settings
from cascade_nats import subjects
from cascade_sim.dispatcher import CONSUMER
from tests import poison
from tests.cascade_http.live import live_server
from tests.cascade_http.test_cli import run_cli
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.cascade_sim.world import accelsim_tree
from tests.support import wait_until

TOKEN = "t"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def publish(nats_url: str, poisons: list[poison.Poison]) -> list[int]:
    nc = await nats.connect(nats_url)
    try:
        return await poison.publish(nc, poisons)
    finally:
        await nc.close()


async def consumers_done(nats_url: str) -> bool:
    """Whether the dispatcher's and the runners' consumers have nothing pending or unacked."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        launch = subjects.launch_consumer(poison.LAUNCHED_CONFIG)
        infos = [await js.consumer_info(subjects.STREAM, name) for name in (CONSUMER, launch)]
        return all(i.num_pending == 0 and i.num_ack_pending == 0 for i in infos)
    finally:
        await nc.close()


def health(http: httpx.Client) -> dict[str, int]:
    return http.get("/api/health").json()  # type: ignore[no-any-return]


def parked_rows(con: duckdb.DuckDBPyConnection) -> list[tuple[object, ...]]:
    return con.execute("SELECT seq, subject, event_type, error FROM parked ORDER BY seq").fetchall()


def test_bad_messages_are_parked_and_the_service_goes_on(tmp_path: Path, nats_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    settings = Settings(
        token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=accelsim_tree(tmp_path / "accel-sim"),
        runner=True, runner_slots=1, samples=False,
    )
    with live_server(settings) as live, httpx.Client(base_url=live.url, headers=AUTH, timeout=60) as http:
        body = tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")
        uploaded = http.post("/api/traces?id=combo", content=body, headers={"Content-Type": "application/x-tar"})
        assert uploaded.status_code == 202 and uploaded.json()["state"] == "ready", uploaded.text
        first = [
            poison.not_json("x"),
            poison.unknown_type("x"),
            poison.newer_version("x", "y"),
            poison.launch_request_not_json("x", "y"),
            poison.misplaced_launch_request("x", "y", "z"),
            poison.misplaced("x", "combo"),
            poison.naive_time("combo"),
            poison.too_big("combo"),
        ]
        bad = dict(zip(anyio.run(publish, nats_url, first), first))

        created = http.post("/api/runs", json={"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]})
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        wait_until(lambda: http.get(f"/api/runs/{run_id}").json()["state"] != "active", 90, "the run did not finish")
        run = http.get(f"/api/runs/{run_id}").json()
        assert run["state"] == "succeeded" and run["sims"][0]["kernels_done"] == 3, run

        # A fact naming another run for the sim that ran: on its own subject, but not foldable.
        foreign = poison.foreign_sim("x", run["sims"][0]["id"])
        bad |= dict(zip(anyio.run(publish, nats_url, [foreign]), [foreign]))
        last = max(bad)
        wait_until(lambda: health(http)["projected_seq"] >= last, 20, "the projector stopped")
        assert health(http)["parked"] == len(bad)
        assert http.get(f"/api/runs/{run_id}").json() == run, "the parked fact changed nothing"
        wait_until(lambda: anyio.run(consumers_done, nats_url), 20, "a consumer did not go past its bad messages")

        listed = http.get("/api/parked").json()
        assert [p["seq"] for p in listed] == sorted(bad)
        for item in listed:
            p = bad[item["seq"]]
            assert (item["subject"], item["event_type"]) == (p.subject, p.event_type) and p.error in item["error"], (p, item)
        assert httpx.get(f"{live.url}/api/parked").status_code == 401

        cli = run_cli("events", "--parked", "--url", live.url, CASCADE_TOKEN=TOKEN)
        assert cli.returncode == 0, cli.stderr
        lines = cli.stdout.splitlines()
        assert [int(line.split()[0].lstrip("#")) for line in lines] == sorted(bad)
        as_json = run_cli("events", "--parked", "--json", "--url", live.url, CASCADE_TOKEN=TOKEN)
        assert [json.loads(line) for line in as_json.stdout.splitlines()] == listed

        history = run_cli("events", "x", "--nats-url", nats_url)
        assert history.returncode == 0, history.stderr
        unreadable = [line for line in history.stdout.splitlines() if "could not be decoded" in line]
        on_x = [seq for seq, p in bad.items() if p.subject.startswith("cascade.ev.run.x.") and p is not foreign]
        assert len(unreadable) == len(on_x) and all(f"the event at seq {seq} could not" in line for seq, line in zip(on_x, unreadable))

        replayed = tmp_path / "audit.duckdb"
        out = run_cli("replay", "--db", str(replayed), "--nats-url", nats_url)
        assert out.returncode == 0, out.stdout + out.stderr
        verify = run_cli("replay", "--verify", "--url", live.url, CASCADE_TOKEN=TOKEN)
        assert verify.returncode == 0 and "equal to a fresh replay" in verify.stdout, verify.stdout + verify.stderr
        assert "ok   parked" in verify.stdout
        stream_seq = health(http)["stream_seq"]

    skipped = [r.getMessage() for r in caplog.records if "skipped the message" in r.getMessage()]
    on_run_subjects = [seq for seq, p in bad.items() if p.subject == subjects.run("x")]
    on_queued = [seq for seq, p in bad.items() if ".queued." in p.subject]
    assert sorted(int(m.split("sequence ")[1].split()[0]) for m in skipped) == sorted(on_run_subjects + on_queued), "logged once each"

    with duckdb.connect(str(replayed), read_only=True) as con:
        replay_parked = parked_rows(con)
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        assert parked_rows(con) == replay_parked, "replay parks the same"

    with live_server(settings) as again, httpx.Client(base_url=again.url, headers=AUTH, timeout=60) as http:
        restarted = health(http)
        assert (restarted["stream_seq"], restarted["projected_seq"], restarted["parked"]) == (stream_seq, stream_seq, len(bad))
        assert http.get(f"/api/runs/{run_id}").json()["state"] == "succeeded"
