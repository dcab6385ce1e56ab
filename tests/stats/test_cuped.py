"""CUPED from sums: known answers, plain OLS on per-user arrays, gbstats, no-data identity."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from tracker.stats import (
    CovariateMeanStats,
    CovariateRatioStats,
    IntervalKind,
    MeanStats,
    RatioStats,
    Reason,
    adjusted_moments,
    boundary_multiplier,
    compare,
    compare_adjusted,
    compare_adjusted_sequential,
    compare_sequential,
    fit_adjustment,
)


def _users(rng: np.random.Generator, n: int, shift: float = 0.0, missing: float = 0.3):
    """Per-user (y, X) with X = [pre-period value, pre-period count, no-history indicator]."""
    engagement = rng.gamma(2.0, 1.0, n)
    pre = engagement + rng.normal(0, 0.5, n)
    count = rng.poisson(engagement * 3)
    y = 0.8 * engagement + 0.1 * count + shift + rng.normal(0, 0.7, n)
    no_history = rng.random(n) < missing
    x = np.column_stack([np.where(no_history, 0.0, pre), np.where(no_history, 0.0, count),
                         no_history.astype(float)])
    return y, x


def _ols_by_hand(ys: list[np.ndarray], xs: list[np.ndarray]):
    """OLS of y on one intercept per arm and X, on the raw per-user arrays (numpy lstsq)."""
    arms = len(ys)
    dummies = np.vstack([np.tile(np.eye(arms)[a], (len(y), 1)) for a, y in enumerate(ys)])
    design = np.hstack([dummies, np.vstack(xs)])
    y = np.concatenate(ys)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    residuals = y - design @ coef
    sigma2 = residuals @ residuals / (len(y) - design.shape[1])
    covariance = sigma2 * np.linalg.inv(design.T @ design)
    return coef[:arms], coef[arms:], covariance[arms:, arms:]


def test_hand_worked_example() -> None:
    # control (y, x) = (1,0), (2,1), (3,2); treatment (3,1), (4,2), (5,3): y − x constant in
    # each arm, so θ = 1 and the adjusted arms have no variance left; pooled x̄ = 1.5.
    c = CovariateMeanStats.from_values([1.0, 2.0, 3.0], [[0.0], [1.0], [2.0]])
    t = CovariateMeanStats.from_values([3.0, 4.0, 5.0], [[1.0], [2.0], [3.0]])
    r = compare_adjusted(t, c)
    assert r.adjustment.theta == pytest.approx((1.0,))
    assert r.control.estimate == pytest.approx(2.5) and r.treatment.estimate == pytest.approx(3.5)
    assert r.comparison.difference.estimate == pytest.approx(1.0)
    assert r.comparison.reason is Reason.ZERO_VARIANCE
    assert r.unadjusted.difference.estimate == pytest.approx(2.0)
    assert r.variance_reduction == 1.0


def test_small_known_answer_with_residual_spread() -> None:
    # control (y, x) = (1,0), (2,1), (4,2); treatment (2,1), (2,3).
    # S_xx = 2 + 2, S_xy = 3 + 0 → θ = 3/4. Pooled x̄ = 7/5.
    # Control: ȳ 7/3, x̄ 1 → 7/3 + 0.75·0.4 = 2.6333…; residuals y − 0.75x: 1, 1.25, 2.5,
    #   SS = 1.2916…: mean 1.5833, deviations −.5833, −.3333, .9167 → SS = 1.29167, Var = SS/2/3.
    # Treatment: ȳ 2, x̄ 2 → 2 − 0.75·0.6 = 1.55; residuals 1.25, −0.25: SS 1.125, Var = SS/1/2.
    c = CovariateMeanStats.from_values([1.0, 2.0, 4.0], [[0.0], [1.0], [2.0]])
    t = CovariateMeanStats.from_values([2.0, 2.0], [[1.0], [3.0]])
    fit = fit_adjustment([t, c])
    assert fit.theta == pytest.approx((0.75,))
    assert fit.covariate_means == pytest.approx((1.4,))
    m_c, m_t = adjusted_moments(c, fit), adjusted_moments(t, fit)
    assert m_c.estimate == pytest.approx(7 / 3 + 0.3)
    assert m_t.estimate == pytest.approx(1.55)
    assert m_c.variance == pytest.approx((0.5833333**2 + 0.3333333**2 + 0.9166667**2) / 6,
                                         rel=1e-6)
    assert m_t.variance == pytest.approx(1.125 / 2)
    # θ's variance: residual SS (1.29167 + 1.125) over N − arms − 1 = 5 − 2 − 1, over S_xx = 4
    assert fit.residual_df == 2
    assert fit.theta_covariance[0][0] == pytest.approx((1.2916667 + 1.125) / 2 / 4, rel=1e-6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mean_adjustment_equals_plain_ols_on_the_per_user_arrays(seed) -> None:
    rng = np.random.default_rng(seed)
    data = [_users(rng, n, shift) for n, shift in ((400, 0.0), (350, 0.2), (300, -0.1))]
    stats = [CovariateMeanStats.from_values(y, x) for y, x in data]
    fit = fit_adjustment(stats)
    intercepts, theta, theta_cov = _ols_by_hand([y for y, _ in data], [x for _, x in data])
    assert fit.theta == pytest.approx(theta, rel=1e-9)
    assert np.asarray(fit.theta_covariance) == pytest.approx(theta_cov, rel=1e-8)
    x_bar = np.vstack([x for _, x in data]).mean(axis=0)
    for (y, x), s, intercept in zip(data, stats, intercepts, strict=True):
        m = adjusted_moments(s, fit)
        assert m.estimate == pytest.approx(intercept + theta @ x_bar, rel=1e-9)
        residual = y - x @ theta
        assert m.variance == pytest.approx(residual.var(ddof=1) / len(y), rel=1e-8)


def test_sums_added_across_days_give_the_same_adjustment() -> None:
    rng = np.random.default_rng(7)
    y, x = _users(rng, 500)
    whole = CovariateMeanStats.from_values(y, x)
    parts = CovariateMeanStats.from_values(y[:200], x[:200]) + CovariateMeanStats.from_values(
        y[200:], x[200:])
    assert parts.n == whole.n and parts.sum_xy == pytest.approx(whole.sum_xy)
    other = CovariateMeanStats.from_values(*_users(rng, 400, 0.1))
    a, b = compare_adjusted(other, whole), compare_adjusted(other, parts)
    assert a.comparison.difference.ci_low == pytest.approx(b.comparison.difference.ci_low)


def test_ratio_adjustment_equals_ols_of_the_linearised_outcome() -> None:
    # Per arm, o_i = (y_i − R m_i) / m̄ is the delta-method linearisation of R = Σy/Σm;
    # CUPED of the ratio is OLS of o on arm intercepts and X, centred at R.
    rng = np.random.default_rng(11)
    arms = []
    for n, p in ((500, 0.10), (450, 0.12)):
        engagement = rng.gamma(2.0, 1.0, n)
        m = rng.poisson(2 + 3 * engagement) + 1.0
        y = rng.binomial(m.astype(int), np.clip(p * engagement / 2, 0, 1)).astype(float)
        pre_m = rng.poisson(2 + 3 * engagement).astype(float)
        pre_y = rng.binomial(pre_m.astype(int), np.clip(p * engagement / 2, 0, 1)).astype(float)
        arms.append((y, m, np.column_stack([pre_y, pre_m])))
    stats = [CovariateRatioStats.from_values(y, m, x) for y, m, x in arms]
    fit = fit_adjustment(stats)
    linear = [(y - y.sum() / m.sum() * m) / m.mean() for y, m, _ in arms]
    _, theta, theta_cov = _ols_by_hand(linear, [x for *_, x in arms])
    assert fit.theta == pytest.approx(theta, rel=1e-9)
    assert np.asarray(fit.theta_covariance) == pytest.approx(theta_cov, rel=1e-8)
    x_bar = np.vstack([x for *_, x in arms]).mean(axis=0)
    for (y, m, x), s, o in zip(arms, stats, linear, strict=True):
        adj = adjusted_moments(s, fit)
        assert adj.estimate == pytest.approx(y.sum() / m.sum() - theta @ (x.mean(0) - x_bar))
        assert adj.variance == pytest.approx((o - x @ theta).var(ddof=1) / len(y), rel=1e-8)
    result = compare_adjusted(stats[1], stats[0])
    assert 0.2 < result.variance_reduction < 1.0


def _no_history(stats_factory, n: int, rng: np.random.Generator, *outcome):
    """Every user without pre-period data: covariates 0 and the indicator 1."""
    return stats_factory(*outcome, np.column_stack([np.zeros(n), np.zeros(n), np.ones(n)]))


@pytest.mark.parametrize("sequential", [False, True], ids=["fixed-horizon", "always-valid"])
def test_without_pre_period_data_adjusted_equals_unadjusted_exactly(sequential) -> None:
    rng = np.random.default_rng(5)
    yt, yc = rng.gamma(1.0, 2.0, 300), rng.gamma(1.0, 2.1, 280)
    t = _no_history(CovariateMeanStats.from_values, 300, rng, yt)
    c = _no_history(CovariateMeanStats.from_values, 280, rng, yc)
    run, plain = ((compare_adjusted_sequential, compare_sequential) if sequential
                  else (compare_adjusted, compare))
    r = run(t, c)
    assert not r.adjustment.active
    assert r.comparison == plain(MeanStats.from_values(yt), MeanStats.from_values(yc))
    assert r.comparison == r.unadjusted and r.variance_reduction == 0.0


def test_ratio_without_pre_period_data_equals_unadjusted_exactly() -> None:
    rng = np.random.default_rng(6)
    m_t, m_c = rng.poisson(4, 200) + 1.0, rng.poisson(4, 220) + 1.0
    y_t, y_c = rng.binomial(m_t.astype(int), 0.2) * 1.0, rng.binomial(m_c.astype(int), 0.2) * 1.0
    t = _no_history(CovariateRatioStats.from_values, 200, rng, y_t, m_t)
    c = _no_history(CovariateRatioStats.from_values, 220, rng, y_c, m_c)
    r = compare_adjusted(t, c)
    assert r.comparison == compare(RatioStats.from_values(y_t, m_t),
                                   RatioStats.from_values(y_c, m_c))
    assert r.variance_reduction == 0.0


def test_variance_reduction_is_the_squared_correlation() -> None:
    # y = x + e with Var(x) = Var(e): corr² = 0.5, CUPED removes half the variance.
    rng = np.random.default_rng(3)
    arms = []
    for _ in range(2):
        x = rng.normal(0, 1, 200_000)
        arms.append(CovariateMeanStats.from_values(x + rng.normal(0, 1, x.size), x[:, None]))
    r = compare_adjusted(*arms)
    assert r.variance_reduction == pytest.approx(0.5, abs=0.01)
    width = r.comparison.difference.ci_high - r.comparison.difference.ci_low
    raw = r.unadjusted.difference.ci_high - r.unadjusted.difference.ci_low
    assert width / raw == pytest.approx(math.sqrt(0.5), abs=0.01)


def test_always_valid_interval_uses_the_adjusted_variance() -> None:
    rng = np.random.default_rng(8)
    t = CovariateMeanStats.from_values(*_users(rng, 3000, 0.05))
    c = CovariateMeanStats.from_values(*_users(rng, 3000))
    seq, fixed = compare_adjusted_sequential(t, c), compare_adjusted(t, c)
    assert seq.comparison.interval_kind is IntervalKind.SEQUENTIAL
    d = seq.comparison.difference
    se = math.sqrt(seq.treatment.variance + seq.control.variance)
    half = boundary_multiplier(6000, 0.05) * se
    assert (d.ci_low, d.ci_high) == pytest.approx((d.estimate - half, d.estimate + half))
    assert d.estimate == fixed.comparison.difference.estimate
    raw = seq.unadjusted.difference
    assert d.ci_high - d.ci_low < 0.9 * (raw.ci_high - raw.ci_low)
    assert seq.variance_reduction == fixed.variance_reduction > 0.1


def test_bad_inputs_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="symmetric"):
        CovariateMeanStats(2, 1.0, 1.0, (1.0, 1.0), ((1.0, 0.0), (1.0, 1.0)), (0.0, 0.0))
    with pytest.raises(ValueError, match="2 entries"):
        CovariateMeanStats(2, 1.0, 1.0, (1.0, 1.0), ((1.0, 0.0), (0.0, 1.0)), (0.0,))
    with pytest.raises(ValueError, match="different covariates"):
        CovariateMeanStats.from_values([1.0], [[1.0]]) + CovariateMeanStats.from_values(
            [1.0], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="one row per user"):
        CovariateMeanStats.from_values([1.0, 2.0], [[1.0]])
    with pytest.raises(ValueError, match="same covariates"):
        fit_adjustment([CovariateMeanStats.from_values([1.0], [[1.0]]),
                        CovariateMeanStats.from_values([1.0], [[1.0, 2.0]])])
    with pytest.raises(TypeError, match="every arm"):
        fit_adjustment([CovariateMeanStats(), CovariateRatioStats()])
    fit = fit_adjustment([CovariateMeanStats.from_values([1.0, 2.0], [[1.0], [3.0]])])
    with pytest.raises(ValueError, match="fitted on 1 covariates"):
        adjusted_moments(CovariateMeanStats(), fit)


def test_one_user_arm_keeps_the_unadjusted_reason() -> None:
    one = CovariateMeanStats.from_values([1.0], [[2.0]])
    many = CovariateMeanStats.from_values([1.0, 2.0, 4.0], [[0.0], [1.0], [2.0]])
    r = compare_adjusted(one, many)
    assert r.comparison.reason is Reason.ONE_USER
    assert dataclasses.astuple(r.treatment)[:3] == (1, 1.0, None)


gbstats = pytest.importorskip("gbstats.models.statistics")
gbtests = pytest.importorskip("gbstats.frequentist.tests")


def _gb_arm(y: np.ndarray, x: np.ndarray):
    post = gbstats.SampleMeanStatistic(n=len(y), sum=float(y.sum()), sum_squares=float(y @ y))
    pre = gbstats.SampleMeanStatistic(n=len(y), sum=float(x.sum()), sum_squares=float(x @ x))
    return gbstats.RegressionAdjustedStatistic(
        n=len(y), post_statistic=post, pre_statistic=pre,
        post_pre_sum_of_products=float(x @ y), theta=0.0)


@pytest.mark.parametrize("sequential", [False, True], ids=["fixed-horizon", "always-valid"])
def test_absolute_difference_agrees_with_gbstats_for_the_same_theta(sequential) -> None:
    rng = np.random.default_rng(21)
    (yc, xc), (yt, xt) = _users(rng, 900, 0.0, 0.0), _users(rng, 800, 0.15, 0.0)
    a, b = _gb_arm(yc, xc[:, 0]), _gb_arm(yt, xt[:, 0])
    if sequential:
        test = gbtests.SequentialTwoSidedTTest(
            a, b, gbtests.SequentialConfig(difference_type="absolute"))
    else:
        test = gbtests.TwoSidedTTest(a, b, gbtests.FrequentistConfig(difference_type="absolute"))
    gb_theta = gbstats.compute_theta(a, b)  # gbstats pools over both arms without centring each
    t = CovariateMeanStats.from_values(yt, xt[:, :1])
    c = CovariateMeanStats.from_values(yc, xc[:, :1])
    fit = dataclasses.replace(fit_adjustment([t, c]), theta=(gb_theta,))
    run = compare_adjusted_sequential if sequential else compare_adjusted
    r = run(t, c, adjustment=fit)
    assert adjusted_moments(t, fit).variance * len(yt) == pytest.approx(b.variance, rel=1e-10)
    d = r.comparison.difference
    assert d.estimate == pytest.approx(test.point_estimate, rel=1e-10)
    assert d.std_error**2 == pytest.approx(test.variance, rel=1e-10)
    assert [d.ci_low, d.ci_high] == pytest.approx(test.confidence_interval, rel=1e-10)
    assert r.comparison.p_value == pytest.approx(test.p_value, rel=1e-9, abs=1e-12)
    if not sequential:
        assert r.comparison.df == pytest.approx(test.dof, rel=1e-10)


def test_ratio_linearisation_at_theta_zero_agrees_with_gbstats_ratio_statistic() -> None:
    # gbstats 0.8.0 has no regression-adjusted ratio; at θ = 0 our linearised outcome's
    # variance must be its delta-method RatioStatistic variance (per user, then / n).
    rng = np.random.default_rng(31)
    m = rng.poisson(3, 700) + 1.0
    y = rng.binomial(m.astype(int), 0.15).astype(float)
    x = rng.poisson(m)[:, None].astype(float)
    s = CovariateRatioStats.from_values(y, m, x)
    fit = dataclasses.replace(fit_adjustment([s]), theta=(0.0,))
    num = gbstats.SampleMeanStatistic(n=700, sum=float(y.sum()), sum_squares=float(y @ y))
    den = gbstats.SampleMeanStatistic(n=700, sum=float(m.sum()), sum_squares=float(m @ m))
    gb = gbstats.RatioStatistic(n=700, m_statistic=num, d_statistic=den,
                                m_d_sum_of_products=float(y @ m))
    adj = adjusted_moments(s, fit)
    assert adj.estimate == pytest.approx(gb.mean, rel=1e-12)
    assert adj.variance * 700 == pytest.approx(gb.variance, rel=1e-10)
