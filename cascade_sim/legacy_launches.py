"""The adapter for launch requests from before placement by config. Those were published on
the sim's own `queued` subject (`subjects.LEGACY_LAUNCH_REQUESTS`, `SimQueued.by_config`
false) for the one `launch` consumer every runner took from, so one may name a config this
runner lacks. A runner drains that consumer as one more `Source`: a request for one of its
configs is delivered like any other; one it lacks the config for is settled here (handed
back while a live runner has the config, else its sim fails as unrunnable); and once nothing
is left there the consumer is deleted, and the source retired."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import nats.js.errors
from nats.js.client import JetStreamContext
from nats.js.kv import KeyValue

from cascade_core import events as ev
from cascade_core import sims
from cascade_nats import subjects
from cascade_nats.store import EventStore
from cascade_sim import registry
from cascade_sim.launch_requests import Delivery, Handled, Source, deliveries, settle
from cascade_sim.sim_life import as_requested

log = logging.getLogger("cascade.runner")


async def legacy_launches(store: EventStore, kv: KeyValue, *, runner_id: str, configs: set[str]) -> LegacyLaunches | None:
    """The legacy consumer as a source of `runner_id`'s, which has `configs`; None once it is
    drained and deleted, or if it never was there."""
    try:
        await store.js.consumer_info(subjects.STREAM, subjects.LEGACY_LAUNCH_CONSUMER)
        sub = await store.js.pull_subscribe_bind(subjects.LEGACY_LAUNCH_CONSUMER, subjects.STREAM)
    except nats.js.errors.NotFoundError:
        return None
    return LegacyLaunches(sub, store=store, kv=kv, runner_id=runner_id, configs=configs)


class LegacyLaunches(Source):
    """The legacy consumer: delivers only the requests for this runner's configs."""

    def __init__(self, sub: JetStreamContext.PullSubscription, *, store: EventStore, kv: KeyValue, runner_id: str, configs: set[str]) -> None:
        super().__init__(subjects.LEGACY_LAUNCH_CONSUMER, sub)
        self.store = store
        self.kv = kv
        self.runner_id = runner_id
        self.configs = configs

    async def take(self, count: int) -> list[Delivery]:
        messages = await self._fetch(count)
        if not messages:
            self.retired = await self._deleted()
            return []
        return [delivery for delivery in await deliveries(messages) if await self._runnable(delivery)]

    async def _runnable(self, delivery: Delivery) -> bool:
        """Whether this runner has the request's config; if not, the request is settled here."""
        request = delivery.request
        if request.gpu_config in self.configs:
            return True
        handled: Handled = "hand back"
        try:
            handled = await self._lacking_config(request)
        except Exception:
            log.exception("sim %s: the runner failed looking for a runner of its config", request.sim_id)
        await settle(request, delivery.msg, handled)
        return False

    async def _lacking_config(self, request: ev.SimQueued) -> Handled:
        """Hand the request back when a live runner has its config, else fail its sim."""
        others = [r for r in await registry.live(self.kv) if r.id != self.runner_id and request.gpu_config in r.configs]
        if others:
            return "hand back"  # a runner that has the config will take it
        _, sim = await as_requested(self.store, request)
        command = sims.GiveUp(
            at=datetime.now(UTC), reason="unrunnable", error=f"no runner has GPU config {request.gpu_config}", causation_id=request.id,
            first_attempt=max(request.attempt, 1),
        )
        for event in sims.decide(command, sim):
            await self.store.append(event)
        return "done"

    async def _deleted(self) -> bool:
        """Whether the consumer is gone: deleted here once nothing waits there and no runner
        holds a request of it, or by another runner."""
        js = self.store.js
        try:
            info = await js.consumer_info(subjects.STREAM, self.name)
            if info.num_pending or info.num_ack_pending:
                return False
            await js.delete_consumer(subjects.STREAM, self.name)
            log.info("runner %s: the %s consumer of launch requests from before placement by config is drained: deleted", self.runner_id, self.name)
        except nats.js.errors.NotFoundError:
            pass
        await self.close()
        return True
