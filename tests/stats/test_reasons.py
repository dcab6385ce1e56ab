"""Degenerate inputs: an explicit reason code, never NaN, never an exception."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.stats import (
    Effect,
    MeanStats,
    RatioStats,
    Reason,
    arm_estimate,
    compare,
    compare_sequential,
    crossover_health,
    non_inferiority,
    sequential_srm,
    srm_test,
    trend_test,
)

VARIED = MeanStats.from_values([0.0, 1.0, 3.0])
EMPTY = MeanStats()
SINGLE = MeanStats.from_values([2.0])
CONSTANT = MeanStats.from_values([0.5, 0.5, 0.5, 0.5])
ALL_ZERO = MeanStats.from_values([0.0, 0.0, 0.0])
NEGATIVE = MeanStats.from_values([-1.0, 0.0, -3.0])
NO_IMPRESSIONS = RatioStats.from_values([0.0, 0.0], [0.0, 0.0])
SOME_IMPRESSIONS = RatioStats.from_values([1.0, 0.0, 2.0], [2.0, 1.0, 4.0])

# (case, reason it must carry, what the result must still know)
CASES = [
    pytest.param(lambda: arm_estimate(VARIED), Reason.OK, "estimate", id="ordinary-arm-is-ok"),
    pytest.param(lambda: arm_estimate(EMPTY), Reason.NO_USERS, None, id="arm-without-users"),
    pytest.param(lambda: arm_estimate(SINGLE), Reason.ONE_USER, "estimate",
                 id="arm-with-one-user-keeps-its-mean"),
    pytest.param(lambda: arm_estimate(CONSTANT), Reason.ZERO_VARIANCE, "estimate",
                 id="arm-where-every-user-has-the-same-value"),
    pytest.param(lambda: arm_estimate(NO_IMPRESSIONS), Reason.ZERO_DENOMINATOR, None,
                 id="ratio-arm-without-impressions"),
    pytest.param(lambda: compare(VARIED, EMPTY).difference, Reason.NO_USERS, None,
                 id="comparison-with-an-empty-control"),
    pytest.param(lambda: compare(SINGLE, VARIED).difference, Reason.ONE_USER, "estimate",
                 id="comparison-with-a-one-user-treatment-keeps-the-difference"),
    pytest.param(lambda: compare(CONSTANT, CONSTANT).difference, Reason.ZERO_VARIANCE,
                 "estimate", id="comparison-of-two-constant-arms"),
    pytest.param(lambda: compare(VARIED, ALL_ZERO).relative_lift, Reason.CONTROL_MEAN_ZERO,
                 None, id="relative-lift-against-a-zero-control-mean"),
    pytest.param(lambda: compare(SOME_IMPRESSIONS, NO_IMPRESSIONS).difference,
                 Reason.ZERO_DENOMINATOR, None, id="ratio-comparison-without-control-impressions"),
    pytest.param(lambda: compare(VARIED, VARIED).relative_lift, Reason.UNBOUNDED_RATIO,
                 "estimate", id="lift-interval-unbounded-when-control-mean-is-uncertain"),
    pytest.param(lambda: non_inferiority(VARIED, NEGATIVE, margin=0.1),
                 Reason.NON_POSITIVE_MEAN, "estimate",
                 id="relative-guardrail-needs-a-positive-control-mean"),
    pytest.param(lambda: compare_sequential(VARIED, ALL_ZERO).relative_lift,
                 Reason.CONTROL_MEAN_ZERO, None, id="sequential-lift-against-a-zero-control-mean"),
    pytest.param(lambda: non_inferiority(VARIED, ALL_ZERO, margin=0.01), Reason.CONTROL_MEAN_ZERO,
                 None, id="relative-guardrail-against-a-zero-control-mean"),
    pytest.param(lambda: non_inferiority(CONSTANT, VARIED, margin=1.0), Reason.ZERO_VARIANCE,
                 "estimate", id="guardrail-tolerating-a-total-loss-of-a-constant-treatment"),
    pytest.param(lambda: srm_test([0, 0], [1, 1]), Reason.NO_USERS, None,
                 id="srm-before-any-user"),
    pytest.param(lambda: sequential_srm([[0, 0]], [1, 1]), Reason.NO_USERS, None,
                 id="sequential-srm-before-any-user"),
    pytest.param(lambda: crossover_health(0, 0), Reason.NO_USERS, None,
                 id="crossover-before-any-user"),
    pytest.param(lambda: trend_test([0, 1], [0.1, 0.05], [1e-4, 1e-4]), Reason.TOO_FEW_DAYS,
                 None, id="trend-over-two-days"),
]


@pytest.mark.parametrize(("make", "reason", "still_known"), CASES)
def test_degenerate_input_gives_a_reason_code(make, reason, still_known) -> None:
    result = make()
    assert result.reason is reason
    if still_known is not None:
        assert getattr(result, still_known) is not None
    if reason is not Reason.OK:
        for field in ("ci_low", "ci_high", "p_value"):
            assert getattr(result, field, None) is None, field


def test_every_reason_code_is_exercised() -> None:
    assert {case.values[1] for case in CASES} == set(Reason)


def test_zero_control_mean_still_gives_the_absolute_difference_and_p_value() -> None:
    r = compare(VARIED, ALL_ZERO)
    assert r.difference.reason is Reason.OK and r.p_value is not None
    assert r.relative_lift.estimate is None and not r.ok


def _floats(obj: object) -> list[float]:
    """Every float inside a (nested) result dataclass."""
    if isinstance(obj, float):
        return [obj]
    if dataclasses.is_dataclass(obj):
        return [f for field in dataclasses.fields(obj) for f in _floats(getattr(obj, field.name))]
    if isinstance(obj, tuple):
        return [f for item in obj for f in _floats(item)]
    return []


small_arm = st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.5]), max_size=4).map(MeanStats.from_values)


@settings(max_examples=300, deadline=None)
@given(small_arm, small_arm)
def test_no_result_ever_contains_nan(treatment: MeanStats, control: MeanStats) -> None:
    results = [
        arm_estimate(treatment),
        compare(treatment, control),
        compare_sequential(treatment, control),
        non_inferiority(treatment, control, margin=0.1),
        non_inferiority(treatment, control, margin=0.1, relative=False, higher_is_better=False),
    ]
    for result in results:
        assert not any(math.isnan(f) for f in _floats(result)), result
    for effect in (results[1].difference, results[1].relative_lift):
        assert isinstance(effect, Effect)
        assert (effect.ci_low is None) == (effect.reason is not Reason.OK)
