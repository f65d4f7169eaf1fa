"""The upload command: one upload from its first event to its outcome, the decisions of
`cascade_core.traces` with the event store, the object store and the body around them.

Each step is decided under the one conflict rule (`cascade_app.conflicts`): the start on
what the trace's subject holds (another upload that took the id first refuses it), each next
step on the subject's newest event being the upload's own, so anything else written to the
trace meanwhile stops the upload instead of interleaving with it. The outcome waits until the
read model shows it, so the answer can be read from there.

How each way of ending shows in the log:
- ready: upload_started, files_stored (processing), kernels_listed, real_timing_listed, ready;
- a problem in the content: ... failed, with the error, and no files kept; one found while
  the body streams in ends the upload at once, and the answer goes out while the client may
  still be sending (uvicorn reads and drops the rest of the body, then closes);
- a client that disconnects: upload_started, failed ("interrupted"), no files kept;
- a body over the size limit, or one that expands past the expanded-size or ratio limit once
  decompressed: upload_started, failed, deleted: nothing is kept and the id is free again,
  just as when a declared Content-Length is refused at once (413 every way).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Sequence

import anyio

from cascade_app import disk
from cascade_app.clock import now
from cascade_app.conflicts import Decision, decided, seq_of
from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_app.uploads.body import decoded
from cascade_app.uploads.store import remove, store_archive
from cascade_core import events as ev
from cascade_core.limits import Limited
from cascade_core.object_names import trace_prefix
from cascade_core.refusals import TooLarge
from cascade_core.traces import (
    Compression,
    Upload,
    check_upload,
    cut_short,
    decide_next,
    decide_outcome,
    decide_upload,
    failed,
    files_stored,
    interrupted,
    over_limit,
    upload_too_large,
)
from cascade_formats import trace_contents
from cascade_formats.tracefiles import TraceError
from cascade_host import new_ids
from cascade_nats import subjects
from projections.queries.traces import list_traces

# How long cleaning up after a failed upload may take, even while the server shuts down.
CLEANUP_S = 30.0


class Disconnected(Exception):
    """The client went away before its body ended (raised by the body's iterator)."""


async def upload_trace(c: Cascade, trace_id: str, content_type: str, declared: int | None, body: AsyncIterable[bytes]) -> None:
    """Store and process one upload of `body` (`declared` bytes long, if it said); the
    trace's state in the read model tells the outcome. Refused: what the request line and
    headers show (`check_upload`), a taken id (`Conflict`), a body over a limit (`TooLarge`)."""
    compression = check_upload(trace_id, content_type, declared, c.settings.max_upload_bytes)
    disk.check_room(disk.looked_at(c.settings.data_dir, c.disk, now()), declared or 0)  # as it is now: uploads are large
    upload = Upload(trace_id, new_ids.upload_id())
    subject = subjects.trace(trace_id)

    async def start() -> Decision[bool]:
        last = await c.store.last_on(subject)
        started = decide_upload(last.event if last else None, upload, now(), content_type=content_type)
        return Decision([started], seq_of(last), last is not None)

    used_before = await decided(c, start, wait=False)
    c.uploading.add(trace_id)
    try:
        if used_before:
            # The id was used before: remove anything its deletion may have left behind.
            await c.objects.delete_prefix(trace_prefix(trace_id))
        limit = c.settings.max_upload_bytes
        await _receive(c, upload, compression, Limited(body, limit, upload_too_large(limit)))
    finally:
        c.uploading.discard(trace_id)


async def fail_cut_short(c: Cascade) -> None:
    """Every upload a server stopped receiving or storing ends failed (`cut_short`), rather
    than stay `uploading` or `processing`: run at start, before this server receives any."""
    for trace in await read(c, list_traces):
        if trace.state in ("uploading", "processing"):

            async def step(trace_id: str = trace.id) -> Decision[None]:
                last = await c.store.last_on(subjects.trace(trace_id))
                mine = trace_id in c.uploading  # an upload this server began since
                ended = None if last is None or mine else cut_short(trace_id, last.event, now())
                return Decision([] if ended is None else [ended], seq_of(last), None)

            await decided(c, step)


async def _next(c: Cascade, upload: Upload, events: Sequence[ev.Event], *, wait: bool = True) -> None:
    """The upload's next events, while the trace is still its own."""

    async def step() -> Decision[None]:
        last = await c.store.last_on(subjects.trace(upload.trace_id))
        return Decision(decide_next(last.event if last else None, upload, events), seq_of(last), None)

    await decided(c, step, wait=wait)


async def _receive(c: Cascade, upload: Upload, compression: Compression, body: Limited) -> None:
    expansion = c.settings.expansion
    try:
        received = await store_archive(c.objects, upload.trace_id, decoded(body, compression, expansion), expansion)
    except TraceError as error:
        await _shielded(_next(c, upload, [failed(upload, str(error), now())]))
        return
    except Disconnected:
        await _shielded(_next(c, upload, [interrupted(upload, body.received, now())]))
        return
    except TooLarge as large:
        await _shielded(_next(c, upload, over_limit(upload, large.detail, now())))
        raise
    except Exception as error:
        await _shielded(_next(c, upload, [failed(upload, f"the server could not store the upload ({error}); upload it again", now())]))
        raise
    await _next(c, upload, files_stored(upload, received.files, now()), wait=False)
    try:
        found = await anyio.to_thread.run_sync(trace_contents.contents, received)
        outcome = await anyio.to_thread.run_sync(decide_outcome, upload, received.files, found, await c.gpu_configs(), now())
    except Exception as error:  # a parser's own errors are in `found`: this is a bug, and the trace must not stay processing
        await _shielded(remove(c.objects, upload.trace_id, received.files))
        await _shielded(_next(c, upload, [failed(upload, f"the server could not read the trace ({error!r}); report it", now())]))
        raise
    if isinstance(outcome[-1], ev.TraceFailed):
        await _shielded(remove(c.objects, upload.trace_id, received.files))
    await _next(c, upload, outcome)


async def _shielded(work: Awaitable[object]) -> None:
    """Finish `work` even if the request is being cancelled."""
    with anyio.CancelScope(shield=True), anyio.fail_after(CLEANUP_S):
        await work
