"""Sufficient statistics of one arm with pre-exposure covariates: the input of CUPED.

Regression adjustment (:mod:`tracker.stats.cuped`) needs, besides the outcome's
sums of :mod:`tracker.stats.sufficient`, the sums of k covariates x_1 … x_k per
user (e.g. the user's interactions in the 14 days before exposure, the
pre-period value of the metric) and their cross-products with each other and
with the outcome. Like :class:`~tracker.stats.sufficient.MeanStats` these are
sums over users, so disjoint sets of users merge by ``+``:

>>> a = CovariateMeanStats.from_values([1.0, 0.0], [[2.0], [1.0]])
>>> b = CovariateMeanStats.from_values([3.0], [[4.0]])
>>> (a + b) == CovariateMeanStats.from_values([1.0, 0.0, 3.0], [[2.0], [1.0], [4.0]])
True
>>> (a + b).sum_xy
(14.0,)
>>> sum([a, b], CovariateMeanStats()) == a + b   # the default is the empty set of users
True

**Users without pre-period data** keep every covariate at 0 and get an
indicator covariate that is 1 for them and 0 for the others (the
missing-indicator method; Deng et al. 2013 §3.3 discuss users new to the
product). The indicator is one more column of x like any other, so the
regression fits one extra intercept for the users without history: their
adjusted value is compared with the mean of *their* group, not pulled towards
0 · θ. When no user has history, every x is 0 and the indicator is the
constant 1: both carry no information and the adjustment drops them, so the
result is the unadjusted one exactly.

The sums of x are stored as full k × k matrices (``sum_xx[j][l]`` = Σ x_j·x_l,
symmetric), a few floats per covariate: tracker uses k ≤ 4 (interactions,
graded sum, pre-period metric, indicator).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from tracker.stats.sufficient import (
    MeanStats,
    RatioStats,
    _check_count,
    _check_empty,
    _check_square_sum,
    _check_sum,
)

Vector = tuple[float, ...]
Matrix = tuple[tuple[float, ...], ...]


def _vector(name: str, values: object, k: int | None = None) -> Vector:
    try:
        items = tuple(values)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be a sequence of numbers, got {values!r}") from None
    if k is not None and len(items) != k:
        raise ValueError(f"{name} must have {k} entries (one per covariate), got {len(items)}")
    return tuple(_check_sum(f"{name}[{j}]", v) for j, v in enumerate(items))


def _matrix(name: str, rows: object, k: int) -> Matrix:
    try:
        items = tuple(rows)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be a k x k nested sequence, got {rows!r}") from None
    if len(items) != k:
        raise ValueError(f"{name} must be {k} x {k} (one row per covariate), got {len(items)} rows")
    matrix = tuple(_vector(f"{name}[{j}]", row, k) for j, row in enumerate(items))
    asym = np.abs(np.subtract(matrix, np.transpose(matrix))) if k else np.zeros(0)
    if k and float(asym.max()) > 1e-9 * (1.0 + float(np.abs(matrix).max())):
        raise ValueError(f"{name} must be symmetric (Σ x_j·x_l = Σ x_l·x_j), got {matrix}")
    return matrix


def _check_covariates(n: int, sum_x: Vector, sum_xx: Matrix, **extra: Vector) -> None:
    for j, total in enumerate(sum_x):
        _check_square_sum(f"sum_xx[{j}][{j}]", sum_xx[j][j], total, n)
    flat = {f"sum_x[{j}]": v for j, v in enumerate(sum_x)}
    flat.update({f"sum_xx[{j}][{j}]": row[j] for j, row in enumerate(sum_xx)})
    for name, vector in extra.items():
        flat.update({f"{name}[{j}]": v for j, v in enumerate(vector)})
    _check_empty(n, **flat)


def _add(a: tuple, b: tuple) -> tuple:
    return tuple(np.add(a, b).tolist()) if a else ()


def _add_empty(a: CovariateStats, b: CovariateStats) -> CovariateStats:
    """``a + b`` when their covariate counts differ: only the empty default is neutral."""
    for empty, other in ((a, b), (b, a)):
        if empty.n == 0 and empty.k == 0:
            return other
    raise ValueError(f"cannot add sums of {a.k} and {b.k} covariates (different covariates)")


def _covariate_matrix(covariates: ArrayLike, n: int) -> np.ndarray:
    x = np.asarray(covariates, dtype=float)
    if x.ndim == 1 and n == 0 and x.size == 0:
        x = x.reshape(0, 0)
    if x.ndim != 2 or x.shape[0] != n:
        raise ValueError(
            f"covariates must be 2-D, one row per user ({n} users) and one column per "
            f"covariate, got shape {x.shape}"
        )
    return x


@dataclass(frozen=True, slots=True)
class CovariateMeanStats:
    """Sums over the users of one arm for a user-level metric y and covariates x_1 … x_k.

    ``n``: users; ``sum_y`` = Σ y_i, ``sum_y2`` = Σ y_i²; ``sum_x[j]`` = Σ x_ij;
    ``sum_xx[j][l]`` = Σ x_ij·x_il (so ``sum_xx[j][j]`` = Σ x_ij²);
    ``sum_xy[j]`` = Σ x_ij·y_i. :attr:`outcome` is the unadjusted
    :class:`~tracker.stats.sufficient.MeanStats`.
    """

    n: int = 0
    sum_y: float = 0.0
    sum_y2: float = 0.0
    sum_x: Vector = ()
    sum_xx: Matrix = ()
    sum_xy: Vector = ()

    def __post_init__(self) -> None:
        outcome = MeanStats(_check_count("n", self.n), self.sum_y, self.sum_y2)
        sum_x = _vector("sum_x", self.sum_x)
        k = len(sum_x)
        sum_xx = _matrix("sum_xx", self.sum_xx, k)
        sum_xy = _vector("sum_xy", self.sum_xy, k)
        _check_covariates(outcome.n, sum_x, sum_xx, sum_xy=sum_xy)
        for name, value in (("n", outcome.n), ("sum_y", outcome.sum_x),
                            ("sum_y2", outcome.sum_x2), ("sum_x", sum_x),
                            ("sum_xx", sum_xx), ("sum_xy", sum_xy)):
            object.__setattr__(self, name, value)

    @property
    def k(self) -> int:
        """Number of covariates."""
        return len(self.sum_x)

    @property
    def outcome(self) -> MeanStats:
        """The outcome's sums alone: what the unadjusted comparison uses."""
        return MeanStats(self.n, self.sum_y, self.sum_y2)

    def __add__(self, other: object) -> CovariateMeanStats:
        if not isinstance(other, CovariateMeanStats):
            return NotImplemented
        if other.k != self.k:
            return _add_empty(self, other)
        return CovariateMeanStats(
            self.n + other.n, self.sum_y + other.sum_y, self.sum_y2 + other.sum_y2,
            _add(self.sum_x, other.sum_x),
            tuple(_add(a, b) for a, b in zip(self.sum_xx, other.sum_xx, strict=True)),
            _add(self.sum_xy, other.sum_xy),
        )

    @classmethod
    def from_values(cls, values: ArrayLike, covariates: ArrayLike) -> CovariateMeanStats:
        """The sums of per-user values y (1-D) and covariates x (n × k).

        >>> CovariateMeanStats.from_values([1.0, 3.0], [[1.0, 0.0], [2.0, 1.0]])
        CovariateMeanStats(n=2, sum_y=4.0, sum_y2=10.0, sum_x=(3.0, 1.0), \
sum_xx=((5.0, 2.0), (2.0, 1.0)), sum_xy=(7.0, 3.0))
        """
        y = MeanStats.from_values(values)
        x = _covariate_matrix(covariates, y.n)
        y_arr = np.asarray(values, dtype=float)
        return cls(y.n, y.sum_x, y.sum_x2, tuple(x.sum(axis=0).tolist()),
                   tuple(map(tuple, (x.T @ x).tolist())), tuple((x.T @ y_arr).tolist()))


@dataclass(frozen=True, slots=True)
class CovariateRatioStats:
    """Sums over the users of one arm for a ratio metric Σy / Σm and covariates x_1 … x_k.

    The outcome's sums are those of :class:`~tracker.stats.sufficient.RatioStats`
    (``n, sum_y, sum_m, sum_y2, sum_m2, sum_ym``); the covariates add
    ``sum_x[j]`` = Σ x_ij, ``sum_xx[j][l]`` = Σ x_ij·x_il and the cross-products
    with numerator and denominator, ``sum_xy[j]`` = Σ x_ij·y_i and
    ``sum_xm[j]`` = Σ x_ij·m_i. For a ratio metric the natural covariates are the
    user's pre-period numerator and denominator (GrowthBook's ratio CUPED).
    """

    n: int = 0
    sum_y: float = 0.0
    sum_m: float = 0.0
    sum_y2: float = 0.0
    sum_m2: float = 0.0
    sum_ym: float = 0.0
    sum_x: Vector = ()
    sum_xx: Matrix = ()
    sum_xy: Vector = ()
    sum_xm: Vector = ()

    def __post_init__(self) -> None:
        outcome = RatioStats(self.n, self.sum_y, self.sum_m, self.sum_y2, self.sum_m2,
                             self.sum_ym)
        sum_x = _vector("sum_x", self.sum_x)
        k = len(sum_x)
        sum_xx = _matrix("sum_xx", self.sum_xx, k)
        sum_xy = _vector("sum_xy", self.sum_xy, k)
        sum_xm = _vector("sum_xm", self.sum_xm, k)
        _check_covariates(outcome.n, sum_x, sum_xx, sum_xy=sum_xy, sum_xm=sum_xm)
        for name in ("n", "sum_y", "sum_m", "sum_y2", "sum_m2", "sum_ym"):
            object.__setattr__(self, name, getattr(outcome, name))
        for name, value in (("sum_x", sum_x), ("sum_xx", sum_xx), ("sum_xy", sum_xy),
                            ("sum_xm", sum_xm)):
            object.__setattr__(self, name, value)

    @property
    def k(self) -> int:
        """Number of covariates."""
        return len(self.sum_x)

    @property
    def outcome(self) -> RatioStats:
        """The outcome's sums alone: what the unadjusted comparison uses."""
        return RatioStats(self.n, self.sum_y, self.sum_m, self.sum_y2, self.sum_m2, self.sum_ym)

    def __add__(self, other: object) -> CovariateRatioStats:
        if not isinstance(other, CovariateRatioStats):
            return NotImplemented
        if other.k != self.k:
            return _add_empty(self, other)
        outcome = self.outcome + other.outcome
        return CovariateRatioStats(
            outcome.n, outcome.sum_y, outcome.sum_m, outcome.sum_y2, outcome.sum_m2,
            outcome.sum_ym, _add(self.sum_x, other.sum_x),
            tuple(_add(a, b) for a, b in zip(self.sum_xx, other.sum_xx, strict=True)),
            _add(self.sum_xy, other.sum_xy), _add(self.sum_xm, other.sum_xm),
        )

    @classmethod
    def from_values(
        cls, numerators: ArrayLike, denominators: ArrayLike, covariates: ArrayLike
    ) -> CovariateRatioStats:
        """The sums of per-user numerators y, denominators m (1-D) and covariates x (n × k).

        >>> s = CovariateRatioStats.from_values([1.0, 0.0], [2.0, 1.0], [[1.0], [3.0]])
        >>> s.outcome.sum_ym, s.sum_x, s.sum_xx, s.sum_xy, s.sum_xm
        (2.0, (4.0,), ((10.0,),), (1.0,), (5.0,))
        """
        r = RatioStats.from_values(numerators, denominators)
        x = _covariate_matrix(covariates, r.n)
        y = np.asarray(numerators, dtype=float)
        m = np.asarray(denominators, dtype=float)
        return cls(r.n, r.sum_y, r.sum_m, r.sum_y2, r.sum_m2, r.sum_ym,
                   tuple(x.sum(axis=0).tolist()), tuple(map(tuple, (x.T @ x).tolist())),
                   tuple((x.T @ y).tolist()), tuple((x.T @ m).tolist()))


#: Either kind of per-arm sufficient statistics with covariates.
CovariateStats = CovariateMeanStats | CovariateRatioStats
