"""A run's kernel timings as a Chrome trace JSON, which Perfetto and chrome://tracing open.

Each config of the run is a process, each of its sims (replicas) a thread, and each
finished kernel a slice. The clock is simulated time: a sim's kernels are laid end to end
(the simulator runs them one after another and reports no start times of its own), each
slice from the sim's cycle count before it to the count after it, in whole nanoseconds.
Field names and order follow the Chrome trace event format, which is also the order the
API reference shows.

Besides the kernel slices (cat `kernel`), each sim has two counter tracks sampled at each
kernel's start, the kernel's own IPC and its own DRAM bandwidth (reads plus writes, its
difference from the launch before, not the running total the log prints: in GB/s given the
bytes an access moves, from the sim's options; in accesses per microsecond without them),
and a Memcpy track: Accel-Sim gives a trace's
`MemcpyHtoD` commands no simulated time, so each is an instant at the start of the launch it
precedes in `kernelslist.g`. A last process, "Wall clock (runners)", shows when each sim (each
chunk of a split one) ran on its runner: real time, microseconds from the earliest launch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Literal

import msgspec

from cascade_api.models import KernelStat, RunSummary, Sim
from cascade_formats.kernel_names import short_name
from cascade_formats.tracefiles import KernelsListEntry, MemcpyHtoD

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


class CounterEvent(TraceEvent, frozen=True, kw_only=True, tag="C"):
    """A counter track's sample, named per sim; the value holds until the next sample."""

    name: str
    ts: float
    args: dict[str, float]


class InstantEvent(TraceEvent, frozen=True, kw_only=True, tag="i"):
    """A memcpy, its args the kernelslist.g line as read (its line number, address, bytes)."""

    tid: int
    cat: str
    name: str
    ts: float
    s: Literal["t"] = "t"
    args: MemcpyHtoD


class RunnerSpan(msgspec.Struct, frozen=True, kw_only=True):
    """A sim's time on a runner, or a split sim's chunk's (`chunk`, from 0), from its launch
    to its end, as the read model holds it."""

    runner_id: str | None
    sim_id: str
    gpu_config: str
    replica: int
    state: str
    launched_at: datetime
    finished_at: datetime
    chunk: int | None = None


class BeginEvent(TraceEvent, frozen=True, kw_only=True, tag="B"):
    """A wall-clock span's start; a span is a B/E pair, so its args need not be a kernel's."""

    tid: int
    cat: str
    name: str
    ts: float
    args: RunnerSpan


class EndEvent(TraceEvent, frozen=True, kw_only=True, tag="E"):
    tid: int
    ts: float


Event = MetadataEvent | SliceEvent | CounterEvent | InstantEvent | BeginEvent | EndEvent


class OtherData(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    trace_id: str
    time_axis: str = TIME_AXIS
    slice_duration: str = SLICE_DURATION
    kernel_scope: str = KERNEL_SCOPE


class PerfettoTrace(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    trace_events: list[Event]
    display_time_unit: Literal["ns"] = "ns"
    other_data: OtherData


def _us(ns: int) -> float:
    # Trace timestamps are in microseconds; a nanosecond is the finest step worth keeping.
    # Whole nanoseconds print with at most 3 decimals, and Perfetto's llround(ts * 1000)
    # reads back exactly those nanoseconds.
    return ns / 1000


class Clock(msgspec.Struct, frozen=True):
    """Where a sim's slices have got to: its cycles and whole nanoseconds so far, and its clock
    as its kernels record it (sim_time_ns = gpu_sim_cycle / MHz * 1000: the one the runner
    used, whatever the config says now), known from its first kernel of any cycles; kernels
    before that one end at 0 whatever it is."""

    cycle: int = 0
    ns: int = 0
    ns_per_cycle: float = 0.0


def _slices(pid: int, tid: int, kernels: Iterable[KernelStat], clock: Clock) -> tuple[list[SliceEvent], Clock]:
    """The slices of a sim's next kernels (in kernel_index order) from where `clock` stands,
    and where they leave it."""
    slices: list[SliceEvent] = []
    start_cycle, start_ns, ns_per_cycle = clock.cycle, clock.ns, clock.ns_per_cycle
    for kernel in kernels:
        if not ns_per_cycle and kernel.gpu_sim_cycle > 0:
            ns_per_cycle = kernel.sim_time_ns / kernel.gpu_sim_cycle
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
    return slices, Clock(cycle=start_cycle, ns=start_ns, ns_per_cycle=ns_per_cycle)


def _sim_slices(pid: int, tid: int, parts: Iterable[KernelPart]) -> Iterator[tuple[list[SliceEvent], KernelPart]]:
    """Each part of a sim's kernels with its slices, the sim's clock carried from one part to the next."""
    clock = Clock()
    for part in parts:
        slices, clock = _slices(pid, tid, part.kernels, clock)
        yield slices, part


class _Tracks(msgspec.Struct, frozen=True):
    """A sim's counter tracks: IPC, and DRAM in GB/s given the bytes an access moves (the
    sim's `atom_bytes`, from its options), else in accesses per µs."""

    ipc: str
    dram: str
    dram_unit: str
    per_ns: float


def _tracks(replica: int, atom_bytes: float | None) -> _Tracks:
    if atom_bytes is None:
        return _Tracks(f"replica {replica} IPC", f"replica {replica} DRAM accesses per µs", "accesses_per_us", 1000.0)
    return _Tracks(f"replica {replica} IPC", f"replica {replica} DRAM GB/s", "gbps", atom_bytes)


def _counters(pid: int, tracks: _Tracks, slices: Sequence[SliceEvent], dram_accesses: Mapping[int, float]) -> list[CounterEvent]:
    """The sim's IPC and DRAM counters at each kernel's start (`dram_accesses` by
    kernel_index, the kernel's own)."""
    counters: list[CounterEvent] = []
    for e in slices:
        cycles = e.args.gpu_sim_cycle
        ipc = e.args.gpu_sim_insn / cycles if cycles else 0.0
        counters.append(CounterEvent(pid=pid, name=tracks.ipc, ts=e.ts, args={"ipc": ipc}))
        accesses = dram_accesses.get(e.args.kernel_index)
        if accesses is not None:
            # accesses x per_ns / ns: bytes per ns, which is GB/s; or accesses per µs.
            rate = accesses * tracks.per_ns / e.args.sim_time_ns if e.args.sim_time_ns else 0.0
            counters.append(CounterEvent(pid=pid, name=tracks.dram, ts=e.ts, args={tracks.dram_unit: rate}))
    return counters


def _counters_end(pid: int, tracks: _Tracks, last: SliceEvent, dram: bool) -> list[CounterEvent]:
    """0 at the sim's last kernel's end: past it the sim ran nothing, and a counter holds its
    last value until the next sample (DRAM's only where the sim had a DRAM sample)."""
    end = round(last.ts + last.dur, 3)  # as the next slice's ts would print
    counters = [CounterEvent(pid=pid, name=tracks.ipc, ts=end, args={"ipc": 0.0})]
    if dram:
        counters.append(CounterEvent(pid=pid, name=tracks.dram, ts=end, args={tracks.dram_unit: 0.0}))
    return counters


def memcpys_before(entries: Iterable[KernelsListEntry]) -> dict[int, list[MemcpyHtoD]]:
    """The memcpys of `kernelslist.g` by the launch (uid) they precede; those after the last
    launch precede none and are left out."""
    before: dict[int, list[MemcpyHtoD]] = {}
    waiting: list[MemcpyHtoD] = []
    for entry in entries:
        if isinstance(entry, MemcpyHtoD):
            waiting.append(entry)
        else:
            before[entry.uid] = waiting
            waiting = []
    return before


def _size(n: int) -> str:
    """A memcpy's size as a slice name says it: binary units, so 4,194,304 bytes is 4.0 MB."""
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MB"
    return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} B"


def _memcpys(pid: int, tid: int, slices: Sequence[SliceEvent], before: Mapping[int, Sequence[MemcpyHtoD]]) -> list[InstantEvent]:
    return [
        InstantEvent(
            pid=pid,
            tid=tid,
            cat="memcpy",
            name=f"MemcpyHtoD {_size(m.bytes)}",
            ts=e.ts,
            args=m,
        )
        for e in slices
        for m in before.get(e.args.uid, ())
    ]


def _wall_clock(pid: int, spans: Sequence[RunnerSpan]) -> list[Event]:
    """The "Wall clock (runners)" process: a thread per runner and, where a runner ran sims
    at once, per lane of it (a sim takes the first lane free when it launches: slices on one
    thread must nest), each sim's span from its launch to its end."""
    if not spans:
        return []
    origin = min(s.launched_at for s in spans)
    lanes: dict[tuple[str, int], list[RunnerSpan]] = {}
    ends: defaultdict[str, list[datetime]] = defaultdict(list)  # each lane's last end, by runner
    for span in sorted(spans, key=lambda s: (s.launched_at, s.finished_at)):
        runner = span.runner_id or "no runner named"
        lane = next((i for i, end in enumerate(ends[runner]) if end <= span.launched_at), len(ends[runner]))
        if lane == len(ends[runner]):
            ends[runner].append(span.finished_at)
        else:
            ends[runner][lane] = span.finished_at
        lanes.setdefault((runner, lane), []).append(span)

    def us(at: datetime) -> float:
        return round((at - origin).total_seconds() * 1_000_000, 3)

    events: list[Event] = [
        MetadataEvent(pid=pid, name="process_name", args={"name": "Wall clock (runners)"}),
        MetadataEvent(pid=pid, name="process_sort_index", args={"sort_index": pid}),
    ]
    for tid, (runner, lane) in enumerate(sorted(lanes), start=1):
        name = runner if lane == 0 else f"{runner} · lane {lane + 1}"
        events.append(MetadataEvent(pid=pid, name="thread_name", args={"name": name}, tid=tid))
        events.append(MetadataEvent(pid=pid, name="thread_sort_index", args={"sort_index": tid}, tid=tid))
        for span in lanes[(runner, lane)]:
            name = f"{span.gpu_config} replica {span.replica}" + ("" if span.chunk is None else f" chunk {span.chunk + 1}")
            events.append(BeginEvent(pid=pid, tid=tid, cat="sim", name=name, ts=us(span.launched_at), args=span))
            events.append(EndEvent(pid=pid, tid=tid, ts=us(span.finished_at)))
    return events


class KernelPart(msgspec.Struct, frozen=True):
    """Some of a sim's finished kernels, in kernel_index order, and each one's own DRAM
    accesses (reads plus writes) by kernel_index, where its stats have them and they were asked for."""

    kernels: Sequence[KernelStat]
    dram_accesses: Mapping[int, float] = {}


# A sim's kernels a part at a time, in kernel_index order; with their DRAM accesses when asked.
SimKernels = Callable[[str, bool], Iterable[KernelPart]]

_encoder = msgspec.json.Encoder()


def _listed(events: Sequence[Event]) -> bytes:
    """Events as they appear in a JSON list, without its brackets."""
    return _encoder.encode(events)[1:-1]


def perfetto_pieces(
    run: RunSummary,
    sims: Sequence[Sim],
    kernels: SimKernels,
    *,
    atom_bytes: Mapping[str, float] = {},
    memcpys: Mapping[int, Sequence[MemcpyHtoD]] = {},
    spans: Sequence[RunnerSpan] = (),
) -> Iterator[bytes]:
    """The run's trace (a `PerfettoTrace`'s JSON), in pieces of a part of a sim's kernels
    each: processes in the order of `run.entries` (pid 1, 2, ...), a thread per sim by replica
    (tid = replica + 1), and a slice per finished kernel in kernel_index order. Each thread's
    metadata precedes its slices, then come the sim's counters (`atom_bytes`: the bytes a DRAM
    access moves, by sim, where its options are known) and, with `memcpys` (by the launch uid
    they precede), its Memcpy thread after the config's sim threads. The wall-clock process of
    `spans` comes last. A sim's kernels are read three times (slices, counters, memcpys), so
    that what is held at once is a part of them, whatever the run's size."""
    head, tail = _encoder.encode(PerfettoTrace(trace_events=[], other_data=OtherData(run_id=run.id, trace_id=run.trace_id))).split(b"[]")
    yield head + b"["
    comma = b""
    for events in _event_parts(run, sims, kernels, atom_bytes, memcpys, spans):
        if events:
            yield comma + _listed(events)
            comma = b","
    yield b"]" + tail


def _event_parts(
    run: RunSummary,
    sims: Sequence[Sim],
    kernels: SimKernels,
    atom_bytes: Mapping[str, float],
    memcpys: Mapping[int, Sequence[MemcpyHtoD]],
    spans: Sequence[RunnerSpan],
) -> Iterator[Sequence[Event]]:
    configs = dict.fromkeys(entry.gpu_config for entry in run.entries)
    for pid, config in enumerate(configs, start=1):
        yield [
            MetadataEvent(pid=pid, name="process_name", args={"name": f"{config} · Accel-Sim simulated GPU"}),
            MetadataEvent(pid=pid, name="process_sort_index", args={"sort_index": pid}),
        ]
        config_sims = sorted((s for s in sims if s.gpu_config == config), key=lambda s: s.replica)
        # Memcpy threads follow the sim threads, whose tids are their replicas + 1.
        memcpy_tid = max((s.replica for s in config_sims), default=0) + 2
        for sim in config_sims:
            tid = sim.replica + 1
            yield [
                MetadataEvent(pid=pid, name="thread_name", args={"name": f"replica {sim.replica} · {sim.id}"}, tid=tid),
                MetadataEvent(pid=pid, name="thread_sort_index", args={"sort_index": tid}, tid=tid),
            ]
            last, copied = None, False
            for slices, _ in _sim_slices(pid, tid, kernels(sim.id, False)):
                last = slices[-1] if slices else last
                copied = copied or any(memcpys.get(e.args.uid) for e in slices)
                yield slices
            if last is None:
                continue
            tracks, dram = _tracks(sim.replica, atom_bytes.get(sim.id)), False
            for slices, part in _sim_slices(pid, tid, kernels(sim.id, True)):
                dram = dram or bool(part.dram_accesses)
                yield _counters(pid, tracks, slices, part.dram_accesses)
            yield _counters_end(pid, tracks, last, dram)
            if not copied:
                continue
            yield [
                MetadataEvent(pid=pid, name="thread_name", args={"name": f"replica {sim.replica} · Memcpy"}, tid=memcpy_tid),
                MetadataEvent(pid=pid, name="thread_sort_index", args={"sort_index": memcpy_tid}, tid=memcpy_tid),
            ]
            for slices, _ in _sim_slices(pid, tid, kernels(sim.id, False)):
                yield _memcpys(pid, memcpy_tid, slices, memcpys)
            memcpy_tid += 1
    yield _wall_clock(len(configs) + 1, spans)
