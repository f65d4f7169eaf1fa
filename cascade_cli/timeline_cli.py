"""`cascade timeline`: a serving step timeline rebuilt offline, from a measured
`step_timeline.json` and a sim's `kernel-stats.csv`, as JSON or as a few lines of text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

from cascade_app.config import ConfigError
from cascade_formats import timeline as tl
from cascade_formats.kernel_stats import kernel_times_from_csv
from cascade_formats.timeline import MetricCompare, Num, SimStepTimeline


def timeline(args: argparse.Namespace) -> int:
    try:
        raw = Path(args.timeline).read_bytes()
        kernels = Path(args.kernels).read_text()
    except OSError as err:
        raise ConfigError(f"{err.filename}: {err.strerror}") from err
    try:
        sim_ns = kernel_times_from_csv(kernels, args.clock_mhz)
        # Offline there is no trace to bound kernel uids by; the kernel times stand for it.
        measured = tl.validate_timeline(raw, kernel_count=sys.maxsize)
    except ValueError as err:
        raise ConfigError(str(err)) from err
    result = tl.step_timeline("offline", f"{args.clock_mhz:g} MHz", 0, measured, sim_ns)
    encoded = msgspec.json.encode(result)
    if args.output:
        Path(args.output).write_bytes(encoded)
    print(encoded.decode() if args.json else summary_text(result))
    return 0


def summary_text(tl: SimStepTimeline) -> str:
    """A few lines: coverage, then per request TTFT / ITL mean / e2e, simulated vs real."""
    cov = tl.simulated.summary.simulation.coverage
    lines = [
        f"{tl.sim_id} ({tl.gpu_config}, replica {tl.replica}): "
        f"{cov.simulated_kernels} of {cov.kernels} kernels simulated "
        f"({_pct(cov.kernel_fraction)} of kernels, {_pct(cov.gpu_time_fraction)} of measured GPU time)"
    ]
    for request in tl.compare.requests:
        lines.append(f"  request (repeat {request.repeat}):")
        for label, metric in (
            ("TTFT", request.ttft_ms),
            ("ITL mean", request.itl_ms_mean),
            ("e2e", request.e2e_ms),
        ):
            lines.append(f"    {label:<9}{_metric_text(metric)}")
    wall = tl.compare.summary.wall_ns
    if wall.count:
        lines.append(
            f"  step wall: mean error {_signed(wall.mean_error, 1e3, ' us')} "
            f"({_signed(wall.mean_error_pct, 1, '%')}) over {wall.count} steps"
        )
    return "\n".join(lines)


def _metric_text(metric: MetricCompare) -> str:
    simulated = "n/a" if metric.simulated is None else f"{metric.simulated:.3f} ms"
    real = "n/a" if metric.real is None else f"{metric.real:.3f} ms"
    return f"{simulated} simulated vs {real} real ({_signed(metric.error_pct, 1, '%')})"


def _signed(value: Num | None, scale: float, suffix: str) -> str:
    return "n/a" if value is None else f"{value / scale:+.2f}{suffix}"


def _pct(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{fraction * 100:.2f}%"
