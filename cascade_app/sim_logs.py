"""A sim's log, read from the event log: the read model keeps where each heartbeat's lines
are (`sim_log`: the heartbeat's stream sequence), the heartbeats keep the lines, so the log
is stored once, in the only source of truth, and streams from there while the sim runs and
after any restart or rebuild alike."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_core import events as ev
from cascade_core import subjects
from projections.queries import runs as q
from projections.rows import SimRow

PLACES_PER_READ = 4096  # heartbeats' places read from the read model at a time
CHUNK_BYTES = 256 * 1024  # about what goes out per write: heartbeats are from a line to ~200 KB


async def log_text(c: Cascade, sim: SimRow) -> AsyncGenerator[bytes, None]:
    """Every log line of the sim's current attempt, in line order, each ending in a newline."""
    after = 0  # line numbers start at 1
    pending: list[bytes] = []
    size = 0
    while places := await read(c, q.log_places, sim, after, PLACES_PER_READ):
        async with contextlib.aclosing(c.store.at(seq for _, seq in places)) as messages:
            async for _, subject, payload in messages:
                beat = subjects.decode(subject, payload)
                assert isinstance(beat, ev.SimHeartbeat), f"sim_log names a {ev.event_type(beat)}"
                pending.append(beat.log.encode() + b"\n")
                size += len(pending[-1])
                if size >= CHUNK_BYTES:
                    yield b"".join(pending)
                    pending, size = [], 0
        if len(places) < PLACES_PER_READ:
            break
        after = places[-1][0]
    if pending:
        yield b"".join(pending)
