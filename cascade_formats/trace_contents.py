"""What an uploaded trace's files say, for `traces.decide_outcome`: its kernels from
`kernelslist.g` and their headers, its real timing lined up with them, its step timeline
checked against them, and `cascade.json`; or the first problem found, as the uploader reads it."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from cascade_core import events as ev
from cascade_core.traces import Contents, TraceInfo
from cascade_formats.realtiming import line_up, parse_timing
from cascade_formats.timeline import TimelineError, validate_timeline
from cascade_formats.tracefiles import (
    KERNELSLIST,
    REAL_TIMING,
    KernelHeader,
    KernelLaunch,
    TraceError,
    kernel_files,
    parse_cascade_json,
    parse_kernelslist,
    text_of,
    trace_arch,
    trace_kernels,
)


class Received(msgspec.Struct, frozen=True, kw_only=True):
    """What an upload stored and found. Paths are relative to the trace's root; kernel
    headers were read from the first bytes of each kernel file."""

    files: list[ev.StoredFile]
    headers: dict[str, KernelHeader] = {}
    header_errors: dict[str, str] = {}
    kernelslist: bytes | None = None
    step_timeline: bytes | None = None
    real_timing: bytes | None = None
    cascade_json: bytes | None = None
    kernelslists_elsewhere: list[str] = []


def contents(received: Received) -> Contents | str:
    """The trace the files make, or the first problem with them."""
    try:
        kernels, arch = _kernels(received)
        if received.step_timeline is not None:
            validate_timeline(received.step_timeline, len(kernels))
        timing = _timing(received.real_timing, REAL_TIMING, kernels) if received.real_timing is not None else []
        info = parse_cascade_json(received.cascade_json) if received.cascade_json is not None else TraceInfo()
    except (TraceError, TimelineError) as error:
        return str(error)
    return Contents(
        kernels=kernels,
        arch=arch,
        timing=timing,
        has_step_timeline=received.step_timeline is not None,
        info=info,
    )


def _kernels(received: Received) -> tuple[list[ev.TraceKernel], str]:
    """The trace's kernels in launch order and its arch, or the first problem with them."""
    if received.kernelslist is None:
        elsewhere = f" (found {', '.join(received.kernelslists_elsewhere[:3])})" if received.kernelslists_elsewhere else ""
        raise TraceError(
            f"the archive has no {KERNELSLIST} at its root or under its one top folder{elsewhere}; "
            "Accel-Sim starts a trace from it, so put it beside the kernel files"
        )
    entries = parse_kernelslist(text_of(received.kernelslist, KERNELSLIST))
    first_line = {e.file: e.line for e in reversed(entries) if isinstance(e, KernelLaunch)}
    for file in kernel_files(entries):
        if file in received.header_errors:
            raise TraceError(received.header_errors[file])
        if file not in received.headers:
            raise TraceError(f"{KERNELSLIST} line {first_line[file]} names {file!r}, which is not in the trace")
    headers = [received.headers[f] for f in kernel_files(entries)]
    arch = trace_arch(headers)
    return trace_kernels(entries, received.headers), arch


def _timing(raw: bytes, source: str, kernels: Sequence[ev.TraceKernel]) -> list[ev.RealTiming]:
    return line_up(parse_timing(text_of(raw, source), source), kernels, source)
