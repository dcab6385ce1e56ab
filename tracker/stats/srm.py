"""Sample-ratio mismatch: did each arm get the share of users it was declared to get?

An SRM means assignment or logging lost users unevenly, so the arms are no
longer comparable and every lift is suspect (Fabijan et al. 2019, "Diagnosing
Sample Ratio Mismatch in Online Controlled Experiments", KDD 2019).

Two tests, both flagged at p < 0.001 (the threshold of GrowthBook, Eppo and
Bucketeer) *and* only when the deviation is practically relevant:

- :func:`srm_test`, Pearson's chi-square goodness of fit of the users per arm
  against the declared weights. Valid for one look.
- :func:`sequential_srm`, the anytime-valid Dirichlet-multinomial Bayes factor
  test of Lindon & Malek (2022), "Anytime-Valid Inference for Multinomial Count
  Data", NeurIPS 2022 (arXiv:2011.03567). Valid when repeated every day.

The practical gate, ``min_deviation``: with 100 million users a 50.02/49.98
split is "significant" (p ≈ 6e-5) yet harmless. A flag also needs some arm's observed
share to differ from its weight by at least ``min_deviation`` *relative* to
the weight (default 0.005: 50/50 must be at least 50.25/49.75).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import special
from scipy import stats as sps

from tracker.stats.results import Reason

#: p-value below which an SRM is flagged.
DEFAULT_THRESHOLD = 0.001
#: Smallest relative deviation of an arm's share from its weight worth flagging.
DEFAULT_MIN_DEVIATION = 0.005
#: Dirichlet prior concentration of the sequential test (GrowthBook's default).
DEFAULT_CONCENTRATION = 10_000.0


@dataclass(frozen=True, slots=True)
class SrmResult:
    """Outcome of an SRM check over the arms, in the order of the declared weights.

    ``users`` observed per arm; ``expected_share`` the normalised weights;
    ``p_value`` (chi-square, or anytime-valid for the sequential test);
    ``statistic`` the chi-square statistic or, for the sequential test, the
    log Bayes factor at the last look; ``max_deviation`` the largest
    |observed share / weight − 1| over arms. ``flagged`` is
    ``p_value < threshold and max_deviation >= min_deviation``. With no users
    the result has ``reason=NO_USERS`` and ``flagged=False``.
    """

    users: tuple[int, ...]
    expected_share: tuple[float, ...]
    statistic: float | None
    p_value: float | None
    max_deviation: float | None
    threshold: float
    min_deviation: float
    flagged: bool
    sequential: bool
    reason: Reason

    @property
    def ok(self) -> bool:
        return self.reason is Reason.OK


def _check_weights(weights: Sequence[float] | ArrayLike, k: int) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size != k:
        raise ValueError(f"need one weight per arm: {k} arms, weights of shape {w.shape}")
    if k < 2:
        raise ValueError("a sample-ratio check needs at least two arms")
    if not (np.all(np.isfinite(w)) and np.all(w > 0)):
        raise ValueError(
            f"weights must be finite and > 0 (leave out arms with zero traffic), got {w.tolist()}"
        )
    return w / w.sum()


def _check_counts(counts: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(counts)) or np.any(counts < 0) or np.any(counts != np.floor(counts)):
        raise ValueError(f"user counts must be non-negative integers, got {counts.tolist()}")
    return counts


def _check_gate(threshold: float, min_deviation: float) -> None:
    if not (0.0 < threshold < 1.0):
        raise ValueError(f"threshold must be strictly between 0 and 1, got {threshold!r}")
    if not (math.isfinite(min_deviation) and min_deviation >= 0):
        raise ValueError(f"min_deviation must be a finite number >= 0, got {min_deviation!r}")


def _max_deviation(counts: np.ndarray, share: np.ndarray) -> float:
    return float(np.max(np.abs(counts / counts.sum() / share - 1.0)))


def srm_test(
    users: Sequence[int] | ArrayLike,
    weights: Sequence[float] | ArrayLike,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    min_deviation: float = DEFAULT_MIN_DEVIATION,
) -> SrmResult:
    """Chi-square goodness-of-fit SRM test of users per arm against declared weights.

    With N users and shares w_i: E_i = N w_i, X² = Σ (O_i − E_i)² / E_i,
    p = P(χ²_{k−1} ≥ X²) (Pearson 1900). Weights need not sum to 1.

    Worked example: 50/50 declared, 5,100 vs 4,900 users: E = 5,000 each,
    X² = (100² + 100²) / 5,000 = 4, p = P(χ²₁ ≥ 4) ≈ 0.0455: not flagged.
    10,600 vs 9,400: X² = 72, p ≈ 2e-17, deviation 6 %: flagged.

    >>> r = srm_test([5100, 4900], [0.5, 0.5])
    >>> r.statistic, round(r.p_value, 4), r.flagged
    (4.0, 0.0455, False)
    >>> srm_test([10600, 9400], [1, 1]).flagged
    True
    """
    _check_gate(threshold, min_deviation)
    counts = _check_counts(np.asarray(users, dtype=float))
    if counts.ndim != 1:
        raise ValueError(f"users must be 1-D (one count per arm), got shape {counts.shape}")
    share = _check_weights(weights, counts.size)
    observed = tuple(int(c) for c in counts)
    if counts.sum() == 0:
        return SrmResult(
            observed, tuple(share.tolist()), None, None, None, threshold, min_deviation,
            False, False, Reason.NO_USERS,
        )
    expected = counts.sum() * share
    statistic = float(np.sum((counts - expected) ** 2 / expected))
    p_value = float(sps.chi2.sf(statistic, counts.size - 1))
    deviation = _max_deviation(counts, share)
    return SrmResult(
        observed, tuple(share.tolist()), statistic, p_value, deviation, threshold,
        min_deviation, p_value < threshold and deviation >= min_deviation, False, Reason.OK,
    )


def log_bayes_factor(
    users: ArrayLike, weights: ArrayLike, *, concentration: float = DEFAULT_CONCENTRATION
) -> np.ndarray:
    """Log Bayes factor of "some other split" against the declared split.

    H1: shares θ ~ Dirichlet(c · w) (prior centred on the declared weights w);
    H0: θ = w. For cumulative counts x (n users) the conjugate marginal
    likelihood gives (Lindon & Malek 2022, the multinomial test)

        log BF = log Γ(c) − log Γ(c + n) + Σ [log Γ(c w_i + x_i) − log Γ(c w_i)]
                 − Σ x_i log w_i.

    ``users`` may be one look (shape ``(k,)``) or several (``(T, k)``, cumulative
    per look); the result has one value per look. Under H0, BF is a
    nonnegative martingale with mean 1, so P(sup BF ≥ 1/α) ≤ α (Ville's
    inequality): that is what makes the test anytime-valid.

    >>> round(float(log_bayes_factor([0, 0], [0.5, 0.5])), 12)
    0.0
    """
    x = np.asarray(users, dtype=float)
    w = _check_weights(weights, x.shape[-1])
    alpha = concentration * w
    n = x.sum(axis=-1)
    return (
        special.gammaln(concentration)
        - special.gammaln(concentration + n)
        + np.sum(special.gammaln(alpha + x) - special.gammaln(alpha), axis=-1)
        - np.sum(x * np.log(w), axis=-1)
    )


def sequential_srm(
    cumulative_users: Sequence[Sequence[int]] | ArrayLike,
    weights: Sequence[float] | ArrayLike,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    min_deviation: float = DEFAULT_MIN_DEVIATION,
    concentration: float = DEFAULT_CONCENTRATION,
) -> SrmResult:
    """Anytime-valid SRM test over the looks made so far (Lindon & Malek 2022).

    ``cumulative_users`` has one row per look (e.g. per day), each the users per
    arm *to date*; a single row is a single look. The anytime-valid p-value is
    p = min(1, min over looks of 1 / BF) (the running minimum keeps it valid
    however many looks were made); ``statistic`` is log BF at the last look and
    ``max_deviation`` is measured there. ``concentration`` c is the prior's
    total pseudo-count: larger c targets smaller mismatches (GrowthBook uses
    10,000; at 100k users this detects a 51/49 split ~98 % of the time).

    >>> r = sequential_srm([[1000, 1000], [2100, 1900], [3300, 2700]], [0.5, 0.5])
    >>> r.p_value < 0.001, r.flagged, r.sequential
    (True, True, True)
    >>> sequential_srm([[510, 490]], [0.5, 0.5]).p_value
    1.0
    """
    _check_gate(threshold, min_deviation)
    if not (math.isfinite(concentration) and concentration > 0):
        raise ValueError(f"concentration must be a positive number, got {concentration!r}")
    counts = _check_counts(np.atleast_2d(np.asarray(cumulative_users, dtype=float)))
    if counts.ndim != 2 or counts.shape[0] == 0:
        raise ValueError(
            "cumulative_users must be one row of counts per look, shape (looks, arms), "
            f"got shape {counts.shape}"
        )
    if np.any(np.diff(counts, axis=0) < 0):
        raise ValueError(
            "cumulative_users must not decrease from one look to the next (are these "
            "per-day counts rather than cumulative ones? use numpy.cumsum)"
        )
    share = _check_weights(weights, counts.shape[1])
    last = counts[-1]
    observed = tuple(int(c) for c in last)
    if last.sum() == 0:
        return SrmResult(
            observed, tuple(share.tolist()), None, None, None, threshold, min_deviation,
            False, True, Reason.NO_USERS,
        )
    log_bf = log_bayes_factor(counts, share, concentration=concentration)
    p_value = float(min(1.0, math.exp(-float(np.max(log_bf)))))
    deviation = _max_deviation(last, share)
    return SrmResult(
        observed, tuple(share.tolist()), float(log_bf[-1]), p_value, deviation, threshold,
        min_deviation, p_value < threshold and deviation >= min_deviation, True, Reason.OK,
    )
