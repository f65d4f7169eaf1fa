"""What must hold after any fault, checked the same way after every scenario:

- every run reached a final state;
- each (sim, attempt, kernel) is recorded exactly once, in the stream and in the read model,
  and each succeeded sim has all its kernels;
- the read model equals a fresh replay of the stream;
- every event stream client connected throughout saw each event once: ids (opaque strings)
  unique and in order, and by content what the read model holds (each sim's final state,
  each kernel of the sims' final attempts);
- no process is left behind once the cluster is stopped: no nats-server, simulator or worker
  started under the scenario's directory survives.

`check` returns what it counted, for the scenario's record.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import duckdb
import msgspec

from cascade_core import events as ev
from cascade_nats import subjects
from cascade_nats.access import parse
from cascade_nats.connect import connect
from cascade_nats.store import EventStore
from tests.faults.cluster import Cluster, EventStream, processes_under

FINAL = {"succeeded", "failed", "cancelled"}


class Counted(msgspec.Struct, kw_only=True):
    runs: int
    sims: dict[str, int]  # by state
    attempts: int  # sim attempts claimed, over all sims
    stream_events: int
    stream_kernels: int  # kernel results in the stream, every attempt's
    kernels: int  # in the read model: the final attempts'
    sse_events: int
    sse_connections: int


def check(cluster: Cluster, run_ids: list[str], streams: list[EventStream]) -> Counted:
    """Check every invariant, stopping the cluster on the way (the read model's file and the
    process table are looked at with nothing running)."""
    runs = [cluster.run(run_id) for run_id in run_ids]
    for run in runs:
        assert run["state"] in FINAL, f"run {run['id']} is still {run['state']}: {run['sims']}"
    sims = [s for run in runs for s in run["sims"]]
    verification = cluster.api("POST", "/api/replay/verify", {})
    assert verification["equal"], f"the read model differs from a fresh replay: {verification}"
    stream_kernels, attempts, stream_events = asyncio.run(_stream_counts(cluster.nats_url, {(s["run_id"], s["id"]) for s in sims}))
    for key, count in stream_kernels.items():
        assert count == 1, f"kernel {key} (sim, attempt, uid) is {count} times in the stream"
    for stream in streams:
        _check_stream(stream, runs, attempts)
    read_model = cluster.data_dir / "readmodel.duckdb"
    cluster.close()
    kernels = _read_model_kernels(read_model, sims)
    _check_no_process_left(cluster)
    return Counted(
        runs=len(runs),
        sims=dict(Counter(s["state"] for s in sims)),
        attempts=sum(attempts.values()),
        stream_events=stream_events,
        stream_kernels=len(stream_kernels),
        kernels=kernels,
        sse_events=sum(len(s.events) for s in streams),
        sse_connections=sum(s.connections for s in streams),
    )


async def _stream_counts(url: str, sims: set[tuple[str, str]]) -> tuple[Counter[tuple[str, int, int]], Counter[str], int]:
    """Kernel results per (sim, attempt, uid) and claims per sim of the given (run, sim)s,
    and how many messages the stream holds. What is no event there (a foreign message) is
    skipped, and so is an event about one of the sims that names another run."""
    kernels: Counter[tuple[str, int, int]] = Counter()
    claims: Counter[str] = Counter()
    total = 0
    nc = await connect(parse(url))
    store = EventStore(nc)
    try:
        async for batch in store.raw(subjects.ALL, 1, until_caught_up=True):
            for _, subject, data in batch:
                total += 1
                try:
                    event = subjects.decode(subject, data)
                except ev.Unreadable:
                    continue
                if isinstance(event, ev.KernelFinished) and (event.run_id, event.sim_id) in sims:
                    kernels[(event.sim_id, event.attempt, event.uid)] += 1
                elif isinstance(event, ev.SimClaimed) and (event.run_id, event.sim_id) in sims:
                    claims[event.sim_id] += 1
    finally:
        await store.close()
        await nc.close()
    return kernels, claims, total


def _order(event_id: str) -> tuple[int, ...]:
    """An SSE id's place in the stream: a stream sequence, then the event's index within it
    if it has one (`<seq>.<k>`)."""
    return tuple(int(part) for part in event_id.split("."))


def _what(event: Any) -> tuple[object, ...]:
    """What an SSE event is about: its sim, kernel, file or run."""
    data = event.data
    if event.event == "kernel":
        return data["sim_id"], data["kernel_index"]
    if event.event == "file":
        return data["sim_id"], data["name"]
    return (data["id"],)


def _check_stream(stream: EventStream, runs: list[dict[str, Any]], attempts: Counter[str]) -> None:
    assert stream.ended.wait(30), f"the stream of {stream.run_id} did not end: {stream.events[-3:]}"
    events = stream.events
    ids = [e.id for e in events]
    assert ids == sorted(ids, key=_order), "event ids out of order"
    # One id may stand for several events of one stream sequence (a sim and the run it ended),
    # unless ids are `<seq>.<k>`; never for the same thing twice.
    sent = Counter((e.id, e.event, _what(e)) for e in events)
    assert max(sent.values()) == 1, f"an event came twice: {sent.most_common(3)}"
    (run,) = [r for r in runs if r["id"] == stream.run_id]
    sims: dict[str, dict[str, Any]] = {}
    kernels: dict[str, Counter[int]] = {}  # kernel events by sim and index
    first: dict[str, int] = {}  # the kernels each sim had done at the snapshot
    for event in events:
        if event.event == "snapshot":
            sims = {sim["id"]: sim for sim in event.data["sims"]}
            kernels = {sim_id: Counter() for sim_id in sims}
            first = {sim_id: sim["kernels_done"] for sim_id, sim in sims.items()}
        elif event.event == "sim":
            sims[event.data["id"]] = event.data
        elif event.event == "kernel":
            kernels[event.data["sim_id"]][event.data["kernel_index"]] += 1
    assert events[-1].event in ("run", "snapshot") and events[-1].data["state"] == run["state"]
    for sim in run["sims"]:
        seen = sims[sim["id"]]
        assert (seen["state"], seen["kernels_done"]) == (sim["state"], sim["kernels_done"]), f"the stream's last word on {sim['id']}"
        # Each attempt sends its kernels once; only an attempt after the snapshot's sends
        # those the snapshot showed done.
        tries = max(attempts[sim["id"]], 1)
        for index in range(sim["kernels_done"]):
            least = 0 if index < first[sim["id"]] else 1
            assert least <= kernels[sim["id"]][index] <= tries, f"{sim['id']} kernel {index} came {kernels[sim['id']][index]} times"
        if tries == 1:
            assert sum(kernels[sim["id"]].values()) == sim["kernels_done"] - first[sim["id"]]


def _read_model_kernels(path: Any, sims: list[dict[str, Any]]) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        twice = con.execute("SELECT sim_id, attempt, uid, count(*) FROM kernels GROUP BY ALL HAVING count(*) > 1").fetchall()
        assert twice == [], f"kernels recorded twice in the read model: {twice}"
        per_sim = dict(con.execute("SELECT k.sim_id, count(*) FROM kernels k JOIN sims s ON s.id = k.sim_id AND s.attempt = k.attempt GROUP BY ALL").fetchall())
    finally:
        con.close()
    for sim in sims:
        if sim["state"] == "succeeded":
            assert per_sim.get(sim["id"]) == sim["kernels_total"], f"{sim['id']} succeeded with {per_sim.get(sim['id'])} kernels"
    return sum(per_sim.get(s["id"], 0) for s in sims)


def _check_no_process_left(cluster: Cluster) -> None:
    deadline = time.monotonic() + 15
    while (left := processes_under(cluster.tmp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == [], f"left behind: {left}"
