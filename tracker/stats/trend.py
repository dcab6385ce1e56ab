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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from tracker.stats.estimates import rounding_bound
from tracker.stats.results import Reason, check_level


class TrendDirection(StrEnum):
    """What a significant slope means for the effect; ``NONE`` when not significant."""

    FADING = "fading"  # novelty: the effect worsens with days since exposure
    GROWING = "growing"  # primacy: the effect improves with days since exposure
    NONE = "none"


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
    q = float(sps.t.ppf(0.5 + level / 2, df))
    p_value = float(2 * sps.t.sf(abs(slope) / std_error, df))
    direction = TrendDirection.NONE
    if p_value < 1 - level:
        worsens = (slope < 0) == higher_is_better
        direction = TrendDirection.FADING if worsens else TrendDirection.GROWING
    return Trend(slope, slope - q * std_error, slope + q * std_error, std_error, p_value, df,
                 intercept, dispersion, level, direction, Reason.OK)
