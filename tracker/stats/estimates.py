"""One arm, one metric: mean (or ratio), standard error and confidence interval.

Two estimators, one result type:

- :func:`mean_estimate` for user-level metrics (the arm's value is the mean of
  the users' values), from ``n, Σx, Σx²``;
- :func:`ratio_estimate` for per-impression metrics with the user as the unit
  of analysis, ``R = Σy / Σm``, with the delta-method variance of Deng, Knoblich
  & Lu (2018), "Applying the Delta Method in Metric Analytics: A Practical
  Guide with Novel Ideas", KDD 2018, section 3.

:func:`arm_estimate` dispatches on the type of the statistics, which is what a
report looping over metrics wants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tracker.stats import distributions as dist
from tracker.stats.results import Reason, check_level
from tracker.stats.sufficient import ArmStats, MeanStats, RatioStats

#: Unit roundoff of float64 sums (2.2e-16).
_EPS = float(np.finfo(float).eps)


@dataclass(frozen=True, slots=True)
class ArmEstimate:
    """The value of one metric in one arm, with its fixed-horizon interval.

    ``estimate`` is the mean (or ratio); ``std_error`` the standard error of that
    estimate; ``ci_low``/``ci_high`` a two-sided Student-t interval at ``level``
    with ``n - 1`` degrees of freedom. Missing fields are ``None`` and ``reason``
    says why (``NO_USERS``, ``ONE_USER``, ``ZERO_VARIANCE``, ``ZERO_DENOMINATOR``).
    With ``ZERO_VARIANCE`` the standard error is 0.0 but no interval is given:
    ``[mean, mean]`` would claim a certainty that a finite sample never has.
    """

    n: int
    estimate: float | None
    std_error: float | None
    ci_low: float | None
    ci_high: float | None
    level: float
    reason: Reason

    @property
    def ok(self) -> bool:
        return self.reason is Reason.OK


def rounding_bound(n: int, sum_sq: float) -> float:
    """How far a centred sum of squares computed from running sums can be from 0 by rounding.

    Σx² and Σx accumulated one value at a time in float64 (numpy, SQLite's and
    PostgreSQL's SUM) each carry a relative error of at most about n · ε
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2002, §4.2), so
    Σx² − (Σx)²/n computed for truly constant values is within n · ε · Σx² of 0
    (measured: at most 0.36 of that bound over 3,000 constant arms of up to
    20,000 users). A centred sum above the bound is real spread, whatever the
    mean: values near 1e6 with sd 1 over 20 users have Σ(x − x̄)² ≈ 19 against a
    bound of 0.09.

    >>> rounding_bound(20, 2e13)
    0.08881784197001252
    """
    return n * _EPS * sum_sq


def _centred(sum_sq: float, total: float, n: int) -> float:
    """Σ(x - x̄)² from Σx² and Σx; 0.0 when it is within rounding of 0 (constant values)."""
    centred = sum_sq - total * total / n
    return 0.0 if centred <= rounding_bound(n, sum_sq) else centred


@dataclass(frozen=True, slots=True)
class Moments:
    """Point estimate of one arm and the variance of that estimate (not of a user).

    The common currency of :mod:`tracker.stats.compare` and
    :mod:`tracker.stats.sequential`: a mean and a ratio compare the same way once
    reduced to this. ``estimate`` is ``None`` for ``NO_USERS`` and
    ``ZERO_DENOMINATOR``; ``variance`` is ``None`` unless at least two users.
    """

    n: int
    estimate: float | None
    variance: float | None
    reason: Reason


def _mean_moments(stats: MeanStats) -> Moments:
    n = stats.n
    if n == 0:
        return Moments(0, None, None, Reason.NO_USERS)
    mean = stats.sum_x / n
    if n == 1:
        return Moments(1, mean, None, Reason.ONE_USER)
    sample_variance = _centred(stats.sum_x2, stats.sum_x, n) / (n - 1)
    return Moments(n, mean, sample_variance / n, Reason.OK)


def _ratio_moments(stats: RatioStats) -> Moments:
    n = stats.n
    if n == 0:
        return Moments(0, None, None, Reason.NO_USERS)
    if stats.sum_m == 0:
        return Moments(n, None, None, Reason.ZERO_DENOMINATOR)
    ratio = stats.sum_y / stats.sum_m
    if n == 1:
        return Moments(1, ratio, None, Reason.ONE_USER)
    var_y = _centred(stats.sum_y2, stats.sum_y, n) / (n - 1)
    var_m = _centred(stats.sum_m2, stats.sum_m, n) / (n - 1)
    cov_ym = (stats.sum_ym - stats.sum_y * stats.sum_m / n) / (n - 1)
    spread = var_y - 2 * ratio * cov_ym + ratio * ratio * var_m
    raw = stats.sum_y2 + 2 * abs(ratio * stats.sum_ym) + ratio * ratio * stats.sum_m2
    if spread <= rounding_bound(n, raw) / (n - 1):
        # y_i = R · m_i for every user (every impression has the same value), up to
        # the rounding of the three sums of squares it is computed from.
        spread = 0.0
    mean_m = stats.sum_m / n
    return Moments(n, ratio, spread / (n * mean_m * mean_m), Reason.OK)


def moments(stats: ArmStats) -> Moments:
    """Estimate and variance of the estimate of one arm, by the type of ``stats``.

    >>> moments(MeanStats(n=4, sum_x=10.0, sum_x2=30.0))
    Moments(n=4, estimate=2.5, variance=0.4166666666666667, reason=<Reason.OK: 'ok'>)
    """
    if isinstance(stats, MeanStats):
        return _mean_moments(stats)
    if isinstance(stats, RatioStats):
        return _ratio_moments(stats)
    raise TypeError(f"expected MeanStats or RatioStats, got {type(stats).__name__}")


def _interval(m: Moments, level: float) -> ArmEstimate:
    if m.variance is None:
        return ArmEstimate(m.n, m.estimate, None, None, None, level, m.reason)
    std_error = math.sqrt(m.variance)
    if std_error == 0.0:
        return ArmEstimate(m.n, m.estimate, 0.0, None, None, level, Reason.ZERO_VARIANCE)
    half = float(dist.t_ppf(0.5 + level / 2, m.n - 1)) * std_error
    return ArmEstimate(
        m.n, m.estimate, std_error, m.estimate - half, m.estimate + half, level, m.reason
    )


def moments_estimate(m: Moments, *, level: float = 0.95) -> ArmEstimate:
    """The interval of an estimate already reduced to :class:`Moments`, such as a
    regression-adjusted arm (:func:`tracker.stats.cuped.adjusted_moments`):
    estimate ± t_{(1+level)/2, n−1} · √variance, with the reasons of :func:`mean_estimate`.

    >>> s = MeanStats(n=4, sum_x=10.0, sum_x2=30.0)
    >>> moments_estimate(moments(s)) == mean_estimate(s)
    True
    """
    return _interval(m, check_level(level))


def mean_estimate(stats: MeanStats, *, level: float = 0.95) -> ArmEstimate:
    """Mean over users with standard error and Student-t interval.

    x̄ = Σx / n, s² = (Σx² − (Σx)²/n) / (n − 1), SE = s / √n,
    CI = x̄ ± t_{(1+level)/2, n−1} · SE.

    Worked example: values 1, 2, 3, 4 → n = 4, Σx = 10, Σx² = 30, x̄ = 2.5,
    s² = (30 − 25)/3 = 5/3, SE = √(5/12) ≈ 0.6455, t_{0.975, 3} ≈ 3.1824,
    CI ≈ 2.5 ± 2.0543.

    >>> r = mean_estimate(MeanStats(n=4, sum_x=10.0, sum_x2=30.0))
    >>> r.estimate, round(r.std_error, 4), round(r.ci_low, 4), round(r.ci_high, 4)
    (2.5, 0.6455, 0.4457, 4.5543)
    >>> mean_estimate(MeanStats(n=1, sum_x=3.0, sum_x2=9.0)).reason
    <Reason.ONE_USER: 'one_user'>
    """
    level = check_level(level)
    if not isinstance(stats, MeanStats):
        raise TypeError(f"mean_estimate needs MeanStats, got {type(stats).__name__}")
    return _interval(_mean_moments(stats), level)


def ratio_estimate(stats: RatioStats, *, level: float = 0.95) -> ArmEstimate:
    """Ratio of sums R = Σy / Σm with delta-method standard error (users as the unit).

    With ȳ = Σy/n, m̄ = Σm/n and the sample (n − 1) moments over users
    s_y², s_m², s_ym, the first-order Taylor expansion of ȳ/m̄ gives
    (Deng, Knoblich & Lu 2018, section 3):

        Var(R) ≈ (s_y² − 2 R s_ym + R² s_m²) / (n · m̄²)

    The interval is R ± t_{(1+level)/2, n−1} · SE.

    Worked example: users with (y, m) = (1, 2), (0, 1), (3, 3) → R = 4/6;
    ȳ = 4/3, m̄ = 2, s_y² = 7/3, s_m² = 1, s_ym = 3/2, so
    Var(R) = (7/3 − 2 · 2/3 · 3/2 + 4/9 · 1) / (3 · 2²) = (7/9) / 12 = 7/108.

    >>> r = ratio_estimate(RatioStats.from_values([1.0, 0.0, 3.0], [2.0, 1.0, 3.0]))
    >>> round(r.estimate, 4), round(r.std_error ** 2 * 108, 6)
    (0.6667, 7.0)
    """
    level = check_level(level)
    if not isinstance(stats, RatioStats):
        raise TypeError(f"ratio_estimate needs RatioStats, got {type(stats).__name__}")
    return _interval(_ratio_moments(stats), level)


def arm_estimate(stats: ArmStats, *, level: float = 0.95) -> ArmEstimate:
    """:func:`mean_estimate` or :func:`ratio_estimate`, chosen by the type of ``stats``.

    >>> arm_estimate(MeanStats(n=4, sum_x=10.0, sum_x2=30.0)).estimate
    2.5
    """
    if isinstance(stats, MeanStats):
        return mean_estimate(stats, level=level)
    if isinstance(stats, RatioStats):
        return ratio_estimate(stats, level=level)
    raise TypeError(f"expected MeanStats or RatioStats, got {type(stats).__name__}")
