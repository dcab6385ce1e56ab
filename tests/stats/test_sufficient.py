"""Sufficient statistics: validation, construction from values, merging by addition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.stats import (
    MeanStats,
    RatioStats,
    arm_estimate,
    compare,
    compare_sequential,
)

# Realistic user-level values: centi-units between 0 and 50 (click rates, counts, NDCG...).
values = st.integers(0, 5000).map(lambda v: v / 100)
day = st.lists(values, max_size=12)
days = st.lists(day, min_size=1, max_size=6)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def test_from_values_hand_worked() -> None:
    stats = MeanStats.from_values([1.0, 2.0, 3.0, 4.0])
    assert (stats.n, stats.sum_x, stats.sum_x2) == (4, 10.0, 30.0)


def test_ratio_from_values_hand_worked() -> None:
    stats = RatioStats.from_values([1.0, 0.0, 3.0], [2.0, 1.0, 3.0])
    assert (stats.n, stats.sum_y, stats.sum_m) == (3, 4.0, 6.0)
    assert (stats.sum_y2, stats.sum_m2, stats.sum_ym) == (10.0, 14.0, 11.0)


def test_default_is_identity_of_addition() -> None:
    stats = MeanStats(3, 6.0, 14.0)
    assert stats + MeanStats() == stats
    assert sum([stats, stats], MeanStats()) == MeanStats(6, 12.0, 28.0)
    assert RatioStats() + RatioStats(1, 1.0, 2.0, 1.0, 4.0, 2.0) == RatioStats(
        1, 1.0, 2.0, 1.0, 4.0, 2.0
    )


def test_adding_different_kinds_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        MeanStats(1, 1.0, 1.0) + RatioStats(1, 1.0, 1.0, 1.0, 1.0, 1.0)  # type: ignore[operator]


def test_numpy_scalars_are_accepted_and_normalised() -> None:
    stats = MeanStats(np.int64(2), np.float32(3.0), np.float64(5.0))
    assert type(stats.n) is int and type(stats.sum_x) is float


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        pytest.param(lambda: MeanStats(-1, 0.0, 0.0), ValueError, "n must be >= 0",
                     id="negative-user-count"),
        pytest.param(lambda: MeanStats(2.5, 1.0, 1.0), TypeError, "integer count",
                     id="fractional-user-count"),
        pytest.param(lambda: MeanStats(True, 1.0, 1.0), TypeError, "integer count",
                     id="bool-is-not-a-count"),
        pytest.param(lambda: MeanStats(2, math.nan, 1.0), ValueError, "finite",
                     id="nan-sum"),
        pytest.param(lambda: MeanStats(2, 1.0, math.inf), ValueError, "finite",
                     id="infinite-sum-of-squares"),
        pytest.param(lambda: MeanStats(2, 1.0, -1.0), ValueError, "cannot be negative",
                     id="negative-sum-of-squares"),
        pytest.param(lambda: MeanStats(0, 1.0, 1.0), ValueError, "every sum must be 0",
                     id="sums-without-users"),
        pytest.param(lambda: MeanStats(3, 6.0, 2.0), ValueError, "swapped",
                     id="sum-of-squares-below-cauchy-schwarz"),
        pytest.param(lambda: RatioStats(2, 1.0, 3.0, 1.0, 1.0, 1.0), ValueError, "sum_m2",
                     id="ratio-denominator-squares-inconsistent"),
        pytest.param(lambda: MeanStats.from_values([[1.0, 2.0]]), ValueError, "1-D",
                     id="two-dimensional-values"),
        pytest.param(lambda: RatioStats.from_values([1.0], [1.0, 2.0]), ValueError,
                     "same length", id="ratio-length-mismatch"),
    ],
)
def test_programming_errors_raise_clear_messages(make, error, message) -> None:
    with pytest.raises(error, match=message):
        make()


@settings(max_examples=150, deadline=None)
@given(days)
def test_merging_daily_mean_stats_equals_pooled_computation(daily: list[list[float]]) -> None:
    merged = sum((MeanStats.from_values(d) for d in daily), MeanStats())
    pooled = MeanStats.from_values([v for d in daily for v in d])
    assert merged.n == pooled.n
    assert _close(merged.sum_x, pooled.sum_x) and _close(merged.sum_x2, pooled.sum_x2)
    a, b = arm_estimate(merged), arm_estimate(pooled)
    assert a.reason == b.reason
    for field in ("estimate", "std_error", "ci_low", "ci_high"):
        assert _close(getattr(a, field), getattr(b, field)), field


@settings(max_examples=100, deadline=None)
@given(days, days)
def test_merging_daily_stats_gives_the_pooled_comparison(
    treatment_days: list[list[float]], control_days: list[list[float]]
) -> None:
    def both(daily: list[list[float]]) -> tuple[MeanStats, MeanStats]:
        merged = sum((MeanStats.from_values(d) for d in daily), MeanStats())
        return merged, MeanStats.from_values([v for d in daily for v in d])

    (t_merged, t_pooled), (c_merged, c_pooled) = both(treatment_days), both(control_days)
    for method in (compare, compare_sequential):
        a, b = method(t_merged, c_merged), method(t_pooled, c_pooled)
        assert (a.difference.reason, a.relative_lift.reason) == (
            b.difference.reason, b.relative_lift.reason
        )
        assert _close(a.p_value, b.p_value)
        for effect in ("difference", "relative_lift"):
            for field in ("estimate", "ci_low", "ci_high"):
                x, y = getattr(getattr(a, effect), field), getattr(getattr(b, effect), field)
                assert _close(x, y), (method.__name__, effect, field)


# A user: (numerator, impressions) with numerator <= impressions (e.g. clicks).
user = st.integers(1, 20).flatmap(lambda m: st.tuples(st.integers(0, m), st.just(m)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(user, max_size=10), min_size=1, max_size=6))
def test_merging_daily_ratio_stats_equals_pooled_computation(daily) -> None:
    def stats(users) -> RatioStats:
        return RatioStats.from_values([y for y, _ in users], [m for _, m in users])

    merged = sum((stats(d) for d in daily), RatioStats())
    pooled = stats([u for d in daily for u in d])
    assert merged == pooled  # integer-valued sums add exactly
    a, b = arm_estimate(merged), arm_estimate(pooled)
    assert a == b
