"""Per-arm estimates: mean and ratio with their intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from tracker.stats import (
    MeanStats,
    RatioStats,
    Reason,
    arm_estimate,
    mean_estimate,
    ratio_estimate,
)


def test_mean_hand_worked_example() -> None:
    # values 1, 2, 3, 4: mean 2.5, s^2 = 5/3, SE = sqrt(5/12); t(0.975, 3) = 3.182446305
    r = mean_estimate(MeanStats(4, 10.0, 30.0))
    se = math.sqrt(5 / 12)
    assert r.estimate == 2.5
    assert r.std_error == pytest.approx(se, rel=1e-12)
    assert r.ci_low == pytest.approx(2.5 - 3.182446305 * se, rel=1e-8)
    assert r.ci_high == pytest.approx(2.5 + 3.182446305 * se, rel=1e-8)
    assert r.reason is Reason.OK and r.ok


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95, 0.99], ids=lambda lv: f"level-{lv}")
@pytest.mark.parametrize(
    "values",
    [
        pytest.param(np.random.default_rng(1).exponential(2.0, 50), id="skewed-50-users"),
        pytest.param(np.random.default_rng(2).binomial(1, 0.03, 5000), id="rare-clicks-5000-users"),
        pytest.param(np.array([0.0, 0.0, 0.0, 1.0]), id="mostly-zeros-4-users"),
    ],
)
def test_mean_interval_matches_scipy_on_raw_values(values: np.ndarray, level: float) -> None:
    r = mean_estimate(MeanStats.from_values(values), level=level)
    low, high = sps.t.interval(level, values.size - 1, loc=values.mean(), scale=sps.sem(values))
    assert r.estimate == pytest.approx(values.mean(), rel=1e-12)
    assert r.std_error == pytest.approx(sps.sem(values), rel=1e-9)
    assert (r.ci_low, r.ci_high) == pytest.approx((low, high), rel=1e-9)
    assert r.level == level


def test_wider_level_gives_wider_interval() -> None:
    stats = MeanStats.from_values([0.0, 1.0, 3.0, 0.5, 2.0])
    narrow, wide = mean_estimate(stats, level=0.8), mean_estimate(stats, level=0.99)
    assert wide.ci_low < narrow.ci_low < narrow.ci_high < wide.ci_high


def test_ratio_hand_worked_example() -> None:
    # (y, m) = (1, 2), (0, 1), (3, 3): R = 2/3, Var(R) = (7/3 - 2 + 4/9) / 12 = 7/108
    r = ratio_estimate(RatioStats.from_values([1.0, 0.0, 3.0], [2.0, 1.0, 3.0]))
    assert r.estimate == pytest.approx(2 / 3)
    assert r.std_error == pytest.approx(math.sqrt(7 / 108), rel=1e-12)
    # t(0.975, 2) = 4.302652730
    assert r.ci_low == pytest.approx(2 / 3 - 4.302652730 * math.sqrt(7 / 108), rel=1e-8)


def test_ratio_with_one_impression_per_user_is_the_user_mean() -> None:
    clicks = np.array([0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    ratio = ratio_estimate(RatioStats.from_values(clicks, np.ones_like(clicks)))
    mean = mean_estimate(MeanStats.from_values(clicks))
    assert ratio.estimate == pytest.approx(mean.estimate)
    # delta method with constant m reduces to s_y^2 / n exactly
    assert ratio.std_error == pytest.approx(mean.std_error, rel=1e-12)


def test_ratio_standard_error_matches_a_user_level_bootstrap() -> None:
    rng = np.random.default_rng(7)
    n = 3000
    impressions = rng.negative_binomial(1, 0.25, n) + 1  # skewed: many users with 1-3 lists
    propensity = rng.beta(0.4, 6.0, n)
    clicks = rng.binomial(impressions, propensity).astype(float)
    r = ratio_estimate(RatioStats.from_values(clicks, impressions.astype(float)))
    idx = rng.integers(0, n, size=(1000, n))
    boot = clicks[idx].sum(axis=1) / impressions[idx].sum(axis=1)
    assert r.estimate == pytest.approx(clicks.sum() / impressions.sum())
    assert r.std_error == pytest.approx(boot.std(ddof=1), rel=0.08)


def test_arm_estimate_dispatches_on_the_statistics_type() -> None:
    assert arm_estimate(MeanStats(4, 10.0, 30.0)) == mean_estimate(MeanStats(4, 10.0, 30.0))
    ratio = RatioStats.from_values([1.0, 2.0], [2.0, 2.0])
    assert arm_estimate(ratio) == ratio_estimate(ratio)
    with pytest.raises(TypeError, match="MeanStats or RatioStats"):
        arm_estimate((4, 10.0, 30.0))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "level",
    [
        pytest.param(0.0, id="zero"),
        pytest.param(1.0, id="one"),
        pytest.param(95, id="percent-instead-of-fraction"),
        pytest.param(math.nan, id="nan"),
    ],
)
def test_level_outside_the_unit_interval_is_a_programming_error(level: float) -> None:
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        mean_estimate(MeanStats(4, 10.0, 30.0), level=level)


def test_wrong_statistics_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="needs RatioStats"):
        ratio_estimate(MeanStats(4, 10.0, 30.0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs MeanStats"):
        mean_estimate(RatioStats())  # type: ignore[arg-type]


# --- zero variance: decided against the rounding of the sums, not the size of the mean ------


def _running_sums(values: list[float]) -> MeanStats:
    """Sums accumulated one value at a time, as SQL SUM() does (the rollup's path)."""
    total = total_sq = 0.0
    for v in values:
        total += v
        total_sq += v * v
    return MeanStats(len(values), total, total_sq)


@pytest.mark.parametrize(
    ("mean", "sd", "n"),
    [
        pytest.param(1e6, 1.0, 20, id="mean-1e6-sd-1-20-users"),
        pytest.param(1e6, 1.0, 2_000, id="mean-1e6-sd-1-2000-users"),
        pytest.param(1e4, 1e-2, 50, id="mean-1e4-sd-1e-2"),
        pytest.param(0.5, 1e-6, 100, id="tiny-spread-around-a-half"),
    ],
)
def test_real_spread_around_a_large_mean_is_not_zero_variance(mean, sd, n) -> None:
    values = np.random.default_rng(n).normal(mean, sd, n)
    r = mean_estimate(_running_sums(values.tolist()))
    assert r.reason is Reason.OK
    # the one-pass formula from stored sums is only this exact at sd / mean = 1e-6
    assert r.std_error == pytest.approx(sps.sem(values), rel=1e-2)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(-1e8, 1e8, allow_subnormal=False).filter(lambda v: v == 0 or abs(v) > 1e-8),
    st.integers(2, 3_000),
)
def test_constant_values_are_zero_variance_at_any_magnitude(value: float, n: int) -> None:
    r = mean_estimate(_running_sums([value] * n))
    assert r.reason is Reason.ZERO_VARIANCE and r.std_error == 0.0 and r.ci_low is None


@settings(max_examples=200, deadline=None)
@given(
    st.floats(1e-3, 1e6, allow_subnormal=False),
    st.lists(st.integers(1, 50).map(float), min_size=2, max_size=400),
)
def test_ratio_with_one_value_per_impression_is_zero_variance(value, impressions) -> None:
    ratio = RatioStats.from_values([value * m for m in impressions], impressions)
    assert ratio_estimate(ratio).reason is Reason.ZERO_VARIANCE


def test_ratio_with_real_spread_at_a_large_scale_is_kept() -> None:
    rng = np.random.default_rng(4)
    m = rng.integers(1, 5, 300).astype(float)
    y = m * 1e6 + rng.normal(0, 10.0, 300)  # per-impression values near 1e6, user noise sd 10
    r = ratio_estimate(RatioStats.from_values(y, m))
    assert r.reason is Reason.OK and r.std_error > 0
