"""A resumed run event stream is the tail of a continuous one: the same ids, types, data and
order after the cut, and the same end.

First as a property, without NATS: random histories are projected into DuckDB in random
batches, as the projector does (its row cache kept or dropped between batches). A client
connected all along takes the snapshot after some batch, then each later batch's changes.
A client resumed from a random cut, against a server whose projector stands after some
batch, gets the catch-up folded from the run's events up to there (arriving in random
pieces, as the log does), then the later batches. Then on a real run through the HTTP API:
the fake simulator printing slowly, heartbeats every 10 ms, resumes from many cut points
while the run goes on and after it ended.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import anyio
import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cascade_app.config import Settings
from cascade_core import events as ev
from cascade_api.models import RunDetail
from cascade_http.run_events import ALL_OF, CatchUp, Position, end_of, finished_before, last_event_id, message, messages
from cascade_nats import subjects
from cascade_nats.firehose import Frame
from cascade_sim import attempt
from projections.fold import Change
from projections.projector import RowCache, apply
from projections.queries import runs as q
from projections.rows import RunRow, SimRow
from tests.cascade_http.live import LiveServer, SseEvent, live_server, sse_events
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.cascade_sim.world import accelsim_tree
from tests.projections.histories import T0, _Clock, _event, histories
from tests.projections.test_fold import fresh

# The runs' trace, there before them (a run is created for a ready trace; a snapshot shows it).
TRACE = ev.TraceUploadStarted(id="ev-0", at=T0 - timedelta(seconds=1), trace_id="tr.0", content_type="application/x-tar")
END_OF_MESSAGE = b"\r\n\r\n"  # each message's last line is its one line of JSON data


def split(data: bytes) -> list[bytes]:
    return [part + END_OF_MESSAGE for part in data.split(END_OF_MESSAGE) if part]


def id_of(message: bytes) -> str:
    return message.split(b"\r\n", 1)[0].removeprefix(b"id: ").decode()


def position(message: bytes) -> Position:
    found = last_event_id(id_of(message))
    assert found is not None
    return found


class Batch(msgspec.Struct, frozen=True, kw_only=True):
    """What the projector leaves after one batch, as far as the run's streams see it."""

    checkpoint: int
    changes: list[Change]  # the run's, as the projector publishes them
    snapshot: tuple[int, RunDetail] | None
    rows: tuple[RunRow, list[SimRow]] | None


def project(items: Sequence[tuple[int, ev.Event]], bounds: Sequence[int], cached: Sequence[bool], run_id: str) -> list[Batch]:
    con = fresh(0)
    cache = RowCache()
    out = []
    for (start, end), keep in zip(zip(bounds, bounds[1:]), cached):
        if not keep:
            cache.clear()
        folded = apply(con, items[start:end], cache=cache)
        changes = [c for c in folded.changes if c.run_id == run_id]
        out.append(Batch(checkpoint=items[end - 1][0], changes=changes, snapshot=q.stream_snapshot(con, run_id), rows=q.run_rows(con, run_id)))
    return out


def pieces(data: st.DataObject, n: int, label: str) -> list[tuple[int, int]]:
    cuts = sorted({0, *data.draw(st.lists(st.integers(1, max(n, 1)), max_size=6), label=label), n})
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(deletes=False), data=st.data())  # a run is deleted once ended, when its streams have ended too
def test_a_resumed_stream_is_the_tail_of_a_continuous_one(history: list[ev.Event], data: st.DataObject) -> None:
    # JetStream deduplicates only within its window: a retry later is stored again.
    repeats = data.draw(st.lists(st.sampled_from(history), max_size=3), label="repeats")
    items = list(enumerate([TRACE, *history, *repeats], 1))
    run_id = data.draw(st.sampled_from(sorted({e.run_id for e in history if isinstance(e, ev.RunCreated)})), label="run")
    bounds = pieces(data, len(items), "batches")
    cached = data.draw(st.lists(st.booleans(), min_size=len(bounds), max_size=len(bounds)), label="cache kept")
    batches = project(items, [0, *[b for _, b in bounds]], cached, run_id)
    exists = [i for i, b in enumerate(batches) if b.rows is not None]

    # Connected all along, from the snapshot after batch i.
    i = data.draw(st.sampled_from(exists), label="connected after batch")
    stream, ended = connected(batches, i)
    ids = [position(m) for m in stream]
    assert ids == sorted(set(ids)), "unique and strictly increasing"
    final = batches[-1].rows
    assert final is not None and ended == (final[0].state != "active")

    # Resumed from a cut: an id it received, or a plain sequence.
    checkpoint = ids[0][0]
    cut_id = data.draw(st.sampled_from([id_of(m) for m in stream]) | st.integers(checkpoint, items[-1][0]).map(str), label="cut")
    cut = last_event_id(cut_id)
    assert cut is not None
    tail = [m for m, p in zip(stream, ids) if p > cut]
    # ... from a server whose projector stands after batch j.
    j = data.draw(st.sampled_from(exists), label="server after batch")
    server = batches[j]
    assert server.rows is not None
    log = len(run_frames(items, run_id, server.checkpoint))
    resumed, resumed_ended = resumed_from(items, batches, run_id, cut, j, pieces(data, log, "log pieces"))
    assert split(resumed) == tail
    assert resumed_ended == ended, "a resumed stream ends where a continuous one does"
    assert finished_before(*server.rows, cut) == (not tail and end_of(*server.rows) is not None)


def connected(batches: Sequence[Batch], i: int) -> tuple[list[bytes], bool]:
    """The messages a client connected from the snapshot after batch i gets, and whether its
    stream ended."""
    snapshot, rows = batches[i].snapshot, batches[i].rows
    assert snapshot is not None and rows is not None
    checkpoint, detail = snapshot
    places = q.places(rows[1])
    stream = [message("snapshot", str(checkpoint), detail)]
    after, ended = (checkpoint, ALL_OF), detail.state != "active"
    for batch in batches[i + 1 :]:
        if ended:
            break
        sent = messages(batch.changes, places, after)
        stream += split(sent.data)
        ended = sent.over
    return stream, ended


def run_frames(items: Sequence[tuple[int, ev.Event]], run_id: str, checkpoint: int) -> list[Frame]:
    prefix = subjects.run_history(run_id).removesuffix(">")
    return [(seq, subjects.of(e).encode(), ev.encode(e)) for seq, e in items if seq <= checkpoint and subjects.of(e).startswith(prefix)]


def resumed_from(
    items: Sequence[tuple[int, ev.Event]], batches: Sequence[Batch], run_id: str, cut: Position, j: int, log_pieces: Sequence[tuple[int, int]]
) -> tuple[bytes, bool]:
    """What a stream resumed after `cut` sends, as `run_events.events` does, from a server
    whose projector stands after batch j: the catch-up folded from the run's events up to
    there (arriving in `log_pieces`), then the later batches; and whether it ended."""
    server = batches[j]
    assert server.rows is not None
    frames = run_frames(items, run_id, server.checkpoint)
    at = q.places(server.rows[1])  # where the resuming server has the run's sims
    catch_up = CatchUp(cut, at, frozenset())  # these histories hold nothing the projector parks
    resumed = b""
    for start, end in log_pieces:
        if catch_up.ended:
            break
        resumed += catch_up(frames[start:end])
    after, ended = max(cut, (server.checkpoint, ALL_OF)), catch_up.over
    for batch in batches[j + 1 :]:
        if ended:
            break
        sent = messages(batch.changes, at, after)
        resumed += sent.data
        ended = sent.over
    return resumed, ended


def test_a_resume_past_the_end_sends_no_file_stored_after_it() -> None:
    """A file a sim stores after its run ended (here, cancelled) is in no stream: each ended
    with the run. A resume from the end, or from a sequence past it, has nothing to send,
    whether the server's read model is behind that id (its route's read did not show the
    end: the stream ends once it comes to it) or past it (the route answers 204)."""
    clock: _Clock = _Clock()
    lives = [("trace", "tr.0", step) for step in ("started", "files", "kernels", "ready")]
    lives += [("run", "run-0", ["sim-0-0"]), ("sim", "run-0", "sim-0-0", ("claim", 1)), ("cancel", "run-0"), ("sim", "run-0", "sim-0-0", ("file", 1))]
    items = list(enumerate([TRACE, *(_event(clock, life, {}) for life in lives)], 1))
    batches = project(items, range(len(items) + 1), [True] * len(items), "run-0")  # one event a batch
    first = next(i for i, b in enumerate(batches) if b.rows is not None)
    stream, ended = connected(batches, first)
    assert ended and [id_of(m) for m in stream] == ["6", "7.0", "8.0", "8.1"]  # the cancel's sim, then the run
    for cut in ((8, 1), (9, ALL_OF)):
        for j in range(first, len(batches)):
            log = [(0, len(run_frames(items, "run-0", batches[j].checkpoint)))]
            assert resumed_from(items, batches, "run-0", cut, j, log) == (b"", True), (cut, j)


def test_an_event_id_is_a_sequence_and_an_index_or_nothing() -> None:
    assert last_event_id("17.3") == (17, 3)
    assert last_event_id(" 17 ") == (17, ALL_OF)
    for garbage in (None, "", "x", "17.", ".3", "17.3.1", "-1", "17.-3", "1e3", "١٧"):
        assert last_event_id(garbage) is None, garbage


# --- a real run ----------------------------------------------------------------------------

TOKEN = "t"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SIMS = 3
# Resume after the continuous client's n-th event (1 is its snapshot): these, then every
# hundredth, as many as the run gives (a loaded machine's projector folds more heartbeats into
# one change, so the count of events is not known beforehand).
FIRST_CUTS = (1, 2, 3, 10, 40)
CUT_EVERY = 100


@pytest.fixture
def live(tmp_path: Path, nats_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.setattr(attempt, "HEARTBEAT_S", 0.01)  # 2 s in service
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_LINE_DELAY", "0.001")  # the 4,136-line log over ~5 s
    settings = Settings(
        token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=accelsim_tree(tmp_path / "accel-sim"),
        runner=True, runner_slots=SIMS, samples=False,
    )
    with live_server(settings) as server:
        yield server


async def read_stream(http: httpx.AsyncClient, path: str, last_id: str) -> list[SseEvent]:
    """The events after `last_id`; none if the answer is 204 (the run ended at or before it)."""
    async with http.stream("GET", path, headers={"Last-Event-ID": last_id}) as response:
        assert response.status_code in (200, 204)
        return [e async for e in sse_events(response)]


@pytest.mark.anyio
async def test_resuming_a_real_run_anywhere_gives_what_a_continuous_client_got(live: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live.url, headers=AUTH, timeout=60) as http:
        body = tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")
        uploaded = await http.post("/api/traces?id=combo", content=body, headers={"Content-Type": "application/x-tar"})
        assert uploaded.status_code == 202, uploaded.text
        created = await http.post("/api/runs", json={"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": SIMS}]})
        assert created.status_code == 201, created.text
        path = f"/api/runs/{created.json()['id']}/events"

        continuous: list[SseEvent] = []
        resumed: list[tuple[str, list[SseEvent]]] = []  # (the Last-Event-ID it sent, what it got)

        async def resume(last_id: str) -> None:
            resumed.append((last_id, await read_stream(http, path, last_id)))

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                async with http.stream("GET", path) as response:
                    async for event in sse_events(response):
                        continuous.append(event)
                        if len(continuous) in FIRST_CUTS or len(continuous) % CUT_EVERY == 0:
                            tg.start_soon(resume, event.id)
                            tg.start_soon(resume, str(event.position[0]))  # after all of its sequence
            # After the end, from the log alone: the middle, and inside the last sequence.
            for last_id in (continuous[len(continuous) // 2].id, continuous[-2].id):
                await resume(last_id)
            response = await http.get(path, headers={"Last-Event-ID": continuous[-1].id})
            assert response.status_code == 204

    sims = sum(e.event == "sim" for e in continuous)
    cuts = sum(n in FIRST_CUTS or n % CUT_EVERY == 0 for n in range(1, len(continuous) + 1))
    assert sims > 40 * SIMS and cuts > len(FIRST_CUTS), f"only {sims} sim events: the test needs heartbeats to cut between"
    assert continuous[-1].event == "run" and continuous[-1].data["state"] == "succeeded"
    assert continuous[-2].event == "sim" and continuous[-2].position[0] == continuous[-1].position[0]
    positions = [e.position for e in continuous]
    assert positions == sorted(set(positions))
    assert len(resumed) == 2 * cuts + 2
    for last_id, events in resumed:
        cut = last_event_id(last_id)
        assert cut is not None
        assert events == [e for e in continuous if e.position > cut], f"resumed after {last_id}"
