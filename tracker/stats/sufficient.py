"""Sufficient statistics of one arm for one metric: the rollup's output, our input.

Everything in :mod:`tracker.stats` is computed from these sums, never from raw
rows. They are sums over users, so the statistics of two disjoint sets of users
(two days of *new* users, two shards of a table) merge by ``+``, and a
cumulative view is the sum of its parts:

>>> MeanStats.from_values([1.0, 0.0]) + MeanStats.from_values([3.0])
MeanStats(n=3, sum_x=4.0, sum_x2=10.0)
>>> sum([MeanStats.from_values([1.0]), MeanStats.from_values([2.0])], MeanStats())
MeanStats(n=2, sum_x=3.0, sum_x2=5.0)

Adding is only right when each user appears in exactly one of the parts: a
user seen on two days has *one* user-level value, so per-day user sums of the
same users do not add up to the cumulative user sums (the rollup's cumulative
window handles that; these classes cannot know).

The variance is recovered as ``(sum_x2 - sum_x**2 / n) / (n - 1)``. That
one-pass formula loses precision when the mean is huge compared with the spread
(relative error about ``n * mean**2 / variance * 1e-16``); for the bounded and count
metrics of a recommender it is harmless. Values are called constant (zero
variance) only when the centred sum is within that rounding error of 0
(:func:`tracker.stats.estimates.rounding_bound`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike

# Relative slack allowed when checking that a sum of squares is at least what the
# sum implies (Cauchy-Schwarz); anything larger is a programming error (swapped sums).
_CONSISTENCY_RTOL = 1e-9


def _check_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer count of users, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (a count of users), got {value}")
    return int(value)


def _check_sum(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def _check_square_sum(name: str, sum_sq: float, total: float, n: int) -> None:
    if sum_sq < 0:
        raise ValueError(f"{name} is a sum of squares and cannot be negative, got {sum_sq}")
    if n > 0 and sum_sq < total * total / n * (1 - _CONSISTENCY_RTOL) - 1e-300:
        raise ValueError(
            f"{name}={sum_sq} is smaller than (sum)^2/n={total * total / n}: "
            "impossible for real data; are the sums swapped or from different users?"
        )


def _check_empty(n: int, **sums: float) -> None:
    if n == 0 and any(v != 0 for v in sums.values()):
        raise ValueError(f"with n=0 every sum must be 0, got {sums}")


@dataclass(frozen=True, slots=True)
class MeanStats:
    """Sums over the users of one arm for a user-level metric (a mean over users).

    ``n``: users; ``sum_x``: sum of the users' values x_i; ``sum_x2``: sum of x_i².
    The default instance is the empty set of users (the identity of ``+``).
    """

    n: int = 0
    sum_x: float = 0.0
    sum_x2: float = 0.0

    def __post_init__(self) -> None:
        n = _check_count("n", self.n)
        sum_x = _check_sum("sum_x", self.sum_x)
        sum_x2 = _check_sum("sum_x2", self.sum_x2)
        _check_empty(n, sum_x=sum_x, sum_x2=sum_x2)
        _check_square_sum("sum_x2", sum_x2, sum_x, n)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "sum_x", sum_x)
        object.__setattr__(self, "sum_x2", sum_x2)

    def __add__(self, other: object) -> MeanStats:
        if not isinstance(other, MeanStats):
            return NotImplemented
        return MeanStats(
            self.n + other.n, self.sum_x + other.sum_x, self.sum_x2 + other.sum_x2
        )

    @classmethod
    def from_values(cls, values: ArrayLike) -> MeanStats:
        """The sums of a 1-D array of user-level values (one value per user).

        >>> MeanStats.from_values([0.0, 0.5, 1.0])
        MeanStats(n=3, sum_x=1.5, sum_x2=1.25)
        """
        x = np.asarray(values, dtype=float)
        if x.ndim != 1:
            raise ValueError(f"values must be 1-D (one value per user), got shape {x.shape}")
        return cls(int(x.size), float(x.sum()), float(np.dot(x, x)))


@dataclass(frozen=True, slots=True)
class RatioStats:
    """Sums over the users of one arm for a ratio metric, with the user as the unit.

    A ratio metric is a per-impression mean, ``R = sum_y / sum_m``, where for user
    i ``y_i`` is the numerator summed over the user's impressions (e.g. clicks,
    or the sum of per-list NDCG values) and ``m_i`` the denominator (the user's
    number of impressions). Users, not impressions, are independent, so the
    variance of R needs the per-user sums and cross-products:

    - ``n``: users;
    - ``sum_y`` = Σ y_i, ``sum_m`` = Σ m_i;
    - ``sum_y2`` = Σ y_i², ``sum_m2`` = Σ m_i², ``sum_ym`` = Σ y_i·m_i.

    The default instance is the empty set of users (the identity of ``+``).
    """

    n: int = 0
    sum_y: float = 0.0
    sum_m: float = 0.0
    sum_y2: float = 0.0
    sum_m2: float = 0.0
    sum_ym: float = 0.0

    def __post_init__(self) -> None:
        n = _check_count("n", self.n)
        values = {
            name: _check_sum(name, getattr(self, name))
            for name in ("sum_y", "sum_m", "sum_y2", "sum_m2", "sum_ym")
        }
        _check_empty(n, **values)
        _check_square_sum("sum_y2", values["sum_y2"], values["sum_y"], n)
        _check_square_sum("sum_m2", values["sum_m2"], values["sum_m"], n)
        object.__setattr__(self, "n", n)
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __add__(self, other: object) -> RatioStats:
        if not isinstance(other, RatioStats):
            return NotImplemented
        return RatioStats(
            self.n + other.n,
            self.sum_y + other.sum_y,
            self.sum_m + other.sum_m,
            self.sum_y2 + other.sum_y2,
            self.sum_m2 + other.sum_m2,
            self.sum_ym + other.sum_ym,
        )

    @classmethod
    def from_values(cls, numerators: ArrayLike, denominators: ArrayLike) -> RatioStats:
        """The sums of per-user numerators y_i and denominators m_i (same length).

        >>> RatioStats.from_values([1.0, 0.0], [2.0, 1.0])
        RatioStats(n=2, sum_y=1.0, sum_m=3.0, sum_y2=1.0, sum_m2=5.0, sum_ym=2.0)
        """
        y = np.asarray(numerators, dtype=float)
        m = np.asarray(denominators, dtype=float)
        if y.ndim != 1 or y.shape != m.shape:
            raise ValueError(
                "numerators and denominators must be 1-D arrays of the same length "
                f"(one entry per user), got shapes {y.shape} and {m.shape}"
            )
        return cls(
            int(y.size),
            float(y.sum()),
            float(m.sum()),
            float(np.dot(y, y)),
            float(np.dot(m, m)),
            float(np.dot(y, m)),
        )


#: Either kind of per-arm sufficient statistics.
ArmStats = MeanStats | RatioStats
