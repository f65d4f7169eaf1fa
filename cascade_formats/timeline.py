"""Rebuild a serving run's step timeline from simulated kernel times.

A trace may come with `step_timeline.json`, the profiler's capture of a real LLM serving run:
engine steps with their kernels, and one request per repeat. For one sim, the covered kernels
(those linked to a trace kernel the sim finished, by `trace_kernel_uid`) take their simulated
times, each step's wall grows or shrinks by its covered kernels' deltas, steps are re-placed
with their measured gaps, and the request metrics are recomputed. The model and its
arithmetic are fixed by the spec's step-timeline.md; the output is the API's SimStepTimeline.

Numbers keep the type they had (an untouched int stays an int in the JSON), because the API
reference prints ints and floats distinctly and the output must match it byte for byte.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from cascade_formats import json_depth

# An int stays an int through decode and encode; msgspec keeps the union's member types.
Num = int | float

TIMELINE_FILE = "step_timeline.json"
HOST_MODEL = "scaled-gaps"
GAP_MODEL = "measured"
REQUEST_ASSUMPTION = "one request per repeat; queued (or arrival) + pre/steps/inter-step gaps/post"


class TimelineError(ValueError):
    """A malformed step_timeline.json; the message names the first bad field."""


# --- The measured timeline (input), also the shape of the simulated one -------------------


class Kernel(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    name: str
    grid: str
    block: str
    duration_ns: Num
    start_offset_ns: Num
    # Only kernels also traced for Accel-Sim have one; UNSET keeps it out of the output too.
    trace_kernel_uid: int | UnsetType = UNSET


class Step(msgspec.Struct, frozen=True, kw_only=True):
    step: int
    repeat: int
    warmup: bool
    kind: str
    num_reqs: int
    num_scheduled_tokens: int
    baseline_wall_ns: Num
    profiled_wall_ns: Num | None
    gpu_busy_ns: Num | None
    cuda_api_ns: Num | None
    host_ns: Num | None = None
    kernels: list[Kernel]
    baseline_wall_start_ns: Num
    baseline_wall_end_ns: Num
    baseline_gap_before_ns: Num | None
    profiled_wall_start_ns: Num | None
    profiled_wall_end_ns: Num | None
    profiled_gap_before_ns: Num | None


class Request(msgspec.Struct, frozen=True, kw_only=True):
    repeat: int
    warmup: bool
    queued_ms: Num | None
    ttft_ms: Num | None
    itl_ms_mean: Num | None
    itl_ms_p50: Num | None
    e2e_ms: Num | None
    num_output_tokens: int
    # Present for non-warmup requests only; warmup requests print without them.
    arrival_ns: Num | UnsetType = UNSET
    pre_first_step_ns: Num | UnsetType = UNSET
    post_last_step_ns: Num | UnsetType = UNSET
    first_step_start_ns: Num | UnsetType = UNSET
    last_step_end_ns: Num | UnsetType = UNSET
    first_token_ns: Num | UnsetType = UNSET
    last_token_ns: Num | UnsetType = UNSET


class StepTimeline(msgspec.Struct, frozen=True):
    meta: dict[str, Any]
    steps: list[Step]
    requests: list[Request]


# --- The simulated timeline (output) -----------------------------------------------------


class StepCoverage(msgspec.Struct, frozen=True, kw_only=True):
    repeat: int
    step: int
    kernels: int
    simulated_kernels: int
    measured_gpu_ns: Num
    simulated_coverage_gpu_ns: float
    unmodeled_gpu_ns: Num
    measured_kernel_overlap_ns: float


class Coverage(msgspec.Struct, frozen=True, kw_only=True):
    kernels: int
    simulated_kernels: int
    kernel_fraction: float | None
    gpu_time_fraction: float | None
    measured_gpu_ns: float
    covered_measured_gpu_ns: float
    unmodeled_gpu_ns: float
    steps: list[StepCoverage]


class Simulation(msgspec.Struct, frozen=True, kw_only=True):
    host_model: str
    host_fit: dict[str, Any]
    coverage: Coverage
    request_assumption: str
    gap_model: str
    gap_fit: dict[str, Any]


class GapStats(msgspec.Struct, frozen=True, kw_only=True):
    n: int
    mean: Num
    p50: Num
    p95: Num


class KindStats(msgspec.Struct, frozen=True, kw_only=True):
    steps: int
    wall_ns_mean: Num
    gpu_busy_ns_mean: Num
    gap_before_ns: GapStats | UnsetType = UNSET


class Summary(msgspec.Struct, frozen=True):
    simulation: Simulation
    per_kind: dict[str, KindStats]


class Simulated(msgspec.Struct, frozen=True, kw_only=True):
    meta: dict[str, Any]
    steps: list[Step]
    requests: list[Request]
    summary: Summary


class MetricCompare(msgspec.Struct, frozen=True, kw_only=True):
    real: Num | None
    simulated: Num | None
    error: Num | None
    error_pct: float | None


class StepCompare(msgspec.Struct, frozen=True, kw_only=True):
    repeat: int
    step: int
    kind: str
    wall_ns: MetricCompare
    gpu_busy_ns: MetricCompare


class RequestCompare(msgspec.Struct, frozen=True, kw_only=True):
    repeat: int
    ttft_ms: MetricCompare
    itl_ms_mean: MetricCompare
    itl_ms_p50: MetricCompare
    e2e_ms: MetricCompare


class ErrorStats(msgspec.Struct, frozen=True, kw_only=True):
    count: int
    mean_error: Num | None
    mean_abs_error: Num | None
    p50_abs_error: Num | None
    p95_abs_error: Num | None
    mean_error_pct: float | None
    mean_abs_error_pct: float | None
    p50_abs_error_pct: float | None
    p95_abs_error_pct: float | None


class CompareSummary(msgspec.Struct, frozen=True):
    wall_ns: ErrorStats
    gpu_busy_ns: ErrorStats


class Compare(msgspec.Struct, frozen=True):
    steps: list[StepCompare]
    requests: list[RequestCompare]
    summary: CompareSummary


class SimStepTimeline(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    sim_id: str
    gpu_config: str
    replica: int
    simulated: Simulated
    compare: Compare
    config_label: Annotated[
        str | None,
        msgspec.Meta(
            description="`NAME@<first 6 hex of the digest>` when the run's replicas of gpu_config ran config files of more "
            "than one digest, as the run's comparison lists them (Comparison.configs): replicas of different labels are "
            "never pooled; absent when they all ran the same files."
        ),
    ] = None


# --- Validation ----------------------------------------------------------------------------

_NON_NEGATIVE_STEP = (
    "num_reqs",
    "num_scheduled_tokens",
    "baseline_wall_ns",
    "profiled_wall_ns",
    "gpu_busy_ns",
    "cuda_api_ns",
    "baseline_gap_before_ns",
    "profiled_gap_before_ns",
)
_NON_NEGATIVE_REQUEST = (
    "queued_ms",
    "ttft_ms",
    "itl_ms_mean",
    "itl_ms_p50",
    "e2e_ms",
    "pre_first_step_ns",
    "post_last_step_ns",
)
_NON_WARMUP_REQUEST = (
    "arrival_ns",
    "pre_first_step_ns",
    "post_last_step_ns",
    "first_step_start_ns",
    "last_step_end_ns",
    "first_token_ns",
    "last_token_ns",
)
_MSGSPEC_ERROR = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>.*)`)?$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`$")
_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`$")


def validate_timeline(raw: bytes, kernel_count: int) -> StepTimeline:
    """Decode and check a step_timeline.json against a trace of `kernel_count` kernels.

    Out of order means: within a repeat, taking its non-warmup steps in file order, a step
    whose `step` is not greater than the previous one's, or whose `baseline_wall_start_ns`
    is before the previous one's; or, within a step, a kernel whose `seq` is not greater
    than the previous kernel's (start offsets move in `seq` order, so the file must list
    kernels that way).
    """
    try:
        timeline = json_depth.decode(raw, StepTimeline)
    except msgspec.ValidationError as exc:
        raise _bad(_describe(str(exc))) from None
    except msgspec.DecodeError as exc:
        raise _bad(f"not valid JSON: {exc}") from None
    except json_depth.TooDeep as exc:
        raise _bad(str(exc)) from None
    _check_steps(timeline.steps, kernel_count)
    _check_requests(timeline.requests, timeline.steps)
    return timeline


def _bad(message: str) -> TimelineError:
    return TimelineError(f"{TIMELINE_FILE}: {message}")


def _describe(message: str) -> str:
    """Turn msgspec's "Expected `int`, got `str` - at `$.steps[0].step`" into our wording."""
    match = _MSGSPEC_ERROR.match(message)
    assert match is not None  # the pattern matches any string
    msg, path = match["msg"], (match["path"] or "").lstrip(".")
    if missing := _MISSING.match(msg):
        return f"{_join(path, missing['field'])} is missing"
    where = path or "the top level"
    if expected := _EXPECTED.match(msg):
        want = expected["want"].replace("int | float", "number").replace(" | ", " or ")
        return f"{where} must be {want}, got {expected['got']}"
    return f"{where}: {msg}"


def _join(path: str, field: str) -> str:
    return f"{path}.{field}" if path else field


def _non_negative(obj: msgspec.Struct, fields: Iterable[str], path: str) -> None:
    for field in fields:
        value = getattr(obj, field)
        if isinstance(value, int | float) and value < 0:
            raise _bad(f"{path}.{field} must be >= 0, got {value}")


def _check_steps(steps: Sequence[Step], kernel_count: int) -> None:
    previous: dict[int, Step] = {}  # repeat -> its previous non-warmup step
    for i, step in enumerate(steps):
        path = f"steps[{i}]"
        _non_negative(step, _NON_NEGATIVE_STEP, path)
        _check_kernels(step.kernels, kernel_count, path)
        if step.warmup:
            continue
        before = previous.get(step.repeat)
        if before is not None and step.step <= before.step:
            raise _bad(
                f"{path}.step must be greater than {before.step} (the previous step of "
                f"repeat {step.repeat}), got {step.step}"
            )
        if before is not None and step.baseline_wall_start_ns < before.baseline_wall_start_ns:
            raise _bad(
                f"{path}.baseline_wall_start_ns must not be before {before.baseline_wall_start_ns} "
                f"(the start of step {before.step}), got {step.baseline_wall_start_ns}"
            )
        previous[step.repeat] = step


def _check_kernels(kernels: Sequence[Kernel], kernel_count: int, step_path: str) -> None:
    for j, kernel in enumerate(kernels):
        path = f"{step_path}.kernels[{j}]"
        _non_negative(kernel, ("duration_ns",), path)
        if j and kernel.seq <= kernels[j - 1].seq:
            raise _bad(
                f"{path}.seq must be greater than {kernels[j - 1].seq} (the previous kernel's), "
                f"got {kernel.seq}"
            )
        uid = kernel.trace_kernel_uid
        if uid is not UNSET and not 1 <= uid <= kernel_count:
            raise _bad(
                f"{path}.trace_kernel_uid must be between 1 and {kernel_count} (the trace's "
                f"kernel count), got {uid}"
            )


def _check_requests(requests: Sequence[Request], steps: Sequence[Step]) -> None:
    repeats = {step.repeat for step in steps if not step.warmup}
    seen: set[int] = set()
    for i, request in enumerate(requests):
        path = f"requests[{i}]"
        if request.num_output_tokens < 1:
            raise _bad(
                f"{path}.num_output_tokens must be >= 1, got {request.num_output_tokens}"
            )
        _non_negative(request, _NON_NEGATIVE_REQUEST, path)
        if request.warmup:
            continue
        for field in _NON_WARMUP_REQUEST:
            if getattr(request, field) is UNSET:
                raise _bad(f"{path}.{field} is missing (non-warmup requests need it)")
        if request.repeat not in repeats:
            raise _bad(f"{path}.repeat {request.repeat} has no non-warmup step")
        if request.repeat in seen:
            raise _bad(
                f"{path}.repeat {request.repeat} already has a non-warmup request "
                "(one request per repeat)"
            )
        seen.add(request.repeat)


# --- Simulation ----------------------------------------------------------------------------


def simulate(timeline: StepTimeline, sim_ns: Mapping[int, float]) -> Simulated:
    """The timeline with covered kernels at their simulated times (`sim_ns`: uid -> ns)."""
    steps: list[Step] = []
    coverage: list[StepCoverage] = []
    by_repeat: dict[int, list[Step]] = {}
    previous: dict[int, tuple[Step, Step]] = {}  # repeat -> (measured, simulated) previous step
    for step in timeline.steps:
        if step.warmup:
            steps.append(step)
            continue
        simulated = _simulate_step(step, sim_ns, previous.get(step.repeat))
        previous[step.repeat] = (step, simulated)
        by_repeat.setdefault(step.repeat, []).append(simulated)
        steps.append(simulated)
        coverage.append(_step_coverage(step, sim_ns))
    requests = [
        request if request.warmup else _simulate_request(request, by_repeat[request.repeat])
        for request in timeline.requests
    ]
    summary = Summary(
        simulation=Simulation(
            host_model=HOST_MODEL,
            host_fit={},
            coverage=_coverage(coverage),
            request_assumption=REQUEST_ASSUMPTION,
            gap_model=GAP_MODEL,
            gap_fit={},
        ),
        per_kind=_per_kind([step for step in steps if not step.warmup]),
    )
    return Simulated(meta=timeline.meta, steps=steps, requests=requests, summary=summary)


def _sim_time(kernel: Kernel, sim_ns: Mapping[int, float]) -> float | None:
    """The kernel's simulated time if it is covered (linked to a kernel the sim finished)."""
    uid = kernel.trace_kernel_uid
    return sim_ns.get(uid) if isinstance(uid, int) else None


def _overlap_ns(kernels: Sequence[Kernel]) -> float:
    """Σ durations − the union of the kernel intervals.

    Summed as each kernel's part already covered by earlier-starting kernels: the same
    quantity, but exactly 0.0 when nothing overlaps, where subtracting a union rebuilt from
    float offsets would leave rounding dust.
    """
    overlap = 0.0
    reach = -math.inf
    for kernel in sorted(kernels, key=lambda k: k.start_offset_ns):
        end = kernel.start_offset_ns + kernel.duration_ns
        overlap += max(0, min(end, reach) - kernel.start_offset_ns)
        reach = max(reach, end)
    return overlap


def _gpu_busy(step: Step) -> Num:
    """The step's GPU busy time; without one, its kernels' time with overlaps counted once."""
    if step.gpu_busy_ns is not None:
        return step.gpu_busy_ns
    return sum(kernel.duration_ns for kernel in step.kernels) - _overlap_ns(step.kernels)


def _simulate_step(
    step: Step, sim_ns: Mapping[int, float], previous: tuple[Step, Step] | None
) -> Step:
    kernels: list[Kernel] = []
    delta: Num = 0  # an int 0 leaves untouched values (and their int type) as measured
    for kernel in step.kernels:  # validated to be in seq order
        moved = kernel.start_offset_ns + delta
        duration = _sim_time(kernel, sim_ns)
        if duration is None:
            kernels.append(msgspec.structs.replace(kernel, start_offset_ns=moved))
        else:
            delta += duration - kernel.duration_ns
            kernels.append(msgspec.structs.replace(kernel, duration_ns=duration, start_offset_ns=moved))
    busy = _gpu_busy(step)
    host = step.baseline_wall_ns - busy
    busy_sim = busy + delta
    wall = host + busy_sim
    if previous is None:
        gap, start = step.baseline_gap_before_ns, step.baseline_wall_start_ns
    else:
        measured_before, simulated_before = previous
        gap = step.baseline_gap_before_ns
        if gap is None:
            gap = step.baseline_wall_start_ns - measured_before.baseline_wall_end_ns
        start = simulated_before.baseline_wall_end_ns + gap
    end = start + wall
    return msgspec.structs.replace(
        step,
        baseline_wall_ns=wall,
        profiled_wall_ns=wall,
        gpu_busy_ns=busy_sim,
        host_ns=host,
        kernels=kernels,
        baseline_wall_start_ns=start,
        baseline_wall_end_ns=end,
        baseline_gap_before_ns=gap,
        profiled_wall_start_ns=start,
        profiled_wall_end_ns=end,
        profiled_gap_before_ns=gap,
    )


def _step_coverage(step: Step, sim_ns: Mapping[int, float]) -> StepCoverage:
    covered = [kernel for kernel in step.kernels if _sim_time(kernel, sim_ns) is not None]
    overlap = _overlap_ns(step.kernels)
    busy = _gpu_busy(step)
    kernel_ns = sum(kernel.duration_ns for kernel in step.kernels)
    return StepCoverage(
        repeat=step.repeat,
        step=step.step,
        kernels=len(step.kernels),
        simulated_kernels=len(covered),
        measured_gpu_ns=busy,
        simulated_coverage_gpu_ns=sum((kernel.duration_ns for kernel in covered), 0.0),
        unmodeled_gpu_ns=max(0, busy - kernel_ns + overlap),
        measured_kernel_overlap_ns=overlap,
    )


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _coverage(steps: Sequence[StepCoverage]) -> Coverage:
    kernels = sum(step.kernels for step in steps)
    simulated_kernels = sum(step.simulated_kernels for step in steps)
    measured = sum((step.measured_gpu_ns for step in steps), 0.0)
    covered = sum((step.simulated_coverage_gpu_ns for step in steps), 0.0)
    return Coverage(
        kernels=kernels,
        simulated_kernels=simulated_kernels,
        kernel_fraction=_ratio(simulated_kernels, kernels),
        gpu_time_fraction=_ratio(covered, measured),
        measured_gpu_ns=measured,
        covered_measured_gpu_ns=covered,
        unmodeled_gpu_ns=sum((step.unmodeled_gpu_ns for step in steps), 0.0),
        steps=list(steps),
    )


def _per_kind(steps: Sequence[Step]) -> dict[str, KindStats]:
    kinds: dict[str, list[Step]] = {}
    for step in steps:
        kinds.setdefault(step.kind, []).append(step)
    return {kind: _kind_stats(group) for kind, group in kinds.items()}


def _kind_stats(steps: Sequence[Step]) -> KindStats:
    gaps = [step.baseline_gap_before_ns for step in steps if step.baseline_gap_before_ns is not None]
    return KindStats(
        steps=len(steps),
        wall_ns_mean=statistics.mean(step.baseline_wall_ns for step in steps),
        gpu_busy_ns_mean=statistics.mean(_gpu_busy(step) for step in steps),
        gap_before_ns=(
            GapStats(
                n=len(gaps),
                mean=statistics.mean(gaps),
                p50=percentile(gaps, 0.5),
                p95=percentile(gaps, 0.95),
            )
            if gaps
            else UNSET
        ),
    )


def _simulate_request(request: Request, steps: Sequence[Step]) -> Request:
    first, last = steps[0], steps[-1]
    first_token, last_token = first.baseline_wall_end_ns, last.baseline_wall_end_ns
    arrival, post = request.arrival_ns, request.post_last_step_ns
    assert not isinstance(arrival, UnsetType) and not isinstance(post, UnsetType)  # validated
    intervals = [_interval(step) for step in steps[1:]]
    tokens = request.num_output_tokens
    return msgspec.structs.replace(
        request,
        ttft_ms=(first_token - arrival) / 1e6,
        itl_ms_mean=sum(intervals) / (tokens - 1) / 1e6 if tokens > 1 else None,
        itl_ms_p50=percentile(intervals, 0.5) / 1e6 if tokens > 1 and intervals else None,
        e2e_ms=(last_token + post - arrival) / 1e6,
        first_step_start_ns=first.baseline_wall_start_ns,
        last_step_end_ns=last_token,
        first_token_ns=first_token,
        last_token_ns=last_token,
    )


def _interval(step: Step) -> Num:
    """Token interval of a repeat's later step: the end of its step minus the previous end.

    Taken as gap + wall rather than as a difference of two timestamps near 1e9 ns, which
    would lose the low digits (the spec's Float details).
    """
    assert step.baseline_gap_before_ns is not None  # set on every simulated later step
    return step.baseline_gap_before_ns + step.baseline_wall_ns


def percentile(values: Iterable[Num], q: float) -> Num:
    """Linear interpolation at position q·(n − 1) of the sorted values, as numpy's default.

    A position on a value returns that value itself (an int stays an int); between two it
    uses numpy's two-sided lerp, so results match numpy's to the bit.
    """
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    t = position - low
    if t == 0:
        return ordered[low]
    a, b = ordered[low], ordered[low + 1]
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


# --- Compare -------------------------------------------------------------------------------


def compare(timeline: StepTimeline, simulated: Simulated) -> Compare:
    """Per-step and per-request errors of `simulated` against the measured `timeline`."""
    steps = [
        StepCompare(
            repeat=real.repeat,
            step=real.step,
            kind=real.kind,
            wall_ns=_metric(real.baseline_wall_ns, sim.baseline_wall_ns),
            gpu_busy_ns=_metric(real.gpu_busy_ns, sim.gpu_busy_ns),
        )
        for real, sim in zip(timeline.steps, simulated.steps, strict=True)
        if not real.warmup
    ]
    requests = [
        RequestCompare(
            repeat=real.repeat,
            ttft_ms=_metric(real.ttft_ms, sim.ttft_ms),
            itl_ms_mean=_metric(real.itl_ms_mean, sim.itl_ms_mean),
            itl_ms_p50=_metric(real.itl_ms_p50, sim.itl_ms_p50),
            e2e_ms=_metric(real.e2e_ms, sim.e2e_ms),
        )
        for real, sim in zip(timeline.requests, simulated.requests, strict=True)
        if not real.warmup
    ]
    summary = CompareSummary(
        wall_ns=_error_stats([step.wall_ns for step in steps]),
        gpu_busy_ns=_error_stats([step.gpu_busy_ns for step in steps]),
    )
    return Compare(steps=steps, requests=requests, summary=summary)


def _metric(real: Num | None, simulated: Num | None) -> MetricCompare:
    error = None if real is None or simulated is None else simulated - real
    # error / real * 100, in that order, is what reproduces the reference's digits.
    error_pct = error / real * 100 if error is not None and real else None
    return MetricCompare(real=real, simulated=simulated, error=error, error_pct=error_pct)


def _error_stats(metrics: Sequence[MetricCompare]) -> ErrorStats:
    errors = [m.error for m in metrics if m.error is not None]
    pcts = [m.error_pct for m in metrics if m.error_pct is not None]
    abs_errors = [abs(e) for e in errors]
    abs_pcts = [abs(p) for p in pcts]
    return ErrorStats(
        count=len(errors),
        mean_error=_mean(errors),
        mean_abs_error=_mean(abs_errors),
        p50_abs_error=_percentile_or_none(abs_errors, 0.5),
        p95_abs_error=_percentile_or_none(abs_errors, 0.95),
        mean_error_pct=_mean(pcts),
        mean_abs_error_pct=_mean(abs_pcts),
        p50_abs_error_pct=_percentile_or_none(abs_pcts, 0.5),
        p95_abs_error_pct=_percentile_or_none(abs_pcts, 0.95),
    )


def _mean(values: Sequence[Num]) -> Num | None:
    # statistics.mean is exact (then rounded once), which the reference's digits need.
    return statistics.mean(values) if values else None


def _percentile_or_none(values: Sequence[Num], q: float) -> Num | None:
    return percentile(values, q) if values else None


def step_timeline(
    sim_id: str,
    gpu_config: str,
    replica: int,
    timeline: StepTimeline,
    sim_ns: Mapping[int, float],
    config_label: str | None = None,
) -> SimStepTimeline:
    """One sim's `SimStepTimeline`: the simulated timeline and its comparison."""
    simulated = simulate(timeline, sim_ns)
    return SimStepTimeline(
        sim_id=sim_id,
        gpu_config=gpu_config,
        replica=replica,
        simulated=simulated,
        compare=compare(timeline, simulated),
        config_label=config_label,
    )
