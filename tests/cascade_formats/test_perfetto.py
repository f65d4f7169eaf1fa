from __future__ import annotations

import itertools
import json
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_core.events import SimMetrics
from cascade_api.models import KernelStat, RunSummary, Sim
from cascade_core.runs import RunEntry
from cascade_formats.perfetto import perfetto_trace
from cascade_sim.samples import H100, LLM_KERNELS

AT = datetime(2026, 11, 8, 8, 59, 3, tzinfo=timezone.utc)

# The API reference's `Download a Perfetto trace` example, up to where it trims the list.
REFERENCE_EVENTS = """[
    {
      "ph": "M",
      "pid": 1,
      "name": "process_name",
      "args": {
        "name": "SM86_RTX3070 · Accel-Sim simulated GPU"
      }
    },
    {
      "ph": "M",
      "pid": 1,
      "name": "process_sort_index",
      "args": {
        "sort_index": 1
      }
    },
    {
      "ph": "M",
      "pid": 1,
      "name": "thread_name",
      "args": {
        "name": "replica 0 · sim-1047ddbdf5b1"
      },
      "tid": 1
    },
    {
      "ph": "M",
      "pid": 1,
      "name": "thread_sort_index",
      "args": {
        "sort_index": 1
      },
      "tid": 1
    },
    {
      "ph": "X",
      "pid": 1,
      "tid": 1,
      "cat": "kernel",
      "name": "k1 init_kernel",
      "ts": 0.0,
      "dur": 5.454,
      "args": {
        "kernel_index": 0,
        "uid": 1,
        "kernel_name": "_Z11init_kernelIdEvPT_S1_S1_S0_S0_S0_",
        "gpu_sim_cycle": 6174,
        "gpu_sim_insn": 19456,
        "ipc": 3.1513,
        "sim_time_ns": 5454.063604240282,
        "start_cycle": 0,
        "end_cycle": 6174
      }
    },
    {
      "ph": "X",
      "pid": 1,
      "tid": 1,
      "cat": "kernel",
      "name": "k2 copy_kernel",
      "ts": 5.454,
      "dur": 5.232,
      "args": {
        "kernel_index": 1,
        "uid": 2,
        "kernel_name": "_Z11copy_kernelIdEvPKT_PS0_",
        "gpu_sim_cycle": 5923,
        "gpu_sim_insn": 11264,
        "ipc": 1.9017,
        "sim_time_ns": 5232.332155477032,
        "start_cycle": 6174,
        "end_cycle": 12097
      }
    }
]"""

REFERENCE_TAIL = """{
  "displayTimeUnit": "ns",
  "otherData": {
    "run_id": "run-210d75c008c4",
    "trace_id": "demo",
    "time_axis": "simulated time, microseconds; each sim's kernels laid end to end",
    "slice_duration": "sim_time_ns = gpu_sim_cycle / core clock (MHz) * 1000",
    "kernel_scope": "sequential kernels, each including the configured launch latency; excludes host time and memcpy"
  }
}"""


def run(*entries: RunEntry) -> RunSummary:
    return RunSummary(
        id="run-210d75c008c4",
        trace_id="demo",
        created_at=AT,
        state="succeeded",
        entries=list(entries),
        sim_counts={"succeeded": sum(e.count for e in entries)},
        sample=False,
    )


def sim(sim_id: str, config: str, replica: int) -> Sim:
    return Sim(
        id=sim_id,
        run_id="run-210d75c008c4",
        gpu_config=config,
        replica=replica,
        state="succeeded",
        error=None,
        launcher_ref=None,
        created_at=AT,
        started_at=AT,
        finished_at=AT,
        last_heartbeat_at=AT,
        exit_code=0,
        kernels_done=2,
        kernels_total=2,
        current_kernel=None,
        latest=SimMetrics(),
        log_tail=[],
    )


def kernel(sim_id: str, index: int, name: str, cycles: int, insn: int, ipc: float, ns: float) -> KernelStat:
    return KernelStat(
        sim_id=sim_id,
        kernel_index=index,
        kernel_name=name,
        kernel_launch_uid=index + 1,
        gpu_sim_cycle=cycles,
        gpu_sim_insn=insn,
        gpu_ipc=ipc,
        sim_time_ns=ns,
        stats={},
    )


def reference_kernels(sim_id: str) -> list[KernelStat]:
    return [
        kernel(sim_id, 0, "_Z11init_kernelIdEvPT_S1_S1_S0_S0_S0_", 6174, 19456, 3.1513, 5454.063604240282),
        kernel(sim_id, 1, "_Z11copy_kernelIdEvPKT_PS0_", 5923, 11264, 1.9017, 5232.332155477032),
    ]


def as_json(value: object) -> object:
    # json keeps key order, so comparing dumps compares order as well as content
    return json.loads(msgspec.json.encode(value))


def test_reproduces_the_reference_example() -> None:
    sims = [sim("sim-e8f63b6b3bed", "SM86_RTX3070", 1), sim("sim-1047ddbdf5b1", "SM86_RTX3070", 0)]
    kernels = reference_kernels("sim-e8f63b6b3bed") + reference_kernels("sim-1047ddbdf5b1")[::-1]
    trace = as_json(perfetto_trace(run(RunEntry(gpu_config="SM86_RTX3070", count=2)), sims, kernels))
    assert isinstance(trace, dict)
    assert list(trace) == ["traceEvents", "displayTimeUnit", "otherData"]
    events = trace.pop("traceEvents")
    assert json.dumps(events[:6]) == json.dumps(json.loads(REFERENCE_EVENTS))
    assert json.dumps(trace) == json.dumps(json.loads(REFERENCE_TAIL))
    # 6 shown + those the reference trims: replica 0's IPC counter, replica 1's two metadata
    # events, slices and counter
    assert [(e["ph"], e["name"], e.get("tid")) for e in events[6:]] == [
        ("C", "replica 0 IPC", None),
        ("C", "replica 0 IPC", None),
        ("C", "replica 0 IPC", None),
        ("M", "thread_name", 2),
        ("M", "thread_sort_index", 2),
        ("X", "k1 init_kernel", 2),
        ("X", "k2 copy_kernel", 2),
        ("C", "replica 1 IPC", None),
        ("C", "replica 1 IPC", None),
        ("C", "replica 1 IPC", None),
    ]


def test_processes_follow_entry_order_and_threads_replicas() -> None:
    sims = [sim("s-b0", "SM7_QV100", 0), sim("s-a1", "SM86_RTX3070", 1), sim("s-a0", "SM86_RTX3070", 0)]
    trace = as_json(
        perfetto_trace(run(RunEntry(gpu_config="SM86_RTX3070", count=2), RunEntry(gpu_config="SM7_QV100", count=1)), sims, reference_kernels("s-b0"))
    )
    assert isinstance(trace, dict)
    metadata = [(e["pid"], e.get("tid"), e["args"]) for e in trace["traceEvents"] if e["ph"] == "M"]
    assert metadata == [
        (1, None, {"name": "SM86_RTX3070 · Accel-Sim simulated GPU"}),
        (1, None, {"sort_index": 1}),
        (1, 1, {"name": "replica 0 · s-a0"}),
        (1, 1, {"sort_index": 1}),
        (1, 2, {"name": "replica 1 · s-a1"}),
        (1, 2, {"sort_index": 2}),
        (2, None, {"name": "SM7_QV100 · Accel-Sim simulated GPU"}),
        (2, None, {"sort_index": 2}),
        (2, 1, {"name": "replica 0 · s-b0"}),
        (2, 1, {"sort_index": 1}),
    ]
    assert [(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "X"] == [(2, 1), (2, 1)]


def slices_as_printed(kernels: list[KernelStat]) -> list[dict[str, Any]]:
    """The slices of one sim's `kernels` as the JSON says them, numbers as the exact decimals
    printed (Decimal), so that sums are the sums of what a reader sees."""
    trace = perfetto_trace(run(RunEntry(gpu_config="SM7_QV100", count=1)), [sim("s", "SM7_QV100", 0)], kernels)
    events = json.loads(msgspec.json.encode(trace), parse_float=Decimal)["traceEvents"]
    return [e for e in events if e["ph"] == "X"]


def test_slices_come_from_the_cumulative_cycles() -> None:
    # Three 0.4 ns kernels: their ends, 0.4, 0.8 and 1.2 ns, round to 0, 1 and 1 ns.
    slices = slices_as_printed([kernel("s", i, f"k{i}", 1, 1, 1.0, 0.4) for i in range(3)])
    assert [(e["ts"], e["dur"]) for e in slices] == [(0, 0), (0, Decimal("0.001")), (Decimal("0.001"), 0)]
    assert [(e["args"]["start_cycle"], e["args"]["end_cycle"]) for e in slices] == [(0, 1), (1, 2), (2, 3)]
    assert [e["name"] for e in slices] == ["k1 k0", "k2 k1", "k3 k2"]


def test_the_llm_sample_slices_meet_end_to_end() -> None:
    # Kernels 10 and 11 of the LLM sample (SM90_H100, 1980 MHz): rounded on their own, k10's
    # ts + dur came out 1 ns past k11's ts.
    clock = H100.core_clock_mhz
    kernels = [kernel("s", i, name, cycles, insn, 1.0, cycles / clock * 1000) for i, (name, cycles, insn) in enumerate(LLM_KERNELS)]
    slices = slices_as_printed(kernels)
    assert [e["ts"] + e["dur"] for e in slices[:-1]] == [e["ts"] for e in slices[1:]]


@settings(max_examples=300, deadline=None)
@given(
    cycles=st.lists(st.integers(min_value=0, max_value=10**10), min_size=1, max_size=40),
    clock_mhz=st.floats(min_value=100.0, max_value=5000.0, allow_nan=False),
)
def test_slices_never_overlap(cycles: list[int], clock_mhz: float) -> None:
    """For any cycle counts and core clock, as the runner records them: each slice ends
    exactly where the next begins, as printed (microseconds, at most 3 decimals) and as
    Perfetto reads it (llround(ts * 1000) ns), and each end is the sim's cumulative cycles
    in nanoseconds, rounded once."""
    kernels = [kernel("s", i, f"k{i}", c, c, 1.0, c / clock_mhz * 1000) for i, c in enumerate(cycles)]
    slices = slices_as_printed(kernels)
    assert slices[0]["ts"] == 0
    for e in slices:
        assert e["dur"] >= 0 and all(-e[k].as_tuple().exponent <= 3 for k in ("ts", "dur") if isinstance(e[k], Decimal))
    for e, successor in zip(slices, slices[1:]):
        assert e["ts"] + e["dur"] == successor["ts"]
        assert round(float(e["ts"]) * 1000) + round(float(e["dur"]) * 1000) == round(float(successor["ts"]) * 1000)
    for e, end_cycle in zip(slices, itertools.accumulate(cycles)):
        assert e["args"]["end_cycle"] == end_cycle
        assert abs((e["ts"] + e["dur"]) * 1000 - Decimal(end_cycle * 1000) / Decimal(clock_mhz)) <= Decimal("0.5000001")
