"""Does the lift fade or grow with time since exposure? A weighted trend test.

Input: for days d = 0, 1, … since each user's first exposure, the lift
estimate L_d on that day and its variance v_d (from
:func:`tracker.stats.compare.compare` of that day's arms). The slope β of
L_d = α + β d is fitted by weighted least squares with weights w_d = 1 / v_d
(fixed-effect meta-regression: Hedges & Olkin 1985, *Statistical Methods for
Meta-Analysis*, ch. 11; Borenstein et al. 2009, *Introduction to
Meta-Analysis*, ch. 20):

    d̄ = Σ w d / Σ w,   β = Σ w (d − d̄) L / Σ w (d − d̄)²,
    Var(β) = φ / Σ w (d − d̄)²,   φ = Σ w (L − α − β d)² / (D − 2),

with D days and a Student t on D − 2 degrees of freedom. φ is the
multiplicative dispersion of Thompson & Sharp (1999), "Explaining
heterogeneity in meta-analysis", Stat. Med. 18: the same users are measured on
every day, so the days' estimates are correlated (a persistent user effect) and
the v_d are only right up to a common factor; estimating φ from the residuals
keeps the test's A/A error at its level where taking the v_d at face value
(φ = 1, a z test) does not: 4.90 % against 3.00 % in 2,000 simulated A/A
experiments with persistent users (``benchmarks/cuped.py``; positively
correlated days make face-value variances too large for a slope, and
day-to-day heterogeneity would make them too small).

When β is significant at ``level`` the effect is called **fading** (novelty) when
the slope runs against the metric's good direction (β < 0 for a metric where higher
is better): the treatment looks better early than later, so its early lift overstates
the long run, whether the lift shrinks towards 0 or a gain turns into a loss. It is
called **growing** (primacy) when the slope runs with it: users adapt to the change
and the treatment looks better the longer they are exposed (a loss that shrinks, a gain
that grows). This is the definition of novelty and primacy effects in online
experiments (Sadeghi et al. 2021, "Novelty and Primacy: A Long-Term Estimator for Online
Experiments", arXiv 2102.12893): the sign of the change of the treatment effect over
exposure. With no trend, a false alarm is
called either way with even odds (the slope's sign is symmetric). (An earlier rule,
"fading" when the fitted lift's magnitude shrinks, called a novelty that takes a small
long-run loss through a large early gain "growing": its fitted line crosses 0.)

Worked example: lifts 0.10, 0.08, 0.06, 0.05, 0.03 on days 0–4, each with
variance 1e-4: d̄ = 2, Σ(d − d̄)² = 10, Σ (d − d̄) L = −0.17, so β = −0.017 per
day, α = 0.098; residuals 0.002, −0.001, −0.004, 0.003, 0 give φ = 0.3/3 = 0.1
and SE(β) = √(0.1 · 1e-4 / 10) = 0.001.

>>> r = trend_test([0, 1, 2, 3, 4], [0.10, 0.08, 0.06, 0.05, 0.03], [1e-4] * 5)
>>> round(r.slope, 6), round(r.std_error, 6), r.df, r.direction
(-0.017, 0.001, 3, <TrendDirection.FADING: 'fading'>)

**Staggered entry** (:func:`exposure_trend`, what the report uses). Why not
:func:`trend_test`: once users enter on different days and do not all come back, its
weights 1 / v_d, estimated from each day's own data, move with that day's lift (v_d
grows with T̄_d²), so high lifts are down-weighted on sparse late days and a slope appears
from nothing (8.8-9.5 % false alarms in the sparse scenario of ``benchmarks/calibration.py``,
mostly "fading"); and
its residual dispersion assumes the days' errors are exchangeable, which overlapping
returning users make false. Here:

- only days with at least ``min_users`` users in both arms (and a control mean ≠ 0);
- weights w_d = 1 / (1/n_T,d + 1/n_C,d), the precision of a difference of two means of
  equal spread (pooled variance): they depend on the counts, never on the lift;
- β = Σ c_d L_d with c_d = w_d (d − d̄) / Σ w (d − d̄)² (weighted least squares), and
  Var(β) = cᵀ Σ_L c, where Σ_L = J_T Σ_T J_T + J_C Σ_C J_C is the delta-method covariance
  of the lifts (J_T = diag(1 / C̄_d), J_C = diag(T̄_d / C̄_d²)) from each arm's covariance of
  day means (:meth:`ExposureDays.covariance`): user-clustered when the arms carry their
  cross-day sums, a sandwich estimator that is valid whatever the weights (White 1980;
  Liang & Zeger 1986, "Longitudinal data analysis using generalized linear models");
  with independent days otherwise, which positive correlation between days (persistent
  users) makes conservative;
- a normal z test (thousands of users, the clusters, behind each estimate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike

from tracker.stats import distributions as dist
from tracker.stats.estimates import rounding_bound
from tracker.stats.results import Reason, check_level


class TrendDirection(StrEnum):
    """What a significant slope means for the effect; ``NONE`` when not significant."""

    FADING = "fading"  # novelty: the effect worsens with days since exposure
    GROWING = "growing"  # primacy: the effect improves with days since exposure
    NONE = "none"


class TrendMethod(StrEnum):
    """How the slope's standard error was obtained.

    ``RESIDUAL_DISPERSION``: :func:`trend_test`, weights 1 / v_d from each day's own
    variance and a dispersion from the residuals (t on D − 2 df). ``USER_CLUSTERED``:
    :func:`exposure_trend` with the users' cross-day sums, the covariance of every pair of
    days' means (a user counts on each day she came back). ``INDEPENDENT_DAYS``:
    :func:`exposure_trend` without them, the days' covariances taken as 0.
    """

    RESIDUAL_DISPERSION = "residual_dispersion"
    USER_CLUSTERED = "user_clustered"
    INDEPENDENT_DAYS = "independent_days"


@dataclass(frozen=True, slots=True)
class Trend:
    """Slope of the daily lift over days since exposure (lift units per day).

    ``ci_low``/``ci_high`` a two-sided interval at ``level``, ``p_value`` for
    β = 0, ``df`` = days − 2, ``dispersion`` φ; fields are ``None`` with a
    ``reason`` when fewer than three distinct days (``TOO_FEW_DAYS``), or when the
    line fits exactly (``ZERO_VARIANCE``).
    """

    slope: float | None
    ci_low: float | None
    ci_high: float | None
    std_error: float | None
    p_value: float | None
    df: int
    intercept: float | None
    dispersion: float | None
    level: float
    direction: TrendDirection
    reason: Reason
    method: TrendMethod = TrendMethod.RESIDUAL_DISPERSION


def _series(days: ArrayLike, estimates: ArrayLike, variances: ArrayLike) -> tuple[np.ndarray, ...]:
    d, y, v = (np.asarray(a, dtype=float) for a in (days, estimates, variances))
    if d.ndim != 1 or d.shape != y.shape or d.shape != v.shape:
        raise ValueError(
            "days, estimates and variances must be 1-D of the same length (one entry a day), "
            f"got shapes {d.shape}, {y.shape}, {v.shape}"
        )
    if not (np.isfinite(d).all() and np.isfinite(y).all() and np.isfinite(v).all()):
        raise ValueError("days, estimates and variances must be finite (drop days without data)")
    if (v <= 0).any():
        raise ValueError(f"every variance must be > 0, got {v[v <= 0].tolist()}")
    return d, y, v


def trend_test(
    days: ArrayLike, estimates: ArrayLike, variances: ArrayLike, *, level: float = 0.95,
    higher_is_better: bool = True,
) -> Trend:
    """Weighted least-squares slope of ``estimates`` over ``days`` (see the module docstring);
    ``higher_is_better``: the metric's good direction, which names a significant slope."""
    level = check_level(level)
    d, y, v = _series(days, estimates, variances)
    df = d.size - 2
    empty = Trend(None, None, None, None, None, max(df, 0), None, None, level,
                  TrendDirection.NONE, Reason.TOO_FEW_DAYS)
    if df < 1 or np.unique(d).size < 3:
        return empty
    w = 1.0 / v
    d_bar = float(w @ d / w.sum())
    sxx = float(w @ (d - d_bar) ** 2)
    slope = float(w @ ((d - d_bar) * y) / sxx)
    intercept = float(w @ y / w.sum()) - slope * d_bar
    residual_ss = float(w @ (y - intercept - slope * d) ** 2)
    if residual_ss <= rounding_bound(d.size, float(w @ y**2)):  # on the line up to rounding
        return Trend(slope, None, None, 0.0, None, df, intercept, 0.0, level,
                     TrendDirection.NONE, Reason.ZERO_VARIANCE)
    dispersion = residual_ss / df
    std_error = math.sqrt(dispersion / sxx)
    q = float(dist.t_ppf(0.5 + level / 2, df))
    p_value = float(2 * dist.t_sf(abs(slope) / std_error, df))
    direction = TrendDirection.NONE
    if p_value < 1 - level:
        worsens = (slope < 0) == higher_is_better
        direction = TrendDirection.FADING if worsens else TrendDirection.GROWING
    return Trend(slope, slope - q * std_error, slope + q * std_error, std_error, p_value, df,
                 intercept, dispersion, level, direction, Reason.OK)


#: Users an arm must have on an exposure day for the day to enter :func:`exposure_trend`: on
#: fewer, a day's relative lift is too skewed and too noisy to weigh into a slope.
MIN_USERS_PER_DAY = 30


@dataclass(frozen=True, slots=True, eq=False)
class ExposureDays:
    """One arm's per-user metric by day since each user's first exposure.

    ``days`` the exposure days (d = 0, 1, …), and per day the users present that day
    (``users``), Σx and Σx² of their values (``sums``, ``sums_sq``). Optionally the users'
    cross-day sums, matrices over pairs of days (d, e) of the users present on both:
    ``co_users`` their count, ``co_sums`` Σ x_d over them (the row's day), ``co_products``
    Σ x_d · x_e (the diagonals are ``users``, ``sums`` and ``sums_sq``). They give the
    covariance of two days' means, which the same users returning make positive; without
    them it is taken as 0.
    """

    days: tuple[int, ...]
    users: np.ndarray
    sums: np.ndarray
    sums_sq: np.ndarray
    co_users: np.ndarray | None = None
    co_sums: np.ndarray | None = None
    co_products: np.ndarray | None = None

    @property
    def clustered(self) -> bool:
        return self.co_users is not None and self.co_sums is not None \
            and self.co_products is not None

    def covariance(self, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The means of the days ``keep`` (indices) and their covariance matrix, user-
        clustered: Cov(x̄_d, x̄_e) = Σ_{u on d and e} (x_ud − x̄_d)(x_ue − x̄_e) / (n_d n_e)
        (the CR0 sandwich of a regression clustered by user, Liang & Zeger 1986); the
        diagonal is the plug-in variance of the mean, Σ (x − x̄)² / n²."""
        n = np.asarray(self.users, dtype=float)[keep]
        mean = np.asarray(self.sums, dtype=float)[keep] / n
        if self.clustered:
            sub = np.ix_(keep, keep)
            nn = np.asarray(self.co_users, dtype=float)[sub]
            xs = np.asarray(self.co_sums, dtype=float)[sub]
            xx = np.asarray(self.co_products, dtype=float)[sub]
            centred = xx - mean[None, :] * xs - mean[:, None] * xs.T \
                + np.outer(mean, mean) * nn
        else:
            square = np.asarray(self.sums_sq, dtype=float)[keep] - n * mean * mean
            centred = np.diag(np.maximum(square, 0.0))
        return mean, centred / np.outer(n, n)


def exposure_trend(
    treatment: ExposureDays, control: ExposureDays, *, level: float = 0.95,
    higher_is_better: bool = True, min_users: int = MIN_USERS_PER_DAY,
) -> Trend:
    """Slope of the relative lift L_d = T̄_d / C̄_d − 1 over days since exposure, with weights
    fixed by the users alone and a standard error that knows the same users recur (the
    method and why: "Staggered entry" in the module docstring); days with fewer than
    ``min_users`` users in an arm (or a control mean of 0) are left out.

    Worked example (independent days): three days, 100 users an arm each, control mean 1,
    treatment 1.3, 1.2, 1.1, every Σ(x − x̄)² = 100 (variance of a mean 0.01): weights equal,
    c = (−0.5, 0, 0.5), β = −0.1; Var(L_d) = 0.01 + T̄_d² · 0.01, so
    Var(β) = 0.25 (0.01 + 0.0169) + 0.25 (0.01 + 0.0121) = 0.01225, SE 0.1107, z = −0.904.

    >>> def arm(means):
    ...     n = np.full(3, 100.0)
    ...     return ExposureDays((0, 1, 2), n, n * means, 100.0 + n * np.square(means))
    >>> r = exposure_trend(arm(np.array([1.3, 1.2, 1.1])), arm(np.ones(3)), min_users=100)
    >>> round(r.slope, 6), round(r.std_error, 4), r.method.value
    (-0.1, 0.1107, 'independent_days')
    """
    level = check_level(level)
    if min_users < 2:
        raise ValueError(f"min_users must be at least 2, got {min_users!r}")
    if treatment.days != control.days:
        raise ValueError("treatment and control must cover the same exposure days, got "
                         f"{treatment.days} and {control.days}")
    method = (TrendMethod.USER_CLUSTERED if treatment.clustered and control.clustered
              else TrendMethod.INDEPENDENT_DAYS)
    nt = np.asarray(treatment.users, dtype=float)
    nc = np.asarray(control.users, dtype=float)
    sc = np.asarray(control.sums, dtype=float)
    keep = np.flatnonzero((nt >= min_users) & (nc >= min_users) & (sc != 0))
    d = np.asarray(treatment.days, dtype=float)[keep]
    empty = Trend(None, None, None, None, None, max(d.size - 2, 0), None, None, level,
                  TrendDirection.NONE, Reason.TOO_FEW_DAYS, method)
    if d.size < 3:
        return empty
    slope, intercept, variance = _weighted_slope(treatment, control, keep, d)
    if not variance > 0:
        return Trend(slope, None, None, 0.0, None, d.size - 2, intercept, None, level,
                     TrendDirection.NONE, Reason.ZERO_VARIANCE, method)
    std_error = math.sqrt(variance)
    q = float(dist.norm_ppf(0.5 + level / 2))
    p_value = float(2 * dist.norm_sf(abs(slope) / std_error))
    direction = TrendDirection.NONE
    if p_value < 1 - level:
        worsens = (slope < 0) == higher_is_better
        direction = TrendDirection.FADING if worsens else TrendDirection.GROWING
    return Trend(slope, slope - q * std_error, slope + q * std_error, std_error, p_value,
                 d.size - 2, intercept, None, level, direction, Reason.OK, method)


def _weighted_slope(treatment: ExposureDays, control: ExposureDays, keep: np.ndarray,
                    d: np.ndarray) -> tuple[float, float, float]:
    """Slope, intercept and the slope's variance of :func:`exposure_trend` over the days
    ``keep`` (exposure days ``d``)."""
    mt, cov_t = treatment.covariance(keep)
    mc, cov_c = control.covariance(keep)
    lift = mt / mc - 1.0
    jt, jc = 1.0 / mc, mt / mc**2
    cov = jt[:, None] * cov_t * jt[None, :] + jc[:, None] * cov_c * jc[None, :]
    nt = np.asarray(treatment.users, dtype=float)[keep]
    nc = np.asarray(control.users, dtype=float)[keep]
    w = 1.0 / (1.0 / nt + 1.0 / nc)
    d_bar = float(w @ d / w.sum())
    coef = w * (d - d_bar) / float(w @ (d - d_bar) ** 2)
    slope = float(coef @ lift)
    return slope, float(w @ lift / w.sum()) - slope * d_bar, float(coef @ cov @ coef)
