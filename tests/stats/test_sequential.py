"""Always-valid confidence sequences for the difference and the relative lift."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.stats import (
    DEFAULT_TUNING_N,
    Decided,
    IntervalKind,
    MeanStats,
    Reason,
    boundary_multiplier,
    compare,
    compare_sequential,
    contrast,
    non_inferiority_sequential_of,
    sequential_critical,
)
from tracker.stats.compare import non_inferiority_of


def test_multiplier_at_the_tuning_sample_size_hand_worked() -> None:
    # alpha = 0.05: N rho^2 = -2 ln 0.05 + ln(1 - 2 ln 0.05) = 5.991465 + 1.944697 = 7.936162
    # multiplier^2 = 2 (8.936162 / 7.936162) ln(sqrt(8.936162) / 0.05) = 9.2124
    nr2 = 5.991465 + 1.944697
    expected = math.sqrt(2 * (nr2 + 1) / nr2 * (0.5 * math.log(nr2 + 1) + math.log(20)))
    assert expected == pytest.approx(3.0352, abs=1e-4)
    assert boundary_multiplier(5000, 0.05, 5000) == pytest.approx(expected, rel=1e-6)
    assert DEFAULT_TUNING_N == 5000


@pytest.mark.parametrize("n", [10, 100, 5_000, 100_000, 10_000_000], ids=lambda n: f"n-{n}")
def test_sequence_is_wider_than_the_fixed_horizon_interval_at_every_size(n: int) -> None:
    assert boundary_multiplier(n, 0.05) > 1.959964


def test_hand_worked_comparison() -> None:
    # 4,000 users per arm, 480 vs 400 conversions
    r = compare_sequential(MeanStats(4000, 480.0, 480.0), MeanStats(4000, 400.0, 400.0))
    v_t, v_c = (480 - 480**2 / 4000) / 3999 / 4000, (400 - 400**2 / 4000) / 3999 / 4000
    se = math.sqrt(v_t + v_c)
    nr2 = 8000 * (5.991465 + 1.944697) / 5000
    multiplier = math.sqrt(2 * (nr2 + 1) / nr2 * math.log(math.sqrt(nr2 + 1) / 0.05))
    assert r.difference.std_error == pytest.approx(se)
    assert r.difference.ci_low == pytest.approx(0.02 - multiplier * se, rel=1e-6)
    assert r.difference.ci_high == pytest.approx(0.02 + multiplier * se, rel=1e-6)
    z2 = (0.02 / se) ** 2
    log_e_value = nr2 * z2 / (2 * (nr2 + 1)) - 0.5 * math.log(nr2 + 1)
    assert r.p_value == pytest.approx(math.exp(-log_e_value), rel=1e-5)
    assert r.statistic == pytest.approx(0.02 / se)
    # the lift's sequence is Fieller's with multiplier M: (0.12 - rho 0.1)^2 = M^2 (v_t + rho^2 v_c)
    for end in (r.relative_lift.ci_low, r.relative_lift.ci_high):
        rho = 1 + end
        assert (0.12 - rho * 0.10) ** 2 == pytest.approx(multiplier**2 * (v_t + rho**2 * v_c))
    assert r.relative_lift.ci_low < 0 < r.relative_lift.ci_high  # agrees with p > 0.05
    assert r.df is None and r.interval_kind is IntervalKind.SEQUENTIAL
    assert r.decided_on is Decided.RELATIVE_LIFT


def test_sequential_and_fixed_share_the_estimate_and_standard_error() -> None:
    t, c = MeanStats.from_values([0.0, 1.0, 2.0, 0.0, 5.0]), MeanStats.from_values([0.0, 1.0, 1.0])
    fixed, sequential = compare(t, c), compare_sequential(t, c)
    assert fixed.interval_kind is IntervalKind.FIXED_HORIZON
    assert sequential.difference.estimate == fixed.difference.estimate
    assert sequential.relative_lift.std_error == fixed.relative_lift.std_error


arm = st.lists(st.integers(0, 40).map(lambda v: v / 4), min_size=2, max_size=60)


@settings(max_examples=200, deadline=None)
@given(arm, arm, st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_p_value_below_alpha_exactly_when_the_sequence_excludes_zero(t, c, level) -> None:
    r = compare_sequential(MeanStats.from_values(t), MeanStats.from_values(c), level=level)
    if r.reason is not Reason.OK:
        assert r.p_value is None and r.decisive.ci_low is None
        return
    excludes = r.decisive.ci_low > 0 or r.decisive.ci_high < 0
    # ties are measure-zero; skip the knife edge where rounding decides
    if not math.isclose(r.p_value, 1 - level, rel_tol=1e-9):
        assert excludes == (r.p_value < 1 - level)
    assert 0.0 < r.p_value <= 1.0


def test_a_large_real_effect_is_eventually_detected() -> None:
    rng = np.random.default_rng(9)
    t = MeanStats.from_values(rng.normal(1.1, 1.0, 50_000))
    c = MeanStats.from_values(rng.normal(1.0, 1.0, 50_000))
    r = compare_sequential(t, c)
    assert r.p_value < 1e-6 and r.relative_lift.ci_low > 0 and r.difference.ci_low > 0


@settings(max_examples=200, deadline=None)
@given(arm, arm, st.sampled_from([0.01, 0.005, 0.001]))
def test_a_stricter_level_at_the_same_tuning_agrees_with_the_same_p_value(t, c, alpha) -> None:
    # what a report does after Holm: draw the sequence at a corrected level, rho unchanged
    nominal = compare_sequential(MeanStats.from_values(t), MeanStats.from_values(c))
    strict = compare_sequential(MeanStats.from_values(t), MeanStats.from_values(c),
                                level=1 - alpha, tuning_level=0.95)
    assert strict.p_value == nominal.p_value
    if strict.reason is Reason.OK and not math.isclose(strict.p_value, alpha, rel_tol=1e-9):
        excludes = strict.decisive.ci_low > 0 or strict.decisive.ci_high < 0
        assert excludes == (strict.p_value < alpha)


@pytest.mark.parametrize(
    "tuning_n",
    [pytest.param(0, id="zero"), pytest.param(-5, id="negative"), pytest.param(math.nan, id="nan")],
)
def test_invalid_tuning_parameter_is_a_programming_error(tuning_n: float) -> None:
    with pytest.raises(ValueError, match="tuning_n"):
        compare_sequential(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0), tuning_n=tuning_n)


# ------------------------------------------------------------------------- guardrails
def _arm(n: int, mean: float, sd: float = 1.0) -> MeanStats:
    return MeanStats(n, n * mean, (n - 1) * sd * sd + n * mean * mean)


@pytest.mark.parametrize("higher_is_better", [True, False], ids=["higher-better",
                                                                 "lower-better"])
@pytest.mark.parametrize("treatment_mean", [0.9, 0.97, 1.0, 1.03])
def test_the_always_valid_guardrail_rejects_exactly_beyond_the_sequence_boundary(
        higher_is_better, treatment_mean):
    pair = contrast(_arm(3000, treatment_mean), _arm(3000, 1.0))
    seq = non_inferiority_sequential_of(pair, margin=0.05, higher_is_better=higher_is_better)
    fixed = non_inferiority_of(pair, margin=0.05, higher_is_better=higher_is_better)
    assert seq.statistic == pytest.approx(fixed.statistic, rel=1e-12)  # the same statistic
    b = sequential_critical(6000, 0.05, tuning_alpha=0.05)
    good = seq.statistic if higher_is_better else -seq.statistic
    assert seq.non_inferior is (good > b)
    assert (seq.p_value < 0.05) is seq.non_inferior
    assert (seq.p_value_inferior < 0.05) is (-good > b)
    # always-valid is never easier to pass than the fixed horizon
    assert fixed.non_inferior or not seq.non_inferior
    assert seq.interval_kind is IntervalKind.SEQUENTIAL


def test_the_always_valid_bound_uses_the_sequence_boundary():
    pair = contrast(_arm(3000, 1.0), _arm(3000, 1.0))
    seq = non_inferiority_sequential_of(pair, margin=0.05, relative=False)
    b = sequential_critical(6000, 0.05, tuning_alpha=0.05)
    assert seq.ci_low == pytest.approx(-b * math.sqrt(pair.variance), rel=1e-12)
    assert seq.ci_high == math.inf


def test_an_untestable_guardrail_says_why():
    r = non_inferiority_sequential_of(contrast(_arm(1, 1.0), _arm(5, 1.0)), margin=0.05)
    assert r.non_inferior is None and r.reason is Reason.ONE_USER
