"""Treatment against control: difference, relative lift, Welch test, non-inferiority.

All of it works for user-level means and for ratio metrics alike: each arm is
first reduced to its estimate and the variance of that estimate
(:func:`tracker.stats.estimates.moments`), then

- absolute difference  d = T − C,            Var(d) = v_T + v_C;
- relative lift        r = (T − C) / |C|,    Var(r) ≈ v_T / C² + T² v_C / C⁴
  (first-order delta method; Kohavi, Tang & Xu, *Trustworthy Online Controlled
  Experiments*, 2020, §18; GrowthBook gbstats ``frequentist_variance``);
- degrees of freedom by Welch–Satterthwaite (Welch 1947):
  df = (v_T + v_C)² / (v_T² / (n_T − 1) + v_C² / (n_C − 1)).

The two-sided p-value tests d = 0 with Welch's t statistic d / √Var(d); it is
the same number as ``scipy.stats.ttest_ind_from_stats(..., equal_var=False)``
for means. Both intervals use t_{(1+level)/2, df}. These are fixed-horizon
guarantees: see :mod:`tracker.stats.sequential` for intervals that survive
daily peeking.

The delta-method lift interval is symmetric while the sampling distribution of
a ratio is right-skewed; it agrees with a user-level bootstrap once the control
mean's relative standard error is a few percent (the test uses ~4 %: the ends
agree within 6 % of the interval's width), and is too short on the upside for
tiny or very noisy arms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as sps

from tracker.stats.estimates import moments
from tracker.stats.results import Effect, IntervalKind, Reason, check_level
from tracker.stats.sufficient import ArmStats, MeanStats, RatioStats

# Arm reasons that leave no point estimate at all, most severe first.
_NO_ESTIMATE = (Reason.NO_USERS, Reason.ZERO_DENOMINATOR)


@dataclass(frozen=True, slots=True)
class Comparison:
    """One treatment arm against control for one metric.

    ``difference`` is T − C, ``relative_lift`` is (T − C) / |C| (0.05 = +5 %),
    each with a two-sided interval at ``level``. ``p_value`` is two-sided for
    H0: T = C, uncorrected for multiple comparisons; ``statistic`` is the t (or
    z) statistic and ``df`` its Welch–Satterthwaite degrees of freedom (``None``
    for sequential results, which are asymptotically normal). ``interval_kind``
    says whether intervals and p-value are fixed-horizon or always-valid.
    """

    difference: Effect
    relative_lift: Effect
    p_value: float | None
    statistic: float | None
    df: float | None
    level: float
    interval_kind: IntervalKind

    @property
    def reason(self) -> Reason:
        """Why the test (p-value, difference interval) is missing; ``OK`` if not."""
        return self.difference.reason

    @property
    def ok(self) -> bool:
        return self.difference.reason is Reason.OK and self.relative_lift.reason is Reason.OK


@dataclass(frozen=True, slots=True)
class Contrast:
    """Treatment − control before any interval is drawn (shared by all the tests).

    ``variance``/``lift_variance`` are variances of the estimates; ``n_total``
    the users of both arms. Reasons follow :class:`Reason`.
    """

    difference: float | None
    variance: float | None
    lift: float | None
    lift_variance: float | None
    df: float | None
    n_total: int
    reason: Reason
    lift_reason: Reason


def contrast(treatment: ArmStats, control: ArmStats) -> Contrast:
    """Difference and relative lift of two arms with the variances of both.

    >>> c = contrast(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0))
    >>> c.difference, round(c.lift, 4), c.reason
    (1.0, 0.4, <Reason.OK: 'ok'>)
    >>> contrast(MeanStats(4, 2.0, 2.0), MeanStats(4, 0.0, 0.0)).lift_reason
    <Reason.CONTROL_MEAN_ZERO: 'control_mean_zero'>
    """
    if type(treatment) is not type(control) or not isinstance(treatment, MeanStats | RatioStats):
        raise TypeError(
            "treatment and control must both be MeanStats or both RatioStats, got "
            f"{type(treatment).__name__} and {type(control).__name__}"
        )
    t, c = moments(treatment), moments(control)
    n_total = t.n + c.n
    if t.estimate is None or c.estimate is None:
        reason = next(r for r in _NO_ESTIMATE if r in (t.reason, c.reason))
        return Contrast(None, None, None, None, None, n_total, reason, reason)
    difference = t.estimate - c.estimate
    lift = None if c.estimate == 0 else difference / abs(c.estimate)
    lift_blocked = Reason.CONTROL_MEAN_ZERO if lift is None else None

    if t.variance is None or c.variance is None:  # an arm with a single user
        return Contrast(
            difference, None, lift, None, None, n_total, Reason.ONE_USER,
            lift_blocked or Reason.ONE_USER,
        )
    variance = t.variance + c.variance
    if variance == 0.0:
        return Contrast(
            difference, 0.0, lift, None, None, n_total, Reason.ZERO_VARIANCE,
            lift_blocked or Reason.ZERO_VARIANCE,
        )
    df = variance**2 / (t.variance**2 / (t.n - 1) + c.variance**2 / (c.n - 1))
    if lift is None:
        return Contrast(
            difference, variance, None, None, df, n_total, Reason.OK, Reason.CONTROL_MEAN_ZERO
        )
    lift_variance = t.variance / c.estimate**2 + t.estimate**2 * c.variance / c.estimate**4
    lift_reason = Reason.OK if lift_variance > 0 else Reason.ZERO_VARIANCE
    return Contrast(difference, variance, lift, lift_variance, df, n_total, Reason.OK, lift_reason)


def effect(
    estimate: float | None, variance: float | None, reason: Reason, critical: float | None
) -> Effect:
    """An :class:`Effect` with interval ``estimate ± critical · √variance`` when ``OK``."""
    std_error = None if variance is None else math.sqrt(variance)
    if reason is not Reason.OK or estimate is None or std_error is None or critical is None:
        return Effect(estimate, None, None, std_error, reason)
    half = critical * std_error
    return Effect(estimate, estimate - half, estimate + half, std_error, Reason.OK)


def compare(treatment: ArmStats, control: ArmStats, *, level: float = 0.95) -> Comparison:
    """Fixed-horizon comparison: difference and relative lift with Welch intervals.

    Worked example (means): treatment values 2, 3, 4, 5 (n 4, Σx 14, Σx² 54) and
    control 1, 2, 3, 4 (n 4, Σx 10, Σx² 30): d = 1, both s² = 5/3, Var(d) = 5/6,
    t = 1/√(5/6) ≈ 1.0954, df = 6, two-sided p ≈ 0.3153.

    >>> r = compare(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0))
    >>> r.difference.estimate, round(r.statistic, 4), r.df, round(r.p_value, 4)
    (1.0, 1.0954, 6.0, 0.3153)
    >>> round(r.relative_lift.estimate, 2), r.interval_kind
    (0.4, <IntervalKind.FIXED_HORIZON: 'fixed_horizon'>)
    """
    level = check_level(level)
    k = contrast(treatment, control)
    if k.difference is None or k.variance is None or k.df is None:
        return Comparison(
            effect(k.difference, k.variance, k.reason, None),
            effect(k.lift, k.lift_variance, k.lift_reason, None),
            None, None, None, level, IntervalKind.FIXED_HORIZON,
        )
    t_crit = float(sps.t.ppf(0.5 + level / 2, k.df))
    statistic = k.difference / math.sqrt(k.variance)
    p_value = float(2 * sps.t.sf(abs(statistic), k.df))
    return Comparison(
        effect(k.difference, k.variance, k.reason, t_crit),
        effect(k.lift, k.lift_variance, k.lift_reason, t_crit),
        p_value, statistic, k.df, level, IntervalKind.FIXED_HORIZON,
    )


@dataclass(frozen=True, slots=True)
class NonInferiority:
    """One-sided test that treatment is not worse than control by more than ``margin``.

    ``estimate`` is the relative lift (``relative=True``) or the difference. The
    interval is one-sided at ``level``: ``(ci_low, +inf)`` when higher is better,
    ``(-inf, ci_high)`` when lower is better. ``p_value`` is one-sided for H0
    "worse by at least the margin"; ``non_inferior`` is True when that H0 is
    rejected at 1 − level (equivalently, the bound clears the margin), ``None``
    when the test cannot be computed (see ``reason``).
    """

    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    std_error: float | None
    p_value: float | None
    statistic: float | None
    df: float | None
    margin: float
    relative: bool
    higher_is_better: bool
    level: float
    non_inferior: bool | None
    reason: Reason


def non_inferiority(
    treatment: ArmStats,
    control: ArmStats,
    *,
    margin: float,
    relative: bool = True,
    higher_is_better: bool = True,
    level: float = 0.95,
) -> NonInferiority:
    """Guardrail test: is the treatment at worst ``margin`` worse than control?

    With e the effect (relative lift or difference), SE its standard error and
    Welch df, for higher-is-better metrics H0: e ≤ −margin against H1: e > −margin,
    t = (e + margin) / SE, p = P(T_df ≥ t); for lower-is-better metrics
    H0: e ≥ margin, t = (e − margin) / SE, p = P(T_df ≤ t). The one-sided bound
    is e ∓ t_{level, df} · SE (Schuirmann 1987; the guardrail form used by
    GrowthBook and Eppo). ``margin`` is a non-negative magnitude: 0.01 with
    ``relative=True`` tolerates a 1 % relative loss.

    Worked example: the means above (e = d = 1, SE = √(5/6), df = 6) with an
    absolute margin of 0.5: t = 1.5 / 0.9129 ≈ 1.6432, p ≈ 0.0757: not shown
    non-inferior at 95 %.

    >>> r = non_inferiority(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0),
    ...                     margin=0.5, relative=False)
    >>> round(r.statistic, 4), round(r.p_value, 4), r.non_inferior, r.ci_high
    (1.6432, 0.0757, False, inf)
    """
    level = check_level(level)
    if not (isinstance(margin, int | float) and math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number >= 0 (a tolerated loss), got {margin!r}")
    k = contrast(treatment, control)
    if relative:
        estimate, variance, reason = k.lift, k.lift_variance, k.lift_reason
    else:
        estimate, variance, reason = k.difference, k.variance, k.reason
    if reason is not Reason.OK or estimate is None or variance is None or k.df is None:
        std_error = None if variance is None else math.sqrt(variance)
        return NonInferiority(
            estimate, None, None, std_error, None, None, k.df, float(margin), relative,
            higher_is_better, level, None, reason,
        )
    std_error = math.sqrt(variance)
    t_crit = float(sps.t.ppf(level, k.df))
    if higher_is_better:
        statistic = (estimate + margin) / std_error
        p_value = float(sps.t.sf(statistic, k.df))
        ci_low, ci_high = estimate - t_crit * std_error, math.inf
    else:
        statistic = (estimate - margin) / std_error
        p_value = float(sps.t.cdf(statistic, k.df))
        ci_low, ci_high = -math.inf, estimate + t_crit * std_error
    return NonInferiority(
        estimate, ci_low, ci_high, std_error, p_value, statistic, k.df, float(margin),
        relative, higher_is_better, level, p_value < 1 - level, Reason.OK,
    )
