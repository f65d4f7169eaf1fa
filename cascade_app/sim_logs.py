"""A sim's log, read from the event log: the read model keeps where each heartbeat's lines
are (`sim_log`: the heartbeat's stream sequence), the heartbeats keep the lines, so the log
is stored once, in the only source of truth, and streams from there while the sim runs and
after any restart or rebuild alike."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_core import events as ev
from cascade_core.refusals import Unavailable
from cascade_formats import gpgpusim_options
from cascade_nats import deflated
from cascade_nats import subjects
from cascade_nats.store import StoreError
from projections.queries import runs as q
from projections.rows import SimRow

PLACES_PER_READ = 4096  # heartbeats' places read from the read model at a time
PIECE_BYTES = 256 * 1024  # about what goes out per write: heartbeats are from a line to ~200 KB
NATS_RETRY_AFTER_S = 5


async def log_text(c: Cascade, sim: SimRow, after_line: int = 0) -> AsyncGenerator[bytes, None]:
    """Every log line of the sim's current attempt past line `after_line` (lines a follower
    has), in line order, each ending in a newline.

    The first piece is read before this returns, so that what cannot be read now is refused
    before a response starts: a read model being rebuilt (`read`), or NATS not answering."""
    pieces = _pieces(c, sim, after_line)
    try:
        first = await anext(pieces, b"")
    except (OSError, StoreError) as err:  # a Wire that cannot connect, an answer that does not come
        await pieces.aclose()
        detail = f"a sim's log is read from the event log, in NATS, which does not answer now ({err}); see /api/health"
        raise Unavailable(detail, retry_after_s=NATS_RETRY_AFTER_S) from err
    return _chained(first, pieces)


async def _chained(first: bytes, rest: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    async with contextlib.aclosing(rest):
        if first:
            yield first
        async for piece in rest:
            yield piece


async def _pieces(c: Cascade, sim: SimRow, after_line: int) -> AsyncGenerator[bytes, None]:
    # From the heartbeat that holds line `after_line` + 1 (line numbers start at 1), less
    # the lines of it before that one.
    after = await read(c, q.log_start, sim, after_line + 1) - 1
    skip = after_line - after
    pending: list[bytes] = []
    size = 0
    while places := await read(c, q.log_places, sim, after, PLACES_PER_READ):
        async with contextlib.aclosing(c.store.at(seq for _, seq in places)) as messages:
            async for _, subject, payload in messages:
                beat = subjects.decode(subject, payload)
                assert isinstance(beat, ev.SimHeartbeat), f"sim_log names a {ev.event_type(beat)}"
                text = deflated.log_utf8(beat)
                if skip:
                    text = b"\n".join(text.split(b"\n")[skip:])
                    skip = 0
                    if not text:
                        continue
                pending.append(text + b"\n")
                size += len(pending[-1])
                if size >= PIECE_BYTES:
                    yield b"".join(pending)
                    pending, size = [], 0
        if len(places) < PLACES_PER_READ:
            break
        after = places[-1][0]
    if pending:
        yield b"".join(pending)


async def options_ran_with(c: Cascade, sim: SimRow) -> dict[str, str] | None:
    """The options the sim's simulator ran with, by name (with its `-`), as its log's option
    dump shows them; None when the log has none (yet). The dump is in the log's first few
    tens of KB, which the first piece holds: no more is read."""
    pieces = _pieces(c, sim, 0)
    async with contextlib.aclosing(pieces):
        first = await anext(pieces, b"")
    _, options = gpgpusim_options.learn(first.decode(errors="replace").splitlines())
    return {name: spec.default for name, spec in options.items()} or None
