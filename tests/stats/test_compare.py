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


def test_hand_worked_example() -> None:
    # treatment 2,3,4,5 vs control 1,2,3,4: means 3.5 and 2.5, both s^2 = 5/3, v = 5/12 each
    r = compare(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0))
    se = math.sqrt(5 / 6)
    assert r.difference.estimate == 1.0
    assert r.difference.std_error == pytest.approx(se)
    # the difference keeps its Welch interval: t(0.975, 6) = 2.446911851
    assert r.difference.ci_low == pytest.approx(1 - 2.446911851 * se, rel=1e-8)
    assert r.difference.ci_high == pytest.approx(1 + 2.446911851 * se, rel=1e-8)
    # the log ratio decides: l = ln 1.4, a = (5/12)/3.5^2, b = (5/12)/2.5^2
    a, b = (5 / 12) / 12.25, (5 / 12) / 6.25
    log_se = math.sqrt(a + b)
    df = (a + b) ** 2 / ((a * a + b * b) / 3)
    assert df == pytest.approx(5.428949, rel=1e-6)
    assert r.decided_on is Decided.RELATIVE_LIFT and r.df == pytest.approx(df)
    assert r.statistic == pytest.approx(math.log(1.4) / log_se)
    assert r.p_value == pytest.approx(2 * sps.t.sf(math.log(1.4) / log_se, df), rel=1e-10)
    t_crit = sps.t.ppf(0.975, df)
    assert r.relative_lift.estimate == pytest.approx(0.4)
    assert r.relative_lift.ci_low == pytest.approx(1.4 * math.exp(-t_crit * log_se) - 1)
    assert r.relative_lift.ci_high == pytest.approx(1.4 * math.exp(t_crit * log_se) - 1)
    # the delta-method SE of the lift is still reported: Var = v/2.5^2 + 3.5^2 v/2.5^4
    lift_se = math.sqrt((5 / 12) / 2.5**2 + 3.5**2 * (5 / 12) / 2.5**4)
    assert r.relative_lift.std_error == pytest.approx(lift_se)
    assert r.interval_kind is IntervalKind.FIXED_HORIZON
    assert r.ok and r.reason is Reason.OK and r.decisive is r.relative_lift


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
def test_difference_standard_error_matches_scipy_welch(treatment, control) -> None:
    r = compare(_stats_from_summary(*treatment), _stats_from_summary(*control))
    expected = sps.ttest_ind_from_stats(*treatment, *control, equal_var=False)
    d = r.difference
    assert d.estimate / d.std_error == pytest.approx(expected.statistic, rel=1e-8)


@pytest.mark.parametrize(
    ("treatment", "control", "reason"),
    [
        pytest.param((-1.0, 2.0, 30), (1.0, 2.0, 30), Reason.NON_POSITIVE_MEAN,
                     id="negative-treatment-mean"),
        pytest.param((0.5, 2.0, 30), (-1.0, 2.0, 30), Reason.NON_POSITIVE_MEAN,
                     id="negative-control-mean"),
        pytest.param((0.5, 2.0, 30), (0.0, 2.0, 30), Reason.CONTROL_MEAN_ZERO,
                     id="zero-control-mean"),
    ],
)
def test_without_a_log_ratio_the_welch_test_of_the_difference_decides(
    treatment, control, reason
) -> None:
    r = compare(_stats_from_summary(*treatment), _stats_from_summary(*control))
    expected = sps.ttest_ind_from_stats(*treatment, *control, equal_var=False)
    assert r.decided_on is Decided.DIFFERENCE and r.decisive is r.difference
    assert r.statistic == pytest.approx(expected.statistic, rel=1e-8)
    assert r.p_value == pytest.approx(expected.pvalue, rel=1e-7)
    assert r.relative_lift.reason is reason and r.relative_lift.ci_low is None


def test_log_ratio_test_by_hand_from_user_values() -> None:
    rng = np.random.default_rng(8)
    t_values, c_values = rng.exponential(1.3, 35), rng.exponential(1.0, 50)
    r = compare(MeanStats.from_values(t_values), MeanStats.from_values(c_values), level=0.9)
    a = t_values.var(ddof=1) / t_values.size / t_values.mean() ** 2
    b = c_values.var(ddof=1) / c_values.size / c_values.mean() ** 2
    df = (a + b) ** 2 / (a * a / 34 + b * b / 49)
    log_ratio = math.log(t_values.mean() / c_values.mean())
    assert r.p_value == pytest.approx(
        2 * sps.t.sf(abs(log_ratio) / math.sqrt(a + b), df), rel=1e-9
    )
    half = sps.t.ppf(0.95, df) * math.sqrt(a + b)
    assert r.relative_lift.ci_low == pytest.approx(math.expm1(log_ratio - half), rel=1e-9)
    assert r.relative_lift.ci_high == pytest.approx(math.expm1(log_ratio + half), rel=1e-9)


def test_relative_interval_matches_statsmodels_log_risk_ratio_on_large_binary_arms() -> None:
    proportion = pytest.importorskip("statsmodels.stats.proportion")
    # 200k users per arm, conversions 6,300 vs 6,000: the Katz log interval of the risk ratio
    n, x_t, x_c = 200_000, 6_300, 6_000
    r = compare(MeanStats(n, float(x_t), float(x_t)), MeanStats(n, float(x_c), float(x_c)))
    low, high = proportion.confint_proportions_2indep(
        x_t, n, x_c, n, method="log", compare="ratio"
    )
    # ours uses s^2 with n - 1 and Student t on ~4e5 df: the same to about 1e-5
    assert r.relative_lift.ci_low + 1 == pytest.approx(low, rel=2e-5)
    assert r.relative_lift.ci_high + 1 == pytest.approx(high, rel=2e-5)


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
    t, c = MeanStats.from_values(T_VALUES * 0.97), MeanStats.from_values(C_VALUES * 1.2)
    one_sided = non_inferiority(t, c, margin=0.05, relative=True, level=0.95)
    two_sided = compare(t, c, level=0.90)
    assert one_sided.estimate == pytest.approx(two_sided.relative_lift.estimate)
    assert one_sided.ci_low == pytest.approx(two_sided.relative_lift.ci_low, rel=1e-12)
    assert one_sided.non_inferior == (one_sided.ci_low > -0.05)


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
def test_relative_guardrail_tests_the_log_ratio_against_the_log_margin(
    higher_is_better: bool, treatment_scale: float
) -> None:
    rng = np.random.default_rng(21)
    t_values, c_values = rng.exponential(treatment_scale, 300), rng.exponential(1.0, 300)
    r = non_inferiority(MeanStats.from_values(t_values), MeanStats.from_values(c_values),
                        margin=0.1, relative=True, higher_is_better=higher_is_better)
    a = t_values.var(ddof=1) / 300 / t_values.mean() ** 2
    b = c_values.var(ddof=1) / 300 / c_values.mean() ** 2
    df = (a + b) ** 2 / ((a * a + b * b) / 299)
    log_ratio = math.log(t_values.mean() / c_values.mean())
    bound = math.log(0.9) if higher_is_better else math.log(1.1)
    t_stat = (log_ratio - bound) / math.sqrt(a + b)
    p = sps.t.sf(t_stat, df) if higher_is_better else sps.t.cdf(t_stat, df)
    assert r.statistic == pytest.approx(t_stat, rel=1e-9) and r.df == pytest.approx(df)
    assert r.p_value == pytest.approx(p, rel=1e-8)
    assert r.non_inferior == (p < 0.05)
    edge = math.expm1(log_ratio + (-1 if higher_is_better else 1)
                      * sps.t.ppf(0.95, df) * math.sqrt(a + b))
    assert (r.ci_low if higher_is_better else r.ci_high) == pytest.approx(edge, rel=1e-9)


@pytest.mark.parametrize(
    "higher_is_better", [pytest.param(True, id="higher-is-better"),
                         pytest.param(False, id="lower-is-better")])
@pytest.mark.parametrize("n", [pytest.param(20, id="n-20"), pytest.param(200, id="n-200")])
def test_relative_guardrail_at_its_margin_passes_about_alpha_of_the_time(
    n: int, higher_is_better: bool
) -> None:
    # exponential outcomes, true relative effect exactly on the 10 % margin; 1,500 replicates
    # put the Monte-Carlo 99 % band at about +-1.5 pp around 5 %; the symmetric delta-method
    # interval gave 10.2 % (lower is better) and 1.6 % (higher is better) at n = 20.
    rng = np.random.default_rng(n + higher_is_better)
    mean = 0.9 if higher_is_better else 1.1
    passes = sum(
        bool(non_inferiority(MeanStats.from_values(rng.exponential(mean, n)),
                             MeanStats.from_values(rng.exponential(1.0, n)), margin=0.1,
                             higher_is_better=higher_is_better).non_inferior)
        for _ in range(1_500)
    )
    assert 0.03 <= passes / 1_500 <= 0.075


def test_a_relative_loss_of_100_percent_or_more_is_always_tolerated() -> None:
    r = non_inferiority(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0), margin=9.0)
    assert r.non_inferior is True and r.p_value == 0.0 and r.statistic is None
