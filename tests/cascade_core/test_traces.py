from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec
import pytest

from cascade_core import events as ev
from cascade_core.events import TraceKernel
from cascade_core.gpu_configs import GpuConfig
from cascade_core.refusals import Conflict, Invalid, NotFound, Refused, TooLarge, UnsupportedMedia
from cascade_core.trace import Trace
from cascade_core.trace import evolve as evolve_trace
from cascade_core.traces import (
    Attachment,
    Contents,
    RealTimingAttached,
    Upload,
    attached,
    batches,
    check_upload,
    decide_delete,
    decide_next,
    decide_outcome,
    decide_path_add,
    decide_real_timing,
    decide_upload,
    failed,
    files_stored,
)
from cascade_formats.realtiming import timing_file
from cascade_formats.trace_contents import Received, contents
from cascade_formats.tracefiles import parse_kernel_header
from tests.support import TRACES

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
UPLOAD = Upload("demo", "u1")
CONFIGS = [GpuConfig(name="SM7_QV100", arch="sm_70", core_clock_mhz=1132.0), GpuConfig(name="SM61_TITANX", arch="sm_61", core_clock_mhz=1417.0)]
HEADER = (TRACES / "vectoradd-100-32" / "kernel-1.traceg").read_text()[:2000]
LIMIT = 1000


def refusal(call: object, *args: object) -> tuple[type[Refused], str]:
    with pytest.raises(Refused) as refused:
        call(*args)  # type: ignore[operator]
    return type(refused.value), refused.value.detail


def test_check_upload_takes_the_three_media_types_and_refuses_the_rest() -> None:
    assert check_upload("demo", "application/x-tar", 10, LIMIT) == "tar"
    assert check_upload("a.b_c-1", "application/gzip; charset=binary", None, LIMIT) == "gzip"
    assert check_upload("x" * 64, "Application/X-XZ", LIMIT, LIMIT) == "xz"
    assert refusal(check_upload, "-x", "application/x-tar", 1, LIMIT)[0] is Invalid
    assert refusal(check_upload, "x" * 65, "application/x-tar", 1, LIMIT)[0] is Invalid
    assert refusal(check_upload, "demo", "application/zip", 1, LIMIT)[0] is UnsupportedMedia
    assert refusal(check_upload, "demo", None, 1, LIMIT) == (
        UnsupportedMedia,
        "Content-Type 'missing' is not a trace archive; send a tar stream as application/x-tar, application/gzip or application/x-xz",
    )
    assert refusal(check_upload, "demo", "application/x-tar", LIMIT + 1, LIMIT) == (
        TooLarge,
        "the upload is 1001 bytes, over this server's limit of 1000 bytes (CASCADE_MAX_UPLOAD_BYTES)",
    )


def test_an_id_is_free_when_unused_or_deleted() -> None:
    started = decide_upload(None, UPLOAD, AT, content_type="application/x-tar")
    assert (started.id, started.trace_id, started.correlation_id, started.causation_id) == ("u1.started", "demo", "u1.started", None)
    assert decide_upload(ev.TraceDeleted(id="d", at=AT, trace_id="demo"), UPLOAD, AT, content_type="x").trace_id == "demo"
    live = ev.TraceFailed(id="f", at=AT, trace_id="demo", error="bad")
    with pytest.raises(Conflict, match="^trace demo already exists$"):
        decide_upload(live, UPLOAD, AT, content_type="x")


def received(kernelslist: str, **headers: str) -> Received:
    files = [ev.StoredFile("kernelslist.g", len(kernelslist), "d0")] + [ev.StoredFile(f, 100, "d") for f in headers]
    return Received(
        files=files,
        headers={f: parse_kernel_header(h, f) for f, h in headers.items()},
        kernelslist=kernelslist.encode(),
    )


def decided(received: Received, configs: list[GpuConfig]) -> list[ev.Event]:
    return decide_outcome(UPLOAD, received.files, contents(received), configs, AT)


def test_a_good_upload_is_ready_with_its_kernels() -> None:
    events = decided(received("kernel-1.traceg\nkernel-1.traceg\n", **{"kernel-1.traceg": HEADER}), CONFIGS)
    listed, ready = events
    assert isinstance(listed, ev.TraceKernelsListed) and isinstance(ready, ev.TraceReady)
    assert [(k.uid, k.name, k.grid, k.block) for k in listed.kernels] == [
        (uid, "_Z6vecAddIfEvPT_S1_S1_i", "1x1x1", "1024x1x1") for uid in (1, 2)
    ]
    assert (ready.trace_gpu_arch, ready.kernel_count, ready.bytes, ready.suggested_sim_config) == ("sm_61", 2, 132, "SM61_TITANX")
    assert (ready.has_real_timing, ready.has_step_timeline, ready.model) == (False, False, None)
    assert all(e.causation_id == "u1.started" for e in events)
    assert decided(received("kernel-1.traceg\n", **{"kernel-1.traceg": HEADER}), [])[-1].suggested_sim_config is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("upload", "error"),
    [
        (Received(files=[]), "the archive has no kernelslist.g at its root"),
        (received("kernel-2.traceg\n", **{"kernel-1.traceg": HEADER}), "kernelslist.g line 1 names 'kernel-2.traceg', which is not in the trace"),
        (Received(files=[], kernelslist=b"\xff\xfe"), "kernelslist.g is not UTF-8 text (byte 0 is 0xff)"),
        (
            Received(files=[], kernelslist=b"kernel-1.traceg\n", header_errors={"kernel-1.traceg": "kernel-1.traceg: header has no '-nregs' line"}),
            "kernel-1.traceg: header has no '-nregs' line",
        ),
    ],
)
def test_a_bad_upload_fails_with_the_first_problem(upload: Received, error: str) -> None:
    (outcome,) = decided(upload, CONFIGS)
    assert isinstance(outcome, ev.TraceFailed) and outcome.error.startswith(error)


def test_header_errors_of_files_kernelslist_does_not_name_do_not_matter() -> None:
    upload = received("kernel-1.traceg\n", **{"kernel-1.traceg": HEADER})
    upload = Received(files=upload.files, headers=upload.headers, kernelslist=upload.kernelslist, header_errors={"spare.traceg": "bad"})
    assert isinstance(decided(upload, CONFIGS)[-1], ev.TraceReady)


def test_big_uploads_are_announced_in_events_that_stay_small() -> None:
    long_name = "_Z" + "N5cutlass6kernelI" * 120  # about 2 KB, as heavily templated kernels are
    header = HEADER.replace("_Z6vecAddIfEvPT_S1_S1_i", long_name)
    kernelslist = "".join(f"kernel-{i}.traceg\n" for i in range(1, 1201))
    headers = {f"kernel-{i}.traceg": header for i in range(1, 1201)}
    upload = received(kernelslist, **headers)
    # Four hardware repetitions of every launch: 4,800 rows of 2 KB names.
    timing = "".join("kernel_id,kernel_name,duration_ns\n" + "".join(f"{i},{long_name},{i}.5\n" for i in range(1200)) for _ in range(4))
    upload = Received(files=upload.files, headers=upload.headers, kernelslist=upload.kernelslist, real_timing=timing.encode())
    events = files_stored(UPLOAD, upload.files, AT) + decided(upload, CONFIGS)
    sizes = [len(ev.encode(e)) for e in events]
    assert max(sizes) < 300 * 1024
    kinds = [ev.event_type(e) for e in events]
    assert kinds.count("trace.files_stored.v1") == 3
    assert kinds.count("trace.kernels_listed.v1") >= 3
    assert kinds.count("trace.real_timing_listed.v1") >= 3
    assert sum(len(e.kernels) for e in events if isinstance(e, ev.TraceKernelsListed)) == 1200
    listed = [(r.repeat, r.kernel_id) for e in events if isinstance(e, ev.TraceRealTimingListed) for r in e.rows]
    assert listed == [(repeat, uid) for repeat in range(4) for uid in range(1, 1201)]
    assert len({e.id for e in events}) == len(events)
    assert isinstance(events[-1], ev.TraceReady) and events[-1].has_real_timing


def test_batches_and_an_empty_upload() -> None:
    assert batches(list(range(7)), 3, lambda _: 1) == [[0, 1, 2], [3, 4, 5], [6]]
    assert batches(list(range(4)), 10, lambda _: 40, max_bytes=100) == [[0, 1], [2, 3]]
    assert batches([], 3, lambda _: 1) == []
    (only,) = files_stored(UPLOAD, [], AT)
    assert only.files == []


def test_an_error_is_cut_to_a_readable_length() -> None:
    assert len(failed(UPLOAD, "x" * 10_000, AT).error) == 2000


def trace(**changes: object) -> Trace:
    ready = Trace(
        id="demo", state="ready", error=None, created_at=AT, updated_at=AT, model=None, layers=[], source_gpu=None,
        trace_gpu_arch="sm_61", suggested_sim_config=None, kernel_count=1, bytes=1, has_real_timing=False,
        has_step_timeline=False, sample=False, deleted=False, real_timing=None,
    )
    return msgspec.structs.replace(ready, **changes)


def test_delete_decisions() -> None:
    def decide(t: Trace | None, active_run: str | None = None, uploading_here: bool = False) -> ev.TraceDeleted:
        return decide_delete(t, "demo", AT, "e1", active_run=active_run, uploading_here=uploading_here)

    assert decide(trace()).trace_id == "demo"
    assert decide(trace(state="uploading")).trace_id == "demo"  # left behind by a server that stopped
    assert decide(trace(sample=True)).trace_id == "demo"  # and its sample runs with it
    for args, expected in [
        ((None,), (NotFound, "trace demo not found")),
        ((trace(), "run-1"), (Conflict, "trace demo is used by active run run-1")),
        ((trace(state="uploading"), None, True), (Conflict, "trace demo is still being uploaded; delete it once it is ready or failed")),
    ]:
        assert refusal(decide, *args) == expected


# --- real timing ----------------------------------------------------------------------------


def test_an_uploads_timing_is_lined_up_with_its_kernels() -> None:
    upload = received("kernel-1.traceg\nkernel-1.traceg\n", **{"kernel-1.traceg": HEADER})
    timing = "kernel_id,kernel_name,duration_ns\n7,_Z6vecAddIfEvPT_S1_S1_i,100\n9,vecAdd,200\n"
    events = decided(msgspec.structs.replace(upload, real_timing=timing.encode()), CONFIGS)
    listed = next(e for e in events if isinstance(e, ev.TraceRealTimingListed))
    assert listed.timing_id == ev.UPLOAD_TIMING and "timing_id" not in ev.encode(listed).decode()  # as before timing had ids
    assert [(r.kernel_id, r.duration_ns) for r in listed.rows] == [(1, 100.0), (2, 200.0)]
    long = "kernel_id,kernel_name,duration_ns\n1,vecAdd,100\n2,vecAdd,100\n3,vecAdd,100\n"
    [outcome] = decided(msgspec.structs.replace(upload, real_timing=long.encode()), CONFIGS)
    assert isinstance(outcome, ev.TraceFailed) and outcome.error.startswith(
        "real_timing.csv: the pass from line 2 has 3 kernel launches, the trace 2;"
    )


KERNELS = [
    TraceKernel(uid=uid, name="_Z6vecAddIfEvPT_S1_S1_i", grid="1x1x1", block="1024x1x1", shmem=0, nregs=8, file="kernel-1.traceg")
    for uid in (1, 2)
]


def ready_trace(**changes: object) -> Trace:
    return trace(**{"kernel_count": 2, **changes})


NSYS = "Start (ns),Duration (ns),CorrId,Name\n1,3232,11,vecAdd\n9,3104,12,vecAdd\n"


def attach(body: str, *, replace: bool = False, kernels: Sequence[ev.TraceKernel] = KERNELS) -> Attachment:
    return Attachment(trace_id="demo", timing_id="timing-1", timing=timing_file(body.encode(), kernels), replace=replace)


def test_attaching_timing_lists_its_rows_then_the_marker() -> None:
    listed, marker = decide_real_timing(ready_trace(), attach(NSYS + NSYS), AT)
    assert [(e.id, e.timing_id, e.correlation_id) for e in listed] == [("timing-1.rows.0", "timing-1", "timing-1")]
    assert [(r.kernel_id, r.repeat, r.duration_ns) for r in listed[0].rows] == [(1, 0, 3232.0), (2, 0, 3104.0), (1, 1, 3232.0), (2, 1, 3104.0)]
    assert (marker.id, marker.timing_id, marker.replaces, marker.format, marker.kernels, marker.repeats, marker.measures) == (
        "timing-1.attached", "timing-1", None, "nsys", 2, 2, ["duration_ns"],
    )
    assert attached(marker) == RealTimingAttached(
        trace_id="demo", timing_id="timing-1", format="nsys", kernels=2, repeats=2, measures=["duration_ns"], replaced=None
    )
    _, replacing = decide_real_timing(ready_trace(has_real_timing=True, real_timing="upload"), attach(NSYS, replace=True), AT)
    assert replacing.replaces == "upload"


def test_attached_timing_is_split_into_events_that_stay_small() -> None:
    name = "_Z" + "N5cutlass6kernelI" * 120  # about 2 KB
    kernels = [TraceKernel(uid=uid, name=name, grid="1x1x1", block="1x1x1", shmem=0, nregs=8, file="kernel-1.traceg") for uid in range(1, 1001)]
    body = "".join("kernel_id,kernel_name,duration_ns\n" + "".join(f"{i},{name},{i}\n" for i in range(1000)) for _ in range(5))
    listed, marker = decide_real_timing(ready_trace(kernel_count=1000), attach(body, kernels=kernels), AT)
    assert len(listed) > 10 and max(len(ev.encode(e)) for e in [*listed, marker]) < 300 * 1024
    assert sum(len(e.rows) for e in listed) == 5000 and len({e.id for e in listed}) == len(listed)


@pytest.mark.parametrize(
    ("trace", "attachment", "expected"),
    [
        (None, attach(NSYS), (NotFound, "trace demo not found")),
        (
            ready_trace(sample=True), attach(NSYS),
            (Conflict, "trace demo is a sample that ships with Cascade; its real timing cannot be changed"),
        ),
        (ready_trace(state="processing"), attach(NSYS), (Conflict, "trace demo is processing; real timing can be attached to a ready trace")),
        (
            ready_trace(has_real_timing=True, real_timing="upload"), attach(NSYS),
            (Conflict, "trace demo already has real timing (upload); replace it with ?replace=true (cascade trace timing --replace)"),
        ),
        (ready_trace(), attach("kernel_id,kernel_name,duration_ns\n"), (Invalid, "the timing file holds no kernel launches")),
        (
            ready_trace(), attach(NSYS.replace("3104", "fast")),
            (Invalid, "the timing file line 3: Duration (ns) 'fast' is not a non-negative number"),
        ),
        (
            ready_trace(), Attachment(trace_id="demo", timing_id="t", timing=timing_file(b"\xff\xfe", KERNELS)),
            (Invalid, "the timing file is not UTF-8 text (byte 0 is 0xff); save it as UTF-8"),
        ),
        (
            ready_trace(), attach(NSYS.replace("vecAdd\n", "mult_gpu\n", 1)),
            (
                Invalid,
                "the timing file line 2: launch 1 is 'mult_gpu', but the trace's kernel 1 is '_Z6vecAddIfEvPT_S1_S1_i' (vecAdd); "
                "a pass holds the trace's launches in order, from its first",
            ),
        ),
    ],
)
def test_attaching_timing_is_refused(trace: Trace | None, attachment: Attachment, expected: tuple[type[Refused], str]) -> None:
    assert refusal(decide_real_timing, trace, attachment, AT) == expected


def test_an_upload_goes_on_only_while_the_trace_is_its_own() -> None:
    started = decide_upload(None, UPLOAD, AT, content_type="application/x-tar")
    step = files_stored(UPLOAD, [], AT)
    assert decide_next(started, UPLOAD, step) == step
    assert decide_next(step[0], UPLOAD, step) == step
    for last in (None, ev.TraceDeleted(id="d", at=AT, trace_id="demo"), decide_upload(None, Upload("demo", "u2"), AT, content_type="x")):
        with pytest.raises(Conflict, match="^trace demo was changed by another request during its upload$"):
            decide_next(last, UPLOAD, step)


# --- a trace from a shared path ---------------------------------------------------------------

SHARED_FILES = [ev.StoredFile("kernelslist.g", 10, "SHA-256=a"), ev.StoredFile("kernel-1.traceg", 20, "SHA-256=b")]
SHARED_CONTENTS = Contents(
    kernels=[TraceKernel(uid=1, name="k", grid="1x1x1", block="32x1x1", shmem=0, nregs=8, file="kernel-1.traceg")], arch="sm_61"
)


def test_a_path_added_lists_its_path_its_files_with_digests_then_the_upload_outcome() -> None:
    out = decide_path_add(None, UPLOAD, "/shared/demo", SHARED_FILES, SHARED_CONTENTS, CONFIGS, AT)
    assert [type(e) for e in out] == [ev.TracePathAdded, ev.TraceFilesStored, ev.TraceKernelsListed, ev.TraceReady]
    added, stored = out[0], out[1]
    assert isinstance(added, ev.TracePathAdded) and added.path == "/shared/demo" and added.id == UPLOAD.started_id
    assert isinstance(stored, ev.TraceFilesStored) and stored.files == SHARED_FILES
    assert all(e.correlation_id == UPLOAD.started_id for e in out)
    trace = None
    for e in out:
        assert isinstance(e, ev.TraceEvent)
        trace = evolve_trace(trace, e)
    assert trace is not None and (trace.state, trace.sample, trace.kernel_count, trace.bytes) == ("ready", False, 1, 30)
    assert trace.suggested_sim_config == "SM61_TITANX"


def test_a_path_add_is_refused_on_a_taken_id_and_on_files_that_are_no_trace_with_nothing_to_append() -> None:
    taken = ev.TraceReady(
        id="r", at=AT, trace_id="demo", trace_gpu_arch="sm_61", kernel_count=1, bytes=1, suggested_sim_config=None,
        has_real_timing=False, has_step_timeline=False,
    )
    assert refusal(decide_path_add, taken, UPLOAD, "/s/d", SHARED_FILES, SHARED_CONTENTS, CONFIGS, AT) == (Conflict, "trace demo already exists")
    deleted = ev.TraceDeleted(id="d", at=AT, trace_id="demo")
    assert decide_path_add(deleted, UPLOAD, "/s/d", SHARED_FILES, SHARED_CONTENTS, CONFIGS, AT)[0].id == UPLOAD.started_id
    assert refusal(decide_path_add, None, UPLOAD, "/s/d", SHARED_FILES, "no kernelslist.g", CONFIGS, AT) == (
        Invalid, "/s/d is not a trace Cascade can run: no kernelslist.g"
    )
