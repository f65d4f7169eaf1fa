"""The dispatcher: turns each created run into one launch request per sim, and so each
top-up (`run.entries_added.v1`) and each retry (`run.retry_requested.v1`, a request per
retried sim naming the attempt it asked for).

It reads run events with a durable consumer shared by every `cascade serve` on the cluster,
so each run is dispatched once, and acknowledges a run only after all its launch requests are
stored: a crash before that redelivers the run; the requests' ids are derived from the sims',
so sending them again stores nothing new. A request goes on its config's launch subject,
which one durable consumer per config delivers to the runners that have the config
(`ensure_launch_consumer`): the dispatcher makes it before the config's first request, so it
delivers every one. A message that is no run event is terminated, never
to come back (the projector parks it), and a run that cannot be dispatched likewise. Any other
error (NATS gone, a JetStream leader election) ends `dispatch`, which its supervisor starts
again: the runs it had not acknowledged come back to it.
"""

from __future__ import annotations

import contextlib
import logging

import nats.js.api as api
from nats.aio.msg import Msg
from nats.js.client import JetStreamContext

from cascade_core import events as ev
from cascade_core import sims
from cascade_core.split import chunk_count
from cascade_nats import subjects
from cascade_nats.store import EventStore

log = logging.getLogger("cascade.dispatcher")

CONSUMER = "dispatcher"


def launch_requests(run: ev.RunCreated | ev.RunEntriesAdded | ev.RunRetryRequested) -> list[ev.SimQueued]:
    """What a created run or its top-up asks of the runners: a request per sim, or per chunk
    of a split sim, which any runner may take; nothing for a sample, whose sims never run.
    A retry asks for each sim's (or chunk's) attempt, under an id of its own."""
    if isinstance(run, ev.RunRetryRequested):
        return [
            *(_request(run, f"{sim.sim_id}.{sim.attempt}.queued", sim.sim_id, sim.gpu_config, reuse=sim.reuse, attempt=sim.attempt) for sim in run.sims),
            *(
                _request(
                    run, f"{sims.chunk_name(c.sim_id, c.chunk)}.{c.attempt}.queued", c.sim_id, c.gpu_config, reuse=c.reuse,
                    attempt=c.attempt, chunk=c.chunk, split=c.split,
                )
                for c in run.chunks
            ),
        ]
    if isinstance(run, ev.RunCreated) and run.sample:
        return []
    return [
        _request(
            run, f"{spec.sim_id}.queued" if chunk is None else f"{spec.sim_id}.c{chunk}.queued", spec.sim_id, spec.gpu_config,
            reuse=spec.reuse, chunk=chunk, split=spec.split, fresh=spec.fresh,
        )
        for spec in run.sims
        for chunk in _chunks(spec, run.kernels_total)
    ]


def _request(
    run: ev.RunCreated | ev.RunEntriesAdded | ev.RunRetryRequested,
    request_id: str,
    sim_id: str,
    gpu_config: str,
    *,
    reuse: bool,
    attempt: int = 0,
    chunk: int | None = None,
    split: ev.Split | None = None,
    fresh: bool = False,
) -> ev.SimQueued:
    """One launch request of the run's, on its config's subject."""
    return ev.SimQueued(
        id=request_id,
        at=run.at,
        causation_id=run.id,
        correlation_id=run.correlation_id or run.id,
        run_id=run.run_id,
        sim_id=sim_id,
        chunk=chunk,
        trace_id=run.trace_id,
        gpu_config=gpu_config,
        kernels_total=run.kernels_total,
        split=split,
        attempt=attempt,
        reuse=reuse,
        by_config=True,
        fresh=fresh,
    )


def _chunks(spec: ev.SimSpec, kernels_total: int) -> list[int | None]:
    if spec.split is None:
        return [None]
    return list(range(chunk_count(kernels_total, spec.split)))


async def ensure_consumer(js: JetStreamContext) -> None:
    """The dispatcher's durable consumer; creating it again is harmless."""
    await js.add_consumer(
        subjects.STREAM,
        api.ConsumerConfig(
            durable_name=CONSUMER,
            filter_subject=subjects.RUN_EVENTS,
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_wait=30,
        ),
    )


async def ensure_launch_consumer(js: JetStreamContext, gpu_config: str, *, ack_wait_s: float) -> str:
    """The durable consumer of `gpu_config`'s launch requests, by name; creating it again is
    harmless. A request's lease is `ack_wait_s`: its runner keeps it in progress meanwhile."""
    name = subjects.launch_consumer(gpu_config)
    await js.add_consumer(
        subjects.STREAM,
        api.ConsumerConfig(
            durable_name=name,
            filter_subject=subjects.launch_requests(gpu_config),
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_wait=ack_wait_s,
            max_deliver=-1,
            max_ack_pending=10_000,
        ),
    )
    return name


async def dispatch(store: EventStore, *, ack_wait_s: float) -> None:
    """Dispatch created runs until something fails."""
    sub = await store.js.pull_subscribe_bind(CONSUMER, subjects.STREAM)
    try:
        await _dispatch(store, sub, ack_wait_s)
    finally:
        with contextlib.suppress(Exception):  # gone with its connection, if that is why it stops
            await sub.unsubscribe()


async def _dispatch(store: EventStore, sub: JetStreamContext.PullSubscription, ack_wait_s: float) -> None:
    consumed: set[str] = set()  # the configs whose launch consumer is known to be there
    while True:
        try:
            messages = await sub.fetch(16, timeout=5)
        except TimeoutError:  # nothing to take (nats-py raises its own or asyncio's)
            continue
        for msg in messages:
            event = consumed_event(msg)
            if isinstance(event, ev.RunCreated | ev.RunEntriesAdded | ev.RunRetryRequested):
                try:
                    requests = launch_requests(event)
                    for config in sorted({r.gpu_config for r in requests} - consumed):
                        await ensure_launch_consumer(store.js, config, ack_wait_s=ack_wait_s)
                        consumed.add(config)
                    if requests:
                        await store.append_facts(requests)
                        log.info("run %s: %d sims queued", event.run_id, len(requests))
                except ValueError as err:  # a sim whose id makes no subject
                    log.warning("run %s: cannot be dispatched: %s", event.run_id, err)
            await (msg.ack() if event is not None else msg.term())


def consumed_event(msg: Msg) -> ev.AnyEvent | None:
    """The event a durable consumer's message holds, or None, logged, if it holds none: that
    message is to be terminated, never to come back (the projector parks it)."""
    try:
        return subjects.decode(msg.subject.encode(), msg.data)
    except ev.Unreadable as err:
        where = msg.metadata
        log.warning("consumer %s: skipped the message at sequence %d on %s: %s", where.consumer, where.sequence.stream, msg.subject, err)
        return None
