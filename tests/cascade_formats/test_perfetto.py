from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_core.events import SimMetrics
from cascade_api.models import KernelStat, RunSummary, Sim
from cascade_core.runs import RunEntry
from cascade_formats.perfetto import KernelPart, RunnerSpan, memcpys_before, perfetto_pieces
from cascade_formats.tracefiles import MemcpyHtoD, parse_kernelslist
from cascade_sim.samples import H100, LLM_KERNELS
from tests.support import TRACES

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


def perfetto_trace(
    run: RunSummary,
    sims: list[Sim],
    kernels: list[KernelStat],
    *,
    dram_accesses: dict[tuple[str, int], float] = {},
    part: int = 2,
    **extras: Any,
) -> msgspec.Raw:
    """The trace `perfetto_pieces` makes of these kernels (`dram_accesses` by sim and
    kernel_index), given `part` kernels of a sim at a time, whole."""

    def parts(sim_id: str, dram: bool) -> list[KernelPart]:
        ordered = sorted((k for k in kernels if k.sim_id == sim_id), key=lambda k: k.kernel_index)
        pieces = [ordered[i : i + part] for i in range(0, len(ordered), part)]
        accesses = {index: n for (s, index), n in dram_accesses.items() if s == sim_id} if dram else {}
        return [KernelPart(p, {k.kernel_index: accesses[k.kernel_index] for k in p if k.kernel_index in accesses}) for p in pieces]

    return msgspec.Raw(b"".join(perfetto_pieces(run, sims, parts, **extras)))


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


# The combo trace on SM7_QV100 (1132 MHz), from its real log
# (shared/accelsim/logs/combo-vec-mm-xz__SM7_QV100.log): each launch's gpu_sim_cycle and
# gpu_sim_insn, and `total dram reads` as printed, 26, 282 and 282 (running totals; writes 0),
# so the kernels' own DRAM accesses are 26, 256 and 0.
COMBO_QV100 = [(5714, 10516), (8023, 139264), (5572, 10516)]
COMBO_QV100_OWN_DRAM = [26.0, 256.0, 0.0]
QV100_MHZ = 1132.0


def combo_kernels(sim_id: str) -> list[KernelStat]:
    return [
        kernel(sim_id, i, "_Z6vecAddIfEvPT_S1_S1_i", cycles, insn, round(insn / cycles, 4), cycles / QV100_MHZ * 1000)
        for i, (cycles, insn) in enumerate(COMBO_QV100)
    ]


def combo_trace(**extras: Any) -> list[dict[str, Any]]:
    trace = perfetto_trace(run(RunEntry(gpu_config="SM7_QV100", count=1)), [sim("s", "SM7_QV100", 0)], combo_kernels("s"), **extras)
    events = as_json(trace)
    assert isinstance(events, dict)
    return list(events["traceEvents"])


def test_counters_are_each_kernels_own_ipc_and_dram_accesses_at_its_start() -> None:
    events = combo_trace(dram_accesses={("s", i): n for i, n in enumerate(COMBO_QV100_OWN_DRAM)})
    starts = [e["ts"] for e in events if e["ph"] == "X"]
    end = round(sum(c for c, _ in COMBO_QV100) / QV100_MHZ * 1000) / 1000
    counters = [(e["name"], e["ts"], e["args"]) for e in events if e["ph"] == "C"]
    ipc = "replica 0 IPC"
    dram = "replica 0 DRAM accesses per µs"
    expected = []
    for ts, (cycles, insn), own in zip(starts, COMBO_QV100, COMBO_QV100_OWN_DRAM):
        expected += [(ipc, ts, {"ipc": insn / cycles}), (dram, ts, {"accesses_per_us": own / (cycles / QV100_MHZ)})]
    assert counters == [*expected, (ipc, end, {"ipc": 0.0}), (dram, end, {"accesses_per_us": 0.0})]
    assert counters[1][2]["accesses_per_us"] == 26 / (5714 / 1132)  # 5.151 accesses per µs
    assert all("pid" in e and e["pid"] == 1 and "tid" not in e for e in events if e["ph"] == "C")


def test_a_kernel_without_dram_stats_has_no_dram_sample() -> None:
    events = combo_trace(dram_accesses={("s", 1): 256.0})
    assert [e["name"] for e in events if e["ph"] == "C"] == ["replica 0 IPC", "replica 0 IPC", "replica 0 DRAM accesses per µs"] + [
        "replica 0 IPC", "replica 0 IPC", "replica 0 DRAM accesses per µs"
    ]


def test_memcpys_precede_the_launch_after_them_in_the_kernelslist() -> None:
    text = (TRACES / "combo-vec-mm-xz" / "kernelslist.g").read_text()
    before = memcpys_before(parse_kernelslist(text))
    assert {uid: [(m.address, m.bytes) for m in ms] for uid, ms in before.items()} == {
        1: [(0x7F2B2D500000, 400), (0x7F2B2D500200, 400), (0x7F2B2D500400, 400)],
        2: [(0x7FB02D700000, 4096), (0x7FB02D701000, 4096)],
        3: [],
    }
    events = combo_trace(memcpys=before)
    starts = {e["args"]["uid"]: e["ts"] for e in events if e["ph"] == "X"}
    instants = [e for e in events if e["ph"] == "i"]
    assert [(e["name"], e["ts"], e["s"], e["cat"], e["args"]) for e in instants] == [
        ("MemcpyHtoD 400 B", starts[1], "t", "memcpy", {"line": 1, "address": 0x7F2B2D500000, "bytes": 400}),
        ("MemcpyHtoD 400 B", starts[1], "t", "memcpy", {"line": 2, "address": 0x7F2B2D500200, "bytes": 400}),
        ("MemcpyHtoD 400 B", starts[1], "t", "memcpy", {"line": 3, "address": 0x7F2B2D500400, "bytes": 400}),
        ("MemcpyHtoD 4.0 KB", starts[2], "t", "memcpy", {"line": 5, "address": 0x7FB02D700000, "bytes": 4096}),
        ("MemcpyHtoD 4.0 KB", starts[2], "t", "memcpy", {"line": 6, "address": 0x7FB02D701000, "bytes": 4096}),
    ]
    # Their own thread, after the sim's, named for it: its metadata precedes them.
    threads = [(e["tid"], e["args"]) for e in events if e["ph"] == "M" and "tid" in e]
    assert threads == [(1, {"name": "replica 0 · s"}), (1, {"sort_index": 1}), (2, {"name": "replica 0 · Memcpy"}), (2, {"sort_index": 2})]
    assert {e["tid"] for e in instants} == {2}
    assert events.index(instants[0]) > max(i for i, e in enumerate(events) if e["ph"] == "M" and e.get("tid") == 2)


def test_a_memcpy_of_megabytes_says_so() -> None:
    events = combo_trace(memcpys={1: [MemcpyHtoD(1, 0x10, 4 << 20)]})
    assert [e["name"] for e in events if e["ph"] == "i"] == ["MemcpyHtoD 4.0 MB"]


def span(runner: str | None, sim_id: str, replica: int, launched: int, finished: int) -> RunnerSpan:
    return RunnerSpan(
        runner_id=runner,
        sim_id=sim_id,
        gpu_config="SM7_QV100",
        replica=replica,
        state="succeeded",
        launched_at=AT + timedelta(seconds=launched),
        finished_at=AT + timedelta(seconds=finished),
    )


def test_the_wall_clock_process_has_a_thread_per_runner_and_lane() -> None:
    # runner-a runs s0 and s1 at once, then s2 once s0 is done; runner-b runs s3 alone.
    spans = [span("runner-a", "s1", 1, 2, 9), span("runner-b", "s3", 3, 5, 6), span("runner-a", "s2", 2, 4, 7), span("runner-a", "s0", 0, 1, 4)]
    events = combo_trace(spans=spans)
    wall = [e for e in events if e["pid"] == 2]
    assert [(e["name"], e.get("tid"), e["args"]) for e in wall if e["ph"] == "M"] == [
        ("process_name", None, {"name": "Wall clock (runners)"}),
        ("process_sort_index", None, {"sort_index": 2}),
        ("thread_name", 1, {"name": "runner-a"}),
        ("thread_sort_index", 1, {"sort_index": 1}),
        ("thread_name", 2, {"name": "runner-a · lane 2"}),
        ("thread_sort_index", 2, {"sort_index": 2}),
        ("thread_name", 3, {"name": "runner-b"}),
        ("thread_sort_index", 3, {"sort_index": 3}),
    ]
    # Microseconds from the earliest launch; each B closed by its E before the next B.
    assert [(e["ph"], e["tid"], e["ts"], e.get("args", {}).get("sim_id")) for e in wall if e["ph"] in "BE"] == [
        ("B", 1, 0.0, "s0"), ("E", 1, 3e6, None), ("B", 1, 3e6, "s2"), ("E", 1, 6e6, None),
        ("B", 2, 1e6, "s1"), ("E", 2, 8e6, None),
        ("B", 3, 4e6, "s3"), ("E", 3, 5e6, None),
    ]
    begin = next(e for e in wall if e["ph"] == "B")
    assert (begin["name"], begin["cat"], begin["args"]["launched_at"]) == ("SM7_QV100 replica 0", "sim", "2026-11-08T08:59:04Z")


def test_no_spans_no_wall_clock_process() -> None:
    assert {e["pid"] for e in combo_trace()} == {1}


@settings(max_examples=50, deadline=None)
@given(part=st.integers(min_value=1, max_value=4), replicas=st.integers(min_value=1, max_value=3))
def test_a_trace_made_a_few_kernels_at_a_time_is_the_one_made_at_once(part: int, replicas: int) -> None:
    # A sim's kernels come a part at a time, read three times (slices, counters, memcpys):
    # wherever the parts end, the trace is byte for byte the one of all of them at once.
    sims = [sim(f"s{r}", "SM7_QV100", r) for r in range(replicas)]
    kernels = [k for s in sims for k in combo_kernels(s.id)]
    extras: dict[str, Any] = {
        "dram_accesses": {(s.id, 1): 256.0 for s in sims},
        "memcpys": memcpys_before(parse_kernelslist((TRACES / "combo-vec-mm-xz" / "kernelslist.g").read_text())),
        "spans": [span("runner-a", s.id, s.replica, s.replica, s.replica + 2) for s in sims],
        "atom_bytes": {"s0": 32.0},
    }
    whole = perfetto_trace(run(RunEntry(gpu_config="SM7_QV100", count=replicas)), sims, kernels, part=len(kernels), **extras)
    assert perfetto_trace(run(RunEntry(gpu_config="SM7_QV100", count=replicas)), sims, kernels, part=part, **extras) == whole
    assert json.loads(bytes(whole))["traceEvents"][-1]["ph"] == "E"
