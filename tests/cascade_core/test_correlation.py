"""plot-correlation.py's numbers, on a fixture worked out by hand, and their properties."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cascade_core.correlation import Correlation, Spread, correlate, measured

# Four kernels (hw, sim), and one whose hardware value is 0:
#   kernel  hw   sim  |sim-hw|  error            sim vs hw
#   1       100  110  10        10/100 = 10 %    over
#   2       200  190  10        10/200 =  5 %    under
#   3       400  400   0         0 %             under 1 %
#   4        50  100  50        50/50  = 100 %   over
#   5         0   30  left out: hw_zero
PAIRS = [(100.0, 110.0), (200.0, 190.0), (400.0, 400.0), (50.0, 100.0), (0.0, 30.0)]


def test_every_number_of_the_fixture() -> None:
    scores = correlate(PAIRS)
    assert (scores.kernels, scores.hw_zero) == (4, 1)
    # Err: (10 + 5 + 0 + 100) / 4
    assert scores.err_pct == pytest.approx(28.75)
    # Agg_Err: (10 + 10 + 0 + 50) / (100 + 200 + 400 + 50) * 100 = 70 / 750 * 100
    assert scores.agg_err_pct == pytest.approx(28 / 3)
    # RPD: 2*10/210 + 2*10/390 + 0 + 2*50/150 = 2/21 + 2/39 + 2/3 = (26 + 14 + 182) / 273
    #      = 74/91, over 4 kernels = 37/182, * 100
    assert scores.rpd_pct == pytest.approx(3700 / 182)
    # NRMSE: squares 100, 100, 0, 2500: mean 675, sqrt(675) = 15 sqrt(3); mean hw 750 / 4 = 187.5
    assert scores.nrmse == pytest.approx(15 * math.sqrt(3) / 187.5)
    # Pearson: means 187.5 and 200; deviations hw -87.5, 12.5, 212.5, -137.5 and sim -90, -10, 200, -100
    #   sxy = 7875 - 125 + 42500 + 13750 = 64000
    #   sxx = 7656.25 + 156.25 + 45156.25 + 18906.25 = 71875
    #   syy = 8100 + 100 + 40000 + 10000 = 58200
    assert scores.correl == pytest.approx(64000 / math.sqrt(71875 * 58200))  # 0.98953...
    # Under 1 %: kernel 3. Under 10 %: kernels 2 and 3 (10 % is not under 10 %).
    # Over by 1 % or more: kernels 1 and 4; under: kernel 2.
    assert (scores.err_under_1pct, scores.err_under_10pct, scores.over, scores.under) == (1, 2, 2, 1)


def test_exactly_1_and_10_percent_are_not_under_them() -> None:
    # 1010 against 1000 is 1 % over; 900 against 1000 is 10 % under.
    scores = correlate([(1000.0, 1010.0), (1000.0, 900.0)])
    assert (scores.err_under_1pct, scores.err_under_10pct, scores.over, scores.under) == (0, 1, 1, 1)


def test_no_kernel_or_one() -> None:
    nothing = Correlation(
        kernels=0, correl=None, err_pct=None, agg_err_pct=None, rpd_pct=None, nrmse=None,
        err_under_1pct=0, err_under_10pct=0, over=0, under=0, hw_zero=0,
    )
    assert correlate([]) == nothing
    assert correlate([(0.0, 5.0)]) == msgspec.structs.replace(nothing, hw_zero=1)
    one = correlate([(100.0, 150.0)])
    assert (one.kernels, one.correl, one.err_pct, one.over) == (1, None, 50.0, 1)


def test_a_constant_series_has_no_correl() -> None:
    assert correlate([(100.0, 120.0), (200.0, 120.0)]).correl is None


def test_spread_of_repetitions() -> None:
    # 90, 100, 110: mean 100, range 90 to 110, population variance (100 + 0 + 100) / 3.
    mean, spread = measured([90.0, 110.0, 100.0])
    assert (mean, spread) == (100.0, Spread(repeats=3, min=90.0, max=110.0, stddev=math.sqrt(200 / 3)))
    assert measured([42.0]) == (42.0, None)
    assert measured([]) == (None, None)


# --- properties ---------------------------------------------------------------------------------

values = st.floats(min_value=1e-3, max_value=1e9, allow_nan=False, allow_infinity=False)
series = st.lists(values, min_size=1, max_size=40)


@given(series)
def test_identical_series_score_perfectly(hw: list[float]) -> None:
    scores = correlate(zip(hw, hw))
    assert (scores.err_pct, scores.agg_err_pct, scores.rpd_pct, scores.nrmse) == (0, 0, 0, 0)
    assert (scores.err_under_1pct, scores.over, scores.under) == (len(hw), 0, 0)
    assert scores.correl is None or scores.correl == pytest.approx(1)


@given(series, st.floats(min_value=1e-3, max_value=1e3), st.floats(min_value=0, max_value=1e6))
def test_a_positive_linear_map_correlates_at_1(hw: list[float], slope: float, offset: float) -> None:
    assume(max(hw) - min(hw) > 1e-6 * max(hw))  # a series with spread
    assert correlate((x, slope * x + offset) for x in hw).correl == pytest.approx(1, abs=1e-6)


@given(st.lists(st.tuples(st.one_of(st.just(0.0), values), values), max_size=40))
def test_counts_add_up(pairs: list[tuple[float, float]]) -> None:
    scores = correlate(pairs)
    assert scores.kernels + scores.hw_zero == len(pairs)
    assert scores.err_under_1pct + scores.over + scores.under == scores.kernels
    assert scores.err_under_1pct <= scores.err_under_10pct <= scores.kernels


@given(st.lists(st.tuples(values, values), min_size=1, max_size=40), st.floats(min_value=1e-3, max_value=1e3))
def test_errors_do_not_depend_on_the_unit(pairs: list[tuple[float, float]], scale: float) -> None:
    scores, scaled = correlate(pairs), correlate((h * scale, s * scale) for h, s in pairs)
    for field in ("err_pct", "agg_err_pct", "rpd_pct", "nrmse"):
        assert getattr(scaled, field) == pytest.approx(getattr(scores, field), rel=1e-9)
