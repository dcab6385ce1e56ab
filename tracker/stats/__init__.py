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
    checklist = health_checklist(users=..., weights=..., now=..., latest_received=...)
    decision = decide(arm, primaries, guardrails, checklist)   # ship / do_not_ship / ...
"""

from tracker.stats.compare import (
    Comparison,
    Contrast,
    NonInferiority,
    compare,
    contrast,
    non_inferiority,
)
from tracker.stats.crossover import CrossoverHealth, Health, crossover_health
from tracker.stats.decision import (
    ArmSample,
    Decision,
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
    ratio_estimate,
)
from tracker.stats.health import CheckStatus, HealthChecklist, HealthItem, health_checklist
from tracker.stats.multiple import Correction, adjust_primary, benjamini_hochberg, holm
from tracker.stats.power import (
    minimum_detectable_effect,
    power_non_inferiority,
    power_two_sample,
    users_for_effect,
)
from tracker.stats.results import Decided, Effect, IntervalKind, Reason
from tracker.stats.sequential import DEFAULT_TUNING_N, boundary_multiplier, compare_sequential
from tracker.stats.srm import SrmResult, log_bayes_factor, sequential_srm, srm_test
from tracker.stats.sufficient import ArmStats, MeanStats, RatioStats

__all__ = [
    "DEFAULT_TUNING_N",
    "ArmEstimate",
    "ArmSample",
    "ArmStats",
    "Comparison",
    "Contrast",
    "Correction",
    "Decision",
    "CrossoverHealth",
    "Decided",
    "Effect",
    "GuardrailResult",
    "CheckStatus",
    "Health",
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
    "SrmResult",
    "adjust_primary",
    "arm_estimate",
    "benjamini_hochberg",
    "boundary_multiplier",
    "compare",
    "compare_sequential",
    "contrast",
    "crossover_health",
    "decide",
    "health_checklist",
    "holm",
    "log_bayes_factor",
    "mean_estimate",
    "minimum_detectable_effect",
    "moments",
    "non_inferiority",
    "power_non_inferiority",
    "power_two_sample",
    "ratio_estimate",
    "sequential_srm",
    "srm_test",
    "users_for_effect",
]
