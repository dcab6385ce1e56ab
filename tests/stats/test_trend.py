"""Trend of the daily lift over days since exposure: WLS slope, interval, fading or growing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from tracker.stats import Reason, TrendDirection, trend_test
from tracker.stats.trend import MIN_USERS_PER_DAY, ExposureDays, TrendMethod, exposure_trend


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


# ------------------------------------------------------------------------- exposure_trend
def _arm_from_users(values: np.ndarray, present: np.ndarray, clustered: bool) -> ExposureDays:
    """An arm's exposure-day sums from per-user values (users x days) and presence."""
    p = present.astype(float)
    x = np.where(present, values, 0.0)
    days = tuple(range(values.shape[1]))
    if not clustered:
        return ExposureDays(days, p.sum(0), x.sum(0), (x * x).sum(0))
    return ExposureDays(days, p.sum(0), x.sum(0), (x * x).sum(0), p.T @ p, x.T @ p, x.T @ x)


def _reference_slope_variance(arms, keep_days):
    """The slope's variance from per-user data, directly: the lift's influence per user,
    summed over users (clustered), with the same count weights."""
    (vt, pt), (vc, pc) = arms
    nt, nc = pt.sum(0)[keep_days], pc.sum(0)[keep_days]
    mt = np.array([vt[pt[:, d], d].mean() for d in keep_days])
    mc = np.array([vc[pc[:, d], d].mean() for d in keep_days])
    d = np.asarray(keep_days, dtype=float)
    w = 1 / (1 / nt + 1 / nc)
    coef = w * (d - w @ d / w.sum()) / (w @ (d - w @ d / w.sum()) ** 2)
    total = 0.0
    for values, present, n, scale in ((vt, pt, nt, 1 / mc), (vc, pc, nc, -mt / mc**2)):
        centred = np.where(present[:, keep_days], values[:, keep_days] - (
            mt if values is vt else mc), 0.0)
        influence = centred @ (coef * scale / n)  # one number per user
        total += float(influence @ influence)
    return total


def test_exposure_trend_matches_the_per_user_clustered_variance():
    rng = np.random.default_rng(7)
    users, days = 400, 6
    arms = []
    for _ in range(2):
        level = rng.gamma(2.0, 0.5, users)[:, None]  # persistent users: correlated days
        values = level + rng.normal(0, 0.3, (users, days))
        present = rng.random((users, days)) < 0.6
        arms.append((values, present))
    keep = [d for d in range(days)]
    result = exposure_trend(*(_arm_from_users(v, p, True) for v, p in arms), min_users=30)
    assert result.method is TrendMethod.USER_CLUSTERED
    assert result.std_error**2 == pytest.approx(_reference_slope_variance(arms, keep), rel=1e-9)
    independent = exposure_trend(*(_arm_from_users(v, p, False) for v, p in arms))
    assert independent.method is TrendMethod.INDEPENDENT_DAYS
    assert independent.slope == pytest.approx(result.slope, rel=1e-12)  # same weights
    # persistent users make the days positively correlated: the clustered error is smaller
    assert result.std_error < independent.std_error


def test_without_returning_users_clustered_and_independent_agree():
    rng = np.random.default_rng(8)
    users, days = 600, 5
    arms = []
    for _ in range(2):
        values = rng.exponential(1.0, (users, days))
        present = np.zeros((users, days), dtype=bool)
        present[np.arange(users), rng.integers(0, days, users)] = True  # one day each
        arms.append((values, present))
    clustered = exposure_trend(*(_arm_from_users(v, p, True) for v, p in arms))
    independent = exposure_trend(*(_arm_from_users(v, p, False) for v, p in arms))
    assert clustered.std_error == pytest.approx(independent.std_error, rel=1e-12)


def test_days_below_the_minimum_users_are_left_out():
    n = np.array([500.0, 500.0, 500.0, 10.0])
    means = np.array([1.0, 1.1, 1.2, 9.0])  # a wild lift on a 10-user day
    arm = ExposureDays((0, 1, 2, 3), n, n * means, n * (means**2 + 1))
    control = ExposureDays((0, 1, 2, 3), n, n * 1.0, n * 2.0)
    result = exposure_trend(arm, control, min_users=MIN_USERS_PER_DAY)
    assert result.slope == pytest.approx(0.1) and result.df == 1
    assert exposure_trend(arm, control, min_users=600).reason is Reason.TOO_FEW_DAYS


@settings(deadline=None)  # no timing in tests: the machine is shared
@given(st.lists(st.floats(0.5, 2.0), min_size=4, max_size=10), st.integers(0, 10_000))
def test_the_weights_depend_on_the_users_only(lifts, seed):
    """Shuffling which day carries which lift moves the slope, never the weights: two series
    with the same counts and the same days' lifts in another order give slopes whose
    weighted sum (the intercept's weight) is the same; and a constant lift has slope 0."""
    rng = np.random.default_rng(seed)
    k = len(lifts)
    n = rng.integers(50, 500, k).astype(float)
    control = ExposureDays(tuple(range(k)), n, n * 1.0, n * 2.0)

    def treatment(values):
        values = np.asarray(values)
        return ExposureDays(tuple(range(k)), n, n * values, n * (values**2 + 1))

    flat = exposure_trend(treatment(np.full(k, lifts[0])), control)
    assert flat.slope == pytest.approx(0.0, abs=1e-12)
    a = exposure_trend(treatment(lifts), control)
    b = exposure_trend(treatment(lifts[::-1]), control)
    assert a.slope is not None and b.slope is not None
    w = 1 / (2 / n)
    centre = w @ np.arange(k) / w.sum()
    assert a.intercept + a.slope * centre == pytest.approx(w @ (np.array(lifts) - 1) / w.sum())
    assert b.intercept + b.slope * centre == pytest.approx(
        w @ (np.array(lifts[::-1]) - 1) / w.sum())
