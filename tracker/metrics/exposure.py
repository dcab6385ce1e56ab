"""Catalog-level exposure over all lists: coverage, Gini index, Shannon entropy.

Each returns one float for the whole set of lists. The exposure of an item is the
number of top-k positions it holds across all lists (repeats included).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np

from tracker.metrics.batch import check_k
from tracker.metrics.encoding import encode_served, ids_of

Catalog = Collection[Any] | int


def coverage(recommended: Any, k: int, catalog: Catalog) -> float:
    """Share of the catalog that appears in at least one top k.

    Formula: coverage@k = |∪_lists R_k ∩ C| / |C|, C the catalog.

    Convention: "catalog coverage" / "item coverage" of RePlay, RecBole and Evidently.
    ``catalog`` is either the collection of item ids (served items outside it are not
    counted) or its size as an int (every served item is taken to be in it).
    Edge cases: no lists gives 0; an empty catalog, a size < 1, or k < 1 raises
    ValueError.

    >>> coverage([["a", "z"], ["a", "c", "b"]], k=2, catalog={"a", "b", "c", "d"})
    0.5
    >>> coverage([["a", "z"], ["a", "c", "b"]], k=3, catalog=10)
    0.4
    """
    k = check_k(k)
    if catalog is None:
        raise ValueError("coverage needs the catalog: its item ids or its size as an int")
    exposure, size = _exposure(recommended, k, catalog)
    return coverage_of_histogram(histogram(exposure), size)


def gini_index(recommended: Any, k: int, catalog: Catalog | None = None) -> float:
    """Inequality of item exposure across the top k of all lists, in [0, 1).

    Formula: with the m items' exposures sorted ascending, x_1 <= ... <= x_m,
    gini = Σ_i (2i - m - 1) x_i / (m Σ_i x_i). 0 when every item is shown equally,
    close to 1 when a few items take all exposure.

    Convention: RecBole's GiniIndex and Evidently's popularity bias Gini: with
    ``catalog`` (ids, or the size as an int) the catalog items never shown count with
    exposure 0, which is what makes the index meaningful; without it only the items
    shown are compared. Edge cases: no exposure at all gives 0; k < 1, or a catalog
    size smaller than the number of distinct items shown, raises ValueError.

    Item "a" shown 3 times, "b" once, catalog of 4 (two never shown): exposures
    0, 0, 1, 3 give (-3·0 - 1·0 + 1·1 + 3·3) / (4 · 4) = 0.625.

    >>> gini_index([["a", "b"], ["a"], ["a"]], k=2, catalog=["a", "b", "c", "d"])
    0.625
    >>> gini_index([["a", "b"], ["b", "a"]], k=2)
    0.0
    """
    k = check_k(k)
    exposure, size = _exposure(recommended, k, catalog)
    return gini_of_histogram(histogram(exposure), size)


def entropy(recommended: Any, k: int, base: float = 2.0) -> float:
    """Shannon entropy of item exposure across the top k of all lists.

    Formula: H = -Σ_j p_j log(p_j), p_j = exposure of j / total exposure, log in
    ``base`` (2 by default: bits). 0 when one item takes all exposure; log(m) when m
    items share it equally.

    Convention: RecBole's ShannonEntropy uses the natural log (``base=math.e``). Items
    never shown contribute 0, so no catalog is needed. Edge cases: no exposure gives
    0; k < 1 or a base <= 1 raises ValueError.

    Four positions shared by two items equally is one bit:

    >>> entropy([["a", "b"], ["b", "a"]], k=2)
    1.0
    """
    k = check_k(k)
    if not base > 1:
        raise ValueError(f"base must be > 1, got {base!r}")
    exposure, _ = _exposure(recommended, k, None)
    return entropy_of_histogram(histogram(exposure), base)


# ---------------------------------------------------------------- kernels over histograms
#
# The set-level formulas, once: over the histogram of item exposures (rows ``(exposure x,
# number of items c)``, x > 0, ascending), so their cost follows the distinct exposure
# values, not the items. The functions above and the rollup (which keeps exposure counts per
# arm and day) both call them.


def histogram(exposure: np.ndarray) -> np.ndarray:
    """The histogram of the positive values of ``exposure`` (one per item): an int64
    ``(values, 2)`` array of rows ``(exposure, number of items)``, ascending.

    >>> histogram(np.array([0, 3, 1, 3])).tolist()
    [[1, 1], [3, 2]]
    """
    values, numbers = np.unique(np.asarray(exposure, dtype=np.int64), return_counts=True)
    keep = values > 0
    return np.stack((values[keep], numbers[keep]), axis=1).astype(np.int64)


def coverage_of_histogram(hist: np.ndarray, catalog: int) -> float:
    """coverage = (items with exposure > 0) / catalog size; 0 for an empty catalog.

    >>> coverage_of_histogram(np.array([[1, 1], [3, 1]]), catalog=4)
    0.5
    """
    if catalog < 1 or hist.size == 0:
        return 0.0
    return float(hist[:, 1].sum() / catalog)


def gini_of_histogram(hist: np.ndarray, catalog: int) -> float:
    """Gini index of the exposure of a ``catalog`` of m items whose shown items are
    ``hist`` (the m - Σc others at exposure 0).

    With the m items sorted by exposure x (zeros first), Gini = Σ (2i - m - 1) x_i /
    (m Σx) (the convention of :func:`gini_index`); a group of c items at exposure x
    occupying ranks r+1..r+c adds x·c·(2r + c - m). 0 when nothing is shown.

    Exposures 0, 0, 1, 3: (1·1·(2·2 + 1 - 4) + 3·1·(2·3 + 1 - 4)) / (4·4) = 10/16:

    >>> gini_of_histogram(np.array([[1, 1], [3, 1]]), catalog=4)
    0.625
    """
    if catalog < 1 or hist.size == 0:
        return 0.0
    x = hist[:, 0].astype(np.float64)
    c = hist[:, 1].astype(np.float64)
    total = (x * c).sum()
    before = (catalog - c.sum()) + np.concatenate(([0.0], np.cumsum(c)[:-1]))
    return float((x * c * (2 * before + c - catalog)).sum() / (catalog * total))


def entropy_of_histogram(hist: np.ndarray, base: float = 2.0) -> float:
    """Shannon entropy of exposure, H = -Σ_j p_j log(p_j) with p_j = x_j / Σx, in
    ``base`` (bits by default); items never shown add 0; 0 when nothing is shown.

    Shares 1/4 and 3/4: -(1/4 log2 1/4 + 3/4 log2 3/4) = 0.811...:

    >>> round(entropy_of_histogram(np.array([[1, 1], [3, 1]])), 6)
    0.811278
    """
    if hist.size == 0:
        return 0.0
    x = hist[:, 0].astype(np.float64)
    c = hist[:, 1].astype(np.float64)
    share = x / (x * c).sum()
    return float(-(c * share * np.log(share)).sum() / math.log(base)) + 0.0


def _exposure(recommended: Any, k: int, catalog: Catalog | None) -> tuple[np.ndarray, int]:
    """Exposure per item (catalog items only when a catalog of ids is given) and the
    catalog size (the number of items shown when there is no catalog: Gini then compares
    the items shown only)."""
    if isinstance(catalog, bool) or not (catalog is None or isinstance(catalog, int)):
        if isinstance(catalog, str | bytes) or not isinstance(catalog, Collection):
            raise ValueError("catalog must be a collection of item ids or its size as an int")
        items, (in_catalog,), n_codes = encode_served(recommended, k, [ids_of(catalog)])
        exposure = np.bincount(items[items >= 0], minlength=n_codes)[np.unique(in_catalog)]
        if exposure.size == 0:
            raise ValueError("catalog is empty: coverage and Gini need at least one item")
        return exposure, exposure.size
    items, _, n_codes = encode_served(recommended, k)
    exposure = np.bincount(items[items >= 0], minlength=n_codes)
    shown = int(np.count_nonzero(exposure))
    if catalog is None:
        return exposure, shown
    if catalog < 1:
        raise ValueError(f"catalog size must be >= 1, got {catalog}")
    if catalog < shown:
        raise ValueError(
            f"catalog size {catalog} is smaller than the {shown} distinct items shown; pass "
            "the catalog's ids or its true size"
        )
    zeros = np.zeros(catalog - shown, dtype=exposure.dtype)
    return np.concatenate((exposure[exposure > 0], zeros)), catalog
