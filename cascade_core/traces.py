"""Decisions about traces: pure functions from what is known to the events to append.

An upload goes through these, with the request body, the object store and the event store at
the edges (`cascade_app.uploads`):

- `check_upload` refuses a request before anything is stored (bad id, media type, size);
- `decide_upload` starts the upload if the id is free (never used, or its trace deleted),
  and `decide_next` lets each next step of it go on while the trace is still its own;
- `files_stored` announces the stored files, which moves the trace to `processing`;
- `decide_outcome` reads what the upload found in the files and makes the trace `ready`,
  with its kernels and real timing, or `failed` with an error a user can act on;
- `decide_delete` deletes a trace no active run uses;
- `decide_path_add` adds a trace from a shared path, whole or not at all.

No decision reads a clock or makes an id: the time comes in, and event ids derive from the
upload's own id, so a retried append is deduplicated by the event store. No decision reads a
file either: what an upload's files say (`Contents`) and a timing file's rows (`TimingFile`)
are read at the edge, by `cascade_formats`, and come in as facts or as the problem found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Annotated, Literal, TypedDict, TypeVar

import msgspec

from cascade_core import events as ev
from cascade_core.gpu_configs import GpuConfig, suggested_config
from cascade_core.ids import is_trace_id
from cascade_core.limits import too_large
from cascade_core.refusals import Conflict, Invalid, NotFound, TooLarge, UnsupportedMedia
from cascade_core.trace import Trace

T = TypeVar("T")

Compression = Literal["tar", "gzip", "xz"]

# Content-Type -> how the tar stream is compressed. The x- forms are what curl and browsers send.
MEDIA_TYPES: dict[str, Compression] = {
    "application/x-tar": "tar",
    "application/gzip": "gzip",
    "application/x-gzip": "gzip",
    "application/x-xz": "xz",
}

# Every event stays far below the event store's 512 KiB: a batch closes at whichever comes first.
MAX_FILES_PER_EVENT = 500
MAX_KERNELS_PER_EVENT = 500
MAX_TIMING_ROWS_PER_EVENT = 2000
MAX_EVENT_PAYLOAD = 256 * 1024
MAX_ERROR_CHARS = 2000


class Envelope(TypedDict):
    id: str
    at: datetime
    correlation_id: str
    causation_id: str | None


class Upload(msgspec.Struct, frozen=True):
    """One upload attempt. Its events' ids derive from `upload_id` (random per attempt), and
    all of them are correlated with, and caused by, the attempt's `upload_started` event."""

    trace_id: str
    upload_id: str

    @property
    def started_id(self) -> str:
        """The id of the upload's first event, which all of its events are correlated with."""
        return f"{self.upload_id}.started"

    def envelope(self, name: str, at: datetime) -> Envelope:
        started = self.started_id
        event_id = f"{self.upload_id}.{name}"
        return Envelope(id=event_id, at=at, correlation_id=started, causation_id=None if event_id == started else started)


class TraceInfo(msgspec.Struct, frozen=True):
    """What the uploader says of the trace (`cascade.json`), each optional."""

    model: str | None = None
    layers: list[str | int] = []
    source_gpu: str | None = None


class Contents(msgspec.Struct, frozen=True, kw_only=True):
    """What an upload's files say, for `decide_outcome`: the trace's kernels in launch order,
    the GPU arch they were traced on, real timing lined up with them, whether a step timeline
    came along, and what the uploader says of it."""

    kernels: list[ev.TraceKernel]
    arch: str
    timing: list[ev.RealTiming] = []
    has_step_timeline: bool = False
    info: TraceInfo = msgspec.field(default_factory=TraceInfo)


# --- before anything is stored ----------------------------------------------------------------


def check_upload(trace_id: str, content_type: str | None, content_length: int | None, limit: int) -> Compression:
    """How the body is compressed, or a refusal for what can be told from the request line
    and headers alone: a bad id, a media type that is no trace archive, a declared length
    over the limit."""
    check_trace_id(trace_id)
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    compression = MEDIA_TYPES.get(media_type)
    if compression is None:
        raise UnsupportedMedia(
            f"Content-Type {media_type or 'missing'!r} is not a trace archive; send a tar stream as "
            "application/x-tar, application/gzip or application/x-xz",
        )
    if content_length is not None and content_length > limit:
        raise TooLarge(upload_too_large(limit, content_length))
    return compression


def check_trace_id(trace_id: str) -> None:
    if not is_trace_id(trace_id):
        raise Invalid(
            f"trace id {trace_id[:100]!r} is not valid: use 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
        )


def upload_too_large(limit: int, size: int | None = None) -> str:
    return too_large("upload", limit, "CASCADE_MAX_UPLOAD_BYTES", size)


def check_free(last: ev.Event | None, trace_id: str) -> None:
    """Refuse a trace id in use: `last` is the newest event on its subject (None: never used)."""
    if last is not None and not isinstance(last, ev.TraceDeleted):
        raise Conflict(f"trace {trace_id} already exists")


def decide_upload(last: ev.Event | None, upload: Upload, at: datetime, *, content_type: str) -> ev.TraceUploadStarted:
    """Start an upload if the id is free: `last` is the newest event on the trace's subject
    (None for an id never used). A deleted trace's id may be used again."""
    check_free(last, upload.trace_id)
    return ev.TraceUploadStarted(**upload.envelope("started", at), trace_id=upload.trace_id, content_type=content_type)


def decide_next(last: ev.Event | None, upload: Upload, events: Sequence[ev.Event]) -> Sequence[ev.Event]:
    """The upload's next `events`, while the trace is still its own: the newest event on the
    trace's subject (`last`) is one of the upload's."""
    if last is None or last.correlation_id != upload.started_id:
        raise Conflict(f"trace {upload.trace_id} was changed by another request during its upload")
    return events


# --- after the body is stored --------------------------------------------------------------


def files_stored(upload: Upload, files: Sequence[ev.StoredFile], at: datetime) -> list[ev.TraceFilesStored]:
    """The stored files in events of at most 500 files each (the first moves the trace to
    `processing`); one event with no files when nothing was stored."""
    groups = batches(files, MAX_FILES_PER_EVENT, lambda f: len(f.path) + len(f.digest) + 40) or [[]]
    return [
        ev.TraceFilesStored(**upload.envelope(f"files.{i}", at), trace_id=upload.trace_id, files=group)
        for i, group in enumerate(groups)
    ]


def decide_outcome(
    upload: Upload, files: Sequence[ev.StoredFile], contents: Contents | str, configs: Iterable[GpuConfig], at: datetime
) -> list[ev.Event]:
    """`ready` with the kernels and real timing the `files` hold, or `failed` with the problem
    found in them (`contents` is then its text, which a user can act on)."""
    size = sum(f.bytes for f in files)
    if isinstance(contents, str):
        return [failed(upload, contents, at, size=size)]
    tid = upload.trace_id
    kernels = contents.kernels
    out: list[ev.Event] = [
        ev.TraceKernelsListed(**upload.envelope(f"kernels.{i}", at), trace_id=tid, kernels=group)
        for i, group in enumerate(batches(kernels, MAX_KERNELS_PER_EVENT, lambda k: len(k.name) + len(k.file) + 120))
    ]
    out += [
        ev.TraceRealTimingListed(**upload.envelope(f"timing.{i}", at), trace_id=tid, rows=group)
        for i, group in enumerate(_timing_batches(contents.timing))
    ]
    out.append(
        ev.TraceReady(
            **upload.envelope("ready", at),
            trace_id=tid,
            trace_gpu_arch=contents.arch,
            kernel_count=len(kernels),
            bytes=size,
            suggested_sim_config=suggested_config(contents.arch, configs),
            has_real_timing=bool(contents.timing),
            has_step_timeline=contents.has_step_timeline,
            model=contents.info.model,
            layers=contents.info.layers,
            source_gpu=contents.info.source_gpu,
        )
    )
    return out


def failed(upload: Upload, error: str, at: datetime, *, size: int = 0) -> ev.TraceFailed:
    """The upload failed with `error`; `size` is how many bytes of files it had stored."""
    if len(error) > MAX_ERROR_CHARS:
        error = error[: MAX_ERROR_CHARS - 1] + "…"
    return ev.TraceFailed(**upload.envelope("failed", at), trace_id=upload.trace_id, error=error, bytes=size)


def interrupted(upload: Upload, received: int, at: datetime) -> ev.TraceFailed:
    """The client went away after sending `received` bytes."""
    return failed(upload, f"the upload was interrupted: the client disconnected after sending {received} bytes; upload the trace again", at)


CUT_SHORT = "the upload was cut short: the server stopped while it received or stored it; upload the trace again"


def cut_short(trace_id: str, last: ev.Event, at: datetime) -> ev.TraceFailed | None:
    """The trace of an upload a server stopped receiving or storing, which it left `uploading`
    or `processing` (`last`: the newest event on its subject), fails in that upload's name,
    rather than stay half-made; None if `last` is no upload's."""
    started = last.correlation_id
    if started is None or not started.endswith(".started"):
        return None
    return failed(Upload(trace_id, started.removesuffix(".started")), CUT_SHORT, at)


def over_limit(upload: Upload, detail: str, at: datetime) -> list[ev.Event]:
    """The upload went past a limit as it streamed in (`detail` says which): the trace fails
    and is deleted at once, so nothing is kept and the id is free, as when a declared length
    is refused."""
    deleted = ev.TraceDeleted(**upload.envelope("deleted", at), trace_id=upload.trace_id)
    return [failed(upload, detail, at), deleted]


def _timing_batches(rows: Sequence[ev.RealTiming]) -> list[list[ev.RealTiming]]:
    return batches(rows, MAX_TIMING_ROWS_PER_EVENT, lambda r: len(r.kernel_name) + 100)


def batches(items: Sequence[T], max_count: int, size: Callable[[T], int], max_bytes: int = MAX_EVENT_PAYLOAD) -> list[list[T]]:
    """`items` in order, cut into lists of at most `max_count` items and about `max_bytes`."""
    out: list[list[T]] = []
    current: list[T] = []
    used = 0
    for item in items:
        cost = size(item)
        if current and (len(current) >= max_count or used + cost > max_bytes):
            out.append(current)
            current, used = [], 0
        current.append(item)
        used += cost
    if current:
        out.append(current)
    return out


# --- a trace from a shared path ----------------------------------------------------------------


def decide_path_add(
    last: ev.Event | None,
    upload: Upload,
    path: str,
    files: Sequence[ev.StoredFile],
    contents: Contents | str,
    configs: Iterable[GpuConfig],
    at: datetime,
    *,
    copied: bool = False,
) -> list[ev.Event]:
    """Add the trace lying at `path` if the id is free (as `decide_upload`) and its files
    make a trace (`contents`, read where they lie): its path (`copied`: its files stored in
    the object store too), its files with their digests, then what an upload's outcome says.
    A path whose files are no trace is refused (`Invalid`) with nothing appended: the caller
    removes what it stored, so there is no failed trace to keep."""
    check_free(last, upload.trace_id)
    if isinstance(contents, str):
        raise Invalid(f"{path} is not a trace Cascade can run: {contents}")
    added = ev.TracePathAdded(**upload.envelope("started", at), trace_id=upload.trace_id, path=path, copied=copied)
    return [added, *files_stored(upload, files, at), *decide_outcome(upload, files, contents, configs, at)]


# --- deleting --------------------------------------------------------------------------------


def decide_delete(
    trace: Trace | None, trace_id: str, at: datetime, event_id: str, *, active_run: str | None, uploading_here: bool
) -> ev.TraceDeleted:
    """Delete a trace that exists, is not being uploaded and no active run uses. A trace left
    `uploading` or `processing` by a server that stopped mid-upload (so no upload of it runs
    here) can be deleted. A sample trace's sample runs go with it (the fold drops them): they
    are there to show it, and no other run can use it."""
    if trace is None:
        raise NotFound(f"trace {trace_id} not found")
    if active_run is not None:
        raise Conflict(f"trace {trace_id} is used by active run {active_run}")
    if uploading_here:
        raise Conflict(f"trace {trace_id} is still being uploaded; delete it once it is ready or failed")
    return ev.TraceDeleted(id=event_id, at=at, trace_id=trace_id)


# --- real timing attached later -----------------------------------------------------------------

class TimingFile(msgspec.Struct, frozen=True, kw_only=True):
    """A real timing file's rows, lined up with the trace's launches at the edge: its layout,
    how many launches a pass over the program has, how many passes, and what each measures."""

    rows: list[ev.RealTiming]
    format: ev.TimingFormat
    kernels: int
    repeats: int
    measures: list[ev.Measure]
    counters: list[str] = []  # the hardware counters every launch has, by ncu metric name


class Attachment(msgspec.Struct, frozen=True, kw_only=True):
    """A request to attach real timing to a trace: the file's timing (or the problem with
    it), and whether it may replace the timing the trace has. Its events' ids derive from
    `timing_id` (one per request)."""

    trace_id: str
    timing_id: str
    timing: TimingFile | str
    replace: bool = False


def decide_real_timing(
    trace: Trace | None, request: Attachment, at: datetime
) -> tuple[list[ev.TraceRealTimingListed], ev.TraceRealTimingAttached]:
    """The events that attach the file's timing to a ready trace: its rows, and the marker
    to append after them that makes them the trace's, in place of the timing it has in use.
    Refused: no such trace (`NotFound`); a sample, a trace not ready, or one with timing when
    `replace` is not set (`Conflict`); a file that is no timing, or whose launches are not
    the trace's (`Invalid`, with the problem the edge found)."""
    trace_id = request.trace_id
    if trace is None:
        raise NotFound(f"trace {trace_id} not found")
    if trace.sample:
        raise Conflict(f"trace {trace_id} is a sample that ships with Cascade; its real timing cannot be changed")
    if trace.state != "ready":
        raise Conflict(f"trace {trace_id} is {trace.state}; real timing can be attached to a ready trace")
    timing_in_use = trace.real_timing
    if timing_in_use is not None and not request.replace:
        raise Conflict(
            f"trace {trace_id} already has real timing ({timing_in_use}); replace it with ?replace=true "
            "(cascade trace timing --replace)",
        )
    timing = request.timing
    if isinstance(timing, str):
        raise Invalid(timing)
    timing_id = request.timing_id
    listed = [
        ev.TraceRealTimingListed(
            id=f"{timing_id}.rows.{i}", at=at, correlation_id=timing_id, trace_id=trace_id, rows=group, timing_id=timing_id
        )
        for i, group in enumerate(_timing_batches(timing.rows))
    ]
    marker = ev.TraceRealTimingAttached(
        id=f"{timing_id}.attached",
        at=at,
        correlation_id=timing_id,
        trace_id=trace_id,
        timing_id=timing_id,
        replaces=timing_in_use,
        format=timing.format,
        kernels=timing.kernels,
        repeats=timing.repeats,
        measures=list(timing.measures),
        counters=list(timing.counters),
    )
    return listed, marker


class RealTimingAttached(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Real timing attached to a trace (`PUT /api/traces/{trace_id}/real-timing`)."""

    trace_id: str
    timing_id: Annotated[str, msgspec.Meta(description="This timing's id in the log.")]
    format: Annotated[ev.TimingFormat, msgspec.Meta(description="The layout the file was read as.")]
    kernels: Annotated[int, msgspec.Meta(description="The trace's kernels it measured: all, or the first N when profiling stopped short.")]
    repeats: Annotated[int, msgspec.Meta(description="Passes over the program: the hardware repetitions of each kernel.")]
    measures: Annotated[list[ev.Measure], msgspec.Meta(description="What the file measured.")]
    replaced: Annotated[str | None, msgspec.Meta(description="The timing this one replaced: `upload`, a timing_id, or null.")]
    counters: Annotated[
        list[str], msgspec.Meta(description="The hardware counters it measured (README, Hardware counters), by Nsight Compute metric name; absent when none.")
    ] = []


def attached(marker: ev.TraceRealTimingAttached) -> RealTimingAttached:
    """What the answer to an attachment says about it."""
    return RealTimingAttached(
        trace_id=marker.trace_id,
        timing_id=marker.timing_id,
        format=marker.format,
        kernels=marker.kernels,
        repeats=marker.repeats,
        measures=marker.measures,
        replaced=marker.replaces,
        counters=marker.counters,
    )
