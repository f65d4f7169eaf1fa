"""The log read through once at start, for the messages nats-server can no longer read back
from its store (`parking.lost`) up to the read model's checkpoint: the projector finds those
past its checkpoint as it goes, but a read model made before the damage still shows the
events, and only a replay would miss them. Only sequences and subjects are read (a consumer
that delivers headers alone), so a long log is read through in moments."""

from __future__ import annotations

import contextlib

from cascade_nats import subjects
from cascade_nats.store import EventStore
from projections import parking
from projections.rows import ParkedRow


async def lost_up_to(store: EventStore, checkpoint: int) -> list[ParkedRow]:
    """The sequences up to `checkpoint` the stream does not deliver, each as `parking.lost` parks it."""
    rows: list[ParkedRow] = []
    after = 0
    async with contextlib.aclosing(store.raw(subjects.ALL, 1, until_caught_up=True, headers_only=True)) as batches:
        async for frames in batches:
            # The first message past the checkpoint still shows a gap before it.
            rows += [row for row in parking.lost(frames, after) if row.seq <= checkpoint]
            after = frames[-1][0]
            if after >= checkpoint:
                return rows
    return rows + parking.lost([], after, up_to=checkpoint)
