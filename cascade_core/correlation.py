"""Simulated against real kernel values, scored the way Accel-Sim's users score them: the
numbers `util/plotting/plot-correlation.py` prints per config, over the kernels that have
both a hardware value (hw) and a simulated one (sim).

    correl       Pearson's r of (hw, sim)                        Correl
    err_pct      mean(|sim - hw| / hw) * 100                     Err (its legend's MAE)
    agg_err_pct  sum |sim - hw| / sum hw * 100                   Agg_Err
    rpd_pct      mean(2 |sim - hw| / (sim + hw)) * 100           RPD
    nrmse        sqrt(mean((sim - hw)^2)) / mean(hw)             NRMSE (it prints NMSE)
    err_under_1pct, err_under_10pct   kernels off by under 1 %, under 10 %
    over, under  kernels off by 1 % or more, above and below hw, as its per-kernel loop
                 counts them: `if abs(err) < 1: ... elif err > 0: over else under`

Where plot-correlation.py has two answers or none, one is chosen here:
- A hardware value of 0 leaves its kernel out, counted in `hw_zero`. Its per-kernel loop
  calls such a kernel's error 0 (under 1 %), its per-app code divides by 1e-7 (an error of
  about 1e9 %); plot-correlation.py drops low hardware values the same way (`drophwnumbelow`,
  counted and printed beside the numbers), at 0 in every mapping it ships.
- No outlier is dropped: its count of "high error points dropped" is never raised.
- Pearson's r is None with fewer than two kernels or a series without spread, where numpy's
  `corrcoef` gives nan; the other numbers are None with no kernel at all.
- Its epsilons (`hw + 1e-7`, `sum hw + 1e-6`) guard divisions by 0, which cannot happen once
  hardware values of 0 are out, so there are none here.

A kernel's hardware value is the mean over its repetitions (its `np.average(hw[...])`), and
their spread is what its error bars show (`spread`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Annotated

import msgspec

__all__ = ["Correlation", "Spread", "correlate", "measured"]


class Spread(msgspec.Struct, frozen=True, kw_only=True):
    """A kernel's real value over the trace's hardware repetitions, of which the row shows
    the mean: the range plot-correlation.py draws as error bars, and how far values stray."""

    repeats: Annotated[int, msgspec.Meta(description="How many repetitions measured the kernel.")]
    min: float
    max: float
    stddev: Annotated[float, msgspec.Meta(description="The population standard deviation.")]


class Correlation(msgspec.Struct, frozen=True, kw_only=True):
    """One config's simulated against real values, over the kernels that have both, as
    Accel-Sim's util/plotting/plot-correlation.py scores them (its names in brackets).
    A kernel whose real value is 0 is left out (and counted in `hw_zero`): its relative
    error has no meaning. Nothing else is dropped."""

    kernels: Annotated[int, msgspec.Meta(description="The kernels scored: both values known, the real one above 0.")]
    correl: Annotated[float | None, msgspec.Meta(description="Pearson's r [Correl]; null under two kernels or for a constant series.")]
    err_pct: Annotated[float | None, msgspec.Meta(description="The mean absolute error, mean(|sim-hw|/hw)*100 [Err].")]
    agg_err_pct: Annotated[float | None, msgspec.Meta(description="The aggregate error, sum|sim-hw| / sum hw * 100 [Agg_Err].")]
    rpd_pct: Annotated[float | None, msgspec.Meta(description="The relative percent difference, mean(2|sim-hw|/(sim+hw))*100 [RPD].")]
    nrmse: Annotated[float | None, msgspec.Meta(description="sqrt(mean((sim-hw)^2)) / mean(hw) [NRMSE].")]
    err_under_1pct: Annotated[int, msgspec.Meta(description="Kernels off by under 1 %.")]
    err_under_10pct: Annotated[int, msgspec.Meta(description="Kernels off by under 10 % (those under 1 % among them).")]
    over: Annotated[int, msgspec.Meta(description="Kernels simulated 1 % or more above the real value.")]
    under: Annotated[int, msgspec.Meta(description="Kernels simulated 1 % or more below it: err_under_1pct + over + under = kernels.")]
    hw_zero: Annotated[int, msgspec.Meta(description="Kernels left out for a real value of 0.")]


def correlate(pairs: Iterable[tuple[float, float]]) -> Correlation:
    """The scores of (hw, sim) pairs, one per kernel."""
    hw: list[float] = []
    sim: list[float] = []
    hw_zero = 0
    for real, simulated in pairs:
        if real == 0:
            hw_zero += 1
        else:
            hw.append(real)
            sim.append(simulated)
    n = len(hw)
    errors = [abs(s - h) / h * 100 for h, s in zip(hw, sim)]
    under_1 = sum(e < 1 for e in errors)
    over = sum(e >= 1 and s > h for e, h, s in zip(errors, hw, sim))
    if n == 0:
        return Correlation(
            kernels=0, correl=None, err_pct=None, agg_err_pct=None, rpd_pct=None, nrmse=None,
            err_under_1pct=0, err_under_10pct=0, over=0, under=0, hw_zero=hw_zero,
        )
    return Correlation(
        kernels=n,
        correl=_pearson(hw, sim),
        err_pct=math.fsum(errors) / n,
        agg_err_pct=math.fsum(abs(s - h) for h, s in zip(hw, sim)) / math.fsum(hw) * 100,
        rpd_pct=math.fsum(2 * abs(s - h) / (s + h) for h, s in zip(hw, sim)) / n * 100,
        nrmse=math.sqrt(math.fsum((s - h) ** 2 for h, s in zip(hw, sim)) / n) / (math.fsum(hw) / n),
        err_under_1pct=under_1,
        err_under_10pct=sum(e < 10 for e in errors),
        over=over,
        under=n - under_1 - over,
        hw_zero=hw_zero,
    )


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    try:
        return statistics.correlation(x, y)
    except statistics.StatisticsError:  # under two points, or one series is constant
        return None


def measured(values: Sequence[float]) -> tuple[float | None, Spread | None]:
    """A kernel's value over its hardware repetitions, and their spread when there are two
    or more; (None, None) when none measured it."""
    if not values:
        return None, None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, Spread(repeats=len(values), min=min(values), max=max(values), stddev=statistics.pstdev(values))
