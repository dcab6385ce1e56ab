"""Results per slice of a segment dimension (``device``, ``cohort``, ``surface``): the
verdicts corrected across the slices, the sample-ratio check per slice, and whether the lift
differs across slices (heterogeneity).

Slices are **exploratory**: a dimension of 20 slices is 20 more tests per metric and arm,
and one of them "wins" at α = 0.05 by chance alone. So

- a slice's verdict reads its p-value adjusted by Benjamini–Hochberg across the slices of
  the dimension, for one metric and treatment arm (:func:`slice_verdicts`; the family is
  what a forest plot of that metric shows), and never changes the experiment's decision;
- the sample-ratio check runs per slice against the experiment's own split, its p-values
  adjusted by Holm across the slices (:func:`slice_srm`: a health check wants the chance of
  any false alarm bounded, not its share);
- heterogeneity asks one question per metric, arm and dimension instead of one per slice:
  do the slices' lifts differ by more than chance? (:func:`heterogeneity`).

**Two kinds of dimension** (:class:`DimensionKind`). A *user* dimension gives each user one
slice (their value at their first exposure), so its slices partition the users and their
estimates are independent. A *list* dimension (``surface``) describes the request: a user
counts in every slice they were served in, so slices share users and their estimates are
correlated; and the treatment itself can move users between such slices (a better home
feed sends fewer users to search), so a list slice's sample ratio and lift are conditional
on what the treatment changed.

**The heterogeneity test** is Cochran's Q (Cochran 1954, "The combination of estimates from
different experiments", Biometrics 10) on the slices' log response ratios y = log(T / C),
with the delta method's v = Var(T) / T² + Var(C) / C² (Hedges, Gurevitch & Curtis 1999,
"The meta-analysis of response ratios in experimental ecology", Ecology 80): the lift
constant across slices is y constant, whatever each slice's baseline (a difference would
flag a constant +5 % on a 0.1 and a 0.5 baseline). Q = Σ w (y − ȳ)², w = 1 / v,
ȳ = Σ w y / Σ w, and p = P(χ²_{k−1} ≥ Q); I² = max(0, (Q − (k − 1)) / Q) says which share of
the spread is beyond chance (Higgins & Thompson 2002, "Quantifying heterogeneity in a
meta-analysis", Stat. Med. 21). The same numbers as statsmodels' ``combine_effects``.
Independence is what Q needs: for a list dimension there is no test, and the result says
why (:attr:`Heterogeneity.reason`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike

from tracker.stats import distributions as dist
from tracker.stats.compare import Comparison
from tracker.stats.estimates import Moments
from tracker.stats.multiple import benjamini_hochberg, holm
from tracker.stats.srm import DEFAULT_THRESHOLD, SrmResult, srm_test

#: Below this p-value the lift is said to differ across slices.
HETEROGENEITY_ALPHA = 0.05


class DimensionKind(StrEnum):
    """What a dimension describes: the user (one slice per user) or the served list."""

    USER = "user"
    LIST = "list"


@dataclass(frozen=True, slots=True)
class SliceVerdict:
    """One slice's comparison for one metric and arm. ``adjusted_p``: its p-value adjusted
    by Benjamini–Hochberg across the dimension's slices (None where the comparison has no
    p-value); ``significant``: ``adjusted_p < 1 − level``. Exploratory, always."""

    slice: str
    comparison: Comparison
    adjusted_p: float | None
    significant: bool


def slice_verdicts(comparisons: Mapping[str, Comparison]) -> tuple[SliceVerdict, ...]:
    """The slices' comparisons of one metric and treatment arm with their p-values
    corrected as one family (Benjamini–Hochberg), in the order given.

    >>> from tracker.stats.compare import compare
    >>> from tracker.stats.sufficient import MeanStats
    >>> found = slice_verdicts({
    ...     "ios": compare(MeanStats(500, 290.0, 290.0), MeanStats(500, 250.0, 250.0)),
    ...     "web": compare(MeanStats(500, 252.0, 252.0), MeanStats(500, 250.0, 250.0))})
    >>> [(v.slice, round(v.comparison.p_value, 4), round(v.adjusted_p, 4), v.significant)
    ...  for v in found]
    [('ios', 0.0111, 0.0222, True), ('web', 0.8995, 0.8995, False)]
    """
    levels = {c.level for c in comparisons.values()}
    if len(levels) > 1:
        raise ValueError(f"the slices' comparisons must share one level, got {sorted(levels)}")
    kinds = {c.interval_kind for c in comparisons.values()}
    if len(kinds) > 1:
        raise ValueError("the slices' comparisons must be of one interval kind (fixed-horizon "
                         f"or sequential), got {sorted(k.value for k in kinds)}")
    tested = [name for name, c in comparisons.items() if c.p_value is not None]
    adjusted = dict(zip(tested, benjamini_hochberg(
        [comparisons[name].p_value for name in tested]).tolist(), strict=True))
    return tuple(
        SliceVerdict(name, c, adjusted.get(name),
                     name in adjusted and adjusted[name] < 1 - c.level)
        for name, c in comparisons.items())


@dataclass(frozen=True, slots=True)
class SliceSrm:
    """One slice's sample-ratio check: ``result`` against the experiment's weights, its
    p-value adjusted by Holm across the checked slices (``adjusted_p``, None for a slice
    without users), ``flagged`` when that is below the threshold. ``result.flagged`` is the
    slice's own, unadjusted check: read ``flagged``."""

    slice: str
    result: SrmResult
    adjusted_p: float | None
    flagged: bool


def slice_srm(users: Mapping[str, Sequence[int] | ArrayLike],
              weights: Sequence[float] | ArrayLike, *,
              threshold: float = DEFAULT_THRESHOLD) -> tuple[SliceSrm, ...]:
    """Users per arm in each slice (arms in the order of ``weights``) checked against the
    experiment's split, the p-values Holm-adjusted across the slices with users.

    >>> found = slice_srm({"ios": [5_000, 5_050], "web": [1_000, 1_300]}, [1, 1])
    >>> [(s.slice, s.flagged) for s in found]
    [('ios', False), ('web', True)]
    """
    results = {name: srm_test(counts, weights, threshold=threshold)
               for name, counts in users.items()}
    checked = [name for name, r in results.items() if r.p_value is not None]
    adjusted = dict(zip(checked, holm([results[name].p_value for name in checked]).tolist(),
                        strict=True))
    return tuple(SliceSrm(name, r, adjusted.get(name),
                          name in adjusted and adjusted[name] < threshold)
                 for name, r in results.items())


def describe_srm(checks: Sequence[SliceSrm], kind: DimensionKind) -> str:
    """The per-slice check in a sentence that states its multiplicity (and, for a list
    dimension, what a mismatch there may mean).

    >>> describe_srm(slice_srm({"ios": [50, 52], "web": [400, 600]}, [1, 1]), DimensionKind.USER)
    'sample ratio checked in 2 slices, p-values Holm-adjusted across them: mismatch in web'
    """
    kind = DimensionKind(kind)
    checked = [c for c in checks if c.adjusted_p is not None]
    flagged = [c.slice for c in checks if c.flagged]
    text = (f"sample ratio checked in {len(checked)} slice{'s' * (len(checked) != 1)}, "
            "p-values Holm-adjusted across them: "
            + (f"mismatch in {', '.join(flagged)}" if flagged else "no mismatch"))
    if kind is DimensionKind.LIST and flagged:
        text += " (a list dimension: the treatment itself may move users between its slices)"
    return text


class HeterogeneityReason(StrEnum):
    """Why a heterogeneity test is missing; ``OK`` when it was computed."""

    OK = "ok"
    #: The dimension describes lists: its slices share users, and Q needs independent slices.
    SHARED_USERS = "shared_users"
    #: Fewer than two slices have a log ratio with a variance (each arm's mean finite and > 0,
    #: ≥ 2 users each, a variance > 0).
    TOO_FEW_SLICES = "too_few_slices"


@dataclass(frozen=True, slots=True)
class Heterogeneity:
    """Whether the lift differs across a dimension's slices (Cochran's Q on the log response
    ratios). ``slices``: those tested; ``left_out``: those without a usable log ratio;
    ``statistic`` Q, ``df`` = tested slices − 1, ``p_value``, ``i_squared`` (share of the
    spread beyond chance); ``pooled_lift``: the inverse-variance pooled lift
    (exp(ȳ) − 1); ``differs``: ``p_value < alpha``. All None with another ``reason``."""

    slices: tuple[str, ...]
    left_out: tuple[str, ...]
    statistic: float | None
    df: int | None
    p_value: float | None
    i_squared: float | None
    pooled_lift: float | None
    alpha: float
    differs: bool
    reason: HeterogeneityReason

    def describe(self) -> str:
        """The test's answer in a sentence.

        >>> from tracker.stats.estimates import Moments, Reason
        >>> ok = Moments(1000, 0.5, 1e-4, Reason.OK)
        >>> heterogeneity({"new": (Moments(1000, 0.5, 1e-4, Reason.OK), ok),
        ...                "returning": (Moments(1000, 0.6, 1e-4, Reason.OK), ok)}).describe()
        'the lift differs across slices (Cochran Q = 22.5, 1 df, p = 2.1e-06, I² = 96%)'
        """
        if self.reason is HeterogeneityReason.SHARED_USERS:
            return ("no heterogeneity test: the slices of a list dimension share users, "
                    "so their lifts are not independent")
        if self.reason is HeterogeneityReason.TOO_FEW_SLICES:
            return ("no heterogeneity test: fewer than two slices have a positive mean in both "
                    "arms with a variance (the test compares lifts as log ratios)")
        verdict = "the lift differs across slices" if self.differs else \
            "no evidence that the lift differs across slices"
        return (f"{verdict} (Cochran Q = {self.statistic:.1f}, {self.df} df, "
                f"p = {_p_text(self.p_value)}, I² = {self.i_squared:.0%})")


def _p_text(p: float) -> str:
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def heterogeneity(arms: Mapping[str, tuple[Moments, Moments]], *,
                  kind: DimensionKind = DimensionKind.USER,
                  alpha: float = HETEROGENEITY_ALPHA) -> Heterogeneity:
    """Cochran's Q across slices, from each slice's (treatment, control)
    :class:`~tracker.stats.estimates.Moments` (CUPED's adjusted ones when the comparison is
    adjusted: :func:`tracker.stats.cuped.adjusted_moments`).

    A slice enters when both arms have a positive estimate and a variance, and the log ratio's
    variance is positive; the others are ``left_out``.

    >>> from tracker.stats.estimates import Moments, Reason
    >>> def arm(mean, variance):
    ...     return Moments(900, mean, variance, Reason.OK)
    >>> same = heterogeneity({"ios": (arm(0.55, 2e-4), arm(0.5, 2e-4)),
    ...                       "web": (arm(0.22, 1e-4), arm(0.2, 1e-4))})
    >>> round(same.statistic, 12), same.differs, round(same.pooled_lift, 12)
    (0.0, False, 0.1)
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if DimensionKind(kind) is DimensionKind.LIST:
        return _missing((), (), alpha, HeterogeneityReason.SHARED_USERS)
    used, left, y, v = [], [], [], []
    for name, (treatment, control) in arms.items():
        ratio = _log_ratio(treatment, control)
        if ratio is None:
            left.append(name)
            continue
        used.append(name)
        y.append(ratio[0])
        v.append(ratio[1])
    if len(used) < 2:
        return _missing(tuple(used), tuple(left), alpha, HeterogeneityReason.TOO_FEW_SLICES)
    ys, w = np.array(y), 1.0 / np.array(v)
    pooled = float(np.sum(w * ys) / np.sum(w))
    q = float(np.sum(w * (ys - pooled) ** 2))
    df = len(used) - 1
    p = float(dist.chi2_sf(q, df))
    i2 = max(0.0, (q - df) / q) if q > 0 else 0.0
    return Heterogeneity(tuple(used), tuple(left), q, df, p, i2, math.expm1(pooled), alpha,
                         p < alpha, HeterogeneityReason.OK)


def _log_ratio(treatment: Moments, control: Moments) -> tuple[float, float] | None:
    """log(T / C) and its delta-method variance, None when either is not defined."""
    for m in (treatment, control):
        if m.estimate is None or m.variance is None or not 0 < m.estimate < math.inf:
            return None
    variance = (treatment.variance / treatment.estimate ** 2
                + control.variance / control.estimate ** 2)
    if not (math.isfinite(variance) and variance > 0):
        return None
    return math.log(treatment.estimate / control.estimate), variance


def _missing(used: tuple[str, ...], left: tuple[str, ...], alpha: float,
             reason: HeterogeneityReason) -> Heterogeneity:
    return Heterogeneity(used, left, None, None, None, None, None, alpha, False, reason)
