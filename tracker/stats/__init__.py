"""Pure statistics for A/B experiments: numpy and scipy only, no I/O.

Inputs are the rollup's sufficient statistics per (arm, metric, k)
(:class:`MeanStats`, :class:`RatioStats`, users per arm, crossover counts);
outputs are frozen dataclasses that say what they could not compute and why
(:class:`Reason`) instead of raising or returning NaN.

Typical use by a report, for one metric::

    control = arm_estimate(stats[control_arm])
    for arm in treatments:
        fixed = compare(stats[arm], stats[control_arm])               # fixed horizon
        always_valid = compare_sequential(stats[arm], stats[control_arm])
        fixed.decisive      # the tested effect: its interval agrees with fixed.p_value
    srm = srm_test(users_per_arm, weights)
    p_adjusted = adjust_primary(p_values, is_primary, method="holm")
    checklist = health_checklist(users=..., weights=..., now=..., newest_event=...)
    decision = decide(arm, primaries, guardrails, checklist)   # ship / do_not_ship / ...

With pre-exposure covariates (:class:`CovariateMeanStats`, :class:`CovariateRatioStats`),
CUPED narrows the same comparisons; θ is fitted once over all arms of the metric::

    fit = fit_adjustment([covariate_stats[a] for a in arms])
    adjusted = compare_adjusted(covariate_stats[arm], covariate_stats[control_arm],
                                adjustment=fit)           # or compare_adjusted_sequential
    adjusted.comparison, adjusted.variance_reduction     # .unadjusted for the raw result
    trend = exposure_trend(treatment_days, control_days)  # fading / growing / none

Power, MDE and days to target (:mod:`tracker.stats.decision`) follow the interval mode
(always-valid when sequential) and a model of arrivals (:func:`fit_arrivals`).

Per slice of a segment dimension (:mod:`tracker.stats.slices`: exploratory, never the
decision)::

    verdicts = slice_verdicts({name: compare(t, c) for name, (t, c) in slices.items()})
    checks = slice_srm(users_per_arm_by_slice, weights)         # Holm across the slices
    differs = heterogeneity({name: (moments(t), moments(c)) for ...})  # Cochran's Q
"""

from tracker.stats.arrivals import Arrivals, fit_arrivals
from tracker.stats.compare import (
    Comparison,
    Contrast,
    NonInferiority,
    compare,
    contrast,
    non_inferiority,
)
from tracker.stats.covariates import CovariateMeanStats, CovariateRatioStats, CovariateStats
from tracker.stats.crossover import CrossoverHealth, Health, crossover_health
from tracker.stats.cuped import (
    AdjustedComparison,
    Adjustment,
    adjusted_moments,
    compare_adjusted,
    compare_adjusted_sequential,
    fit_adjustment,
    non_inferiority_adjusted,
    variance_reduction,
)
from tracker.stats.decision import (
    ArmSample,
    Decision,
    DecisionReason,
    Evidence,
    GuardrailResult,
    Outcome,
    PrimaryResult,
    decide,
)
from tracker.stats.estimates import (
    ArmEstimate,
    Moments,
    arm_estimate,
    mean_estimate,
    moments,
    moments_estimate,
    ratio_estimate,
)
from tracker.stats.health import CheckStatus, HealthChecklist, HealthItem, health_checklist
from tracker.stats.multiple import (
    Correction,
    adjust_by_role,
    adjust_primary,
    benjamini_hochberg,
    holm,
)
from tracker.stats.power import (
    minimum_detectable_effect,
    power_non_inferiority,
    power_two_sample,
    users_for_effect,
)
from tracker.stats.results import Decided, Effect, IntervalKind, Reason
from tracker.stats.sequential import (
    DEFAULT_TUNING_N,
    boundary_multiplier,
    compare_sequential,
    non_inferiority_sequential_of,
    sequential_critical,
)
from tracker.stats.slices import (
    DimensionKind,
    Heterogeneity,
    SliceSrm,
    SliceVerdict,
    heterogeneity,
    slice_srm,
    slice_verdicts,
)
from tracker.stats.srm import SrmResult, log_bayes_factor, sequential_srm, srm_test
from tracker.stats.sufficient import ArmStats, MeanStats, RatioStats
from tracker.stats.trend import (
    MIN_USERS_PER_DAY,
    ExposureDays,
    Trend,
    TrendDirection,
    TrendMethod,
    exposure_trend,
    trend_test,
)

__all__ = [
    "DEFAULT_TUNING_N",
    "MIN_USERS_PER_DAY",
    "Arrivals",
    "DecisionReason",
    "Evidence",
    "ExposureDays",
    "TrendMethod",
    "adjust_by_role",
    "exposure_trend",
    "fit_arrivals",
    "non_inferiority_sequential_of",
    "sequential_critical",
    "AdjustedComparison",
    "Adjustment",
    "ArmEstimate",
    "ArmSample",
    "ArmStats",
    "CheckStatus",
    "Comparison",
    "Contrast",
    "Correction",
    "CovariateMeanStats",
    "CovariateRatioStats",
    "CovariateStats",
    "non_inferiority_adjusted",
    "CrossoverHealth",
    "Decided",
    "DimensionKind",
    "Decision",
    "Effect",
    "GuardrailResult",
    "Health",
    "Heterogeneity",
    "HealthChecklist",
    "HealthItem",
    "IntervalKind",
    "MeanStats",
    "Moments",
    "NonInferiority",
    "Outcome",
    "PrimaryResult",
    "RatioStats",
    "Reason",
    "SliceSrm",
    "SliceVerdict",
    "SrmResult",
    "Trend",
    "TrendDirection",
    "adjust_primary",
    "adjusted_moments",
    "arm_estimate",
    "benjamini_hochberg",
    "boundary_multiplier",
    "compare",
    "compare_adjusted",
    "compare_adjusted_sequential",
    "compare_sequential",
    "contrast",
    "crossover_health",
    "decide",
    "fit_adjustment",
    "health_checklist",
    "heterogeneity",
    "holm",
    "log_bayes_factor",
    "mean_estimate",
    "minimum_detectable_effect",
    "moments",
    "moments_estimate",
    "non_inferiority",
    "power_non_inferiority",
    "power_two_sample",
    "ratio_estimate",
    "sequential_srm",
    "slice_srm",
    "slice_verdicts",
    "srm_test",
    "trend_test",
    "users_for_effect",
    "variance_reduction",
]
