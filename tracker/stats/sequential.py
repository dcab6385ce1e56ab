"""Always-valid intervals for daily peeking: asymptotic confidence sequences.

A fixed-horizon 95 % interval misses the truth 5 % of the time *if looked at
once*. Looked at every day and acted on the first day it excludes 0, it misses
far more often (the A/A calibration in ``benchmarks/README.md`` measures it).
A confidence sequence (CS) holds simultaneously for every sample size, so it
may be looked at as often as one likes.

Method: the asymptotic CS of Waudby-Smith, Arnold, Wu, Ramdas & Wang (2023),
"Time-uniform central limit theory and asymptotic confidence sequences",
Annals of Statistics (arXiv:2103.06476), Theorem 2.2 with the two-sided normal
mixture boundary of Howard et al. (2021). For an estimate θ̂ from N units with
per-unit variance σ̂² = N · Var(θ̂):

    θ̂ ± σ̂ · √( 2 (N ρ² + 1) / (N² ρ²) · log( √(N ρ² + 1) / α ) )

and ρ is chosen to make the CS tightest at N = N* (the tuning parameter):

    ρ² = ( −2 log α + log(−2 log α + 1) ) / N*.

As in GrowthBook's gbstats (``SequentialTwoSidedTTest``), N counts the users of
both arms, σ̂² = N · Var(d̂) for the difference d̂, and N* defaults to 5,000. The
relative lift's sequence is Fieller's set with the same multiplier (see
:mod:`tracker.stats.compare`), so it excludes 0 exactly when the difference's does. The
matching always-valid p-value is 1 / E with the mixture e-value
E = exp(ρ² S² / (2 (N ρ² + 1))) / √(N ρ² + 1), S² = N θ̂² / Var(θ̂)
(arXiv:2103.06476v7, eq. 155): p ≤ α exactly when the CS excludes 0. ρ depends
on α, so that p-value is only calibrated at the chosen ``level``.
"""

from __future__ import annotations

import math
from dataclasses import replace

from tracker.stats.compare import (
    Comparison,
    Contrast,
    NonInferiority,
    comparison_of,
    contrast,
    non_inferiority_of,
    one_sided_bound,
)
from tracker.stats.results import IntervalKind, Reason, check_level
from tracker.stats.sufficient import ArmStats

#: GrowthBook's default tuning parameter N*: the CS is narrowest at 5,000 users.
DEFAULT_TUNING_N = 5000.0


def rho_squared(alpha: float, tuning_n: float) -> float:
    """Mixture variance ρ² that makes the CS tightest at ``tuning_n`` units.

    >>> round(rho_squared(0.05, 5000) * 5000, 4)
    7.9362
    """
    log_term = -2.0 * math.log(alpha)
    return (log_term + math.log(log_term + 1.0)) / tuning_n


def boundary_multiplier(n: float, alpha: float, tuning_n: float = DEFAULT_TUNING_N) -> float:
    """The CS half-width in standard errors of the estimate (the sequential "z").

    Half-width = multiplier · SE with SE = σ̂ / √N, i.e. the multiplier is
    √(N · 2 (N ρ² + 1) / (N² ρ²) · log(√(N ρ² + 1) / α)). It is larger than the
    fixed-horizon 1.96 at every N (3.04 at N = N* for α = 0.05) and grows like
    √(log N) for large N: the price of looking every day.

    >>> round(boundary_multiplier(5000, 0.05, 5000), 3)
    3.035
    """
    return _multiplier(n, alpha, rho_squared(alpha, tuning_n))


def _multiplier(n: float, alpha: float, r2: float) -> float:
    """The boundary in standard errors for a given mixture variance ρ² (any α)."""
    nr2 = n * r2
    return math.sqrt(2.0 * (nr2 + 1.0) / nr2 * math.log(math.sqrt(nr2 + 1.0) / alpha))


def _check_tuning(tuning_n: float) -> float:
    if not (isinstance(tuning_n, int | float) and math.isfinite(tuning_n) and tuning_n > 0):
        raise ValueError(
            f"tuning_n (N*, the sample size where the sequence is tightest) must be a "
            f"positive number, got {tuning_n!r}"
        )
    return float(tuning_n)


def compare_sequential(
    treatment: ArmStats,
    control: ArmStats,
    *,
    level: float = 0.95,
    tuning_n: float = DEFAULT_TUNING_N,
    tuning_level: float | None = None,
) -> Comparison:
    """Always-valid comparison: confidence sequences for difference and relative lift.

    Same inputs, degenerate cases and result type as
    :func:`tracker.stats.compare.compare`, labelled ``IntervalKind.SEQUENTIAL``:
    the difference's sequence is d ± multiplier · SE(d) and the relative lift's is
    Fieller's set with the multiplier in place of Student's quantile, so at lift 0
    it is the difference's sequence and the two always agree with the p-value.
    ``statistic`` is the z statistic d̂ / SE, ``df`` is ``None`` (asymptotic
    normal), ``p_value`` the always-valid p-value of the difference.

    ``tuning_level`` (default ``level``) is the level ρ is tuned for. With ρ held
    fixed, the sequence at any ``level`` excludes 0 exactly when
    ``p_value < 1 − level`` (the e-value and the boundary use the same mixture),
    so a report may draw the sequence at a corrected level (e.g. after Holm) and
    still agree with the corrected verdict. Recompute from the cumulative
    statistics at each look; intersecting the sequences of successive looks
    (running intersection) is also valid.

    Worked example: 4,000 users per arm, conversions 480 vs 400 (12 % vs 10 %):
    d̂ = 0.02, SE ≈ 0.006994, z ≈ 2.860. Fixed horizon: 0.02 ± 1.960 · SE, p ≈ 0.0043.
    Sequential with N = 8,000, Nρ² = 8000 · 7.9362 / 5000 ≈ 12.698: multiplier
    √(2 · 13.698 / 12.698 · log(√13.698 / 0.05)) ≈ 3.047, so the CS is
    0.02 ± 0.0213 (contains 0), and log E = 12.698 · z² / (2 · 13.698) − ½ log 13.698
    ≈ 2.482, p = 1/E ≈ 0.084.

    >>> from tracker.stats.sufficient import MeanStats
    >>> r = compare_sequential(MeanStats(4000, 480.0, 480.0), MeanStats(4000, 400.0, 400.0))
    >>> round(r.difference.ci_low, 4), round(r.difference.ci_high, 4), round(r.p_value, 3)
    (-0.0013, 0.0413, 0.084)
    >>> r.interval_kind, r.relative_lift.ci_low < 0 < r.relative_lift.ci_high
    (<IntervalKind.SEQUENTIAL: 'sequential'>, True)
    """
    return sequential_of(contrast(treatment, control), level=level, tuning_n=tuning_n,
                         tuning_level=tuning_level)


def sequential_of(
    pair: Contrast,
    *,
    level: float = 0.95,
    tuning_n: float = DEFAULT_TUNING_N,
    tuning_level: float | None = None,
) -> Comparison:
    """:func:`compare_sequential` of a :class:`~tracker.stats.compare.Contrast` (e.g. of
    regression-adjusted arms): N is ``pair.n_total``, σ̂² = N · ``pair.variance``."""
    level = check_level(level)
    tuning_alpha = 1.0 - (level if tuning_level is None else check_level(tuning_level))
    tuning_n = _check_tuning(tuning_n)
    alpha = 1.0 - level
    if not pair.testable:
        return comparison_of(pair, level, IntervalKind.SEQUENTIAL)
    assert pair.difference is not None and pair.variance is not None
    n = float(pair.n_total)
    r2 = rho_squared(tuning_alpha, tuning_n)
    statistic = pair.difference / math.sqrt(pair.variance)
    return comparison_of(pair, level, IntervalKind.SEQUENTIAL, _multiplier(n, alpha, r2),
                         _always_valid_p(n, r2, statistic), statistic)


def _always_valid_p(n: float, r2: float, statistic: float) -> float:
    """p = min(1, 1/E) with log E = ρ² S² / (2 (Nρ² + 1)) − ½ log(Nρ² + 1), S² = N z²."""
    log_e = r2 * n * statistic**2 / (2.0 * (n * r2 + 1.0)) - 0.5 * math.log1p(n * r2)
    return 1.0 if log_e <= 0 else math.exp(-log_e)


def sequential_critical(n_total: float, alpha: float, *, tuning_alpha: float = 0.05,
                        tuning_n: float = DEFAULT_TUNING_N) -> float:
    """The confidence sequence's boundary in standard errors at ``n_total`` users for the
    error rate ``alpha``, with ρ tuned for ``tuning_alpha`` and ``tuning_n`` (the report tunes
    ρ once for its nominal level and draws corrected tests at smaller α, see
    :func:`compare_sequential`). The always-valid test rejects at ``alpha`` exactly when
    |z| exceeds it; power and MDE of the sequential analysis use it in place of z_{1−α/2}.

    >>> round(sequential_critical(5000, 0.05), 3) == round(boundary_multiplier(5000, 0.05), 3)
    True
    """
    if not (0.0 < alpha < 1.0 and 0.0 < tuning_alpha < 1.0):
        raise ValueError(f"alpha and tuning_alpha must lie in (0, 1), got {alpha!r} and "
                         f"{tuning_alpha!r}")
    if not n_total > 0:
        raise ValueError(f"n_total must be > 0, got {n_total!r}")
    return _multiplier(float(n_total), alpha, rho_squared(tuning_alpha, _check_tuning(tuning_n)))


def non_inferiority_sequential_of(
    pair: Contrast,
    *,
    margin: float,
    relative: bool = True,
    higher_is_better: bool = True,
    level: float = 0.95,
    tuning_n: float = DEFAULT_TUNING_N,
) -> NonInferiority:
    """Always-valid guardrail test: :func:`tracker.stats.compare.non_inferiority_of` with the
    confidence sequence's boundary in place of Student's quantile, so that a guardrail looked
    at every day keeps its error rate (the two-sided normal-mixture boundary of
    :func:`compare_sequential` at α = 1 − ``level``, whose lower (or upper) end alone is a
    valid one-sided bound: conservative, never anti-conservative).

    The statistic is the fixed-horizon one (:func:`tracker.stats.compare.margin_statistic`);
    its always-valid p-value is 1 / E with the mixture e-value of the module docstring on the
    good side of the margin (``p_value``: non-inferior when < 1 − ``level``) and on the bad
    side (``p_value_inferior``: harm). N counts both arms' users, as for the comparisons.

    Worked example: 4,000 users per arm, 12 % vs 12 % conversions, margin 0.02 absolute:
    z = 0.02 / 0.007267 = 2.752, below the sequential boundary 3.047 at N = 8,000 (see
    :func:`compare_sequential`): not shown non-inferior although the fixed-horizon test
    (z > 1.645) would pass.

    >>> from tracker.stats.compare import contrast
    >>> from tracker.stats.sufficient import MeanStats
    >>> arm = MeanStats(4000, 480.0, 480.0)
    >>> r = non_inferiority_sequential_of(contrast(arm, arm), margin=0.02, relative=False)
    >>> round(r.statistic, 3), r.non_inferior, r.interval_kind.value
    (2.752, False, 'sequential')
    """
    level = check_level(level)
    tested = non_inferiority_of(pair, margin=margin, relative=relative,
                                higher_is_better=higher_is_better, level=level)
    untested = replace(tested, ci_low=None, ci_high=None, p_value=None, statistic=None,
                       non_inferior=None, p_value_inferior=None,
                       interval_kind=IntervalKind.SEQUENTIAL)
    if tested.reason is not Reason.OK or tested.statistic is None:
        return replace(untested, reason=tested.reason)
    statistic = tested.statistic
    n = float(pair.n_total)
    alpha = 1.0 - level
    r2 = rho_squared(alpha, _check_tuning(tuning_n))
    two_sided = _always_valid_p(n, r2, statistic)
    good = statistic > 0 if higher_is_better else statistic < 0
    p_value, p_inferior = (two_sided, 1.0) if good else (1.0, two_sided)
    if statistic == 0:
        p_value = p_inferior = 1.0
    low, high = one_sided_bound(pair, _multiplier(n, alpha, r2), relative, higher_is_better)
    return replace(untested, ci_low=low, ci_high=high, p_value=p_value, statistic=statistic,
                   non_inferior=p_value < alpha, p_value_inferior=p_inferior)
