"""Treatment against control: difference, relative lift, the test that decides, non-inferiority.

All of it works for user-level means and for ratio metrics alike: each arm is
first reduced to its estimate and the variance of that estimate
(:func:`tracker.stats.estimates.moments`), then

- absolute difference  d = T − C,            Var(d) = v_T + v_C;
- relative lift        r = (T − C) / |C|     (0.05 = +5 %), ρ = T / C the ratio;
- degrees of freedom by Welch–Satterthwaite (Welch 1947):
  df = (a + b)² / (a² / (n_T − 1) + b² / (n_C − 1)) with (a, b) = (v_T, v_C).

**One test decides, and every interval shown is an inversion of it.** The
p-value is Welch's test of T = C (the same number as
``scipy.stats.ttest_ind_from_stats(..., equal_var=False)``). The relative lift's
interval is Fieller's (Fieller 1954, "Some problems in interval estimation",
JRSS B 16; the ratio interval of Kohavi, Tang & Xu, *Trustworthy Online
Controlled Experiments*, 2020, §18, and of Hauschke, Kieser & Hothorn 1999):
the ratios ρ that Welch's statistic for T − ρ·C does not reject,

    (T − ρ C)² ≤ q² (v_T + ρ² v_C),   q = t_{(1+level)/2, df},

a quadratic in ρ. At ρ = 1 (lift 0) the condition *is* Welch's test of the
difference with the same q, so the relative interval, the difference interval
and the p-value always agree: "better" never stands beside an interval that
crosses 0. Why this and not the symmetric delta-method interval r ± q · SE(r)
(GrowthBook's gbstats) or the log ratio: on skewed outcomes with 20 users per
arm those keep neither the test's A/A error nor a guardrail's error at the
margin (measured in ``benchmarks/calibration.py``: the delta method passed a
10 % guardrail at its margin 1.7 % and 9.8 % of the time instead of 5 %; the
log ratio gave 6.3 % A/A false positives and 1.5x the nominal rate in the
tails that Holm uses), while the Fieller/Welch family stays within ±0.5 pp,
because T − ρ₀ C of two similarly skewed means is nearly symmetric.

The interval is bounded only when the control mean is itself distinguishable
from 0 (C² > q² v_C); otherwise it is unbounded (``Reason.UNBOUNDED_RATIO``) and
the difference's interval is the one shown beside the verdict
(:attr:`Comparison.decided_on` says which). The delta-method SE of r,
√(v_T / C² + T² v_C / C⁴), is still reported as ``std_error``. These are
fixed-horizon guarantees: see :mod:`tracker.stats.sequential` for intervals
that survive daily peeking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tracker.stats import distributions as dist
from tracker.stats.estimates import Moments, moments
from tracker.stats.results import Decided, Effect, IntervalKind, Reason, check_level
from tracker.stats.sufficient import ArmStats, MeanStats, RatioStats

# Arm reasons that leave no point estimate at all, most severe first.
_NO_ESTIMATE = (Reason.NO_USERS, Reason.ZERO_DENOMINATOR)


@dataclass(frozen=True, slots=True)
class Comparison:
    """One treatment arm against control for one metric.

    ``difference`` is T − C, ``relative_lift`` is (T − C) / |C| (0.05 = +5 %),
    each with a two-sided interval at ``level`` (Welch's and Fieller's). ``p_value``
    is two-sided for H0: T = C (Welch), uncorrected for multiple comparisons;
    ``statistic`` is its t (or z) statistic and ``df`` its Welch–Satterthwaite
    degrees of freedom (``None`` for sequential results, which are asymptotically
    normal). Both intervals exclude 0 exactly when ``p_value < 1 − level``;
    :attr:`decisive` is the one to show beside a verdict (the relative lift's
    when it is bounded, see ``decided_on``). ``interval_kind`` says whether
    intervals and p-value are fixed-horizon or always-valid.
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
        """The effect shown beside the verdict: its interval excludes 0 iff p < 1 − level."""
        if self.decided_on is Decided.RELATIVE_LIFT:
            return self.relative_lift
        return self.difference

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

    ``treatment``/``control`` are the arms' estimates and variances of the
    estimates; ``variance`` = v_T + v_C and ``df`` its Welch degrees of freedom;
    ``lift``/``lift_variance`` the relative lift and its delta-method variance;
    ``n_total`` the users of both arms. ``reason`` is the difference's,
    ``lift_reason`` the relative lift's.
    """

    treatment: Moments
    control: Moments
    difference: float | None
    variance: float | None
    lift: float | None
    lift_variance: float | None
    df: float | None
    n_total: int
    reason: Reason
    lift_reason: Reason

    @property
    def testable(self) -> bool:
        """Whether the difference has a variance and degrees of freedom to test it with."""
        return self.difference is not None and self.variance is not None and self.df is not None


def welch_df(a: float, b: float, n_a: int, n_b: int) -> float:
    """Welch–Satterthwaite degrees of freedom of a + b, two variance components.

    >>> welch_df(5 / 12, 5 / 12, 4, 4)
    6.0
    """
    return (a + b) ** 2 / (a * a / (n_a - 1) + b * b / (n_b - 1))


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
    return contrast_of(moments(treatment), moments(control))


def contrast_of(t: Moments, c: Moments) -> Contrast:
    """:func:`contrast` of two arms already reduced to estimate and variance (the
    regression-adjusted arms of :mod:`tracker.stats.cuped` come in this way)."""
    n_total = t.n + c.n
    if t.estimate is None or c.estimate is None:
        reason = next(r for r in _NO_ESTIMATE if r in (t.reason, c.reason))
        return Contrast(t, c, None, None, None, None, None, n_total, reason, reason)
    difference = t.estimate - c.estimate
    lift = None if c.estimate == 0 else difference / abs(c.estimate)
    lift_blocked = Reason.CONTROL_MEAN_ZERO if lift is None else None
    if t.variance is None or c.variance is None:  # an arm with a single user
        return Contrast(t, c, difference, None, lift, None, None, n_total, Reason.ONE_USER,
                        lift_blocked or Reason.ONE_USER)
    variance = t.variance + c.variance
    if variance == 0.0:
        return Contrast(t, c, difference, 0.0, lift, None, None, n_total, Reason.ZERO_VARIANCE,
                        lift_blocked or Reason.ZERO_VARIANCE)
    df = welch_df(t.variance, c.variance, t.n, c.n)
    if lift is None:
        return Contrast(t, c, difference, variance, None, None, df, n_total, Reason.OK,
                        Reason.CONTROL_MEAN_ZERO)
    lift_variance = t.variance / c.estimate**2 + t.estimate**2 * c.variance / c.estimate**4
    return Contrast(t, c, difference, variance, lift, lift_variance, df, n_total, Reason.OK,
                    Reason.OK)


def effect(
    estimate: float | None, variance: float | None, reason: Reason, critical: float | None
) -> Effect:
    """An :class:`Effect` with interval ``estimate ± critical · √variance`` when ``OK``."""
    std_error = None if variance is None else math.sqrt(variance)
    if reason is not Reason.OK or estimate is None or std_error is None or critical is None:
        return Effect(estimate, None, None, std_error, reason)
    half = critical * std_error
    return Effect(estimate, estimate - half, estimate + half, std_error, Reason.OK)


@dataclass(frozen=True, slots=True)
class RatioBounds:
    """Fieller's set {ρ : (T − ρ C)² ≤ q² (v_T + ρ² v_C)} when it is an interval."""

    low: float
    high: float


def fieller(t: Moments, c: Moments, critical: float) -> RatioBounds | None:
    """Fieller's interval for ρ = T / C at ``critical`` (q), or ``None`` when unbounded.

    Roots of ρ² (C² − q² v_C) − 2 ρ T C + (T² − q² v_T) = 0:
    ρ = (T C ± q √(T² v_C + C² v_T − q² v_T v_C)) / (C² − q² v_C), an interval
    exactly when C² > q² v_C (then the root is real). Worked example: T = 3.5,
    C = 2.5, v_T = v_C = 5/12, q = 2: C² − q² v_C = 6.25 − 5/3 = 55/12 and the
    square root is 2 √(12.25 · 5/12 + 6.25 · 5/12 − 4 · 25/144) ≈ 5.2967, so
    ρ = (8.75 ∓ 5.2967) / 4.5833 and (T − ρ C)² = 4 (v_T + ρ² v_C) at both ends.

    >>> r = fieller(Moments(4, 3.5, 5 / 12, Reason.OK), Moments(4, 2.5, 5 / 12, Reason.OK), 2.0)
    >>> round(r.low, 4), round(r.high, 4)
    (0.7534, 3.0647)
    """
    assert t.estimate is not None and c.estimate is not None
    assert t.variance is not None and c.variance is not None
    q2 = critical * critical
    leading = c.estimate**2 - q2 * c.variance
    if leading <= 0:
        return None
    root = math.sqrt(max(0.0, q2 * (t.estimate**2 * c.variance + c.estimate**2 * t.variance
                                    - q2 * t.variance * c.variance)))
    centre = t.estimate * c.estimate
    return RatioBounds((centre - root) / leading, (centre + root) / leading)


def relative_effect(pair: Contrast, critical: float | None) -> Effect:
    """The relative lift with Fieller's interval at ``critical``, mapped ρ → (ρ − 1) · sign(C).

    Without a bounded interval the lift keeps its point estimate and says why.
    """
    std_error = None if pair.lift_variance is None else math.sqrt(pair.lift_variance)
    if pair.lift_reason is not Reason.OK or critical is None:
        return Effect(pair.lift, None, None, std_error, pair.lift_reason)
    bounds = fieller(pair.treatment, pair.control, critical)
    if bounds is None:
        return Effect(pair.lift, None, None, std_error, Reason.UNBOUNDED_RATIO)
    assert pair.control.estimate is not None
    if pair.control.estimate > 0:
        low, high = bounds.low - 1.0, bounds.high - 1.0
    else:  # (T − C) / |C| = 1 − T / C when C < 0
        low, high = 1.0 - bounds.high, 1.0 - bounds.low
    return Effect(pair.lift, low, high, std_error, Reason.OK)


def decided_on(relative: Effect) -> Decided:
    """The lift's interval stands beside the verdict when it is bounded, else the difference's."""
    return Decided.RELATIVE_LIFT if relative.reason is Reason.OK else Decided.DIFFERENCE


def comparison_of(
    pair: Contrast,
    level: float,
    kind: IntervalKind,
    critical: float | None = None,
    p_value: float | None = None,
    statistic: float | None = None,
    df: float | None = None,
) -> Comparison:
    """The :class:`Comparison` of ``pair`` whose intervals use ``critical`` (Student's
    quantile, or a sequential boundary); without ``critical``, no interval and no test."""
    relative = relative_effect(pair, critical)
    return Comparison(
        effect(pair.difference, pair.variance, pair.reason, critical), relative,
        p_value, statistic, df, level, kind, decided_on(relative),
    )


def compare(treatment: ArmStats, control: ArmStats, *, level: float = 0.95) -> Comparison:
    """Fixed-horizon comparison: Welch's test, its difference interval, Fieller's lift interval.

    Worked example (means): treatment values 2, 3, 4, 5 (n 4, Σx 14, Σx² 54) and
    control 1, 2, 3, 4 (n 4, Σx 10, Σx² 30): d = 1, both s² = 5/3, Var(d) = 5/6,
    t = 1/√(5/6) ≈ 1.0954, df = 6, two-sided p ≈ 0.3153; q = t_{0.975, 6} ≈ 2.4469
    and the relative lift's interval is Fieller's (see :func:`fieller`).

    >>> r = compare(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0))
    >>> r.difference.estimate, round(r.statistic, 4), r.df, round(r.p_value, 4)
    (1.0, 1.0954, 6.0, 0.3153)
    >>> round(r.relative_lift.estimate, 2), r.relative_lift.ci_low < 0 < r.relative_lift.ci_high
    (0.4, True)
    """
    return fixed_horizon(contrast(treatment, control), check_level(level))


def fixed_horizon(pair: Contrast, level: float) -> Comparison:
    """Welch's test of ``pair`` and the intervals that invert it (the body of :func:`compare`)."""
    if not pair.testable:
        return comparison_of(pair, level, IntervalKind.FIXED_HORIZON)
    assert pair.difference is not None and pair.variance is not None
    t_crit = float(dist.t_ppf(0.5 + level / 2, pair.df))
    statistic = pair.difference / math.sqrt(pair.variance)
    p_value = float(2 * dist.t_sf(abs(statistic), pair.df))
    return comparison_of(pair, level, IntervalKind.FIXED_HORIZON, t_crit, p_value, statistic,
                         pair.df)


@dataclass(frozen=True, slots=True)
class NonInferiority:
    """One-sided test that treatment is not worse than control by more than ``margin``.

    ``estimate`` is the relative lift (``relative=True``) or the difference. The
    interval is one-sided at ``level``: ``(ci_low, +inf)`` when higher is better,
    ``(-inf, ci_high)`` when lower is better (an unbounded Fieller set leaves the
    bound at ∓inf). ``p_value`` is one-sided for H0 "worse by at least the
    margin"; ``non_inferior`` is True when that H0 is rejected at 1 − level,
    ``None`` when the test cannot be computed (see ``reason``). ``p_value_inferior`` is the
    one-sided p-value of the opposite hypothesis, H0 "not worse than the margin": small when
    the loss is shown *larger* than the margin (harm); fixed horizon it is 1 − ``p_value``.
    ``interval_kind``: fixed-horizon (Welch) or always-valid (a confidence sequence, see
    :func:`tracker.stats.sequential.non_inferiority_sequential_of`).
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
    p_value_inferior: float | None = None
    interval_kind: IntervalKind = IntervalKind.FIXED_HORIZON


def _null_ratio(margin: float, higher_is_better: bool) -> float:
    """ρ₀ = T / C on the null boundary: 1 − margin (higher is better) or 1 + margin."""
    return 1.0 - margin if higher_is_better else 1.0 + margin


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
    1 % relative loss. One-sided at 1 − level (Schuirmann 1987; the guardrail form
    used by GrowthBook and Eppo), with Welch degrees of freedom:

    - ``relative=False``: H0 T − C ≤ −margin (higher is better) or ≥ +margin;
      t = (d ± margin) / SE(d).
    - ``relative=True`` (needs C > 0): H0 T ≤ ρ₀ C with ρ₀ = 1 − margin (higher is
      better) or T ≥ ρ₀ C with ρ₀ = 1 + margin, tested as Fieller does:
      t = (T − ρ₀ C) / √(v_T + ρ₀² v_C), df from (v_T, ρ₀² v_C). T − ρ₀ C of two
      similarly skewed means is nearly symmetric, which keeps the pass rate at the
      margin near 1 − level on skewed data at 20 users per arm. The bound is the
      one-sided Fieller bound, reported as a lift.

    Worked example: the means above (d = 1, SE = √(5/6), df = 6) with an absolute
    margin of 0.5: t = 1.5 / 0.9129 ≈ 1.6432, p ≈ 0.0757: not shown non-inferior
    at 95 %.

    >>> r = non_inferiority(MeanStats(4, 14.0, 54.0), MeanStats(4, 10.0, 30.0),
    ...                     margin=0.5, relative=False)
    >>> round(r.statistic, 4), round(r.p_value, 4), r.non_inferior, r.ci_high
    (1.6432, 0.0757, False, inf)
    """
    return non_inferiority_of(contrast(treatment, control), margin=margin, relative=relative,
                              higher_is_better=higher_is_better, level=level)


def non_inferiority_of(pair: Contrast, *, margin: float, relative: bool = True,
                       higher_is_better: bool = True, level: float = 0.95) -> NonInferiority:
    """:func:`non_inferiority` of two arms already reduced to a :class:`Contrast` (e.g. the
    regression-adjusted arms of :mod:`tracker.stats.cuped`)."""
    level = check_level(level)
    if not (isinstance(margin, int | float) and math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number >= 0 (a tolerated loss), got {margin!r}")
    reason = pair.reason
    if relative and reason is Reason.OK:
        reason = pair.lift_reason
        if reason is Reason.OK and (pair.control.estimate or 0.0) < 0:
            reason = Reason.NON_POSITIVE_MEAN
    variance = pair.lift_variance if relative else pair.variance
    untested = NonInferiority(
        pair.lift if relative else pair.difference, None, None,
        None if variance is None else math.sqrt(variance), None, None, pair.df, float(margin),
        relative, higher_is_better, level, None, reason,
    )
    if reason is not Reason.OK or pair.df is None:
        return untested
    return _test_non_inferiority(pair, untested)


def _test_non_inferiority(pair: Contrast, untested: NonInferiority) -> NonInferiority:
    """:func:`non_inferiority` of a testable ``pair``: ``untested`` with the test's
    statistic, p-value, one-sided bound and verdict filled in."""
    tested = margin_statistic(pair, untested)
    if tested is None:  # margin 1 (ρ₀ = 0) against a constant treatment: nothing to test
        return replace(untested, df=None, reason=Reason.ZERO_VARIANCE)
    statistic, df = tested
    better_up = untested.higher_is_better
    t_crit = float(dist.t_ppf(untested.level, df))
    p_value = float(dist.t_sf(statistic, df) if better_up else dist.t_cdf(statistic, df))
    other = float(dist.t_cdf(statistic, df) if better_up else dist.t_sf(statistic, df))
    ci_low, ci_high = one_sided_bound(pair, t_crit, untested.relative, better_up)
    return replace(untested, ci_low=ci_low, ci_high=ci_high, p_value=p_value,
                   statistic=statistic, df=df, non_inferior=p_value < 1 - untested.level,
                   p_value_inferior=other)


def margin_statistic(pair: Contrast, untested: NonInferiority) -> tuple[float, float] | None:
    """The statistic of the non-inferiority test at ``untested``'s margin and its Welch
    degrees of freedom: (T − ρ₀ C) / √(v_T + ρ₀² v_C) (relative) or (d ± margin) / SE(d);
    None when its variance is 0. Positive on the good side of the margin when higher is
    better, negative when lower is better."""
    t, c = pair.treatment, pair.control
    assert t.estimate is not None and c.estimate is not None
    assert t.variance is not None and c.variance is not None
    margin, relative, better_up = untested.margin, untested.relative, untested.higher_is_better
    rho = _null_ratio(margin, better_up) if relative else 1.0
    shift = 0.0 if relative else (margin if better_up else -margin)
    a, b = t.variance, rho * rho * c.variance
    if a + b <= 0:
        return None
    return (t.estimate - rho * c.estimate + shift) / math.sqrt(a + b), welch_df(a, b, t.n, c.n)


def one_sided_bound(
    pair: Contrast, critical: float, relative: bool, higher_is_better: bool
) -> tuple[float, float]:
    """(bound, +inf) or (−inf, bound): Welch's for the difference, Fieller's for the lift."""
    if relative:
        bounds = fieller(pair.treatment, pair.control, critical)
        low = -math.inf if bounds is None else bounds.low - 1.0
        high = math.inf if bounds is None else bounds.high - 1.0
    else:
        assert pair.difference is not None and pair.variance is not None
        half = critical * math.sqrt(pair.variance)
        low, high = pair.difference - half, pair.difference + half
    return (low, math.inf) if higher_is_better else (-math.inf, high)
