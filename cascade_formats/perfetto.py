"""A run's kernel timings as a Chrome trace JSON, which Perfetto and chrome://tracing open.

Each config of the run is a process, each of its sims (replicas) a thread, and each
finished kernel a slice. The clock is simulated time: a sim's kernels are laid end to end
(the simulator runs them one after another and reports no start times of its own), each
slice from the sim's cycle count before it to the count after it, in whole nanoseconds.
Field names and order follow the Chrome trace event format, which is also the order the
API reference shows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec

from cascade_api.models import KernelStat, RunSummary, Sim
from cascade_formats.kernel_names import short_name

TIME_AXIS = "simulated time, microseconds; each sim's kernels laid end to end"
SLICE_DURATION = "sim_time_ns = gpu_sim_cycle / core clock (MHz) * 1000"
KERNEL_SCOPE = "sequential kernels, each including the configured launch latency; excludes host time and memcpy"


class TraceEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="ph"):
    """The phase (`ph`) tags each event and is encoded first, as Chrome writes it."""

    pid: int


class MetadataEvent(TraceEvent, frozen=True, kw_only=True, tag="M"):
    name: str
    args: dict[str, str | int]
    # Process metadata has no thread; UNSET leaves the key out rather than writing null.
    tid: int | msgspec.UnsetType = msgspec.UNSET


class SliceArgs(msgspec.Struct, frozen=True, kw_only=True):
    kernel_index: int
    uid: int
    kernel_name: str
    gpu_sim_cycle: int
    gpu_sim_insn: int
    ipc: float
    sim_time_ns: float
    start_cycle: int
    end_cycle: int


class SliceEvent(TraceEvent, frozen=True, kw_only=True, tag="X"):
    tid: int
    cat: str
    name: str
    ts: float
    dur: float
    args: SliceArgs


class OtherData(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    trace_id: str
    time_axis: str = TIME_AXIS
    slice_duration: str = SLICE_DURATION
    kernel_scope: str = KERNEL_SCOPE


class PerfettoTrace(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    trace_events: list[MetadataEvent | SliceEvent]
    display_time_unit: Literal["ns"] = "ns"
    other_data: OtherData


def _us(ns: int) -> float:
    # Trace timestamps are in microseconds; a nanosecond is the finest step worth keeping.
    # Whole nanoseconds print with at most 3 decimals, and Perfetto's llround(ts * 1000)
    # reads back exactly those nanoseconds.
    return ns / 1000


def _ns_per_cycle(kernels: Sequence[KernelStat]) -> float:
    """The sim's clock as its kernels record it (sim_time_ns = gpu_sim_cycle / MHz * 1000):
    the one the runner used, whatever the config says now."""
    timed = next((k for k in kernels if k.gpu_sim_cycle > 0), None)
    return timed.sim_time_ns / timed.gpu_sim_cycle if timed else 0.0


def _slices(pid: int, tid: int, kernels: Iterable[KernelStat]) -> list[SliceEvent]:
    ordered = sorted(kernels, key=lambda k: k.kernel_index)
    ns_per_cycle = _ns_per_cycle(ordered)
    slices: list[SliceEvent] = []
    start_cycle = 0
    start_ns = 0
    for kernel in ordered:
        end_cycle = start_cycle + kernel.gpu_sim_cycle
        # Both ends from the cumulative cycle count, each converted and rounded once: a slice
        # ends exactly where the next begins, and rounding never accumulates along a sim.
        end_ns = round(end_cycle * ns_per_cycle)
        slices.append(
            SliceEvent(
                pid=pid,
                tid=tid,
                cat="kernel",
                name=f"k{kernel.kernel_launch_uid} {short_name(kernel.kernel_name)}",
                ts=_us(start_ns),
                dur=_us(end_ns - start_ns),
                args=SliceArgs(
                    kernel_index=kernel.kernel_index,
                    uid=kernel.kernel_launch_uid,
                    kernel_name=kernel.kernel_name,
                    gpu_sim_cycle=kernel.gpu_sim_cycle,
                    gpu_sim_insn=kernel.gpu_sim_insn,
                    ipc=kernel.gpu_ipc,
                    sim_time_ns=kernel.sim_time_ns,
                    start_cycle=start_cycle,
                    end_cycle=end_cycle,
                ),
            )
        )
        start_cycle, start_ns = end_cycle, end_ns
    return slices


def perfetto_trace(run: RunSummary, sims: Sequence[Sim], kernels: Iterable[KernelStat]) -> PerfettoTrace:
    """The run's trace: processes in the order of `run.entries` (pid 1, 2, ...), a thread
    per sim by replica (tid = replica + 1), and a slice per kernel in `kernels` (the
    finished ones) in kernel_index order. Each thread's metadata precedes its slices."""
    by_sim: defaultdict[str, list[KernelStat]] = defaultdict(list)
    for kernel in kernels:
        by_sim[kernel.sim_id].append(kernel)
    events: list[MetadataEvent | SliceEvent] = []
    configs = dict.fromkeys(entry.gpu_config for entry in run.entries)
    for pid, config in enumerate(configs, start=1):
        events.append(MetadataEvent(pid=pid, name="process_name", args={"name": f"{config} · Accel-Sim simulated GPU"}))
        events.append(MetadataEvent(pid=pid, name="process_sort_index", args={"sort_index": pid}))
        for sim in sorted((s for s in sims if s.gpu_config == config), key=lambda s: s.replica):
            tid = sim.replica + 1
            events.append(
                MetadataEvent(pid=pid, name="thread_name", args={"name": f"replica {sim.replica} · {sim.id}"}, tid=tid)
            )
            events.append(MetadataEvent(pid=pid, name="thread_sort_index", args={"sort_index": tid}, tid=tid))
            events.extend(_slices(pid, tid, by_sim[sim.id]))
    return PerfettoTrace(trace_events=events, other_data=OtherData(run_id=run.id, trace_id=run.trace_id))
