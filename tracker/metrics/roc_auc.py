"""ROC AUC within the top k: how well the ranking puts relevant items first."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from tracker.metrics.batch import Judged, check_k
from tracker.metrics.encoding import score_lists


def roc_auc(recommended: Any, relevant: Any, k: int) -> np.ndarray:
    """Share of (relevant, non-relevant) pairs within the top k ranked relevant-first.

    Formula: with P the relevant and N the non-relevant items of R_k,
    roc_auc@k = |{(p, n) in P x N : rank(p) < rank(n)}| / (|P| · |N|).

    Convention: RePlay's RocAuc: the pairs are formed within R_k only (relevant items
    that were not served do not count). A repeated item is non-relevant after its
    first position. Edge cases: 1 when R_k has no non-relevant item, 0 when it has no
    relevant one (so empty G or an empty list gives 0); k < 1 raises ValueError.

    RePlay's example: relevance R,N,R,N,R,N,N has 9 of its 12 pairs in order.

    >>> roc_auc([[4, 1, 6, 3, 5, 2, 7]], [{4, 5, 6}], k=7)
    array([0.75])
    """
    k = check_k(k)
    return score_lists(recommended, relevant, partial(roc_auc_kernel, k=k), k)


def roc_auc_kernel(judged: Judged, k: int) -> np.ndarray:
    hit = judged.top(k)
    served = np.arange(hit.shape[1]) < np.minimum(judged.lengths, k)[:, None]
    miss = served & ~hit
    positives = judged.hit_count(k)
    negatives = np.count_nonzero(miss, axis=1)
    # Each non-relevant item is outranked by the relevant items before it.
    relevant_before = np.cumsum(hit, axis=1)
    ordered = np.where(miss, relevant_before, 0).sum(axis=1)
    pairs = positives * negatives
    auc = np.divide(ordered, pairs, out=np.ones(judged.n_lists), where=pairs > 0)
    auc[positives == 0] = 0.0
    return auc
