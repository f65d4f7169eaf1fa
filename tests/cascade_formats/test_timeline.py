"""Tests for cascade_formats.timeline: the reference's worked example, properties, bad input."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import re
import statistics
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cascade_cli.timeline_cli import summary_text
from cascade_formats.kernel_stats import HEADER, kernel_times_from_csv
from cascade_formats.timeline import (
    Kernel,
    Request,
    SimStepTimeline,
    Step,
    StepTimeline,
    TimelineError,
    step_timeline,
    validate_timeline,
)


def _load_fixture() -> ModuleType:
    # Tests run with --import-mode=importlib, which puts no test directory on sys.path.
    path = Path(__file__).with_name("timeline_fixture.py")
    spec = importlib.util.spec_from_file_location("timeline_fixture", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fx = _load_fixture()

# The first SimStepTimeline of the runs API reference's step-timelines example, verbatim,
# "/* N more items trimmed */" comments included.
REFERENCE = r"""
{
  "sim_id": "sim-1047ddbdf5b1",
  "gpu_config": "SM86_RTX3070",
  "replica": 0,
  "simulated": {
    "meta": {
      "run_name": "offline-h100-derived-fixture",
      "model": "facebook/opt-125m",
      "prompt": "Hello, my name is",
      "max_tokens": 4,
      "repeats": 1,
      "exec_mode": "eager",
      "gpu_name": "NVIDIA H100 80GB HBM3",
      "sm_clock_mhz_median": 1980,
      "mem_clock_mhz": 3106,
      "vllm_version": "fixture-unknown",
      "layerwise_nvtx": false,
      "fixture_provenance": "Actual nsys kernel names/dimensions/durations and simulator cycles; synthetic phase assignment, baseline/profiled walls, queue/API values and rescaled gaps. Not a real corrected_timeline capture. Synthetic consistent absolute step/request timestamps and baseline inter-step gaps added for gap-aware replay."
    },
    "steps": [
      {
        "step": -1,
        "repeat": -1,
        "warmup": true,
        "kind": "prefill",
        "num_reqs": 1,
        "num_scheduled_tokens": 6,
        "baseline_wall_ns": 9000000,
        "profiled_wall_ns": null,
        "gpu_busy_ns": null,
        "cuda_api_ns": null,
        "host_ns": null,
        "kernels": [],
        "baseline_wall_start_ns": 100000000,
        "baseline_wall_end_ns": 109000000,
        "baseline_gap_before_ns": null,
        "profiled_wall_start_ns": null,
        "profiled_wall_end_ns": null,
        "profiled_gap_before_ns": null
      },
      {
        "step": 0,
        "repeat": 0,
        "warmup": false,
        "kind": "prefill",
        "num_reqs": 1,
        "num_scheduled_tokens": 6,
        "baseline_wall_ns": 6507260.692579505,
        "profiled_wall_ns": 6507260.692579505,
        "gpu_busy_ns": 544095.6925795053,
        "cuda_api_ns": null,
        "host_ns": 5963165,
        "kernels": [
          {
            "seq": 536,
            "name": "_ZN8cublasLt19splitKreduce_kernelILi32ELi16Eif6__halffS1_Lb0EfS1_S1_Lb1ELb1ELb0ELb0EEEvNS_18cublasSplitKParamsIT4_EEPKT2_PKT8_PT7_PT3_PKS3_SG_PKT9_S7_PSH_PvlPS3_PiSM_SM_SG_SG_SG_SG_SG_",
            "grid": "24x1x1",
            "block": "32x16x1",
            "duration_ns": 2016,
            "start_offset_ns": 108088.07402640952
          },
          {
            "seq": 537,
            "name": "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_15CUDAFunctor_addIN3c104HalfEEESt5arrayIPcLm3EEEEviT0_T1_",
            "grid": "5x1x1",
            "block": "128x1x1",
            "duration_ns": 1376,
            "start_offset_ns": 150410.8374180178
          }
          /* 150 more items trimmed */
        ],
        "baseline_wall_start_ns": 1000200000,
        "baseline_wall_end_ns": 1006707260.6925795,
        "baseline_gap_before_ns": null,
        "profiled_wall_start_ns": 1000200000,
        "profiled_wall_end_ns": 1006707260.6925795,
        "profiled_gap_before_ns": null
      }
      /* 3 more items trimmed */
    ],
    "requests": [
      {
        "repeat": -1,
        "warmup": true,
        "queued_ms": 0,
        "ttft_ms": 9,
        "itl_ms_mean": null,
        "itl_ms_p50": null,
        "e2e_ms": 9,
        "num_output_tokens": 1
      },
      {
        "repeat": 0,
        "warmup": false,
        "queued_ms": 0.2,
        "ttft_ms": 6.707260692579508,
        "itl_ms_mean": 5.79187032508834,
        "itl_ms_p50": 5.65,
        "e2e_ms": 24.082871667844532,
        "num_output_tokens": 4,
        "arrival_ns": 1000000000,
        "pre_first_step_ns": 200000,
        "post_last_step_ns": 0,
        "first_step_start_ns": 1000200000,
        "last_step_end_ns": 1024082871.6678445,
        "first_token_ns": 1006707260.6925795,
        "last_token_ns": 1024082871.6678445
      }
    ],
    "summary": {
      "simulation": {
        "host_model": "scaled-gaps",
        "host_fit": {},
        "coverage": {
          "kernels": 683,
          "simulated_kernels": 6,
          "kernel_fraction": 0.008784773060029283,
          "gpu_time_fraction": 0.011172026136868988,
          "measured_gpu_ns": 2228423.0,
          "covered_measured_gpu_ns": 24896.0,
          "unmodeled_gpu_ns": 0.0,
          "steps": [
            {
              "repeat": 0,
              "step": 0,
              "kernels": 152,
              "simulated_kernels": 5,
              "measured_gpu_ns": 536835,
              "simulated_coverage_gpu_ns": 20128.0,
              "unmodeled_gpu_ns": 0,
              "measured_kernel_overlap_ns": 0.0
            },
            {
              "repeat": 0,
              "step": 1,
              "kernels": 177,
              "simulated_kernels": 1,
              "measured_gpu_ns": 564801,
              "simulated_coverage_gpu_ns": 4768.0,
              "unmodeled_gpu_ns": 0,
              "measured_kernel_overlap_ns": 0.0
            }
            /* 2 more items trimmed */
          ]
        },
        "request_assumption": "one request per repeat; queued (or arrival) + pre/steps/inter-step gaps/post",
        "gap_model": "measured",
        "gap_fit": {}
      },
      "per_kind": {
        "prefill": {
          "steps": 1,
          "wall_ns_mean": 6507260.692579505,
          "gpu_busy_ns_mean": 544095.6925795053
        },
        "decode": {
          "steps": 3,
          "wall_ns_mean": 4791870.325088339,
          "gpu_busy_ns_mean": 575732.9917550059,
          "gap_before_ns": {
            "n": 3,
            "mean": 1000000,
            "p50": 1000000,
            "p95": 1180000.0
          }
        }
      }
    }
  },
  "compare": {
    "steps": [
      {
        "repeat": 0,
        "step": 0,
        "kind": "prefill",
        "wall_ns": {
          "real": 6500000,
          "simulated": 6507260.692579505,
          "error": 7260.692579505034,
          "error_pct": 0.1117029627616159
        },
        "gpu_busy_ns": {
          "real": 536835,
          "simulated": 544095.6925795053,
          "error": 7260.692579505267,
          "error_pct": 1.3524998518176472
        }
      },
      {
        "repeat": 0,
        "step": 1,
        "kind": "decode",
        "wall_ns": {
          "real": 4790000,
          "simulated": 4825610.975265018,
          "error": 35610.97526501771,
          "error_pct": 0.7434441600212466
        },
        "gpu_busy_ns": {
          "real": 564801,
          "simulated": 600411.9752650177,
          "error": 35610.97526501771,
          "error_pct": 6.3050481966246
        }
      }
      /* 2 more items trimmed */
    ],
    "requests": [
      {
        "repeat": 0,
        "ttft_ms": {
          "real": 6.7,
          "simulated": 6.707260692579508,
          "error": 0.00726069257950801,
          "error_pct": 0.10836854596280611
        },
        "itl_ms_mean": {
          "real": 5.78,
          "simulated": 5.79187032508834,
          "error": 0.011870325088339406,
          "error_pct": 0.20536894616504162
        },
        "itl_ms_p50": {
          "real": 5.65,
          "simulated": 5.65,
          "error": 0.0,
          "error_pct": 0.0
        },
        "e2e_ms": {
          "real": 24.04,
          "simulated": 24.082871667844532,
          "error": 0.042871667844533334,
          "error_pct": 0.1783347248108708
        }
      }
    ],
    "summary": {
      "wall_ns": {
        "count": 4,
        "mean_error": 10717.916961130686,
        "mean_abs_error": 10717.916961130686,
        "p50_abs_error": 3630.346289752517,
        "p95_abs_error": 31358.4328621908,
        "mean_error_pct": 0.2137867806957156,
        "mean_abs_error_pct": 0.2137867806957156,
        "p50_abs_error_pct": 0.05585148138080795,
        "p95_abs_error_pct": 0.6486829804323018
      },
      "gpu_busy_ns": {
        "count": 4,
        "mean_error": 10717.916961130744,
        "mean_abs_error": 10717.916961130744,
        "p50_abs_error": 3630.3462897526333,
        "p95_abs_error": 31358.432862190835,
        "mean_error_pct": 1.914387012110562,
        "mean_abs_error_pct": 1.914387012110562,
        "p50_abs_error_pct": 0.6762499259088236,
        "p95_abs_error_pct": 5.562165944903556
      }
    }
  }
}
"""
_TRIMMED = re.compile(r"\s*/\* (\d+) more items trimmed \*/")
_TRIM_KEY = "__trimmed__"


def _reference() -> dict[str, Any]:
    """The reference as JSON, each trimmed tail kept as a {"__trimmed__": N} last item."""
    return json.loads(_TRIMMED.sub(rf', {{"{_TRIM_KEY}": \1}}', REFERENCE))


def _plain(value: object) -> Any:
    """Encoded and decoded again, so ints and floats are as the JSON has them."""
    return json.loads(msgspec.json.encode(value))


def _assert_matches(actual: Any, expected: Any, path: str = "$") -> None:
    """Equal to the bit, same int/float typing, same key order; trimmed lists by length."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        assert list(actual) == list(expected), f"{path}: keys"
        for key, value in expected.items():
            _assert_matches(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), path
        shown, hidden = expected, 0
        if expected and isinstance(expected[-1], dict) and _TRIM_KEY in expected[-1]:
            shown, hidden = expected[:-1], expected[-1][_TRIM_KEY]
        assert len(actual) == len(shown) + hidden, f"{path}: length"
        for i, value in enumerate(shown):
            _assert_matches(actual[i], value, f"{path}[{i}]")
    else:
        # json.dumps tells 1 from 1.0 and prints floats round-trip exactly.
        assert json.dumps(actual) == json.dumps(expected), f"{path}: {actual!r} != {expected!r}"


def _reference_run() -> SimStepTimeline:
    timeline = validate_timeline(msgspec.json.encode(fx.build_timeline()), fx.TRACE_KERNEL_COUNT)
    sim_ns = kernel_times_from_csv(fx.sim_cycles_csv(), fx.CLOCK_MHZ)
    return step_timeline("sim-1047ddbdf5b1", "SM86_RTX3070", 0, timeline, sim_ns)


REFERENCE_PARTS = [
    "sim_id",
    "gpu_config",
    "replica",
    "simulated.meta",
    "simulated.steps",
    "simulated.requests",
    "simulated.summary.simulation.coverage",
    "simulated.summary.simulation",
    "simulated.summary.per_kind",
    "compare.steps",
    "compare.requests",
    "compare.summary",
]


def _part(value: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        value = value[key]
    return value


@pytest.mark.parametrize("part", REFERENCE_PARTS)
def test_reproduces_reference_example(part: str) -> None:
    actual, expected = _plain(_reference_run()), _reference()
    _assert_matches(_part(actual, part), _part(expected, part), part)


def test_reproduces_reference_example_whole() -> None:
    _assert_matches(_plain(_reference_run()), _reference())


def test_reference_sim_times_and_total_cycles() -> None:
    # The reference's kernel list prints uids 1-3 with these sim_time_ns, and the sim's
    # gpu_tot_sim_cycle (76713) is the six kernels' cycles.
    sim_ns = kernel_times_from_csv(fx.sim_cycles_csv(), fx.CLOCK_MHZ)
    assert [sim_ns[uid] for uid in (1, 2, 3)] == [5454.063604240282, 5232.332155477032, 5491.166077738516]
    assert sum(fx.SIM_CYCLES.values()) == 76713


def test_fixture_matches_spec_totals() -> None:
    timeline = fx.build_timeline()
    steps = [step for step in timeline.steps if not step.warmup]
    assert [len(step.kernels) for step in steps] == [152, 177, 177, 177]
    assert [sum(k.duration_ns for k in step.kernels) for step in steps] == [s.gpu_busy_ns for s in steps]
    covered = [[k for k in step.kernels if k.trace_kernel_uid is not msgspec.UNSET] for step in steps]
    assert [sum(k.duration_ns for k in ks) for ks in covered] == [20128, 4768, 0, 0]
    assert steps[2].gpu_busy_ns + steps[3].gpu_busy_ns == 1126787
    for step in steps:  # every kernel inside its step's wall
        assert all(0 <= k.start_offset_ns and k.start_offset_ns + k.duration_ns <= step.baseline_wall_ns for k in step.kernels)


def test_sample_file_is_the_fixture_with_honest_provenance() -> None:
    raw = fx.SAMPLE_PATH.read_bytes()
    assert raw == fx.sample_json(), "rerun tests/cascade_formats/timeline_fixture.py"
    timeline = validate_timeline(raw, fx.TRACE_KERNEL_COUNT)
    assert timeline.meta["fixture_provenance"] == fx.SAMPLE_PROVENANCE
    sim_ns = kernel_times_from_csv(fx.sim_cycles_csv(), fx.CLOCK_MHZ)
    actual = _plain(step_timeline("sim-1047ddbdf5b1", "SM86_RTX3070", 0, timeline, sim_ns))
    expected = _reference()
    expected["simulated"]["meta"]["fixture_provenance"] = fx.SAMPLE_PROVENANCE
    _assert_matches(actual, expected)


def test_summary_text() -> None:
    text = summary_text(_reference_run())
    assert "6 of 683 kernels simulated" in text
    assert "1.12% of measured GPU time" in text
    assert "TTFT     6.707 ms simulated vs 6.700 ms real (+0.11%)" in text
    assert "ITL mean 5.792 ms simulated vs 5.780 ms real (+0.21%)" in text
    assert "e2e      24.083 ms simulated vs 24.040 ms real (+0.18%)" in text
    assert "mean error +10.72 us (+0.21%) over 4 steps" in text


# --- Properties on random small timelines -------------------------------------------------

KERNEL_COUNT = 6
ns = st.integers(0, 2_000_000)


@st.composite
def kernels(draw: st.DrawFn, first_seq: int) -> list[Kernel]:
    count = draw(st.integers(0, 4))
    return [
        Kernel(
            seq=first_seq + i,
            name=f"k{i}",
            grid="1x1x1",
            block="32x1x1",
            duration_ns=draw(st.integers(0, 100_000)),
            # Offsets are free, so kernels may overlap: that exercises the overlap sums.
            start_offset_ns=draw(st.integers(0, 200_000)),
            trace_kernel_uid=draw(st.one_of(st.just(msgspec.UNSET), st.integers(1, KERNEL_COUNT))),
        )
        for i in range(count)
    ]


@st.composite
def timelines(draw: st.DrawFn) -> StepTimeline:
    """Valid timelines whose measured request metrics agree with their step timestamps."""
    steps: list[Step] = []
    requests: list[Request] = []
    if draw(st.booleans()):
        steps.append(fx.WARMUP_STEP)
        requests.append(fx.WARMUP_REQUEST)
    clock, seq = draw(st.integers(0, 2_000_000_000)), 0
    for repeat in range(draw(st.integers(1, 2))):
        arrival, pre, post = clock, draw(ns), draw(ns)
        start, ends = arrival + pre, []
        for index in range(draw(st.integers(1, 4))):
            gap = None if index == 0 else draw(ns)
            start += gap or 0
            step_kernels = draw(kernels(seq))
            seq += len(step_kernels) + 1
            busy = draw(st.one_of(st.none(), ns))
            wall = draw(ns)
            steps.append(
                Step(
                    step=index,
                    repeat=repeat,
                    warmup=False,
                    kind="prefill" if index == 0 else "decode",
                    num_reqs=1,
                    num_scheduled_tokens=1,
                    baseline_wall_ns=wall,
                    profiled_wall_ns=wall,
                    gpu_busy_ns=busy,
                    cuda_api_ns=None,
                    kernels=step_kernels,
                    baseline_wall_start_ns=start,
                    baseline_wall_end_ns=start + wall,
                    # Sometimes left out: the gap is then the measured start minus previous end.
                    baseline_gap_before_ns=gap if draw(st.booleans()) else None,
                    profiled_wall_start_ns=None,
                    profiled_wall_end_ns=None,
                    profiled_gap_before_ns=None,
                )
            )
            start += wall
            ends.append(start)
        tokens = len(ends)
        intervals = [b - a for a, b in zip(ends, ends[1:])]
        requests.append(
            Request(
                repeat=repeat,
                warmup=False,
                queued_ms=pre / 1e6,
                ttft_ms=(ends[0] - arrival) / 1e6,
                itl_ms_mean=(ends[-1] - ends[0]) / (tokens - 1) / 1e6 if tokens > 1 else None,
                itl_ms_p50=statistics.median(intervals) / 1e6 if intervals else None,
                e2e_ms=(ends[-1] + post - arrival) / 1e6,
                num_output_tokens=tokens,
                arrival_ns=arrival,
                pre_first_step_ns=pre,
                post_last_step_ns=post,
                first_step_start_ns=arrival + pre,
                last_step_end_ns=ends[-1],
                first_token_ns=ends[0],
                last_token_ns=ends[-1],
            )
        )
        clock = ends[-1] + post + draw(ns)
    # Through the validator, which must accept everything this strategy builds.
    raw = msgspec.json.encode(StepTimeline(meta={"run_name": "hypothesis"}, steps=steps, requests=requests))
    return validate_timeline(raw, KERNEL_COUNT)


sim_times = st.dictionaries(
    st.integers(1, KERNEL_COUNT), st.floats(0, 1e6, allow_nan=False, allow_infinity=False)
)


def _non_warmup(items: list[Any]) -> list[Any]:
    return [item for item in items if not item.warmup]


@settings(max_examples=200)
@given(timelines())
def test_no_covered_kernel_reproduces_the_measured_run(timeline: StepTimeline) -> None:
    tl = step_timeline("sim", "cfg", 0, timeline, {})
    for real, sim in zip(_non_warmup(timeline.steps), _non_warmup(tl.simulated.steps), strict=True):
        assert sim.baseline_wall_ns == real.baseline_wall_ns
        busy = real.gpu_busy_ns
        if busy is None:  # the fallback: kernel time with overlaps counted once
            busy = sum(k.duration_ns for k in real.kernels) - _union_overlap(real.kernels)
        assert sim.gpu_busy_ns == busy
        assert (sim.baseline_wall_start_ns, sim.baseline_wall_end_ns) == (
            real.baseline_wall_start_ns,
            real.baseline_wall_end_ns,
        )
        assert sim.kernels == real.kernels
    for real, sim in zip(_non_warmup(timeline.requests), _non_warmup(tl.simulated.requests), strict=True):
        for field in ("ttft_ms", "itl_ms_mean", "itl_ms_p50", "e2e_ms"):
            assert getattr(sim, field) == getattr(real, field), field
    metrics = [m for s in tl.compare.steps for m in (s.wall_ns, s.gpu_busy_ns)]
    metrics += [m for r in tl.compare.requests for m in (r.ttft_ms, r.itl_ms_mean, r.itl_ms_p50, r.e2e_ms)]
    for metric in metrics:
        if metric.real is None:
            assert metric.error is None
        else:
            assert metric.error == 0
            assert metric.error_pct in (0, None)  # null when the real value is 0


def _union_overlap(kernels: list[Kernel]) -> float:
    """Σ durations − the union of the intervals, computed the textbook way."""
    union, reach = 0, -math.inf
    for k in sorted(kernels, key=lambda k: k.start_offset_ns):
        end = k.start_offset_ns + k.duration_ns
        union += max(0, end - max(k.start_offset_ns, reach))
        reach = max(reach, end)
    return sum(k.duration_ns for k in kernels) - union


@settings(max_examples=200)
@given(timelines(), sim_times, st.data())
def test_a_slower_kernel_never_shortens_ttft_or_e2e(
    timeline: StepTimeline, sim_ns: dict[int, float], data: st.DataObject
) -> None:
    uids = sorted(
        {k.trace_kernel_uid for s in _non_warmup(timeline.steps) for k in s.kernels} - {msgspec.UNSET}
    )
    assume(uids)
    uid = data.draw(st.sampled_from(uids))
    times = st.floats(0, 1e6, allow_nan=False)
    sim_ns = sim_ns | {uid: sim_ns[uid] if uid in sim_ns else data.draw(times)}  # covered in both
    slower = sim_ns | {uid: sim_ns[uid] + data.draw(times)}
    base = _non_warmup(step_timeline("s", "c", 0, timeline, sim_ns).simulated.requests)
    slow = _non_warmup(step_timeline("s", "c", 0, timeline, slower).simulated.requests)
    for before, after in zip(base, slow, strict=True):
        assert after.ttft_ms >= before.ttft_ms
        assert after.e2e_ms >= before.e2e_ms


@settings(max_examples=200)
@given(timelines(), sim_times)
def test_e2e_is_ttft_plus_itl_plus_post(timeline: StepTimeline, sim_ns: dict[int, float]) -> None:
    for request in _non_warmup(step_timeline("s", "c", 0, timeline, sim_ns).simulated.requests):
        if request.num_output_tokens < 2:
            assert request.itl_ms_mean is None
            continue
        lhs = request.e2e_ms - request.ttft_ms - request.post_last_step_ns / 1e6
        rhs = (request.num_output_tokens - 1) * request.itl_ms_mean
        assert math.isclose(lhs, rhs, rel_tol=1e-9, abs_tol=1e-6)


# --- Bad step_timeline.json -------------------------------------------------------------


def _fixture_json() -> dict[str, Any]:
    return json.loads(msgspec.json.encode(fx.build_timeline()))


def _validate(doc: Any) -> StepTimeline:
    return validate_timeline(json.dumps(doc).encode(), fx.TRACE_KERNEL_COUNT)


def _raises(doc: Any, message: str) -> None:
    with pytest.raises(TimelineError) as info:
        _validate(doc)
    assert str(info.value) == f"step_timeline.json: {message}"


def test_fixture_is_valid() -> None:
    assert _validate(_fixture_json()) == fx.build_timeline()


def test_not_json() -> None:
    with pytest.raises(TimelineError, match=r"^step_timeline\.json: not valid JSON: "):
        validate_timeline(b'{"meta": {', fx.TRACE_KERNEL_COUNT)


def test_missing_field() -> None:
    doc = _fixture_json()
    del doc["steps"][2]["baseline_wall_ns"]
    _raises(doc, "steps[2].baseline_wall_ns is missing")


def test_missing_top_level_field() -> None:
    doc = _fixture_json()
    del doc["requests"]
    _raises(doc, "requests is missing")


def test_wrong_types() -> None:
    doc = _fixture_json()
    doc["steps"][1]["kernels"][0]["duration_ns"] = "2016"
    _raises(doc, "steps[1].kernels[0].duration_ns must be number, got str")
    doc = _fixture_json()
    doc["steps"][1]["gpu_busy_ns"] = True
    _raises(doc, "steps[1].gpu_busy_ns must be number or null, got bool")
    _raises([], "the top level must be object, got array")


def test_negative_duration() -> None:
    doc = _fixture_json()
    doc["steps"][3]["kernels"][12]["duration_ns"] = -5
    _raises(doc, "steps[3].kernels[12].duration_ns must be >= 0, got -5")


def test_negative_wall() -> None:
    doc = _fixture_json()
    doc["steps"][2]["baseline_wall_ns"] = -1.5
    _raises(doc, "steps[2].baseline_wall_ns must be >= 0, got -1.5")


@pytest.mark.parametrize("uid", [0, fx.TRACE_KERNEL_COUNT + 1])
def test_trace_kernel_uid_out_of_range(uid: int) -> None:
    doc = _fixture_json()
    doc["steps"][1]["kernels"][3]["trace_kernel_uid"] = uid
    _raises(
        doc,
        f"steps[1].kernels[3].trace_kernel_uid must be between 1 and {fx.TRACE_KERNEL_COUNT} "
        f"(the trace's kernel count), got {uid}",
    )


def test_step_numbers_out_of_order() -> None:
    doc = _fixture_json()
    doc["steps"][3]["step"] = 1
    _raises(doc, "steps[3].step must be greater than 1 (the previous step of repeat 0), got 1")


def test_step_start_goes_backwards() -> None:
    doc = _fixture_json()
    doc["steps"][3]["baseline_wall_start_ns"] = doc["steps"][2]["baseline_wall_start_ns"] - 1
    _raises(
        doc,
        "steps[3].baseline_wall_start_ns must not be before 1007500000 (the start of step 1), "
        "got 1007499999",
    )


def test_warmup_steps_take_no_part_in_ordering() -> None:
    doc = _fixture_json()
    doc["steps"].append(doc["steps"].pop(0))  # the warmup step (-1) after step 3
    _validate(doc)


def test_kernels_out_of_seq_order() -> None:
    doc = _fixture_json()
    doc["steps"][1]["kernels"][1]["seq"] = 536
    _raises(doc, "steps[1].kernels[1].seq must be greater than 536 (the previous kernel's), got 536")


def test_non_warmup_request_needs_its_timestamps() -> None:
    doc = _fixture_json()
    del doc["requests"][1]["arrival_ns"]
    _raises(doc, "requests[1].arrival_ns is missing (non-warmup requests need it)")


def test_one_request_per_repeat() -> None:
    doc = _fixture_json()
    doc["requests"].append(doc["requests"][1])
    _raises(doc, "requests[2].repeat 0 already has a non-warmup request (one request per repeat)")


def test_request_for_a_repeat_without_steps() -> None:
    doc = _fixture_json()
    doc["requests"][1]["repeat"] = 7
    _raises(doc, "requests[1].repeat 7 has no non-warmup step")


# --- kernel-stats.csv ---------------------------------------------------------------------


@given(
    st.dictionaries(st.integers(1, 10**6), st.integers(0, 10**12), max_size=20),
    st.floats(1, 5000, allow_nan=False),
)
def test_kernel_times_round_trip(cycles: dict[int, int], clock_mhz: float) -> None:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for uid, cycle in cycles.items():
        writer.writerow([uid, "_Z6kernel,with\"odd\"chars", cycle, 123, 0.5])
    assert kernel_times_from_csv(out.getvalue(), clock_mhz) == {
        uid: cycle / clock_mhz * 1000 for uid, cycle in cycles.items()
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "kernel-stats.csv: header must be uid,name,gpu_sim_cycle,gpu_sim_insn,ipc, got nothing"),
        ("uid,name,cycles\n", "kernel-stats.csv: header must be uid,name,gpu_sim_cycle,gpu_sim_insn,ipc, got uid,name,cycles"),
        ("uid,name,gpu_sim_cycle,gpu_sim_insn,ipc\n1,k,10,1\n", "kernel-stats.csv line 2: expected 5 columns, got 4"),
        ("uid,name,gpu_sim_cycle,gpu_sim_insn,ipc\n1,k,ten,1,1\n", "kernel-stats.csv line 2: gpu_sim_cycle must be an integer, got 'ten'"),
        ("uid,name,gpu_sim_cycle,gpu_sim_insn,ipc\n0,k,10,1,1\n", "kernel-stats.csv line 2: uid must be >= 1, got 0"),
        ("uid,name,gpu_sim_cycle,gpu_sim_insn,ipc\n1,k,-3,1,1\n", "kernel-stats.csv line 2: gpu_sim_cycle must be >= 0, got -3"),
        ("uid,name,gpu_sim_cycle,gpu_sim_insn,ipc\n1,k,10,1,1\n1,k,11,1,1\n", "kernel-stats.csv line 3: uid 1 appears twice"),
    ],
)
def test_kernel_times_bad_rows(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        kernel_times_from_csv(text, 1132)
    assert str(info.value) == message


def test_kernel_times_bad_clock() -> None:
    with pytest.raises(ValueError, match="clock_mhz must be > 0"):
        kernel_times_from_csv("uid,name,gpu_sim_cycle,gpu_sim_insn,ipc\n", 0)
