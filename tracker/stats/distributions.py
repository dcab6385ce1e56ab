"""The normal, Student t and chi-square tails the tests need, from :mod:`scipy.special`.

Each function returns what the :mod:`scipy.stats` distribution of the same name returns, to
the bit (``tests/stats/test_distributions.py`` checks a grid with the edges: infinite and
NaN arguments, ``df`` of 0 and below, probabilities 0 and 1), because ``scipy.stats``
computes them with these very functions. It is imported instead of ``scipy.stats``, whose
import costs about 1.1 s more (it builds every distribution's docstring) in every process
that publishes a summary or renders a report (``scipy.special`` alone: 0.2-0.4 s).

>>> round(float(norm_ppf(0.975)), 6), round(float(t_sf(2.0, 10)), 6)
(1.959964, 0.036694)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import special


def norm_cdf(x: ArrayLike) -> np.ndarray:
    """P(Z ≤ x), Z standard normal (``scipy.stats.norm.cdf``)."""
    return special.ndtr(x)


def norm_sf(x: ArrayLike) -> np.ndarray:
    """P(Z > x) (``scipy.stats.norm.sf``)."""
    return special.ndtr(np.negative(x))


def norm_ppf(q: ArrayLike) -> np.ndarray:
    """The ``q`` quantile of the standard normal (``scipy.stats.norm.ppf``)."""
    return special.ndtri(q)


def t_cdf(x: ArrayLike, df: ArrayLike) -> np.ndarray:
    """P(T ≤ x), T Student's t with ``df`` degrees of freedom (``scipy.stats.t.cdf``)."""
    return special.stdtr(df, x)


def t_sf(x: ArrayLike, df: ArrayLike) -> np.ndarray:
    """P(T > x) (``scipy.stats.t.sf``)."""
    return special.stdtr(df, np.negative(x))


def t_ppf(q: ArrayLike, df: ArrayLike) -> np.ndarray:
    """The ``q`` quantile of Student's t (``scipy.stats.t.ppf``; ``stdtrit`` alone gives +inf
    at q = 0, where the quantile is −inf)."""
    q, df = np.asarray(q, dtype=float), np.asarray(df, dtype=float)
    return np.where((q == 0) & (df > 0), -np.inf, special.stdtrit(df, q))


def chi2_sf(x: ArrayLike, df: ArrayLike) -> np.ndarray:
    """P(X > x), X chi-square with ``df`` degrees of freedom (``scipy.stats.chi2.sf``: 1
    below the support, 0 at +inf, NaN for ``df`` ≤ 0, where ``chdtrc`` alone gives NaN,
    NaN when ``df`` is infinite too, and 0)."""
    x, df = np.asarray(x, dtype=float), np.asarray(df, dtype=float)
    tail = np.where(np.isposinf(x), 0.0, special.chdtrc(df, np.maximum(x, 0.0)))
    return np.where(df > 0, tail, np.nan)
