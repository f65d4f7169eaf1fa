"""Runners announce themselves in a key-value bucket: who they are, what they can run, what
they run now. An entry not refreshed within the bucket's TTL disappears, so the list shows
only live runners."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import nats.js.api as api
import nats.js.errors
from nats.js.client import JetStreamContext
from nats.js.kv import KeyValue

from cascade_core.runners import Runner
from cascade_nats import subjects
from cascade_nats.replicas import scale
from cascade_nats.subject_tokens import subject_token

TTL_S = 15.0
ANNOUNCE_EVERY_S = 3.0


async def bucket(js: JetStreamContext, replicas: int | None = None) -> KeyValue:
    """The bucket, made if need be; with `replicas`, scaled up to them (`replicas.scale`)."""
    try:
        kv = await js.key_value(subjects.RUNNERS_BUCKET)
    except nats.js.errors.BucketNotFoundError:
        config = api.KeyValueConfig(bucket=subjects.RUNNERS_BUCKET, ttl=TTL_S, history=1, replicas=replicas or 1)
        return await js.create_key_value(config)
    await scale(js, f"KV_{subjects.RUNNERS_BUCKET}", replicas)
    return kv


async def announce(kv: KeyValue, runner: Runner) -> None:
    await kv.put(subject_token(runner.id), msgspec.json.encode(runner))


async def withdraw(kv: KeyValue, runner_id: str) -> None:
    try:
        await kv.purge(subject_token(runner_id))
    except nats.js.errors.NotFoundError:
        pass


async def live(kv: KeyValue) -> list[Runner]:
    try:
        keys = await kv.keys()
    except nats.js.errors.NoKeysError:
        return []
    runners = []
    now = datetime.now(UTC)
    for key in keys:
        try:
            entry = await kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            continue
        if entry.value:
            runner = msgspec.json.decode(entry.value, type=Runner)
            if (now - runner.last_seen_at).total_seconds() <= TTL_S:
                runners.append(runner)
    return sorted(runners, key=lambda r: r.id)
