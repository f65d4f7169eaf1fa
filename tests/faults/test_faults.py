"""Faults an operator meets, injected into a running cluster of real processes; after each,
the invariants of `invariants.py` hold. Each scenario records what it measured in
test-artifacts/faults/<scenario>.json (times to recover, events, kernels, memory).

Soak variants, longer than CI's five minutes for the whole suite allow, are marked `slow`
and deselected by default (`pytest -m slow` runs them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import nats
import nats.errors
import pytest

from cascade_core import events as ev
from cascade_nats import server, subjects
from cascade_nats.access import parse
from cascade_nats.connect import connect
from cascade_nats.store import EventStore
from cascade_nats.wire import without_credentials
from tests import poison
from tests.cascade_http.served import CASCADE, stop
from tests.cascade_http.test_lockdown import refused
from tests.cascade_http.test_parking import publish
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.faults import chatter
from tests.faults.cluster import TOKEN, Cluster, EventStream, rss_mib, wait_for
from tests.faults.invariants import check
from tests.projections.test_rebuild import flip_in_every_block

pytestmark = pytest.mark.timeout(300)
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "faults"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    world = Cluster(tmp_path)
    try:
        yield world
    finally:
        world.close()


def record(scenario: str, **numbers: Any) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    text = json.dumps({name: msgspec.to_builtins(value) for name, value in numbers.items()}, indent=2)
    (ARTIFACTS / f"{scenario}.json").write_text(text + "\n")
    print(f"{scenario}: {text}")


def unfinished(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in run["sims"] if s["state"] not in ("succeeded", "failed", "cancelled")]


def under_way(cluster: Cluster, sims: int = 2, *, worker: str | None = None) -> tuple[str, EventStream]:
    """`started` on serve's own runner, or on a `worker` (serve then runs none)."""
    cluster.serve(runner=worker is None)
    cluster.upload()
    if worker is not None:
        cluster.worker(worker)
    return started(cluster, sims)


def started(cluster: Cluster, sims: int) -> tuple[str, EventStream]:
    """A run of the combo trace on `sims` sims once a kernel is done, and a client on its
    event stream from the start."""
    run_id = cluster.create_run(sims)
    stream = cluster.stream(run_id)
    wait_for(lambda: cluster.kernels_done(run_id) >= 1, 60, "no kernel finished")
    return run_id, stream


# --- the runner ---------------------------------------------------------------------------


def test_a_worker_killed_mid_sim_is_shown_lost_and_another_takes_over(cluster: Cluster) -> None:
    run_id, stream = under_way(cluster, worker="w1")
    first = cluster.workers["w1"]
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed = time.monotonic()
    # With no runner left the run says so, and the queue depth counts the sims left waiting.
    lost = wait_for(lambda: (run := cluster.run(run_id)) and all(s.get("attention") for s in unfinished(run)) and run, 60, "no attention")
    shown_after = time.monotonic() - killed
    waiting = unfinished(lost)
    said = [s["attention"] for s in waiting]
    assert said and all(re.fullmatch(r"runner \S+ lost(: silent for \d+ s)?; no live runner has GPU config SM61_TITANX to take over", a) for a in said), said
    status, health = cluster.health()
    assert (status, health["queue_depth"], health["runners"]) == (200, len(waiting), 0)
    cluster.worker("w2")
    run = cluster.wait_until_final(run_id, 90)
    finished_after = time.monotonic() - killed
    assert run["state"] == "succeeded"
    counted = check(cluster, [run_id], [stream])
    assert counted.attempts == 2 + len(waiting), "each sim the killed worker ran has one attempt more"
    record("worker-killed", lost_shown_after_s=round(shown_after, 1), run_finished_after_s=round(finished_after, 1), counted=counted)


async def run_history(url: str, run_id: str) -> list[tuple[int, ev.AnyEvent]]:
    """Every event of the run (its own and its sims'), with its stream sequence, in order."""
    nc = await connect(parse(url))
    store = EventStore(nc)
    try:
        return [(stored.seq, stored.event) async for stored in store.read(subjects.run_history(run_id))]
    finally:
        await store.close()
        await nc.close()


def launched_after_a_cancel(history: list[tuple[int, ev.AnyEvent]]) -> list[tuple[str, int]]:
    """The launches, by sim and attempt, of an attempt cancelled before it was claimed: a cancel
    came between what asked for it (the run's creation for a first attempt, else the retry
    naming it) and its claim."""
    asked: dict[tuple[str, int], int] = {}  # (sim, attempt) -> the sequence of the latest ask
    claims: dict[tuple[str, int], int] = {}
    cancels: list[int] = []
    found = []
    for seq, event in history:
        match event:
            case ev.RunCreated():
                asked.update({(s.sim_id, 1): seq for s in event.sims})
            case ev.RunRetryRequested():
                asked.update({(s.sim_id, s.attempt): seq for s in event.sims})
            case ev.RunCancelRequested():
                cancels.append(seq)
            case ev.SimClaimed():
                claims[(event.sim_id, event.attempt)] = seq
            case ev.SimLaunched():
                key = (event.sim_id, event.attempt)
                if any(asked[key] < cancel < claims[key] for cancel in cancels):
                    found.append(key)
    return found


def test_cancel_and_retry_in_a_loop_never_launches_an_attempt_cancelled_before_its_claim(cluster: Cluster) -> None:
    """A run of more sims than slots, cancelled and retried again and again with short pauses,
    then let finish: it succeeds, each sim's final attempt succeeded, and no runner launched an
    attempt whose request a cancel had ended before it was claimed (`sims.cancel_of`); each
    launch is of an attempt that was claimed before any cancel that followed its ask."""
    sims, rounds, seed = 6, 10, random.randrange(1 << 32)
    pause = random.Random(seed)
    cluster.serve(slots=2)
    cluster.upload()
    run_id, _ = started(cluster, sims)  # its stream ends at the first cancel, the run ended then
    for _ in range(rounds):
        cluster.api("POST", f"/api/runs/{run_id}/cancel")
        time.sleep(pause.uniform(0, 0.5))
        cluster.api("POST", f"/api/runs/{run_id}/retry")
        time.sleep(pause.uniform(0, 0.5))
    run = cluster.wait_until_final(run_id, 180)
    assert run["state"] == "succeeded" and [s["state"] for s in run["sims"]] == ["succeeded"] * sims, (seed, run["sims"])
    history = asyncio.run(run_history(cluster.nats_url, run_id))
    launches: dict[str, list[int]] = {s["id"]: [] for s in run["sims"]}
    for _, event in history:
        if isinstance(event, ev.SimLaunched):
            launches[event.sim_id].append(event.attempt)
    assert launched_after_a_cancel(history) == [], (seed, launches)
    finals = {s["id"]: s.get("attempt", 1) for s in run["sims"]}
    assert all(attempts[-1] == finals[sim_id] for sim_id, attempts in launches.items()), (seed, launches, finals)
    counted = check(cluster, [run_id], [])
    record(
        "cancel-retry-loop", seed=seed, sims=sims, rounds=rounds, launches_per_sim=sorted(len(a) for a in launches.values()),
        launches=sum(len(a) for a in launches.values()), cancels=sum(isinstance(e, ev.RunCancelRequested) for _, e in history),
        retries=sum(isinstance(e, ev.RunRetryRequested) for _, e in history), counted=counted,
    )


# --- the service --------------------------------------------------------------------------


def test_serve_killed_mid_run_leaves_nothing_behind_and_its_restart_finishes_the_run(cluster: Cluster) -> None:
    run_id, stream = under_way(cluster)
    simulators = [int(s["launcher_ref"]) for s in cluster.run(run_id)["sims"] if s["launcher_ref"]]
    nats_pid = cluster.embedded_nats_pid()
    cluster.kill_serve()
    killed = time.monotonic()
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in [nats_pid, *simulators]), 10, "its nats-server or a simulator outlived it")
    cluster.serve()
    restarted_after = time.monotonic() - killed
    run = cluster.wait_until_final(run_id, 120)
    finished_after = time.monotonic() - killed
    assert run["state"] == "succeeded"
    counted = check(cluster, [run_id], [stream])
    record("serve-killed", restarted_after_s=round(restarted_after, 1), run_finished_after_s=round(finished_after, 1), counted=counted)


def kill_serve_repeatedly(cluster: Cluster, kills: int, sims: int) -> None:
    run_id, stream = under_way(cluster, sims)
    restarts = []
    for _ in range(kills):
        time.sleep(2)
        cluster.kill_serve()
        before = time.monotonic()
        cluster.serve()
        restarts.append(round(time.monotonic() - before, 1))
    run = cluster.wait_until_final(run_id, 180)
    counted = check(cluster, [run_id], [stream])
    # A sim whose runner was killed more often than a sim may be tried fails saying so.
    for sim in run["sims"]:
        assert sim["state"] == "succeeded" or sim["error"].startswith("runner lost: "), sim
    record(f"serve-killed-{kills}-times", restarts_s=restarts, run=run["state"], counted=counted)


def test_serve_killed_again_and_again_mid_run(cluster: Cluster) -> None:
    kill_serve_repeatedly(cluster, kills=4, sims=3)


@pytest.mark.slow
def test_soak_serve_killed_twenty_times(cluster: Cluster) -> None:
    kill_serve_repeatedly(cluster, kills=20, sims=6)


def test_the_embedded_nats_server_killed_is_started_again(cluster: Cluster) -> None:
    run_id, stream = under_way(cluster)
    old = cluster.embedded_nats_pid()
    os.kill(old, signal.SIGKILL)
    killed = time.monotonic()
    degraded = wait_for(lambda: (answer := cluster.health())[0] == 503 and answer[1], 10, "health never said degraded")
    healthy = wait_for(lambda: cluster.health()[0] == 200, 30, "health is not ok again")
    healthy_after = time.monotonic() - killed
    assert healthy and cluster.embedded_nats_pid() != old
    address = without_credentials(cluster.nats_url)
    assert "Authorization Violation" in asyncio.run(refused(address)), "started again as locked down as before"
    run = cluster.wait_until_final(run_id, 90)
    assert run["state"] == "succeeded"
    counted = check(cluster, [run_id], [stream])
    assert counted.attempts == 2, "the runner kept its sims through it"
    problems = sorted({p["task"] for p in degraded["problems"]})
    record("embedded-nats-killed", healthy_after_s=round(healthy_after, 1), problems_seen=problems, counted=counted)


# --- an external NATS ---------------------------------------------------------------------


def nats_outage(tmp_path: Path, outage_s: float) -> None:
    cluster = Cluster(tmp_path, pace_s=2.0, external_nats=True)
    try:
        run_id, stream = under_way(cluster, worker="w1")
        worker = cluster.workers["w1"]
        assert cluster.nats is not None
        down = cluster.nats
        down.process.send_signal(signal.SIGKILL)
        down.stop()  # reaps it
        went = time.monotonic()
        seen: set[str] = set()
        while time.monotonic() - went < outage_s:
            status, health = cluster.health()
            assert status == 503 and health["stream_seq"] is None, health
            seen |= {p["task"] for p in health["problems"]}
            assert worker.poll() is None, "the worker gave up: " + cluster.log("w1")[-2000:]
            time.sleep(1)
        port = int(down.address.rsplit(":", 1)[1])
        cluster.nats = server.start(tmp_path / "nats", password=down.password, port=port)
        back = time.monotonic()
        wait_for(lambda: cluster.health()[0] == 200, 30, "health is not ok again")
        healthy_after = time.monotonic() - back
        run = cluster.wait_until_final(run_id, 120)
        finished_after = time.monotonic() - back
        assert run["state"] == "succeeded" and worker.poll() is None
        counted = check(cluster, [run_id], [stream])
        assert counted.attempts == 2, "the worker kept its attempts through the outage"
        record(
            f"nats-down-{outage_s:.0f}s", healthy_after_s=round(healthy_after, 1), run_finished_after_s=round(finished_after, 1),
            problems_seen=sorted(seen), counted=counted,
        )
    finally:
        cluster.close()


def test_an_external_nats_down_for_twenty_seconds_mid_run(tmp_path: Path) -> None:
    nats_outage(tmp_path, 20)


@pytest.mark.slow
def test_soak_an_external_nats_down_past_the_duplicate_window(tmp_path: Path) -> None:
    nats_outage(tmp_path, 150)  # longer than the stream's 2 min duplicate window


# --- bad input ----------------------------------------------------------------------------


def test_foreign_messages_on_the_stream_are_parked_and_harm_nothing(cluster: Cluster) -> None:
    """Messages no consumer can use, before a run and into its sims' own subjects while it
    runs: each is parked and counted, the run succeeds, serve killed -9 after them starts
    again over the same data, and its stream's client resumes past them."""
    cluster.serve()
    cluster.upload()
    before = [
        poison.not_json("x"),
        poison.unknown_type("x"),
        poison.newer_version("x", "y"),
        poison.launch_request_not_json("x", "y"),
        poison.misplaced("x", "combo"),
        poison.naive_time("combo"),
    ]
    bad = dict(zip(asyncio.run(publish(cluster.nats_url, before)), before))
    run_id, stream = started(cluster, 2)
    sim_id = cluster.run(run_id)["sims"][0]["id"]
    during = [poison.not_json(run_id), poison.newer_version(run_id, sim_id), poison.foreign_sim("x", sim_id)]
    bad |= dict(zip(asyncio.run(publish(cluster.nats_url, during)), during))
    wait_for(lambda: cluster.health()[1]["projected_seq"] >= max(bad), 20, "the projector stopped at a foreign message")
    cluster.kill_serve()
    killed = time.monotonic()
    cluster.serve()
    restarted_after = time.monotonic() - killed
    run = cluster.wait_until_final(run_id, 90)
    assert run["state"] == "succeeded"
    status, health = cluster.health()
    assert (status, health["parked"], health["problems"]) == (200, len(bad), [])
    assert [p["seq"] for p in cluster.api("GET", "/api/parked")] == sorted(bad)
    counted = check(cluster, [run_id], [stream])
    record("foreign-messages", parked=len(bad), serve_restarted_after_s=round(restarted_after, 1), counted=counted)


def test_a_client_that_never_reads_its_stream_costs_bounded_memory_and_no_one_else(cluster: Cluster) -> None:
    served = cluster.serve(runner=False)
    cluster.upload()
    run_id = cluster.create_run(1)
    sim_id = cluster.run(run_id)["sims"][0]["id"]
    fast = cluster.stream(run_id)
    asyncio.run(chatter.claim(cluster.nats_url, run_id, sim_id))
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, port = cluster.url.removeprefix("http://").rsplit(":", 1)
    slow.connect((host, int(port)))
    slow.sendall(f"GET /api/runs/{run_id}/events HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
    rounds, beats = 6, 2500  # each round: 2,500 heartbeats naming kernels of 16 KB
    rss = [rss_mib(served.process.pid)]
    lag = []
    try:
        for n in range(rounds):
            sent = time.monotonic()
            asyncio.run(chatter.heartbeats(cluster.nats_url, run_id, sim_id, first=n * beats, count=beats, name_bytes=16 << 10))
            wait_for(lambda: len(fast.events) >= 2 + (n + 1) * beats, 120, "the reading client fell behind")
            lag.append(round(time.monotonic() - sent, 1))
            rss.append(rss_mib(served.process.pid))
    finally:
        slow.close()
    asyncio.run(chatter.finish(cluster.nats_url, run_id, sim_id))
    run = cluster.wait_until_final(run_id, 30)
    # Held for the client that does not read, each round would add its rows (40 MB) for good.
    growth = max(rss[3:]) - rss[2]
    counted = check(cluster, [run_id], [fast])
    record("slow-sse-client", rss_mib=[round(r) for r in rss], growth_after_round_2_mib=round(growth), seconds_per_round=lag, counted=counted)
    assert run["state"] == "failed"
    assert growth < 80, f"the server's memory grows with what a client does not read: {rss}"


# --- the event log's store ----------------------------------------------------------------


def flip_in_last(blocks: list[Path], marker: bytes) -> None:
    """Flip one byte in the payload of the last stored message that holds `marker`, as a
    failing disk would, with nothing else told."""
    for block in reversed(blocks):
        data = bytearray(block.read_bytes())
        at = data.rfind(marker)
        if at >= 0:
            data[at + len(marker) // 2] ^= 0x01
            block.write_bytes(bytes(data))
            return
    raise AssertionError(f"no stored message holds {marker!r}")


@pytest.mark.parametrize("read_model", ["kept", "deleted"])
def test_an_event_lost_from_a_damaged_store_is_said_everywhere(cluster: Cluster, read_model: str) -> None:
    """A byte flipped in a stored kernel result, serve stopped: nats-server drops the message
    without a word. Serve starts again (replaying from the log if its read model is gone);
    the projector parks the missing sequence, naming what was stored around it; health is
    degraded saying so; `cascade events` of the run ends; `cascade replay --verify` says it in
    one line."""
    served = cluster.serve()
    cluster.upload()
    run_id = cluster.create_run(1)
    assert cluster.wait_until_final(run_id, 90)["state"] == "succeeded"
    stop(served.process)
    cluster.served = None
    blocks = sorted((cluster.data_dir / "jetstream").glob("jetstream/*/streams/CASCADE/msgs/*.blk"), key=lambda p: int(p.stem))
    flip_in_last(blocks, b'"type":"sim.kernel_finished.v2"')
    if read_model == "deleted":
        for db in cluster.data_dir.glob("readmodel.duckdb*"):
            db.unlink()
    cluster.serve()
    status, health = cluster.health()
    (lost,) = [p for p in cluster.api("GET", "/api/parked") if p["error"].startswith("lost:")]
    assert status == 200 and health["status"] == "degraded"
    (problem,) = [p for p in health["problems"] if p["task"] == "event log"]
    assert problem["error"].startswith(f"1 event lost from the store: sequence {lost['seq']} lost: nats-server could not read it back")
    assert f".run.{run_id}." in problem["error"], "the subjects stored around it name the run"

    env = cluster.env(CASCADE_URL=cluster.url)
    started = time.monotonic()
    events = subprocess.run([*CASCADE, "events", run_id, "--data-dir", str(cluster.data_dir)], capture_output=True, text=True, timeout=120, env=env)
    assert events.returncode == 0 and run_id in events.stdout, events.stderr
    seconds = time.monotonic() - started
    verified = subprocess.run([*CASCADE, "replay", "--verify", "--data-dir", str(cluster.data_dir)], capture_output=True, text=True, timeout=120, env=env)
    said = [line for line in verified.stdout.splitlines() if line.startswith("LOST")]
    assert verified.returncode == 1 and said == [
        f"LOST 1 of the log's events: nats-server could not read back sequence {lost['seq']} from its store "
        "(cascade events --parked says what was stored around each)"
    ], verified.stdout + verified.stderr
    record(f"lost-event-read-model-{read_model}", seq=lost["seq"], parked=lost["error"], events_s=round(seconds, 1))


# --- a full disk --------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 96 MiB filesystem of the test's own (tmpfs), where the system lets it mount one."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mount)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """A file taking all the room on `disk` but `leave` bytes."""
    stat = os.statvfs(disk)
    filler = disk / "filler"
    subprocess.run(["fallocate", "-l", str(stat.f_bavail * stat.f_frsize - leave), str(filler)], check=True)
    return filler


async def write_fails(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        with pytest.raises(nats.errors.TimeoutError):
            await nc.jetstream().publish(subjects.run("x"), os.urandom(256 << 10), timeout=3)
    finally:
        await nc.close()


def test_a_full_disk_is_said_and_heals_by_itself(small_disk: Path) -> None:
    """serve's data dir on a small filesystem, filled to 64 KiB: health is degraded with a
    `disk` problem, an upload and a new run are refused at once with 507 saying what is
    free, and nothing is left half-made. Space back, health is ok within seconds, and an
    upload and a run succeed; a nats-server that failed to write its store for want of space
    (it refuses every write after that until it is restarted) is started again."""
    cluster = Cluster(small_disk, pace_s=0.05)
    try:
        cluster.serve()
        cluster.upload()
        filler = fill(small_disk, 64 << 10)
        wait_for(lambda: any(p["task"] == "disk" for p in cluster.health()[1]["problems"]), 10, "health says the disk is full")
        status, health = cluster.health()
        assert status == 503
        (problem,) = [p for p in health["problems"] if p["task"] == "disk"]
        assert problem["error"].startswith(f"the data dir's disk is full: {cluster.data_dir} has ")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        started = time.monotonic()
        body = tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")
        upload = httpx.post(f"{cluster.url}/api/traces?id=full", content=body, headers={**headers, "Content-Type": "application/x-tar"}, timeout=60)
        run = httpx.post(f"{cluster.url}/api/runs", json={"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]}, headers=headers, timeout=60)
        refused_in = time.monotonic() - started
        assert (upload.status_code, run.status_code) == (507, 507), (upload.text, run.text)
        assert all(r.json()["detail"].startswith(f"the data dir's disk is full: {cluster.data_dir} has ") for r in (upload, run))
        assert refused_in < 2
        assert httpx.get(f"{cluster.url}/api/traces/full", headers=headers).status_code == 404, "nothing half-made"
        # nats-server itself fails to write, as it would had a request got through.
        asyncio.run(write_fails(cluster.nats_url))

        filler.unlink()
        freed = time.monotonic()
        wait_for(lambda: cluster.health()[0] == 200, 30, "health is ok again")
        healed_in = time.monotonic() - freed
        # Not full, but an upload that would not fit with room to spare is refused before it is read.
        filler = fill(small_disk, 24 << 20)
        large = httpx.post(f"{cluster.url}/api/traces?id=large", content=bytes(12 << 20), headers={**headers, "Content-Type": "application/x-tar"}, timeout=60)
        assert large.status_code == 507 and large.json()["detail"].startswith("the data dir's disk has too little room: ")
        assert large.json()["detail"].endswith("this request would store at least 12.0 MiB; free some space (it goes on by itself within seconds)")
        filler.unlink()
        cluster.upload(trace_id="after")
        run_id = cluster.create_run(1, trace_id="after")
        assert cluster.wait_until_final(run_id, 90)["state"] == "succeeded"
        restarted = "restarting it" in (small_disk / "serve-1.log").read_text(errors="replace")
        record("full-disk", refused_in_s=round(refused_in, 2), healed_in_s=round(healed_in, 1), nats_server_restarted=restarted)
    finally:
        cluster.close()


def test_an_upload_cut_short_by_a_killed_server_ends_failed(cluster: Cluster) -> None:
    """serve killed -9 while it receives an upload: started again, it ends that upload
    failed (not `uploading` for ever), and the id can be uploaded again."""
    cluster.serve()
    body = tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")
    sent = threading.Event()

    def slow() -> Iterator[bytes]:
        yield body[: len(body) // 2]
        sent.set()
        time.sleep(60)  # the rest never comes: the server is killed first
        yield body[len(body) // 2 :]

    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-tar"}
    uploading = threading.Thread(target=lambda: _quietly(lambda: httpx.post(f"{cluster.url}/api/traces?id=cut", content=slow(), headers=headers, timeout=120)), daemon=True)
    uploading.start()
    assert sent.wait(30)
    wait_for(lambda: cluster.api("GET", "/api/traces/cut")["state"] == "uploading", 20, "the upload began")
    cluster.kill_serve()
    cluster.serve()
    wait_for(lambda: cluster.api("GET", "/api/traces/cut")["state"] == "failed", 20, "the cut upload ends failed")
    assert cluster.api("GET", "/api/traces/cut")["error"].startswith("the upload was cut short: the server stopped while it received or stored it")
    assert httpx.delete(f"{cluster.url}/api/traces/cut", headers=headers, timeout=30).status_code == 204
    cluster.upload(trace_id="cut")


def _quietly(request: Callable[[], object]) -> None:
    with contextlib.suppress(httpx.HTTPError):
        request()


def test_a_request_nats_does_not_answer_for_is_503_with_retry_after(cluster: Cluster) -> None:
    """nats-server stopped (SIGSTOP: its connections stay open, nothing answers): a new run
    is refused with 503 and Retry-After once the store's wait runs out, not a bare 500; and
    goes through once nats-server goes on."""
    cluster.serve()
    cluster.upload()
    pid = cluster.embedded_nats_pid()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    body = {"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]}
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        stopped = httpx.post(f"{cluster.url}/api/runs", json=body, headers=headers, timeout=60)
        answered_in = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert stopped.status_code == 503 and stopped.headers["Retry-After"] == "5", stopped.text
    assert stopped.json()["detail"].startswith("the event log did not store it or did not answer in time (")
    run_id = cluster.create_run(1)
    assert cluster.wait_until_final(run_id, 90)["state"] == "succeeded"
    record("nats-stopped", answered_in_s=round(answered_in, 1))


@pytest.mark.parametrize("damage", ["cut to half", "bytes flipped", "not a database"])
def test_a_damaged_read_model_is_made_again_from_the_log_at_start(cluster: Cluster, damage: str) -> None:
    """serve stopped after a run, its read model damaged: serve starts again, moves the file
    aside (one log line) and answers every read as before, from the log."""
    served = cluster.serve()
    cluster.upload()
    run_id = cluster.create_run(2)
    before = cluster.wait_until_final(run_id, 90)
    kernels = cluster.api("GET", f"/api/runs/{run_id}/kernels")
    stop(served.process)
    cluster.served = None
    db = cluster.data_dir / "readmodel.duckdb"
    size = db.stat().st_size
    if damage == "cut to half":
        os.truncate(db, size // 2)
    elif damage == "bytes flipped":
        flip_in_every_block(db)
    else:
        db.write_bytes(b"not a database\n" * 100)
    started = time.monotonic()
    cluster.serve()
    wait_for(lambda: cluster.run(run_id)["state"] == before["state"], 30, "the run is read again")
    assert cluster.api("GET", f"/api/runs/{run_id}/kernels") == kernels
    assert cluster.health()[0] == 200
    said = [line for line in (cluster.tmp / "serve-2.log").read_text(errors="replace").splitlines() if "is damaged" in line]
    assert len(said) == 1 and said[0].endswith(f"moved to {db}.damaged, and made again from the log"), said
    record(f"damaged-read-model-{damage.replace(' ', '-')}", read_again_in_s=round(time.monotonic() - started, 1))
