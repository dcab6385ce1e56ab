"""Sample-ratio mismatch: did each arm get the share of users it was declared to get?

An SRM means assignment or logging lost users unevenly, so the arms are no
longer comparable and every lift is suspect (Fabijan et al. 2019, "Diagnosing
Sample Ratio Mismatch in Online Controlled Experiments", KDD 2019).

Two tests, both flagged on their p-value alone, at p < 0.001 by default (the
threshold of GrowthBook, Eppo and Bucketeer; ``threshold=`` changes it):

- :func:`srm_test`, Pearson's chi-square goodness of fit of the users per arm
  against the declared weights. Valid for one look. With small counts (an expected count
  below 5 in some arm, Cochran's rule) the chi-square approximation over-flags unbalanced
  splits (p < 0.001 with probability 1.2 % at 95/5 and 10 users): the p-value is then the
  exact one, the binomial test for two arms and the exact multinomial test for more
  (:func:`exact_p_value`), whose false-alarm rate never exceeds the threshold.
- :func:`sequential_srm`, the anytime-valid Dirichlet-multinomial Bayes factor
  test of Lindon & Malek (2022), "Anytime-Valid Inference for Multinomial Count
  Data", NeurIPS 2022 (arXiv:2011.03567). Valid when repeated every day.

The size of the deviation is reported, never used as a gate: a split of
5,017,000 / 4,983,000 declared 50/50 deviates by only 0.34 %, but p ≈ 6e-27
says users were lost by something systematic (a broken pipeline, a bot filter
applied to one arm), and a loss that certain biases every lift (Fabijan et al.
2019, §4). :meth:`SrmResult.describe` words it for a report: "control lost
0.34% of its expected users".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from tracker.stats import distributions as dist
from tracker.stats.results import Reason

#: p-value below which an SRM is flagged.
DEFAULT_THRESHOLD = 0.001
#: Dirichlet prior concentration of the sequential test (GrowthBook's default).
DEFAULT_CONCENTRATION = 10_000.0


@dataclass(frozen=True, slots=True)
class SrmResult:
    """Outcome of an SRM check over the arms, in the order of the declared weights.

    ``users`` observed per arm; ``expected_share`` the normalised weights;
    ``p_value`` (chi-square, or anytime-valid for the sequential test);
    ``statistic`` the chi-square statistic or, for the sequential test, the
    log Bayes factor at the last look; ``deviation`` per arm, observed users /
    expected users − 1 (−0.0034: the arm lost 0.34 % of its expected users);
    ``max_deviation`` the largest |deviation|. ``flagged`` is
    ``p_value < threshold``: the deviation's size is information, not a gate.
    With no users the result has ``reason=NO_USERS`` and ``flagged=False``.
    """

    users: tuple[int, ...]
    expected_share: tuple[float, ...]
    statistic: float | None
    p_value: float | None
    max_deviation: float | None
    threshold: float
    flagged: bool
    sequential: bool
    reason: Reason
    deviation: tuple[float, ...] | None = None
    exact: bool = False

    @property
    def ok(self) -> bool:
        return self.reason is Reason.OK

    def describe(self, arms: Sequence[str]) -> str:
        """The deviation in words, largest first: "control lost 0.34% of its expected users".

        ``arms`` names the arms in the order of the weights. Arms within 0.005 % of
        their expected users are left out; with none left the split is "as declared".

        >>> srm_test([5_017_000, 4_983_000], [1, 1]).describe(["treatment", "control"])
        'control lost 0.34% of its expected users, treatment got 0.34% more than expected'
        """
        if len(arms) != len(self.users):
            raise ValueError(f"need one name per arm: {len(self.users)} arms, got {list(arms)}")
        if self.deviation is None:
            return "no users yet"
        # largest first, losses before gains of the same size
        ranked = sorted(zip(arms, self.deviation, strict=True),
                        key=lambda a: (-round(abs(a[1]), 9), a[1]))
        words = [
            f"{arm} lost {-dev:.2%} of its expected users" if dev < 0
            else f"{arm} got {dev:.2%} more than expected"
            for arm, dev in ranked if abs(dev) >= 5e-5
        ]
        return ", ".join(words) if words else "users split as declared"


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


def _check_threshold(threshold: float) -> None:
    if not (isinstance(threshold, int | float) and 0.0 < threshold < 1.0):
        raise ValueError(
            f"threshold must be a p-value strictly between 0 and 1 (e.g. 0.001), got {threshold!r}"
        )


def _deviation(counts: np.ndarray, share: np.ndarray) -> tuple[float, ...]:
    """Observed / expected users − 1 per arm."""
    return tuple((counts / (counts.sum() * share) - 1.0).tolist())


def srm_test(
    users: Sequence[int] | ArrayLike,
    weights: Sequence[float] | ArrayLike,
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> SrmResult:
    """Chi-square goodness-of-fit SRM test of users per arm against declared weights.

    With N users and shares w_i: E_i = N w_i, X² = Σ (O_i − E_i)² / E_i,
    p = P(χ²_{k−1} ≥ X²) (Pearson 1900). Weights need not sum to 1. When some E_i < 5 the
    p-value is exact instead (:func:`exact_p_value`, ``exact`` True); ``statistic`` stays X².

    Worked example: 50/50 declared, 5,100 vs 4,900 users: E = 5,000 each,
    X² = (100² + 100²) / 5,000 = 4, p = P(χ²₁ ≥ 4) ≈ 0.0455: not flagged.
    10,600 vs 9,400: X² = 72, p ≈ 2e-17: flagged. 5,017,000 vs 4,983,000:
    X² = 2 · 17,000² / 5,000,000 = 115.6, p ≈ 6e-27: flagged, though each arm is
    only 0.34 % off its expected users.

    >>> r = srm_test([5100, 4900], [0.5, 0.5])
    >>> r.statistic, round(r.p_value, 4), r.flagged
    (4.0, 0.0455, False)
    >>> srm_test([10600, 9400], [1, 1]).flagged, srm_test([5_017_000, 4_983_000], [1, 1]).flagged
    (True, True)
    """
    _check_threshold(threshold)
    counts = _check_counts(np.asarray(users, dtype=float))
    if counts.ndim != 1:
        raise ValueError(f"users must be 1-D (one count per arm), got shape {counts.shape}")
    share = _check_weights(weights, counts.size)
    observed = tuple(int(c) for c in counts)
    if counts.sum() == 0:
        return SrmResult(
            observed, tuple(share.tolist()), None, None, None, threshold, False, False,
            Reason.NO_USERS,
        )
    expected = counts.sum() * share
    statistic = float(np.sum((counts - expected) ** 2 / expected))
    exact = exact_p_value(counts, share) if expected.min() < SMALL_EXPECTED else None
    p_value = float(dist.chi2_sf(statistic, counts.size - 1)) if exact is None else exact
    deviation = _deviation(counts, share)
    return SrmResult(
        observed, tuple(share.tolist()), statistic, p_value, max(map(abs, deviation)),
        threshold, p_value < threshold, False, Reason.OK, deviation, exact is not None,
    )


#: Below this expected count in some arm the chi-square approximation is not trusted
#: (Cochran 1954, "Some methods for strengthening the common χ² tests", Biometrics 10).
SMALL_EXPECTED = 5.0
#: The exact multinomial test enumerates every split of the users; beyond this many splits
#: (C(N + k − 1, k − 1)) it falls back to chi-square.
MAX_EXACT_OUTCOMES = 200_000


def exact_p_value(users: Sequence[int] | ArrayLike,
                  weights: Sequence[float] | ArrayLike) -> float | None:
    """The exact goodness-of-fit p-value of ``users`` per arm against ``weights``: the
    probability, under the declared split, of every split at most as likely as the observed
    one (the "minimum likelihood" two-sided rule: Clopper-Pearson's for two arms, scipy's
    ``binomtest``; the exact multinomial test for more, Read & Cressie 1988, *Goodness-of-Fit
    Statistics for Discrete Multivariate Data*, §2). None when there are more than
    :data:`MAX_EXACT_OUTCOMES` splits to enumerate.

    Worked example: 10 users declared 95/5, 7 and 3 observed: P(3 or more in the 5 % arm)
    = 1 − P(0) − P(1) − P(2) ≈ 0.01150 (every split with 3 or more is less likely than the
    observed one; those with 0, 1, 2 are more likely).

    >>> round(exact_p_value([7, 3], [0.95, 0.05]), 5)
    0.0115
    """
    x = np.asarray(users, dtype=np.int64)
    w = _check_weights(weights, x.size)
    n = int(x.sum())
    if n == 0:
        return 1.0
    if x.size == 2:
        from scipy import stats as sps  # only here: small samples (its import: 1.1 s)

        return float(sps.binomtest(int(x[0]), n, float(w[0])).pvalue)
    if math.comb(n + x.size - 1, x.size - 1) > MAX_EXACT_OUTCOMES:
        return None
    splits = _compositions(n, x.size)
    log_w = np.log(w)
    log_p = special.gammaln(n + 1) - special.gammaln(splits + 1).sum(axis=1) + splits @ log_w
    observed = special.gammaln(n + 1) - special.gammaln(x + 1).sum() + x @ log_w
    at_most = log_p <= observed + 1e-7 * max(1.0, abs(observed))  # ties up to rounding
    return float(min(1.0, np.exp(log_p[at_most]).sum()))


def _compositions(n: int, k: int) -> np.ndarray:
    """Every way of splitting ``n`` users over ``k`` arms, one row each (stars and bars)."""
    bars = np.array(list(itertools.combinations(range(n + k - 1), k - 1)), dtype=np.int64)
    edges = np.column_stack([np.full(len(bars), -1), bars, np.full(len(bars), n + k - 1)])
    return np.diff(edges, axis=1) - 1


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
    concentration: float = DEFAULT_CONCENTRATION,
) -> SrmResult:
    """Anytime-valid SRM test over the looks made so far (Lindon & Malek 2022).

    ``cumulative_users`` has one row per look (e.g. per day), each the users per
    arm *to date*; a single row is a single look. The anytime-valid p-value is
    p = min(1, min over looks of 1 / BF) (the running minimum keeps it valid
    however many looks were made); ``statistic`` is log BF at the last look and
    the deviations are measured there; ``flagged`` is ``p_value < threshold``.
    ``concentration`` c is the prior's total pseudo-count: larger c targets
    smaller mismatches (GrowthBook uses 10,000; at 100k users this detects a
    51/49 split ~98 % of the time).

    >>> r = sequential_srm([[1000, 1000], [2100, 1900], [3300, 2700]], [0.5, 0.5])
    >>> r.p_value < 0.001, r.flagged, r.sequential
    (True, True, True)
    >>> sequential_srm([[510, 490]], [0.5, 0.5]).p_value
    1.0
    """
    _check_threshold(threshold)
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
            observed, tuple(share.tolist()), None, None, None, threshold, False, True,
            Reason.NO_USERS,
        )
    log_bf = log_bayes_factor(counts, share, concentration=concentration)
    p_value = float(min(1.0, math.exp(-float(np.max(log_bf)))))
    deviation = _deviation(last, share)
    return SrmResult(
        observed, tuple(share.tolist()), float(log_bf[-1]), p_value, max(map(abs, deviation)),
        threshold, p_value < threshold, True, Reason.OK, deviation,
    )
