"""The run event stream, on a real server: many clients each get every change once and in
order, and a client that drops and comes back with Last-Event-ID gets what a client connected
all along got after that id.

Events are appended the way the runner appends them; what each client must receive is
known from the appended events' sequences: a `sim` for every event that changes a sim
(id `<seq>.0`), a `kernel` per kernel, a `file` per file, and the `run` after the sim that
ended it (`<seq>.1`).
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import aclosing

import anyio
import httpx
import msgspec
import pytest

from cascade_app.config import Settings
from cascade_core import events as ev
from cascade_http import run_events
from cascade_nats import subjects
from cascade_nats.store import EventStore
from cascade_sim.dispatcher import launch_requests
from tests.cascade_http import runs_world as w
from tests.cascade_http.conftest import TOKEN
from tests.cascade_http.live import LiveServer, SseEvent, live_server, sse_events

pytestmark = pytest.mark.anyio

EVENTS = f"/api/runs/{w.RUN_ID}/events"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CLIENTS = 100


@pytest.fixture
def live(settings: Settings) -> Iterator[LiveServer]:
    with live_server(settings) as server:
        yield server


@pytest.fixture
async def http(live: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=CLIENTS + 10, max_keepalive_connections=CLIENTS + 10)
    async with httpx.AsyncClient(base_url=live.url, limits=limits, timeout=30) as client:
        yield client


async def append(store: EventStore, live: LiveServer, events: Sequence[ev.Event]) -> list[int]:
    seqs = await store.append_facts(list(events))
    await live.projected(seqs[-1])
    return seqs


def sim_lives() -> list[ev.Event]:
    """Both sims of the reference run, from claim to success, interleaved."""
    lives = [
        w.sim_life(w.RUN_ID, sim_id, launcher_ref=ref, launched=w.at(launched), finished=w.at(finished), lines=["a", "b", "c"], stats=False)
        for sim_id, (ref, launched, finished) in zip(w.SIMS, w.LIVES)
    ]
    return [e for pair in zip(*lives) for e in pair]


def expected(events: Sequence[ev.Event], seqs: Sequence[int]) -> list[tuple[str, str]]:
    """What a stream shows of these appended events: (SSE event, id) in order."""
    kinds = {ev.KernelFinished: "kernel", ev.SimFileStored: "file"}
    out = [(kinds.get(type(e), "sim"), f"{seq}.0") for e, seq in zip(events, seqs)]
    out.append(("run", f"{seqs[-1]}.1"))  # the last sim's success ends the run
    return out


async def setup_run(store: EventStore, live: LiveServer) -> None:
    """The reference run, created, and its launch requests stored: the dispatcher appends them
    when it gets to the run, which under load was among a test's own events, and then a
    snapshot's checkpoint was past the test's last one."""
    run = w.run_created()
    await append(store, live, [*w.trace_events(), run])
    with anyio.fail_after(20):
        for request in launch_requests(run):
            while await store.last_on(subjects.of(request)) is None:
                await anyio.sleep(0.01)
    await live.projected(await store.last_seq())


async def test_a_hundred_clients_each_get_every_event_once_in_order(live: LiveServer, http: httpx.AsyncClient, store: EventStore) -> None:
    await setup_run(store, live)
    received: list[list[SseEvent]] = [[] for _ in range(CLIENTS)]
    subscribed = anyio.Semaphore(0)

    async def listen(i: int) -> None:
        # Half authenticate as browsers' EventSource must, with ?token=.
        params, headers = ({"token": TOKEN}, {}) if i % 2 else ({}, AUTH)
        async with http.stream("GET", EVENTS, params=params, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for event in sse_events(response):
                received[i].append(event)
                if event.event == "snapshot":
                    subscribed.release()

    lives = sim_lives()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(CLIENTS):
                tg.start_soon(listen, i)
            for _ in range(CLIENTS):
                await subscribed.acquire()
            seqs: list[int] = []
            for start in range(0, len(lives), 5):  # in several batches, as a runner's arrive
                seqs += await append(store, live, lives[start : start + 5])
    snapshot = received[0][0]
    assert snapshot.event == "snapshot"
    assert (snapshot.data["id"], snapshot.data["state"], snapshot.data["sim_counts"]) == (w.RUN_ID, "active", {"pending": 2})
    want = expected(lives, seqs)
    for events in received:
        assert events == received[0]  # every client got the same, in the same order
        assert [(e.event, e.id) for e in events[1:]] == want
    last = received[0][-1].data
    assert (last["id"], last["state"], last["sim_counts"]) == (w.RUN_ID, "succeeded", {"succeeded": 2})
    kernels = [(e.data["sim_id"], e.data["kernel_index"], e.data["stats"]) for e in received[0] if e.event == "kernel"]
    assert sorted(kernels) == [(s, i, {}) for s in sorted(w.SIMS) for i in range(6)]
    files = [e.data for e in received[0] if e.event == "file"]
    assert sorted((f["sim_id"], f["name"], f["gpu_config"], f["replica"]) for f in files) == [
        (s, n, "SM86_RTX3070", r) for r, s in sorted(enumerate(w.SIMS), key=lambda p: p[1]) for n in sorted(w.FILES)
    ]


async def test_a_client_that_reconnects_gets_what_a_client_connected_all_along_got(
    live: LiveServer, http: httpx.AsyncClient, store: EventStore
) -> None:
    await setup_run(store, live)
    lives = sim_lives()
    seqs: list[int] = []  # where the run's events were stored, in order
    along: list[SseEvent] = []
    first: list[SseEvent] = []
    second: list[SseEvent] = []

    async def append_lives(part: Sequence[ev.Event]) -> None:
        seqs.extend(await append(store, live, part))

    async def connected_all_along(subscribed: anyio.Event) -> None:
        async with http.stream("GET", EVENTS, headers=AUTH) as response:
            async for event in sse_events(response):
                along.append(event)
                subscribed.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            subscribed = anyio.Event()
            tg.start_soon(connected_all_along, subscribed)
            await subscribed.wait()
            async with http.stream("GET", EVENTS, headers=AUTH) as response, aclosing(sse_events(response)) as events:
                # The headers come before the server subscribes: the snapshot says it has, so
                # what is appended next is in this stream (and not all in its snapshot).
                first.append(await anext(events))
                await append_lives(lives[:20])
                async for event in events:
                    first.append(event)
                    if len(first) == 8:
                        break  # the connection drops here
            # More happens while it is away, and more while it reconnects; other runs' events
            # land among the run's, as the dispatcher's requests do, and show in no stream of it.
            await append(store, live, [w.run_created(run_id="run-other", sims=[("sim-other", "SM86_RTX3070", 0)])])
            await append_lives(lives[20:30])
            async with http.stream("GET", EVENTS, headers={**AUTH, "Last-Event-ID": first[-1].id}) as response:
                assert response.status_code == 200
                tg.start_soon(append_lives, lives[30:])
                async for event in sse_events(response):
                    second.append(event)
    assert first[0].event == "snapshot" and all(e.event != "snapshot" for e in second)
    # Every intermediate state of every sim, as the client connected all along saw it.
    assert first[1:] + second == along[1:]
    assert [(e.event, e.id) for e in along[1:]] == expected(lives, seqs)
    assert (along[-1].event, along[-1].data["state"]) == ("run", "succeeded")


async def test_a_sim_that_moves_to_another_state_carries_its_runs_counts(live: LiveServer, http: httpx.AsyncClient, store: EventStore) -> None:
    await setup_run(store, live)
    with anyio.fail_after(30):
        async with http.stream("GET", EVENTS, headers=AUTH) as response, aclosing(sse_events(response)) as events:
            snapshot = await anext(events)
            await append(store, live, sim_lives())
            received = [e async for e in events]
    states = {sim["id"]: sim["state"] for sim in snapshot.data["sims"]}
    carried = []
    for event in received:
        if event.event != "sim":
            continue
        moved = event.data["state"] != states[event.data["id"]]
        states[event.data["id"]] = event.data["state"]
        if moved:
            carried.append(event.data["run_sim_counts"])
            assert event.data["run_sim_counts"] == dict(collections.Counter(states.values())), event.id
        else:
            assert "run_sim_counts" not in event.data, event.id
    assert carried == [
        {"pending": 1, "launching": 1},
        {"launching": 2},
        {"launching": 1, "running": 1},
        {"running": 2},
        {"running": 1, "succeeded": 1},
        {"succeeded": 2},
    ]
    assert (received[-1].event, received[-1].data["sim_counts"]) == ("run", carried[-1])


async def test_a_finished_run_streams_its_snapshot_and_ends(live: LiveServer, http: httpx.AsyncClient, store: EventStore) -> None:
    await setup_run(store, live)
    seqs = await append(store, live, sim_lives())
    with anyio.fail_after(10):
        async with http.stream("GET", EVENTS, headers=AUTH) as response:
            events = [e async for e in sse_events(response)]
        assert [(e.event, e.id) for e in events] == [("snapshot", str(seqs[-1]))]
        assert events[0].data["state"] == "succeeded"
        # Resumed from before the end: what changed since, ending with the run.
        for last_id, want in [
            (str(seqs[-3]), [("sim", f"{seqs[-2]}.0"), ("sim", f"{seqs[-1]}.0"), ("run", f"{seqs[-1]}.1")]),
            (f"{seqs[-1]}.0", [("run", f"{seqs[-1]}.1")]),  # between the sim and the run it ended
        ]:
            async with http.stream("GET", EVENTS, headers={**AUTH, "Last-Event-ID": last_id}) as response:
                events = [e async for e in sse_events(response)]
            assert [(e.event, e.id) for e in events] == want
        # Resumed from the end: nothing more will come, which 204 tells an EventSource.
        for last_id in (f"{seqs[-1]}.1", str(seqs[-1]), "99999999"):
            response = await http.get(EVENTS, headers={**AUTH, "Last-Event-ID": last_id})
            assert response.status_code == 204, last_id
        # An id that is none of ours: a fresh stream.
        for last_id in ("garbage", "12.x", f"{seqs[-1]}.1.0"):
            async with http.stream("GET", EVENTS, headers={**AUTH, "Last-Event-ID": last_id}) as response:
                events = [e async for e in sse_events(response)]
            assert [(e.event, e.id) for e in events] == [("snapshot", str(seqs[-1]))]
    response = await http.get("/api/runs/run-nope/events", headers=AUTH)
    assert (response.status_code, response.json()) == (404, {"detail": "run run-nope not found"})


async def test_a_cancel_resumes_among_the_sims_it_cancelled(live: LiveServer, http: httpx.AsyncClient, store: EventStore) -> None:
    sims = [(f"sim-{i}", "SM86_RTX3070", i) for i in range(5)]
    await append(store, live, [*w.trace_events(), w.run_created(sims=sims)])
    await append(store, live, w.sim_life(w.RUN_ID, "sim-1", stats=False))  # one finished before the cancel
    with anyio.fail_after(10):
        async with http.stream("GET", EVENTS, headers=AUTH) as response:
            assert (await http.post(f"/api/runs/{w.RUN_ID}/cancel", headers=AUTH)).status_code == 200
            along = [e async for e in sse_events(response)]
        seq = along[1].position[0]
        assert [(e.event, e.id, e.data["id"]) for e in along[1:]] == [
            *[("sim", f"{seq}.{k}", sim) for k, sim in enumerate(["sim-0", "sim-2", "sim-3", "sim-4"])],
            ("run", f"{seq}.4", w.RUN_ID),
        ]
        for cut in range(1, len(along)):
            async with http.stream("GET", EVENTS, headers={**AUTH, "Last-Event-ID": along[cut].id}) as response:
                resumed = [e async for e in sse_events(response)] if response.status_code == 200 else []
            assert resumed == along[cut + 1 :], along[cut].id


async def test_streams_leave_no_subscription_behind(live: LiveServer, http: httpx.AsyncClient, store: EventStore) -> None:
    await setup_run(store, live)
    assert (await http.head(EVENTS, headers=AUTH)).status_code == 200  # HEAD opens no stream
    async with http.stream("GET", EVENTS, headers=AUTH) as response:
        async for event in sse_events(response):
            assert event.event == "snapshot"
            assert w.RUN_ID in live.cascade.projector.live._subscribers
            break  # the client goes away
    with anyio.fail_after(5):
        while w.RUN_ID in live.cascade.projector.live._subscribers:
            await anyio.sleep(0.01)


async def test_a_quiet_stream_is_kept_alive(
    live: LiveServer, http: httpx.AsyncClient, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_events, "KEEP_ALIVE_S", 0.2)  # 15 s in service
    await setup_run(store, live)
    with anyio.fail_after(5):
        async with http.stream("GET", EVENTS, headers=AUTH) as response:
            async for line in response.aiter_lines():
                if line.startswith(": ping"):
                    break


async def test_a_resume_leaves_out_what_the_projector_parked(live: LiveServer, http: httpx.AsyncClient, store: EventStore) -> None:
    """Messages on the run's subjects that no consumer can use (not JSON; a kernel whose cycle
    count no BIGINT holds, which the fold takes and DuckDB refuses) are parked by the
    projector and left out of its changes; a catch-up folded from the log leaves them out
    too, so a resume still equals the continuous stream."""
    await setup_run(store, live)
    lives = sim_lives()
    kernel = next(e for e in lives if isinstance(e, ev.KernelFinished))
    too_big = msgspec.structs.replace(kernel, id="too-big", kernel_index=kernel.kernel_index + 100, uid=999, gpu_sim_cycle=2**63)
    poison = [
        (f"cascade.ev.run.{w.RUN_ID}.sim.{w.SIMS[0]}.data", b"not json"),
        (subjects.of(too_big), ev.encode(too_big)),
    ]
    with anyio.fail_after(30):
        async with http.stream("GET", EVENTS, headers=AUTH) as response:
            await append(store, live, lives[:10])
            for subject, data in poison:
                await store.js.publish(subject, data, stream="CASCADE")
            await append(store, live, lives[10:])
            along = [e async for e in sse_events(response)]
    assert (along[-1].event, along[-1].data["state"]) == ("run", "succeeded")
    health = (await http.get("/api/health")).json()
    assert health["parked"] == 2
    for cut in range(1, len(along)):
        async with http.stream("GET", EVENTS, headers={**AUTH, "Last-Event-ID": along[cut].id}) as response:
            resumed = [e async for e in sse_events(response)] if response.status_code == 200 else []
        assert resumed == along[cut + 1 :], along[cut].id
