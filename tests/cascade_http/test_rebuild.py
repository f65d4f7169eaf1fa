"""A service whose read model another version built answers reads from the old one,
read-only, while it rebuilds the read model from the log, then swaps the new one in; a run's
live stream opened meanwhile misses and repeats nothing across the swap. A rebuild killed
halfway leaves the old read model whole and completes at the next start."""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import duckdb
import httpx
import pytest

from cascade_app.config import Settings
from cascade_nats.store import EventStore
from projections import rebuild, tables, version
from tests.cascade_http import runs_world as w
from tests.cascade_http.conftest import TOKEN
from tests.cascade_http.live import live_server, sse_events
from tests.cascade_http.served import clean_env, health, nats_servers_under, serving, start, stop
from tests.cascade_http.test_cli import append_lifecycle, append_lifecycle_and_wait_dispatched, run_cli, wait_projected
from tests.cascade_http.test_sse import append, expected, sim_lives
from tests.projections.changed_model import CHANGES, NOTE
from tests.projections.test_fold import dump
from tests.projections.test_rebuild import on_transaction
from tests.support import wait_until

AUTH = {"Authorization": f"Bearer {TOKEN}"}
EVENTS = f"/api/runs/{w.RUN_ID}/events"
ROOT = Path(__file__).resolve().parents[2]
CHANGED = [sys.executable, "-m", "tests.cascade_http.changed_serve"]


def unjudged(run: dict[str, Any]) -> dict[str, Any]:
    """A run as its stream shows it: without the sims' attention, which is judged at each
    read from the clock and the live runners (and this test has none)."""
    return {**run, "sims": [{k: v for k, v in sim.items() if k != "attention"} for sim in run["sims"]]}


def read_model_files(data: Path) -> list[str]:
    return sorted(p.name for p in data.iterdir() if p.name.startswith("readmodel"))


@pytest.mark.anyio
@pytest.mark.parametrize("change", CHANGES)
async def test_a_changed_version_rebuilds_the_read_model_while_the_old_one_answers(
    settings: Settings, store: EventStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, change: str
) -> None:
    lives = sim_lives()
    half = len(lives) // 2
    with live_server(settings) as live:
        created = await append(store, live, [*w.trace_events(), w.run_created()])
        while await store.last_seq() < created[-1] + 2:  # the dispatcher queues the run's two sims
            await anyio.sleep(0.01)
        first = await append(store, live, lives[:half])
        async with httpx.AsyncClient(base_url=live.url, headers=AUTH, timeout=30) as http:
            before = unjudged((await http.get(f"/api/runs/{w.RUN_ID}")).json())
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        old_seq = tables.checkpoint(con)

    CHANGES[change](monkeypatch)
    monkeypatch.setattr(rebuild, "PROGRESS_S", 0.05)
    # The rebuild's first transaction waits until the test has seen the old model answer.
    released = threading.Event()
    on_transaction(monkeypatch, 1, lambda: released.wait(30))
    caplog.set_level(logging.INFO, "cascade.projector")
    try:
        with live_server(settings) as live, anyio.fail_after(60):
            async with httpx.AsyncClient(base_url=live.url, headers=AUTH, timeout=30) as http:
                during = (await http.get("/api/health")).json()
                assert during["projected_seq"] == old_seq == during["stream_seq"]
                assert during["rebuild"]["applied"] == 0
                assert ("tables changed" if change == "a column added" else "the fold's version went from") in during["rebuild"]["reason"]
                assert unjudged((await http.get(f"/api/runs/{w.RUN_ID}")).json()) == before
                refused = await http.post(f"/api/runs/{w.RUN_ID}/cancel")
                assert (refused.status_code, refused.headers["retry-after"]) == (503, "5")
                assert refused.json()["detail"].startswith("the read model is being rebuilt from the event log (0 events so far)")
                assert (await http.get("/api/health")).json()["stream_seq"] == old_seq, "a refused command appends nothing"

                # A fresh stream and one resumed from before the old model's checkpoint.
                cut = 3
                async with http.stream("GET", EVENTS) as fresh, http.stream("GET", EVENTS, headers={"Last-Event-ID": f"{first[cut - 1]}.0"}) as resumed:
                    fresh_events, resumed_events = sse_events(fresh), sse_events(resumed)
                    snapshot = await anext(fresh_events)
                    assert (snapshot.event, snapshot.id, snapshot.data) == ("snapshot", str(old_seq), before)
                    caught_up = [await anext(resumed_events) for _ in first[cut:]]  # from the log, up to the old checkpoint
                    assert [(e.event, e.id) for e in caught_up] == expected(lives[cut:half], first[cut:])[:-1]
                    seqs = await store.append_facts(lives[half:])  # the runners go on meanwhile
                    progress = rf"rebuilding read model {re.escape(str(settings.db_path))}: 0 of {old_seq:,} events \(0%\)"
                    while not re.search(progress, caplog.text):
                        await anyio.sleep(0.01)
                    released.set()
                    rest = [event async for event in fresh_events]  # until the run's end
                    resumed_rest = [event async for event in resumed_events]
                assert [(e.event, e.id) for e in rest] == [(e.event, e.id) for e in resumed_rest] == expected(lives[half:], seqs)
                assert [e.data for e in rest] == [e.data for e in resumed_rest]

                while (after := (await http.get("/api/health")).json())["rebuild"] is not None or after["projected_seq"] < seqs[-1]:
                    await anyio.sleep(0.01)
                assert after["projected_seq"] == after["stream_seq"] == seqs[-1]
                verified = (await http.post("/api/replay/verify")).json()
                assert verified["equal"] and verified["seq"] == seqs[-1]
                assert all(t["rows"] == t["replayed_rows"] > 0 for t in verified["tables"] if t["table"] in ("sims", "kernels", "checkpoint"))
                assert (await http.get(f"/api/runs/{w.RUN_ID}")).json()["state"] == "succeeded"
                with live.cascade.reader() as con:
                    assert (tables.checkpoint(con), version.stored(con)) == (seqs[-1], version.current())
                    if change == "a column added":
                        assert con.execute("SELECT list(DISTINCT note), count(*) FROM sims").fetchone() == ([NOTE], 2)
    finally:
        released.set()
    assert re.search(rf"rebuilt read model {re.escape(str(settings.db_path))}: [\d,]+ events in [\d.]+ s \(", caplog.text)
    assert read_model_files(settings.data_dir) == ["readmodel.duckdb"]


def env() -> dict[str, str]:
    return clean_env(CASCADE_TOKEN="t0ken")


def test_a_rebuild_killed_halfway_leaves_the_old_read_model_whole_and_completes_at_the_next_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = data / "readmodel.duckdb"
    with serving(data, "--no-runner", env=env()) as served:
        end = append_lifecycle_and_wait_dispatched(served.url, served.nats_url, heartbeats_of_100k=20)
    with duckdb.connect(str(db), read_only=True) as con:
        old = dump(con)

    # The version with a column added, killed in its fourth transaction, rebuilding.
    serve = ["serve", "--data-dir", str(data), "--port", "0", "--no-runner"]
    killed = subprocess.run([*CHANGED, "--kill-at", "4", *serve], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert "rebuilding it from the log into" in killed.stderr
    wait_until(lambda: not nats_servers_under(data), 15, "the killed server's nats-server is gone")
    with duckdb.connect(str(db), read_only=True) as con:
        assert dump(con) == old, "the old read model is whole"
    assert "readmodel.duckdb.rebuild" in read_model_files(data)

    restarted = start([*CHANGED, *serve], data, tmp_path / "restarted.log", cwd=ROOT, env=env())
    try:
        wait_until(lambda: health(restarted.url)["rebuild"] is None, 30, "the rebuild completes")
        done = health(restarted.url)
        assert done["projected_seq"] == done["stream_seq"] == end
        verify = run_cli("replay", "--verify", "--data-dir", str(data))
        assert verify.returncode == 0 and "equal to a fresh replay" in verify.stdout, verify.stdout + verify.stderr
    finally:
        assert stop(restarted.process) == 0, restarted.text()
    text = restarted.text()
    assert re.search(r"rebuilding it from the log into \S+, going on from sequence [1-9]", text), text
    assert "rebuilt read model" in text and "Traceback" not in text, text
    assert read_model_files(data) == ["readmodel.duckdb"]
    with duckdb.connect(str(db), read_only=True) as con:
        sims = len(old["sims"])  # the lifecycle's and the samples'
        assert con.execute("SELECT count(*), count(note) FROM sims").fetchone() == (sims, sims)
        assert con.execute("SELECT seq FROM checkpoint").fetchone() == (end,)


def test_replay_verify_refuses_a_read_model_another_version_built(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(data, "--no-runner", env=env()) as served:
        wait_projected(served.url, asyncio.run(append_lifecycle(served.nats_url)))
    with duckdb.connect(str(data / "readmodel.duckdb")) as con:
        con.execute("DROP TABLE read_model")  # as every read model before versions were recorded
    refused = run_cli("replay", "--verify", "--data-dir", str(data))
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
    assert refused.stderr == (
        f"cascade: error: read model {data / 'readmodel.duckdb'} was built before read models recorded their version; "
        "`cascade serve` rebuilds it from the log\n"
    )
