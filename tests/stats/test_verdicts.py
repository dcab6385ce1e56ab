"""One statistic decides: the interval beside a verdict never contradicts it.

The verdict a report prints is "significant" when the p-value is below 1 − level and its
direction is the sign of the tested effect; the interval it prints is the decisive effect's
(:attr:`Comparison.decisive`). For every input, fixed-horizon and always-valid, the two agree.
"""

from __future__ import annotations

import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tracker.stats import (
    Comparison,
    MeanStats,
    RatioStats,
    Reason,
    compare,
    compare_sequential,
)


@st.composite
def mean_stats(draw) -> MeanStats:
    """Valid sums of n users with a given mean and sample standard deviation."""
    n = draw(st.integers(0, 5_000))
    mean = draw(st.integers(-5_000, 5_000)) / 1_000  # zero, negative and tiny means included
    sd = draw(st.integers(0, 1_000)) / 100
    if n < 2:
        return MeanStats(n, mean * n, mean * mean * n)
    return MeanStats(n, mean * n, sd * sd * (n - 1) + mean * mean * n)


@st.composite
def ratio_stats(draw) -> RatioStats:
    n = draw(st.integers(0, 40))
    m = draw(st.lists(st.integers(0, 6).map(float), min_size=n, max_size=n))
    y = [draw(st.integers(0, 100)) / 100 * mi for mi in m]
    return RatioStats.from_values(y, m)


def _agrees(r: Comparison) -> None:
    effect = r.decisive
    if r.p_value is None:
        assert effect.ci_low is None and effect.reason is not Reason.OK
        return
    alpha = 1 - r.level
    assume(not math.isclose(r.p_value, alpha, rel_tol=1e-9))  # the knife edge of rounding
    significant = r.p_value < alpha
    if significant:  # "better" or "worse" in the direction of the estimate
        assert effect.ci_low > 0 or effect.ci_high < 0
        assert (effect.ci_low > 0) == (effect.estimate > 0)
    else:  # "inconclusive"
        assert effect.ci_low <= 0 <= effect.ci_high


levels = st.sampled_from([0.8, 0.9, 0.95, 0.99, 0.999])


@settings(max_examples=400, deadline=None)
@given(mean_stats(), mean_stats(), levels)
def test_fixed_horizon_verdict_never_contradicts_its_interval(treatment, control, level):
    _agrees(compare(treatment, control, level=level))


@settings(max_examples=400, deadline=None)
@given(mean_stats(), mean_stats(), levels)
def test_sequential_verdict_never_contradicts_its_interval(treatment, control, level):
    _agrees(compare_sequential(treatment, control, level=level))


@settings(max_examples=200, deadline=None)
@given(ratio_stats(), ratio_stats(), levels, st.booleans())
def test_ratio_metric_verdict_never_contradicts_its_interval(treatment, control, level, seq):
    _agrees((compare_sequential if seq else compare)(treatment, control, level=level))


@settings(max_examples=300, deadline=None)
@given(mean_stats(), mean_stats(), levels, st.booleans())
def test_lift_and_difference_intervals_exclude_zero_together(treatment, control, level, seq):
    r = (compare_sequential if seq else compare)(treatment, control, level=level)
    lift, d = r.relative_lift, r.difference
    assume(lift.reason is Reason.OK and r.p_value is not None)
    assume(not math.isclose(r.p_value, 1 - r.level, rel_tol=1e-9))
    assert (lift.ci_low > 0) == (d.ci_low > 0)
    assert (lift.ci_high < 0) == (d.ci_high < 0)
