"""Treatment against control: Welch test, difference and relative lift, non-inferiority."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from tracker.stats import (
    Decided,
    IntervalKind,
    MeanStats,
    RatioStats,
    Reason,
    compare,
    non_inferiority,
)


def _stats_from_summary(mean: float, std: float, n: int) -> MeanStats:
    """MeanStats with a given mean, sample standard deviation and n."""
    return MeanStats(n, mean * n, std * std * (n - 1) + mean * mean * n)


def _fieller_by_hand(t: float, c: float, v_t: float, v_c: float, q: float) -> np.ndarray:
    """The two ratios where (t - rho c)^2 = q^2 (v_t + rho^2 v_c), by numpy's polynomial roots."""
    return np.sort(np.roots([c * c - q * q * v_c, -2 * t * c, t * t - q * q * v_t]).real)


def test_hand_worked_example() -> None:
    # treatment 2,3,4,5 vs control 1,2,3,4: d = 1, Var(d) = 5/12 + 5/12, df = 6
    r = compare(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0))
    se = math.sqrt(5 / 6)
    assert r.difference.estimate == 1.0
    assert r.difference.std_error == pytest.approx(se)
    assert r.statistic == pytest.approx(1 / se)
    assert r.df == pytest.approx(6.0)
    # t(0.975, 6) = 2.446911851
    assert r.difference.ci_low == pytest.approx(1 - 2.446911851 * se, rel=1e-8)
    assert r.difference.ci_high == pytest.approx(1 + 2.446911851 * se, rel=1e-8)
    # Fieller: 3.5 / 2.5 - 1 = 0.4; ends where (3.5 - rho 2.5)^2 = q^2 (5/12 + rho^2 5/12),
    # i.e. rho^2 (6.25 - q^2 5/12) - 17.5 rho + (12.25 - q^2 5/12) = 0
    low, high = _fieller_by_hand(3.5, 2.5, 5 / 12, 5 / 12, 2.446911851)
    # q^2 5/12 = 2.494741: 3.755259 rho^2 - 17.5 rho + 9.755259 = 0, sqrt(disc) = 12.63791
    assert (low, high) == pytest.approx((0.64738, 4.01276), abs=1e-5)
    assert r.relative_lift.estimate == pytest.approx(0.4)
    assert r.relative_lift.ci_low == pytest.approx(low - 1, rel=1e-8)
    assert r.relative_lift.ci_high == pytest.approx(high - 1, rel=1e-8)
    # the delta-method SE of the lift is still reported: Var = v/2.5^2 + 3.5^2 v/2.5^4
    lift_se = math.sqrt((5 / 12) / 2.5**2 + 3.5**2 * (5 / 12) / 2.5**4)
    assert r.relative_lift.std_error == pytest.approx(lift_se)
    assert r.interval_kind is IntervalKind.FIXED_HORIZON
    assert r.ok and r.reason is Reason.OK
    assert r.decided_on is Decided.RELATIVE_LIFT and r.decisive is r.relative_lift


@pytest.mark.parametrize(
    ("treatment", "control"),
    [
        pytest.param((0.052, 0.31, 10_000), (0.050, 0.29, 10_000), id="balanced-large-arms"),
        pytest.param((1.8, 4.0, 120), (1.2, 1.5, 900), id="unequal-sizes-and-variances"),
        pytest.param((3.0, 0.0, 50), (2.5, 1.0, 60), id="treatment-with-zero-variance"),
        pytest.param((0.10, 0.2, 2), (0.30, 0.4, 3), id="tiny-arms-few-degrees-of-freedom"),
        pytest.param((-1.0, 2.0, 30), (1.0, 2.0, 30), id="negative-effect"),
    ],
)
def test_welch_test_matches_scipy_ttest_ind_from_stats(treatment, control) -> None:
    r = compare(_stats_from_summary(*treatment), _stats_from_summary(*control))
    expected = sps.ttest_ind_from_stats(*treatment, *control, equal_var=False)
    assert r.statistic == pytest.approx(expected.statistic, rel=1e-8)
    assert r.p_value == pytest.approx(expected.pvalue, rel=1e-7)


@pytest.mark.parametrize(
    ("treatment", "control", "reason"),
    [
        pytest.param((0.5, 2.0, 30), (0.0, 2.0, 30), Reason.CONTROL_MEAN_ZERO,
                     id="zero-control-mean"),
        pytest.param((0.5, 2.0, 30), (0.2, 2.0, 30), Reason.UNBOUNDED_RATIO,
                     id="control-mean-indistinguishable-from-zero"),
    ],
)
def test_without_a_bounded_lift_interval_the_difference_interval_is_decisive(
    treatment, control, reason
) -> None:
    r = compare(_stats_from_summary(*treatment), _stats_from_summary(*control))
    assert r.relative_lift.reason is reason and r.relative_lift.ci_low is None
    assert r.decided_on is Decided.DIFFERENCE and r.decisive is r.difference
    assert r.difference.ci_low is not None and r.p_value is not None


def test_negative_control_mean_maps_the_ratio_interval_to_the_lift() -> None:
    # lift = (T - C) / |C| = 1 - T / C for C < 0: the ends swap
    r = compare(_stats_from_summary(-0.9, 0.5, 100), _stats_from_summary(-1.0, 0.5, 100))
    t_var = c_var = 0.25 / 100
    q = sps.t.ppf(0.975, r.df)
    low, high = _fieller_by_hand(-0.9, -1.0, t_var, c_var, q)
    assert r.relative_lift.ci_low == pytest.approx(1 - high, rel=1e-9)
    assert r.relative_lift.ci_high == pytest.approx(1 - low, rel=1e-9)


def test_fieller_ends_are_where_welch_of_t_minus_rho_c_is_just_significant() -> None:
    rng = np.random.default_rng(8)
    t_values, c_values = rng.exponential(1.3, 4_000), rng.exponential(1.0, 5_000)
    r = compare(MeanStats.from_values(t_values), MeanStats.from_values(c_values), level=0.9)
    for end in (r.relative_lift.ci_low, r.relative_lift.ci_high):
        # scaling the control values by rho tests T = rho C with Welch's test (scipy); its df
        # at rho differs from ours at rho = 1 by a hair with thousands of users
        p = sps.ttest_ind(t_values, (1 + end) * c_values, equal_var=False).pvalue
        assert p == pytest.approx(0.10, rel=2e-3)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99], ids=lambda lv: f"level-{lv}")
def test_difference_interval_matches_statsmodels_welch_interval(level: float) -> None:
    weightstats = pytest.importorskip("statsmodels.stats.weightstats")
    rng = np.random.default_rng(3)
    t_values, c_values = rng.exponential(1.1, 400), rng.exponential(1.0, 250)
    r = compare(MeanStats.from_values(t_values), MeanStats.from_values(c_values), level=level)
    cm = weightstats.CompareMeans(
        weightstats.DescrStatsW(t_values), weightstats.DescrStatsW(c_values)
    )
    low, high = cm.tconfint_diff(alpha=1 - level, usevar="unequal")
    assert (r.difference.ci_low, r.difference.ci_high) == pytest.approx((low, high), rel=1e-9)


def test_decisive_interval_excludes_zero_exactly_when_p_below_alpha() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        t = MeanStats.from_values(rng.exponential(1.0, 40) + rng.normal(0, 0.4))
        c = MeanStats.from_values(rng.exponential(1.0, 40))
        r = compare(t, c, level=0.95)
        excludes = r.decisive.ci_low > 0 or r.decisive.ci_high < 0
        assert excludes == (r.p_value < 0.05)


def test_relative_lift_uses_the_magnitude_of_a_negative_control_mean() -> None:
    r = compare(_stats_from_summary(-0.9, 0.5, 100), _stats_from_summary(-1.0, 0.5, 100))
    assert r.relative_lift.estimate == pytest.approx(0.1)  # treatment is higher: positive lift


def test_relative_lift_interval_matches_a_user_level_bootstrap() -> None:
    rng = np.random.default_rng(2024)
    n = 10_000

    def users(lift: float) -> np.ndarray:
        """Per-user click-through: most users never click, heavy right tail."""
        impressions = rng.negative_binomial(1, 0.3, n) + 1
        propensity = np.minimum(rng.beta(0.35, 5.0, n) * (1 + lift), 1.0)
        return rng.binomial(impressions, propensity) / impressions

    t_values, c_values = users(0.05), users(0.0)
    r = compare(MeanStats.from_values(t_values), MeanStats.from_values(c_values))
    lift_boot = np.concatenate([
        t_values[rng.integers(0, n, (250, n))].mean(axis=1)
        / c_values[rng.integers(0, n, (250, n))].mean(axis=1) - 1
        for _ in range(6)
    ])
    low, high = np.quantile(lift_boot, [0.025, 0.975])
    width = r.relative_lift.ci_high - r.relative_lift.ci_low
    assert (c_values == 0).mean() > 0.5  # the data set is realistically zero-heavy
    assert r.relative_lift.std_error == pytest.approx(lift_boot.std(ddof=1), rel=0.08)
    assert abs(r.relative_lift.ci_low - low) < 0.06 * width
    assert abs(r.relative_lift.ci_high - high) < 0.06 * width


def test_ratio_metrics_compare_with_delta_method_variances() -> None:
    # with one impression per user, a ratio comparison is the plain Welch comparison
    rng = np.random.default_rng(5)
    t_clicks, c_clicks = rng.binomial(1, 0.12, 700), rng.binomial(1, 0.10, 800)
    as_ratio = compare(
        RatioStats.from_values(t_clicks, np.ones(700)),
        RatioStats.from_values(c_clicks, np.ones(800)),
    )
    as_mean = compare(MeanStats.from_values(t_clicks), MeanStats.from_values(c_clicks))
    assert as_ratio.p_value == pytest.approx(as_mean.p_value, rel=1e-9)
    assert as_ratio.relative_lift.ci_low == pytest.approx(as_mean.relative_lift.ci_low, rel=1e-9)


def test_mixing_mean_and_ratio_statistics_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="both be MeanStats or both RatioStats"):
        compare(MeanStats(4, 14.0, 54.0), RatioStats.from_values([1.0, 2.0], [1.0, 1.0]))


# --- non-inferiority ----------------------------------------------------------------------

T_VALUES = np.array([2.0, 3.0, 4.0, 5.0, 3.5, 2.5])
C_VALUES = np.array([1.0, 2.0, 3.0, 4.0, 2.0, 3.0, 2.5])


@pytest.mark.parametrize("margin", [0.0, 0.3, 1.0], ids=lambda m: f"margin-{m}")
def test_absolute_non_inferiority_matches_scipy_one_sided_welch(margin: float) -> None:
    r = non_inferiority(
        MeanStats.from_values(T_VALUES), MeanStats.from_values(C_VALUES),
        margin=margin, relative=False,
    )
    # H0: T - C <= -margin  <=>  (T + margin) - C <= 0, tested one-sided
    expected = sps.ttest_ind(T_VALUES + margin, C_VALUES, equal_var=False, alternative="greater")
    assert r.statistic == pytest.approx(expected.statistic, rel=1e-9)
    assert r.p_value == pytest.approx(expected.pvalue, rel=1e-8)
    assert r.ci_high == math.inf and r.non_inferior == (expected.pvalue < 0.05)


def test_lower_is_better_guardrail_matches_scipy_one_sided_welch() -> None:
    # e.g. latency: treatment may be at most 0.5 higher; H0: T - C >= 0.5
    r = non_inferiority(
        MeanStats.from_values(C_VALUES), MeanStats.from_values(T_VALUES),
        margin=0.5, relative=False, higher_is_better=False,
    )
    expected = sps.ttest_ind(C_VALUES - 0.5, T_VALUES, equal_var=False, alternative="less")
    assert r.p_value == pytest.approx(expected.pvalue, rel=1e-8)
    assert r.ci_low == -math.inf and r.non_inferior is True


def test_relative_non_inferiority_bound_is_the_two_sided_interval_at_twice_alpha() -> None:
    # with no margin the guardrail tests T = C, so its bound is the 90 % two-sided end
    t, c = MeanStats.from_values(T_VALUES * 0.97), MeanStats.from_values(C_VALUES * 1.2)
    one_sided = non_inferiority(t, c, margin=0.0, relative=True, level=0.95)
    two_sided = compare(t, c, level=0.90)
    assert one_sided.estimate == pytest.approx(two_sided.relative_lift.estimate)
    assert one_sided.ci_low == pytest.approx(two_sided.relative_lift.ci_low, rel=1e-12)
    assert one_sided.non_inferior == (one_sided.ci_low > 0)


def test_a_clearly_harmful_treatment_is_not_non_inferior() -> None:
    harmful = MeanStats.from_values(np.linspace(0.0, 1.0, 500))
    control = MeanStats.from_values(np.linspace(0.5, 1.5, 500))
    r = non_inferiority(harmful, control, margin=0.01)
    assert r.non_inferior is False and r.p_value > 0.99


@pytest.mark.parametrize(
    "margin",
    [pytest.param(-0.01, id="negative"), pytest.param(math.inf, id="infinite")],
)
def test_invalid_margin_is_a_programming_error(margin: float) -> None:
    with pytest.raises(ValueError, match="margin must be a finite number >= 0"):
        non_inferiority(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0), margin=margin)


@pytest.mark.parametrize(
    ("higher_is_better", "treatment_scale"),
    [pytest.param(True, 0.93, id="higher-is-better-loss-below-margin"),
     pytest.param(False, 1.05, id="lower-is-better-rise-below-margin")],
)
def test_relative_guardrail_is_welch_of_treatment_against_control_times_the_margin(
    higher_is_better: bool, treatment_scale: float
) -> None:
    rng = np.random.default_rng(21)
    t_values, c_values = rng.exponential(treatment_scale, 300), rng.exponential(1.0, 300)
    r = non_inferiority(MeanStats.from_values(t_values), MeanStats.from_values(c_values),
                        margin=0.1, relative=True, higher_is_better=higher_is_better)
    rho = 0.9 if higher_is_better else 1.1
    # H0 T <= 0.9 C (or T >= 1.1 C): scipy's one-sided Welch test of t against rho * c
    expected = sps.ttest_ind(t_values, rho * c_values, equal_var=False,
                             alternative="greater" if higher_is_better else "less")
    assert r.statistic == pytest.approx(expected.statistic, rel=1e-9)
    assert r.df == pytest.approx(expected.df, rel=1e-9)
    assert r.p_value == pytest.approx(expected.pvalue, rel=1e-8)
    assert r.non_inferior == (expected.pvalue < 0.05)
    bound = r.ci_low if higher_is_better else r.ci_high
    assert r.non_inferior == (bound > -0.1 if higher_is_better else bound < 0.1)


@pytest.mark.parametrize(
    "higher_is_better", [pytest.param(True, id="higher-is-better"),
                         pytest.param(False, id="lower-is-better")])
@pytest.mark.parametrize("n", [pytest.param(20, id="n-20"), pytest.param(200, id="n-200")])
def test_relative_guardrail_at_its_margin_passes_about_alpha_of_the_time(
    n: int, higher_is_better: bool
) -> None:
    # exponential outcomes, true relative effect exactly on the 10 % margin; 1,500 replicates
    # put the Monte-Carlo 99 % band at about +-1.5 pp around 5 %; the symmetric delta-method
    # interval gave 10.2 % (lower is better) and 1.6 % (higher is better) at n = 20, the log
    # ratio about 6 %.
    rng = np.random.default_rng(n + higher_is_better)
    mean = 0.9 if higher_is_better else 1.1
    passes = sum(
        bool(non_inferiority(MeanStats.from_values(rng.exponential(mean, n)),
                             MeanStats.from_values(rng.exponential(1.0, n)), margin=0.1,
                             higher_is_better=higher_is_better).non_inferior)
        for _ in range(1_500)
    )
    assert 0.035 <= passes / 1_500 <= 0.065


def test_a_tolerated_loss_beyond_100_percent_is_a_valid_margin() -> None:
    # H0 T <= -8 C cannot hold for positive means; four users per arm already reject it
    r = non_inferiority(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0), margin=9.0)
    assert r.non_inferior is True and r.p_value < 0.01
