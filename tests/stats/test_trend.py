"""Trend of the daily lift over days since exposure: WLS slope, interval, fading or growing."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from tracker.stats import Reason, TrendDirection, trend_test


def test_weighted_slope_equals_numpy_weighted_polyfit() -> None:
    days = np.arange(10.0)
    lifts = np.array([0.12, 0.1, 0.11, 0.08, 0.07, 0.08, 0.05, 0.06, 0.03, 0.04])
    variances = np.linspace(1e-4, 4e-4, 10)  # later days have fewer users
    r = trend_test(days, lifts, variances)
    # np.polyfit weights multiply the residuals: w = 1/σ, i.e. 1/√variance
    slope, intercept = np.polyfit(days, lifts, 1, w=1 / np.sqrt(variances))
    assert r.slope == pytest.approx(slope, rel=1e-10)
    assert r.intercept == pytest.approx(intercept, rel=1e-10)
    # covariance of polyfit with cov='unscaled' is (XᵀWX)⁻¹; ours scales it by the dispersion
    _, cov = np.polyfit(days, lifts, 1, w=1 / np.sqrt(variances), cov="unscaled")
    fitted = intercept + slope * days
    dispersion = np.sum((lifts - fitted) ** 2 / variances) / 8
    assert r.dispersion == pytest.approx(dispersion, rel=1e-10)
    assert r.std_error == pytest.approx(np.sqrt(cov[0, 0] * dispersion), rel=1e-9)
    t = sps.t.ppf(0.975, 8)
    assert (r.ci_low, r.ci_high) == pytest.approx((slope - t * r.std_error,
                                                  slope + t * r.std_error), rel=1e-9)
    assert r.p_value == pytest.approx(2 * sps.t.sf(abs(slope) / r.std_error, 8), rel=1e-9)
    assert r.direction is TrendDirection.FADING


def _series(slope: float, start: float, seed: int, days: int = 14, sd: float = 0.01):
    rng = np.random.default_rng(seed)
    d = np.arange(days, dtype=float)
    return d, start + slope * d + rng.normal(0, sd, days), np.full(days, sd * sd)


@pytest.mark.parametrize(
    ("slope", "start", "direction"),
    [
        pytest.param(-0.01, 0.15, TrendDirection.FADING, id="positive-lift-shrinking-is-novelty"),
        pytest.param(0.01, -0.15, TrendDirection.GROWING,
                     id="loss-shrinking-is-primacy-users-adapt"),
        pytest.param(-0.02, 0.10, TrendDirection.FADING,
                     id="gain-turning-into-a-loss-is-novelty"),
        pytest.param(0.01, 0.02, TrendDirection.GROWING, id="positive-lift-growing-is-primacy"),
        pytest.param(-0.01, -0.02, TrendDirection.FADING, id="loss-deepening-is-fading"),
    ],
)
def test_constructed_series_with_a_known_slope(slope, start, direction) -> None:
    r = trend_test(*_series(slope, start, seed=4))
    assert r.ci_low < slope < r.ci_high
    assert r.p_value < 0.001 and r.direction is direction


def test_for_a_metric_where_lower_is_better_a_falling_lift_is_growing() -> None:
    series = _series(-0.01, 0.15, seed=4)
    assert trend_test(*series).direction is TrendDirection.FADING
    assert trend_test(*series, higher_is_better=False).direction is TrendDirection.GROWING


def test_flat_series_is_no_trend() -> None:
    results = [trend_test(*_series(0.0, 0.05, seed=s)) for s in range(200)]
    rejected = sum(r.p_value < 0.05 for r in results)
    assert rejected <= 25  # 5 % of 200 is 10; binomial 99.9 % upper bound ≈ 22
    assert all(r.direction is TrendDirection.NONE for r in results if r.p_value >= 0.05)
    # a false alarm on pure noise is not systematically called fading
    fading = sum(r.direction is TrendDirection.FADING for r in results)
    assert fading <= rejected - fading + 6
    covered = sum(r.ci_low <= 0.0 <= r.ci_high for r in results)
    assert covered >= 175


def test_exact_line_has_no_interval() -> None:
    r = trend_test([0, 1, 2, 3], [0.1, 0.08, 0.06, 0.04], [1e-4] * 4)
    assert r.slope == pytest.approx(-0.02) and r.reason is Reason.ZERO_VARIANCE
    assert r.p_value is None and r.direction is TrendDirection.NONE


def test_bad_series_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="same length"):
        trend_test([0, 1, 2], [0.1, 0.2], [1e-4, 1e-4])
    with pytest.raises(ValueError, match="variance must be > 0"):
        trend_test([0, 1, 2], [0.1, 0.2, 0.3], [1e-4, 0.0, 1e-4])
    with pytest.raises(ValueError, match="finite"):
        trend_test([0, 1, 2], [0.1, np.nan, 0.3], [1e-4] * 3)
    assert trend_test([0, 0, 1], [0.1, 0.2, 0.3], [1e-4] * 3).reason is Reason.TOO_FEW_DAYS
