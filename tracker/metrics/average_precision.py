"""Average precision (the per-list term of MAP), with its four published denominators."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import numpy as np

from tracker.metrics.batch import Judged, check_k
from tracker.metrics.encoding import score_lists
from tracker.metrics.hits import safe_divide

Normalization = Literal["min_k_relevant", "relevant", "hits", "k"]
NORMALIZATIONS: tuple[str, ...] = ("min_k_relevant", "relevant", "hits", "k")


def average_precision(
    recommended: Any,
    relevant: Any,
    k: int,
    normalization: Normalization = "min_k_relevant",
) -> np.ndarray:
    """Average of the precisions at the ranks of the relevant items in the top k.

    Formula: AP@k = (1/D) Σ_{i<=k} P@i · rel_i, where P@i = |R_i ∩ G| / i and
    rel_i = 1 if the item at rank i is relevant (first copy only), else 0.
    The mean of AP@k over lists is MAP@k (``"map@k"`` in :func:`evaluate`).

    Convention (``normalization``), since the public implementations disagree on D:

    - ``"min_k_relevant"`` (default): D = min(k, |G|); Kaggle's apk, RePlay. A perfect
      top k scores 1 even when |G| > k.
    - ``"relevant"``: D = |G|; trec_eval and ranx.
    - ``"hits"``: D = |R_k ∩ G|, the mean precision over the hits found.
    - ``"k"``: D = k.

    Edge cases: D = 0 (empty G, or no hit with ``"hits"``) gives 0; an empty list
    gives 0; k < 1 or an unknown normalization raises ValueError.

    Relevance R,N,R,R,N,N,R,N,N,N with 4 relevant items: (1 + 2/3 + 3/4 + 4/7) / 4.

    >>> served = [list("abcdefghij")]
    >>> truth = [{"a", "c", "d", "g"}]
    >>> average_precision(served, truth, k=10)
    array([0.74702381])
    >>> average_precision(served, truth, k=3, normalization="k")  # (1 + 2/3) / 3
    array([0.55555556])
    """
    k = check_k(k)
    _check_normalization(normalization)
    kernel = partial(average_precision_kernel, k=k, normalization=normalization)
    return score_lists(recommended, relevant, kernel, k)


def average_precision_kernel(
    judged: Judged, k: int, *, normalization: Normalization = "min_k_relevant"
) -> np.ndarray:
    _check_normalization(normalization)
    total = judged.hit_pattern(k, precision_sum)
    if normalization == "min_k_relevant":
        denominator = np.minimum(judged.n_relevant, k)
    elif normalization == "relevant":
        denominator = judged.n_relevant
    elif normalization == "hits":
        denominator = judged.hit_count(k)
    else:
        denominator = np.full(judged.n_lists, k)
    return safe_divide(total, denominator)


def precision_sum(hit: np.ndarray) -> np.ndarray:
    """Σ_i rel_i · P@i for each row of a 0/1 hit matrix (AP's numerator)."""
    hit = np.asarray(hit, dtype=np.float64)
    width = hit.shape[1]
    # Σ_i rel_i · P@i = Σ_i rel_i · (Σ_{j<=i} rel_j) / i. Short lists: a quadratic form
    # per list, upper[j, i] = 1/i for j <= i so that (hit @ upper)[i] = P@i (a matrix
    # product, the fastest here); long ones: a running sum (no width x width matrix).
    if width <= 64:
        precision_at = hit @ (np.triu(np.ones((width, width))) / np.arange(1, width + 1))
    else:
        precision_at = np.cumsum(hit, axis=1)
        precision_at /= np.arange(1, width + 1)
    return np.einsum("ij,ij->i", precision_at, hit)


def _check_normalization(normalization: object) -> None:
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"unknown normalization {normalization!r}; choose one of "
            + ", ".join(repr(n) for n in NORMALIZATIONS)
        )
