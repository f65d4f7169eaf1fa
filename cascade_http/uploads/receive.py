"""One upload from its first event to its outcome: the decisions of `cascade_core.traces`
with the event store, the object store and the request body around them.

The upload's events are appended as a chain: each expects the one before it to be the last
on the trace's subject, so anything else written to the trace meanwhile stops the upload
instead of interleaving with it. All but the last are plain appends; the last waits until the
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

import secrets
from collections.abc import AsyncIterable, Awaitable, Sequence
from datetime import UTC, datetime

import anyio
from starlette.requests import ClientDisconnect

from cascade_core import events as ev
from cascade_core import subjects
from cascade_core.object_names import trace_prefix
from cascade_core.tracefiles import TraceError
from cascade_core.traces import (
    Compression,
    Refused,
    Upload,
    decide_outcome,
    decide_upload,
    failed,
    files_stored,
    interrupted,
    over_limit,
    upload_too_large,
)
from cascade_http.bodies import Limited, TooLarge
from cascade_http.service import Cascade
from cascade_http.uploads.body import decoded
from cascade_http.uploads.store import remove, store_archive
from cascade_nats.store import ConcurrencyError

# How long cleaning up after a failed upload may take, even while the server shuts down.
CLEANUP_S = 30.0


def now() -> datetime:
    return datetime.now(UTC)


class Chain:
    """Events appended as a chain on one subject, from its sequence `seq`: each expects the
    one before it to be the last there (`ConcurrencyError` if anything else came between)."""

    def __init__(self, c: Cascade, seq: int) -> None:
        self.c = c
        self.seq = seq

    async def append(self, events: Sequence[ev.Event], *, wait: bool = True) -> None:
        """Append in order; with `wait`, return once the read model shows the last one."""
        for i, event in enumerate(events):
            append = self.c.append if wait and i == len(events) - 1 else self.c.store.append
            self.seq = await append(event, expected_last_subject_seq=self.seq)


async def receive_trace(
    c: Cascade, trace_id: str, compression: Compression, content_type: str, body: AsyncIterable[bytes], uploading: set[str]
) -> None:
    """Store and process one upload; the trace's state in the read model tells the outcome.
    Raises `Refused` for a taken id (409) and a body over a limit (413)."""
    upload = Upload(trace_id, secrets.token_hex(8))
    last = await c.store.last_on(subjects.trace(trace_id))
    started = decide_upload(last.event if last else None, upload, now(), content_type=content_type)
    try:
        seq = await c.store.append(started, expected_last_subject_seq=last.seq if last else 0)
    except ConcurrencyError:
        raise Refused(409, f"trace {trace_id} already exists") from None
    uploading.add(trace_id)
    try:
        if last is not None:
            # The id was used before: remove anything its deletion may have left behind.
            await c.objects.delete_prefix(trace_prefix(trace_id))
        limit = c.settings.max_upload_bytes
        await _receive(c, upload, compression, Limited(body, limit, upload_too_large(limit)), Chain(c, seq))
    except ConcurrencyError:
        raise Refused(409, f"trace {trace_id} was changed by another request during its upload") from None
    finally:
        uploading.discard(trace_id)


async def _receive(c: Cascade, upload: Upload, compression: Compression, body: Limited, chain: Chain) -> None:
    expansion = c.settings.expansion
    try:
        received = await store_archive(c.objects, upload.trace_id, decoded(body, compression, expansion), expansion)
    except TraceError as error:
        await _shielded(chain.append([failed(upload, str(error), now())]))
        return
    except ClientDisconnect:
        await _shielded(chain.append([interrupted(upload, body.received, now())]))
        return
    except TooLarge as large:
        await _shielded(chain.append(over_limit(upload, large.detail, now())))
        raise Refused(413, large.detail) from None
    except Exception as error:
        await _shielded(chain.append([failed(upload, f"the server could not store the upload ({error}); upload it again", now())]))
        raise
    await chain.append(files_stored(upload, received.files, now()), wait=False)
    outcome = await anyio.to_thread.run_sync(decide_outcome, upload, received, c.gpu_configs, now())
    if isinstance(outcome[-1], ev.TraceFailed):
        await _shielded(remove(c.objects, upload.trace_id, received.files))
    await chain.append(outcome)


async def _shielded(work: Awaitable[object]) -> None:
    """Finish `work` even if the request is being cancelled."""
    with anyio.CancelScope(shield=True), anyio.fail_after(CLEANUP_S):
        await work
