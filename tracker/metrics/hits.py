"""Set-based accuracy: how many relevant items the top of the list holds.

hit_rate, precision, recall and r_precision count hits; they differ only in the cut
and the denominator. Notation (shared by every metric module): R_k is the first k
recommended items, G the relevant items (grade > 0) of the same list.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from tracker.metrics.batch import Judged, check_k
from tracker.metrics.encoding import score_lists


def hit_rate(recommended: Any, relevant: Any, k: int) -> np.ndarray:
    """1 for each list whose top k holds at least one relevant item, else 0.

    Formula: hit_rate@k = 1 if |R_k ∩ G| >= 1 else 0.

    Convention: a "hit ratio" in the sense of RePlay, ranx and RecBole. Edge cases:
    empty G or empty list gives 0; k beyond the list scores the whole list; k < 1
    raises ValueError.

    >>> hit_rate([["a", "b", "c"], ["d", "e"]], [{"c"}, {"z"}], k=2)
    array([0., 0.])
    >>> hit_rate([["a", "b", "c"], ["d", "e"]], [{"c"}, {"z"}], k=3)
    array([1., 0.])
    """
    k = check_k(k)
    return score_lists(recommended, relevant, partial(hit_rate_kernel, k=k), k)


def precision(recommended: Any, relevant: Any, k: int) -> np.ndarray:
    """Share of the top k ranks holding a relevant item.

    Formula: precision@k = |R_k ∩ G| / k.

    Convention: divides by k even when the list is shorter than k, as trec_eval and
    ranx do (a short list is penalised). The alternative, |R_k ∩ G| / |R_k|, is not
    offered: it rewards serving fewer items. A repeated item counts once. Edge cases:
    empty G or empty list gives 0; k < 1 raises ValueError.

    >>> precision([["a", "b", "c"]], [{"a", "c", "z"}], k=2)
    array([0.5])
    >>> precision([["a", "b", "c"]], [{"a", "c", "z"}], k=10)  # 2 hits / 10
    array([0.2])
    """
    k = check_k(k)
    return score_lists(recommended, relevant, partial(precision_kernel, k=k), k)


def recall(recommended: Any, relevant: Any, k: int) -> np.ndarray:
    """Share of the relevant items found in the top k.

    Formula: recall@k = |R_k ∩ G| / |G|.

    Convention: RePlay, ranx and trec_eval. Some libraries divide by min(k, |G|)
    instead (so a perfect top k scores 1 even when |G| > k); that quantity is not
    recall and is not offered. Edge cases: empty G gives 0 (never NaN); empty list
    gives 0; k < 1 raises ValueError.

    >>> recall([["a", "b", "c"]], [{"a", "c", "y", "z"}], k=3)
    array([0.5])
    """
    k = check_k(k)
    return score_lists(recommended, relevant, partial(recall_kernel, k=k), k)


def r_precision(recommended: Any, relevant: Any) -> np.ndarray:
    """Precision at the rank equal to the number of relevant items.

    Formula: r_precision = |R_{|G|} ∩ G| / |G|, over unique items.

    Convention: the Spotify RecSys Challenge 2018 definition (also trec_eval's Rprec).
    The cut differs per list (|G| of that list), so there is no k. A list shorter
    than |G| is scored as is (the denominator stays |G|). Edge cases: empty G or
    empty list gives 0.

    The challenge's worked example: G = {1, 2, 3, 5, 8, 99}, R = [5, 8, 13, 3], so
    3 of the 6 relevant items are in the first 6 ranks:

    >>> r_precision([["5", "8", "13", "3"]], [["1", "2", "3", "5", "8", "99"]])
    array([0.5])
    """
    return score_lists(recommended, relevant, r_precision_kernel, None)


# Kernels: (judged lists, k) -> one value per list ------------------------------------


def hit_rate_kernel(judged: Judged, k: int | None) -> np.ndarray:
    return (judged.hit_count(k) > 0).astype(np.float64)


def precision_kernel(judged: Judged, k: int) -> np.ndarray:
    return judged.hit_count(k) / float(k)


def recall_kernel(judged: Judged, k: int | None) -> np.ndarray:
    return safe_divide(judged.hit_count(k), judged.n_relevant)


def r_precision_kernel(judged: Judged, k: int | None = None) -> np.ndarray:
    hit = judged.top(None)
    within = np.arange(hit.shape[1]) < judged.n_relevant[:, None]
    return safe_divide(np.count_nonzero(hit & within, axis=1), judged.n_relevant)


def safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator as float, 0 where the denominator is 0."""
    out = np.zeros(np.broadcast(numerator, denominator).shape, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out
