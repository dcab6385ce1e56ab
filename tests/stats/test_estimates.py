"""Per-arm estimates: mean and ratio with their intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
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
