"""Treatment against control: difference, relative lift, the test that decides, non-inferiority.

All of it works for user-level means and for ratio metrics alike: each arm is
first reduced to its estimate and the variance of that estimate
(:func:`tracker.stats.estimates.moments`), then

- absolute difference  d = T − C,            Var(d) = v_T + v_C;
- relative lift        r = T / C − 1,        reported as (T − C) / |C| (0.05 = +5 %);
- log ratio            ℓ = log(T / C),       Var(ℓ) ≈ v_T / T² + v_C / C²
  (delta method on the log scale; needs T > 0 and C > 0);
- degrees of freedom by Welch–Satterthwaite (Welch 1947) on the scale used:
  df = (a + b)² / (a² / (n_T − 1) + b² / (n_C − 1)) with (a, b) = (v_T, v_C) for d
  and (v_T / T², v_C / C²) for ℓ.

**One statistic decides: the relative lift, through the log ratio.** The p-value
tests ℓ = 0 with t = ℓ / SE(ℓ) on those df, and the relative-lift interval is the
exact image exp(ℓ ± t_{(1+level)/2, df} · SE(ℓ)) − 1 of the same test's
interval, so the interval excludes 0 exactly when p < 1 − level and a verdict
can never stand beside an interval that contradicts it. Why the relative lift:
experimenters read and compare lifts in percent across metrics of different
units (GrowthBook's gbstats decides on the relative lift with the delta method;
Kohavi, Tang & Xu, *Trustworthy Online Controlled Experiments*, 2020, §18).
Why on the log scale: the ratio of two means is right-skewed, so the symmetric
delta-method interval r ± t · SE(r) is too short on the upside and its one-sided
error rates are lopsided on small or skewed samples (measured in
``benchmarks/calibration.py``: a relative guardrail at its margin passed 10.2 %
and 1.6 % of the time at n = 20 instead of 5 %); the log ratio is nearly
symmetric and keeps both tails near α (Hauschke, Steinijans & Pigeot,
*Bioequivalence Studies in Drug Development*, 2007, §3 — the log-scale analysis
of ratios of means; Fieller's interval is the documented alternative). SE(r) by
the delta method, (T / C) · SE(ℓ), is still reported as ``std_error``.

When a mean is ≤ 0 the log ratio does not exist (``Reason.NON_POSITIVE_MEAN``,
or ``CONTROL_MEAN_ZERO``): the difference decides instead, by Welch's test (the
same number as ``scipy.stats.ttest_ind_from_stats(..., equal_var=False)``), and
:attr:`Comparison.decided_on` says so. The difference interval is always the
Welch interval; it is descriptive when the relative lift decides. These are
fixed-horizon guarantees: see :mod:`tracker.stats.sequential` for intervals
that survive daily peeking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as sps

from tracker.stats.estimates import Moments, moments
from tracker.stats.results import Decided, Effect, IntervalKind, Reason, check_level
from tracker.stats.sufficient import ArmStats, MeanStats, RatioStats

# Arm reasons that leave no point estimate at all, most severe first.
_NO_ESTIMATE = (Reason.NO_USERS, Reason.ZERO_DENOMINATOR)


@dataclass(frozen=True, slots=True)
class Comparison:
    """One treatment arm against control for one metric.

    ``difference`` is T − C, ``relative_lift`` is (T − C) / |C| (0.05 = +5 %),
    each with a two-sided interval at ``level``. ``p_value`` is two-sided for
    H0: T = C on the statistic named by ``decided_on`` (the log ratio unless a
    mean is ≤ 0), uncorrected for multiple comparisons; ``statistic`` is its t
    (or z) statistic and ``df`` its Welch–Satterthwaite degrees of freedom
    (``None`` for sequential results, which are asymptotically normal).
    :attr:`decisive` is the effect whose interval agrees with ``p_value``.
    ``interval_kind`` says whether intervals and p-value are fixed-horizon or
    always-valid.
    """

    difference: Effect
    relative_lift: Effect
    p_value: float | None
    statistic: float | None
    df: float | None
    level: float
    interval_kind: IntervalKind
    decided_on: Decided = Decided.RELATIVE_LIFT

    @property
    def decisive(self) -> Effect:
        """The effect that was tested: its interval excludes 0 iff p < 1 − level."""
        if self.decided_on is Decided.RELATIVE_LIFT:
            return self.relative_lift
        return self.difference

    @property
    def reason(self) -> Reason:
        """Why the test (p-value, decisive interval) is missing; ``OK`` if not."""
        return self.decisive.reason

    @property
    def ok(self) -> bool:
        return self.difference.reason is Reason.OK and self.relative_lift.reason is Reason.OK


@dataclass(frozen=True, slots=True)
class Scale:
    """One scale on which the arms are contrasted: estimate, its variance, Welch df.

    ``estimate`` and ``variance`` are ``None`` when they do not exist, ``df``
    unless the variance is > 0; ``reason`` is ``OK`` exactly when all three exist.
    """

    estimate: float | None
    variance: float | None
    df: float | None
    reason: Reason


@dataclass(frozen=True, slots=True)
class Contrast:
    """Treatment − control before any interval is drawn (shared by all the tests).

    ``difference``: T − C with Welch variance; ``log_ratio``: log(T / C) with the
    delta-method variance on the log scale; ``lift``/``lift_variance``: the
    relative lift (T − C) / |C| and its delta-method variance; ``n_total`` the
    users of both arms. ``reason`` is the difference's, ``lift_reason`` the
    relative lift's (that of the log ratio when the lift itself exists).
    """

    difference: Scale
    log_ratio: Scale
    lift: float | None
    lift_variance: float | None
    n_total: int

    @property
    def reason(self) -> Reason:
        return self.difference.reason

    @property
    def lift_reason(self) -> Reason:
        return self.log_ratio.reason

    @property
    def decided_on(self) -> Decided:
        """The log ratio decides when it exists, else the difference."""
        if self.log_ratio.reason is Reason.OK:
            return Decided.RELATIVE_LIFT
        return Decided.DIFFERENCE

    @property
    def decisive(self) -> Scale:
        return self.log_ratio if self.decided_on is Decided.RELATIVE_LIFT else self.difference


def welch_df(a: float, b: float, n_a: int, n_b: int) -> float:
    """Welch–Satterthwaite degrees of freedom of a + b, two variance components.

    >>> welch_df(5 / 12, 5 / 12, 4, 4)
    6.0
    """
    return (a + b) ** 2 / (a * a / (n_a - 1) + b * b / (n_b - 1))


def _scale(estimate: float, a: float, b: float, t: Moments, c: Moments) -> Scale:
    variance = a + b
    if variance <= 0.0:
        return Scale(estimate, 0.0, None, Reason.ZERO_VARIANCE)
    return Scale(estimate, variance, welch_df(a, b, t.n, c.n), Reason.OK)


def _log_ratio(t: Moments, c: Moments, difference: Scale) -> Scale:
    """log(T / C) with Var ≈ v_T / T² + v_C / C², or why it does not exist."""
    assert t.estimate is not None and c.estimate is not None  # checked by the caller
    if c.estimate == 0:
        return Scale(None, None, None, Reason.CONTROL_MEAN_ZERO)
    if t.estimate <= 0 or c.estimate < 0:
        return Scale(None, None, None, Reason.NON_POSITIVE_MEAN)
    estimate = math.log(t.estimate / c.estimate)
    if difference.reason is not Reason.OK:  # one user, or no spread at all
        return Scale(estimate, difference.variance, None, difference.reason)
    assert t.variance is not None and c.variance is not None
    return _scale(estimate, t.variance / t.estimate**2, c.variance / c.estimate**2, t, c)


def contrast(treatment: ArmStats, control: ArmStats) -> Contrast:
    """Difference, log ratio and relative lift of two arms with their variances.

    >>> c = contrast(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0))
    >>> c.difference.estimate, round(c.lift, 4), c.reason, c.decided_on
    (1.0, 0.4, <Reason.OK: 'ok'>, <Decided.RELATIVE_LIFT: 'relative_lift'>)
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
        missing = Scale(None, None, None, reason)
        return Contrast(missing, missing, None, None, n_total)
    d = t.estimate - c.estimate
    if t.variance is None or c.variance is None:  # an arm with a single user
        difference = Scale(d, None, None, Reason.ONE_USER)
    else:
        difference = _scale(d, t.variance, c.variance, t, c)
    log_ratio = _log_ratio(t, c, difference)
    lift = None if c.estimate == 0 else d / abs(c.estimate)
    lift_variance = None
    if lift is not None and difference.variance is not None and difference.reason is Reason.OK:
        assert t.variance is not None and c.variance is not None
        lift_variance = t.variance / c.estimate**2 + t.estimate**2 * c.variance / c.estimate**4
    return Contrast(difference, log_ratio, lift, lift_variance, n_total)


def effect(
    estimate: float | None, variance: float | None, reason: Reason, critical: float | None
) -> Effect:
    """An :class:`Effect` with interval ``estimate ± critical · √variance`` when ``OK``."""
    std_error = None if variance is None else math.sqrt(variance)
    if reason is not Reason.OK or estimate is None or std_error is None or critical is None:
        return Effect(estimate, None, None, std_error, reason)
    half = critical * std_error
    return Effect(estimate, estimate - half, estimate + half, std_error, Reason.OK)


def relative_effect(pair: Contrast, critical: float | None) -> Effect:
    """The relative lift with the image exp(ℓ ± critical · SE(ℓ)) − 1 of the log-ratio interval.

    Without a log ratio (a mean ≤ 0, one user, no spread) the lift keeps its point
    estimate and the reason; it has no interval of its own.
    """
    std_error = None if pair.lift_variance is None else math.sqrt(pair.lift_variance)
    lr = pair.log_ratio
    if lr.reason is not Reason.OK or critical is None:
        return Effect(pair.lift, None, None, std_error, lr.reason)
    assert lr.estimate is not None and lr.variance is not None
    half = critical * math.sqrt(lr.variance)
    return Effect(
        pair.lift, math.expm1(lr.estimate - half), math.expm1(lr.estimate + half), std_error,
        Reason.OK,
    )


def compare(treatment: ArmStats, control: ArmStats, *, level: float = 0.95) -> Comparison:
    """Fixed-horizon comparison decided on the log ratio (see the module docstring).

    Worked example (means): treatment values 2, 3, 4, 5 (n 4, Σx 14, Σx² 54) and
    control 1, 2, 3, 4 (n 4, Σx 10, Σx² 30): both s² = 5/3, so v_T = v_C = 5/12;
    ℓ = log(3.5 / 2.5) ≈ 0.33647, Var(ℓ) = (5/12) / 3.5² + (5/12) / 2.5² ≈ 0.10068,
    t = ℓ / √Var(ℓ) ≈ 1.0604, df = Var(ℓ)² / ((a² + b²) / 3) ≈ 5.43, p ≈ 0.334.
    The difference d = 1 keeps its Welch interval (df 6).

    >>> r = compare(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0))
    >>> round(r.statistic, 4), round(r.df, 2), round(r.p_value, 3), r.decided_on
    (1.0604, 5.43, 0.334, <Decided.RELATIVE_LIFT: 'relative_lift'>)
    >>> round(r.relative_lift.estimate, 2), r.difference.estimate
    (0.4, 1.0)
    """
    level = check_level(level)
    pair = contrast(treatment, control)
    d = pair.difference
    d_crit = None if d.df is None else float(sps.t.ppf(0.5 + level / 2, d.df))
    lr = pair.log_ratio
    lr_crit = None if lr.df is None else float(sps.t.ppf(0.5 + level / 2, lr.df))
    difference = effect(d.estimate, d.variance, d.reason, d_crit)
    relative = relative_effect(pair, lr_crit)
    tested = pair.decisive
    if tested.reason is not Reason.OK:
        return Comparison(difference, relative, None, None, None, level,
                          IntervalKind.FIXED_HORIZON, pair.decided_on)
    assert tested.estimate is not None and tested.variance is not None and tested.df is not None
    statistic = tested.estimate / math.sqrt(tested.variance)
    p_value = float(2 * sps.t.sf(abs(statistic), tested.df))
    return Comparison(difference, relative, p_value, statistic, tested.df, level,
                      IntervalKind.FIXED_HORIZON, pair.decided_on)


@dataclass(frozen=True, slots=True)
class NonInferiority:
    """One-sided test that treatment is not worse than control by more than ``margin``.

    ``estimate`` is the relative lift (``relative=True``) or the difference. The
    interval is one-sided at ``level``: ``(ci_low, +inf)`` when higher is better,
    ``(-inf, ci_high)`` when lower is better. ``p_value`` is one-sided for H0
    "worse by at least the margin"; ``non_inferior`` is True when that H0 is
    rejected at 1 − level (equivalently, the bound clears the margin), ``None``
    when the test cannot be computed (see ``reason``). For relative tests
    ``statistic`` and ``df`` are on the log-ratio scale.
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


def _tested_margin(margin: float, relative: bool, higher_is_better: bool) -> float:
    """The null boundary on the tested scale: ±margin, or log(1 ∓ margin) if relative."""
    if not relative:
        return -margin if higher_is_better else margin
    if higher_is_better:
        return -math.inf if margin >= 1 else math.log1p(-margin)
    return math.log1p(margin)


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

    ``margin`` is a non-negative magnitude: 0.01 with ``relative=True`` tolerates a
    1 % relative loss. With e the tested effect, SE its standard error and Welch df,
    for higher-is-better metrics H0: e ≤ b against H1: e > b, t = (e − b) / SE,
    p = P(T_df ≥ t); for lower-is-better metrics H0: e ≥ b, p = P(T_df ≤ t)
    (Schuirmann 1987; the guardrail form used by GrowthBook and Eppo).

    - ``relative=False``: e = T − C and b = −margin (higher is better) or +margin;
    - ``relative=True``: e = log(T / C) and b = log(1 − margin) or log(1 + margin),
      the same hypotheses as r ≤ −margin / r ≥ margin on the lift r = T / C − 1,
      tested where the ratio's sampling distribution is nearly symmetric (see the
      module docstring: this keeps the pass rate at the margin near 1 − level in
      both directions on skewed data). The bound is reported as a relative lift,
      exp(e ∓ t_{level, df} · SE) − 1. A loss of 100 % or more (margin ≥ 1, higher
      is better) cannot happen with positive means: always non-inferior, p = 0.

    Worked example: the means above (d = 1, SE = √(5/6), df = 6) with an absolute
    margin of 0.5: t = 1.5 / 0.9129 ≈ 1.6432, p ≈ 0.0757: not shown non-inferior
    at 95 %.

    >>> r = non_inferiority(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0),
    ...                     margin=0.5, relative=False)
    >>> round(r.statistic, 4), round(r.p_value, 4), r.non_inferior, r.ci_high
    (1.6432, 0.0757, False, inf)
    """
    level = check_level(level)
    if not (isinstance(margin, int | float) and math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number >= 0 (a tolerated loss), got {margin!r}")
    pair = contrast(treatment, control)
    scale = pair.log_ratio if relative else pair.difference
    reported = pair.lift if relative else pair.difference.estimate
    std_error = None
    if relative and pair.lift_variance is not None:
        std_error = math.sqrt(pair.lift_variance)
    elif not relative and scale.variance is not None:
        std_error = math.sqrt(scale.variance)
    if scale.reason is not Reason.OK:
        return NonInferiority(
            reported, None, None, std_error, None, None, scale.df, float(margin), relative,
            higher_is_better, level, None, scale.reason,
        )
    assert scale.estimate is not None and scale.variance is not None and scale.df is not None
    se = math.sqrt(scale.variance)
    bound = _tested_margin(margin, relative, higher_is_better)
    statistic = (scale.estimate - bound) / se
    t_crit = float(sps.t.ppf(level, scale.df))
    to_reported = math.expm1 if relative else float
    if higher_is_better:
        p_value = float(sps.t.sf(statistic, scale.df))
        ci_low, ci_high = to_reported(scale.estimate - t_crit * se), math.inf
    else:
        p_value = float(sps.t.cdf(statistic, scale.df))
        ci_low, ci_high = -math.inf, to_reported(scale.estimate + t_crit * se)
    finite_statistic = statistic if math.isfinite(statistic) else None
    return NonInferiority(
        reported, ci_low, ci_high, std_error, p_value, finite_statistic, scale.df,
        float(margin), relative, higher_is_better, level, p_value < 1 - level, Reason.OK,
    )
