"""Real timing files in each layout, lined up with a trace's launches, and every refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from cascade_core.counters import COUNTERS
from cascade_core.events import RealTiming, TraceKernel
from cascade_formats.realtiming import Launch, Timing, line_up, parse_timing, same_kernel
from cascade_formats.tracefiles import TraceError

FIXTURES = Path(__file__).parent / "timing"
VEC_ADD = "_Z6vecAddIfEvPT_S1_S1_i"
MULT = "_Z8mult_gpuIfEvPT_S1_S1_ii"
# The combo-vec-mm-xz trace: vecAdd, mult_gpu, vecAdd.
COMBO = [
    TraceKernel(uid=1, name=VEC_ADD, grid="1x1x1", block="1024x1x1", shmem=0, nregs=8, file="kernel-1.traceg"),
    TraceKernel(uid=2, name=MULT, grid="1x1x1", block="32x32x1", shmem=0, nregs=32, file="kernel-2.traceg.xz"),
    TraceKernel(uid=3, name=VEC_ADD, grid="1x1x1", block="1024x1x1", shmem=0, nregs=8, file="kernel-1.traceg"),
]
CASCADE_HEADER = "kernel_id,kernel_name,duration_ns\n"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def timed(text: str) -> list[RealTiming]:
    return line_up(parse_timing(text, "t.csv"), COMBO, "t.csv")


# --- Cascade's own layout ---------------------------------------------------------------------


def test_cascade_layout_sorted_by_kernel_id() -> None:
    text = (
        "\ufeffkernel_id,kernel_name,duration_ns\r\n"
        '3,"void foo<int, float>(int)",12.5\r\n'
        "\r\n"
        "1,_Z6vecAddIfEvPT_S1_S1_i,4096\r\n"
    )
    timing = parse_timing(text, "real_timing.csv")
    assert timing == Timing(
        "cascade",
        [[Launch(line=4, name=VEC_ADD, duration_ns=4096.0), Launch(line=2, name="void foo<int, float>(int)", duration_ns=12.5)]],
        ["duration_ns"],
    )


def test_header_only_is_no_timing() -> None:
    timing = parse_timing(CASCADE_HEADER, "real_timing.csv")
    assert timing.passes == [[]] and line_up(timing, COMBO, "real_timing.csv") == []


def test_cascade_layout_lined_up_with_the_trace() -> None:
    text = CASCADE_HEADER + f"10,{VEC_ADD},3232\n20,{MULT},5856\n30,vecAdd,3104\n"
    assert timed(text) == [
        RealTiming(kernel_id=1, kernel_name=VEC_ADD, duration_ns=3232.0),
        RealTiming(kernel_id=2, kernel_name=MULT, duration_ns=5856.0),
        RealTiming(kernel_id=3, kernel_name="vecAdd", duration_ns=3104.0),
    ]


def test_repeated_header_starts_a_repetition() -> None:
    text = CASCADE_HEADER + f"1,{VEC_ADD},3232\n2,{MULT},5856\n3,{VEC_ADD},3104\n" + CASCADE_HEADER + f"1,{VEC_ADD},3300\n2,{MULT},5800\n3,{VEC_ADD},3000\n"
    rows = timed(text)
    assert [(r.kernel_id, r.repeat, r.duration_ns) for r in rows] == [
        (1, 0, 3232.0), (2, 0, 5856.0), (3, 0, 3104.0), (1, 1, 3300.0), (2, 1, 5800.0), (3, 1, 3000.0),
    ]


def test_a_pass_may_stop_short_of_the_traces_end() -> None:
    # Two passes, the second cut after the first launch (ncu --launch-count 1).
    text = CASCADE_HEADER + f"1,{VEC_ADD},3232\n2,{MULT},5856\n" + CASCADE_HEADER + f"1,vecAdd,3300\n"
    assert [(r.kernel_id, r.repeat, r.duration_ns) for r in timed(text)] == [(1, 0, 3232.0), (2, 0, 5856.0), (1, 1, 3300.0)]


# --- Nsight Compute -----------------------------------------------------------------------------


def test_ncu_default_page() -> None:
    timing = parse_timing(fixture("ncu-details.csv"), "ncu.csv")
    assert (timing.format, timing.measures, len(timing.passes)) == ("ncu", ["duration_ns", "cycles"], 1)
    # usecond values scaled to ns; "4,580.50" has a thousands separator; the third in nsecond.
    assert [(r.kernel_id, r.duration_ns, r.cycles, r.repeat) for r in line_up(timing, COMBO, "ncu.csv")] == [
        (1, 3230.0, 4580.5, 0), (2, 5860.0, 8298.0, 0), (3, 3104.0, 4410.0, 0),
    ]


def test_ncu_raw_page_reads_as_the_default_page() -> None:
    raw = parse_timing(fixture("ncu-raw.csv"), "raw.csv")
    details = parse_timing(fixture("ncu-details.csv"), "details.csv")
    assert raw.format == "ncu"
    measured = lambda t: [(x.duration_ns, x.cycles) for x in t.passes[0]]  # noqa: E731
    assert measured(raw) == measured(details)
    assert [x.name for x in raw.passes[0]] == ["vecAdd", "mult_gpu", "vecAdd"]


# ncu-counters-*.csv: each counter's value per launch, in its base unit, the metrics in ncu's
# order (by name), as the files have them.
METRICS = sorted(c.metric for c in COUNTERS)
PER_LAUNCH = [
    (32, 16, 32, 0, 16, 0, 32, 0, 16, 0, 50.5, 344),
    (256, 128, 256, 0, 128, 0, 256, 0, 128, 0, 75.25, 4800),
    (0, 0, 32, 0, 16, 0, 32, 24, 16, 16, 48, 344),
]
COUNTED = {metric: [launch[i] for launch in PER_LAUNCH] for i, metric in enumerate(METRICS)}


@pytest.mark.parametrize("name", ["ncu-counters-details.csv", "ncu-counters-raw.csv"])
def test_ncu_counters_on_either_page(name: str) -> None:
    rows = timed(fixture(name))
    assert [(r.kernel_id, r.duration_ns, r.cycles) for r in rows] == [(1, 3230.0, 4580.5), (2, 5860.0, 8298.0), (3, 3104.0, 4410.0)]
    assert [r.counters for r in rows] == [{m: float(v[i]) for m, v in COUNTED.items()} for i in range(3)]


def test_ncu_counters_scaled_from_prefixed_units() -> None:
    rows = ncu_rows(
        (0, "vecAdd", "gpu__time_duration.sum", "ns", "3"),
        (0, "vecAdd", "smsp__inst_executed.sum", "Kinst", "4.8"),
        (0, "vecAdd", "dram__sectors_read.sum", "Msector", "1.5"),
    )
    assert [r.counters for r in timed(rows)] == [{"smsp__inst_executed.sum": 4800.0, "dram__sectors_read.sum": 1.5e6}]


def test_files_without_counters_have_none() -> None:
    assert all(r.counters is None for r in timed(fixture("ncu-details.csv")))
    assert all(r.counters is None for r in timed(CASCADE_HEADER + f"1,{VEC_ADD},5\n"))


def test_ncu_cycles_of_two_runs_concatenated() -> None:
    timing = parse_timing(fixture("ncu-cycles-2-passes.csv"), "cycles.csv")
    assert (timing.measures, len(timing.passes)) == (["cycles"], 2)
    rows = line_up(timing, COMBO, "cycles.csv")
    assert [(r.kernel_id, r.repeat, r.cycles, r.duration_ns) for r in rows] == [
        (1, 0, 4600.0, None), (2, 0, 8300.0, None), (3, 0, 4400.0, None),
        (1, 1, 4400.0, None), (2, 1, 8100.0, None), (3, 1, 4600.0, None),
    ]


def test_ncu_orders_launches_by_id() -> None:
    text = fixture("ncu-raw.csv").splitlines()
    header, units, rows = text[-5], text[-4], text[-3:]
    shuffled = "\n".join([header, units, rows[2], rows[0], rows[1]])
    assert [x.duration_ns for x in parse_timing(shuffled, "raw.csv").passes[0]] == [3230.0, 5860.0, 3104.0]


# --- Nsight Systems ---------------------------------------------------------------------------


def test_nsys_cuda_gpu_trace() -> None:
    timing = parse_timing(fixture("nsys-cuda-gpu-trace.csv"), "nsys.csv")
    assert (timing.format, timing.measures) == ("nsys", ["duration_ns"])
    # The five memory copies are left out.
    assert [(r.kernel_id, r.kernel_name, r.duration_ns) for r in line_up(timing, COMBO, "nsys.csv")] == [
        (1, "void vecAdd<float>(float *, float *, float *, int)", 3232.0),
        (2, "void mult_gpu<float>(float *, float *, float *, int, int)", 5856.0),
        (3, "void vecAdd<float>(float *, float *, float *, int)", 3104.0),
    ]


def test_nsys_orders_launches_by_corr_id() -> None:
    text = "Start (ns),Duration (ns),CorrId,Name\n900,30,12,mult_gpu\n100,20,11,vecAdd\n950,40,13,vecAdd\n"
    assert [x.duration_ns for x in parse_timing(text, "nsys.csv").passes[0]] == [20.0, 30.0, 40.0]


# --- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "profiled",
    [
        VEC_ADD,
        "vecAdd",
        "vecAdd<float>",
        "vecAdd(float*, float*, float*, int)",
        "vecAdd<float>(float*, float*, float*, int)",
        "void vecAdd<float>(float *, float *, float *, int)",
        "  void vecAdd<float>(float *, float *, float *, int) ",
    ],
)
def test_names_a_profiler_gives_vec_add(profiled: str) -> None:
    assert same_kernel(profiled, VEC_ADD)


def test_names_of_other_kernels() -> None:
    assert not same_kernel("mult_gpu<float>(float*, float*, float*, int, int)", VEC_ADD)
    assert not same_kernel("_Z6vecAddIdEvPT_S1_S1_i", VEC_ADD)  # another symbol, even of the same function
    assert not same_kernel("vecAdd2", VEC_ADD)
    assert same_kernel("void (anonymous namespace)::fill<float, 4>(float*)", "_ZN12_GLOBAL__N_14fillIfLi4EEEvPT_")


# --- refusals -----------------------------------------------------------------------------------

NCU_HEADER = '"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
NCU_RAW_HEADER = '"ID","Kernel Name","gpu__time_duration.sum"\n"","","nsecond"\n'
NSYS_HEADER = "Start (ns),Duration (ns),CorrId,Name\n"


TIMED = (0, "vecAdd", "gpu__time_duration.sum", "ns", "3")  # a launch's time, beside the counters of a case


def ncu_rows(*rows: tuple[int, str, str, str, str]) -> str:
    return NCU_HEADER + "".join(f'"{i}","1","{name}","{metric}","{unit}","{value}"\n' for i, name, metric, unit, value in rows)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "t.csv is empty; its first line must be kernel_id,kernel_name,duration_ns"),
        (
            "id,name,ns\n1,k,2\n",
            "t.csv has no header of a known layout (line 1 is 'id,name,ns'): expected kernel_id,kernel_name,duration_ns, "
            "Nsight Compute's CSV (ncu --csv, with gpu__time_duration.sum or gpc__cycles_elapsed.avg) "
            "or Nsight Systems' (nsys stats --report cuda_gpu_trace --format csv)",
        ),
        (CASCADE_HEADER + "1,k,2\nx,k,2\n", "t.csv line 3: kernel_id 'x' is not a non-negative whole number"),
        (CASCADE_HEADER + "-1,k,2\n", "t.csv line 2: kernel_id '-1' is not a non-negative whole number"),
        (CASCADE_HEADER + "1,k,-2\n", "t.csv line 2: duration_ns '-2' is not a non-negative number"),
        (CASCADE_HEADER + "1,k,nan\n", "t.csv line 2: duration_ns 'nan' is not a non-negative number"),
        (CASCADE_HEADER + "1,k,fast\n", "t.csv line 2: duration_ns 'fast' is not a non-negative number"),
        (CASCADE_HEADER + "1,void f<int, int>(),2\n", "t.csv line 2: expected 3 fields (kernel_id,kernel_name,duration_ns), found 4"),
        (CASCADE_HEADER + "1,k,2\n\n1,k,3\n", "t.csv line 4: kernel_id 1 already appears on line 2"),
        (CASCADE_HEADER + '1,"k,2\n', "t.csv line 2: unexpected end of data"),
        (
            CASCADE_HEADER + "1,k,2\n" + NSYS_HEADER,
            "t.csv line 3: a header unlike the one on line 1; every pass must be in one layout",
        ),
        (ncu_rows((0, "vecAdd", "gpu__time_duration.sum", "usecond", "n/a")), "t.csv line 2: gpu__time_duration.sum 'n/a' is not a non-negative number"),
        (
            ncu_rows((0, "vecAdd", "gpu__time_duration.sum", "minute", "3")),
            "t.csv line 2: unit 'minute' of durations is not one of nsecond, ns, usecond, us, msecond, ms, second, s",
        ),
        (ncu_rows((0, "vecAdd", "gpc__cycles_elapsed.avg", "hertz", "3")), "t.csv line 2: unit 'hertz' of cycle counts is not one of cycle, Kcycle, Mcycle, Gcycle"),
        (ncu_rows((-1, "vecAdd", "gpu__time_duration.sum", "ns", "3")), "t.csv line 2: ID '-1' is not a non-negative whole number"),
        (
            ncu_rows((0, "vecAdd", "gpu__time_duration.sum", "ns", "3"), (0, "vecAdd", "gpu__time_duration.sum", "ns", "4")),
            "t.csv line 3: a second duration of the launch on line 2",
        ),
        (
            ncu_rows((0, "vecAdd", "gpu__time_duration.sum", "ns", "3"), (0, "mult_gpu", "gpc__cycles_elapsed.avg", "cycle", "4")),
            "t.csv line 3: ID 0 is 'mult_gpu' here but 'vecAdd' on line 2",
        ),
        (
            ncu_rows((0, "vecAdd", "gpu__time_duration.sum", "ns", "3"), (1, "mult_gpu", "gpc__cycles_elapsed.avg", "cycle", "4")),
            "t.csv line 2: 'vecAdd' has no cycle count, which other launches have",
        ),
        (
            ncu_rows((0, "vecAdd", "sm__cycles_elapsed.sum", "cycle", "3")),
            "t.csv: no launch has a gpu__time_duration.sum or gpc__cycles_elapsed.avg value; "
            "profile with --metrics gpu__time_duration.sum,gpc__cycles_elapsed.avg",
        ),
        (NCU_HEADER + '"0","1","vecAdd","gpu__time_duration.sum"\n', "t.csv line 2: 4 fields, where the header on line 1 has 6"),
        (
            '"ID","Kernel Name","sm__cycles_elapsed.sum"\n',
            "t.csv line 1: Nsight Compute's raw page without a gpu__time_duration.sum or gpc__cycles_elapsed.avg column; "
            "profile with --metrics gpu__time_duration.sum,gpc__cycles_elapsed.avg",
        ),
        (NCU_RAW_HEADER + '"0","vecAdd","3"\n"0","vecAdd","4"\n', "t.csv line 4: a second duration of the launch on line 3"),
        ('"ID","Kernel Name","gpu__time_duration.sum"\n"","","fortnight"\n', "t.csv line 2: unit 'fortnight' of durations is not one of nsecond, ns, usecond, us, msecond, ms, second, s"),
        (
            ncu_rows(TIMED, (0, "vecAdd", "lts__t_sectors_srcunit_tex_op_read.sum", "byte", "32")),
            "t.csv line 3: unit 'byte' of lts__t_sectors_srcunit_tex_op_read.sum is not one of sector, Ksector, Msector, Gsector",
        ),
        (
            ncu_rows(TIMED, (0, "vecAdd", "sm__warps_active.avg.pct_of_peak_sustained_active", "K%", "3")),
            "t.csv line 3: unit 'K%' of sm__warps_active.avg.pct_of_peak_sustained_active is not one of %",
        ),
        (
            ncu_rows(TIMED, (0, "vecAdd", "smsp__inst_executed.sum", "inst", "n/a")),
            "t.csv line 3: smsp__inst_executed.sum 'n/a' is not a non-negative number",
        ),
        (
            ncu_rows(TIMED, (0, "vecAdd", "smsp__inst_executed.sum", "inst", "3"), (0, "vecAdd", "smsp__inst_executed.sum", "inst", "3")),
            "t.csv line 4: a second smsp__inst_executed.sum of the launch on line 2",
        ),
        (
            ncu_rows(
                (0, "vecAdd", "gpu__time_duration.sum", "ns", "3"), (1, "mult_gpu", "gpu__time_duration.sum", "ns", "4"),
                (1, "mult_gpu", "dram__sectors_read.sum", "sector", "8"),
            ),
            "t.csv line 2: 'vecAdd' has no dram__sectors_read.sum, which the launch on line 3 has; profile every launch with the same metrics",
        ),
        (
            '"ID","Kernel Name","gpu__time_duration.sum","dram__sectors_write.sum"\n"","","nsecond","byte"\n',
            "t.csv line 2: unit 'byte' of dram__sectors_write.sum is not one of sector, Ksector, Msector, Gsector",
        ),
        ('"ID","Kernel Name","gpu__time_duration.sum","dram__sectors_write.sum"\n"0","vecAdd","3","many"\n', "t.csv line 2: dram__sectors_write.sum 'many' is not a non-negative number"),
        (NSYS_HEADER + "100,ten,11,vecAdd\n", "t.csv line 2: Duration (ns) 'ten' is not a non-negative number"),
        (NSYS_HEADER + "100,10,x,vecAdd\n", "t.csv line 2: CorrId 'x' is not a non-negative number"),
        (NSYS_HEADER + "100,10,vecAdd\n", "t.csv line 2: 3 fields, where the header on line 1 has 4"),
    ],
)
def test_malformed_files(text: str, message: str) -> None:
    with pytest.raises(TraceError) as error:
        parse_timing(text, "t.csv")
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            CASCADE_HEADER + f"1,{VEC_ADD},1\n2,{MULT},2\n3,{VEC_ADD},3\n4,{VEC_ADD},4\n",
            "t.csv: the pass from line 2 has 4 kernel launches, the trace 3; "
            "profile the program and input the trace was made of, and keep the launches it traced",
        ),
        (
            CASCADE_HEADER + f"1,{VEC_ADD},1\n2,{MULT},2\n3,{VEC_ADD},3\n" + CASCADE_HEADER,
            "t.csv: pass 2 (2 passes) has 0 kernel launches, the trace 3; "
            "profile the program and input the trace was made of, and keep the launches it traced",
        ),
        (
            NSYS_HEADER + "1,10,11,vecAdd\n2,10,12,vecAdd\n3,10,13,mult_gpu\n",
            "t.csv line 3: launch 2 is 'vecAdd', but the trace's kernel 2 is '_Z8mult_gpuIfEvPT_S1_S1_ii' (mult_gpu); "
            "a pass holds the trace's launches in order, from its first",
        ),
    ],
)
def test_files_that_are_not_the_traces_launches(text: str, message: str) -> None:
    with pytest.raises(TraceError) as error:
        timed(text)
    assert str(error.value) == message
