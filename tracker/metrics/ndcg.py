"""Normalised discounted cumulative gain, linear or exponential gain."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import numpy as np

from tracker.metrics.batch import Judged, check_k, discounts
from tracker.metrics.encoding import score_lists
from tracker.metrics.hits import safe_divide

Gain = Literal["linear", "exponential"]
GAINS: tuple[str, ...] = ("linear", "exponential")
# ideal_dcg sorts grades in one padded (lists x largest |G|) matrix while it holds at
# most this many times the grades; otherwise it sorts all grades at once.
IDEAL_MATRIX_WASTE = 4


def ndcg(recommended: Any, relevant: Any, k: int, gain: Gain = "linear") -> np.ndarray:
    """DCG of the top k divided by the DCG of the ideal top k.

    Formula: ndcg@k = DCG@k / IDCG@k with DCG@k = Σ_{i<=k} gain(rel_i) / log2(i + 1),
    rel_i the grade of the item at rank i (0 if not relevant or a repeat).
    ``gain="linear"`` (default): gain(rel) = rel (Järvelin & Kekäläinen; ranx "ndcg",
    trec_eval). ``gain="exponential"``: gain(rel) = 2^rel - 1 (Burges et al.; ranx
    "ndcg_burges", RecBole for graded data). Binary relevance is grade 1, where both agree.

    Convention: IDCG@k is the DCG of the ideal ordering of **all** grades in G (not only
    the items that were served), cut at k. Some libraries build the ideal list from the
    served items only, which lets a list that misses the best items still score 1.
    Edge cases: empty G gives 0 (never NaN); empty list gives 0; k beyond the list
    scores the whole list against the ideal cut at k; k < 1 raises ValueError.

    Grades [3, 2, 3, 0, 0, 1, 2, 2, 3, 0] at ranks 1..10: DCG@2 = 3 + 2/log2(3) =
    4.2619, IDCG@2 = 3 + 3/log2(3) = 4.8928.

    >>> grades = [3, 2, 3, 0, 0, 1, 2, 2, 3, 0]
    >>> served = [list(range(10))]
    >>> truth = [{item: g for item, g in enumerate(grades)}]
    >>> ndcg(served, truth, k=2)
    array([0.87104906])
    >>> ndcg(served, truth, k=1)
    array([1.])
    """
    k = check_k(k)
    _check_gain(gain)
    return score_lists(recommended, relevant, partial(ndcg_kernel, k=k, gain=gain), k)


def ndcg_kernel(judged: Judged, k: int, *, gain: Gain = "linear") -> np.ndarray:
    _check_gain(gain)
    if judged.binary:  # gain(1) = 1 for both gains
        dcg = judged.hit_pattern(k, binary_dcg)
    else:
        width = judged.top_width(k)  # never longer than the lists: k may be huge
        dcg = _gain(judged.grades[:, :width], gain) @ discounts(width)
    return safe_divide(dcg, ideal_dcg(judged, k, gain))


def binary_dcg(hit: np.ndarray) -> np.ndarray:
    """DCG of each row of a 0/1 hit matrix (every hit gains 1)."""
    return np.asarray(hit, dtype=np.float64) @ discounts(hit.shape[1])


def ideal_dcg(judged: Judged, k: int, gain: Gain) -> np.ndarray:
    """DCG@k of each list's relevant grades sorted best first.

    Graded: the grades go into one ``(n_lists, largest |G|)`` matrix sorted along its
    rows (many short sorts), unless a few lists with very many grades would make it
    mostly padding (``IDEAL_MATRIX_WASTE``); then one global sort by (list, -grade).
    """
    if judged.ideal_depth is not None and k > judged.ideal_depth:
        raise RuntimeError(
            f"graded ideal DCG@{k} needs each list's {k} highest unserved grades; some "
            f"list lists only {judged.ideal_depth} of them (ServedPositions.unlisted)"
        )
    row, grade = judged.truth_row, judged.truth_grade
    if grade is None:  # binary: gain(1) = 1 for both gains, a prefix sum of discounts
        n_relevant = judged.n_relevant  # unlisted items too: their k best grade 1 (checked)
        prefix = np.concatenate(([0.0], np.cumsum(discounts(min(k, int(n_relevant.max(
            initial=0)))))))
        return prefix[np.minimum(n_relevant, k)]
    # graded: from the listed grades, which hold each list's k highest (checked above)
    n_relevant = judged.n_listed
    most = int(n_relevant.max(initial=0))
    discount = discounts(min(k, most))  # the ideal list is at most the largest |G|
    if judged.n_lists * most <= IDEAL_MATRIX_WASTE * max(row.size, 1) and not np.any(
        row[1:] < row[:-1]
    ):
        def ideal_prefix() -> np.ndarray:
            column = np.arange(row.size) - (np.cumsum(n_relevant) - n_relevant)[row]
            best = np.zeros((judged.n_lists, most), dtype=np.float64)
            best[row, column] = grade
            best.sort(axis=1)
            best = best[:, ::-1]  # each list's grades, best first
            return np.cumsum(_gain(best, gain) * discounts(most), axis=1)

        prefix = judged.memo(("ideal_dcg_prefix", gain), ideal_prefix)  # one sort, every k
        return prefix[:, min(k, most) - 1] if most else np.zeros(judged.n_lists)
    order = np.lexsort((-grade, row))
    row, grade = row[order], grade[order]
    starts = np.cumsum(n_relevant) - n_relevant
    rank = np.arange(row.size) - starts[row]
    keep = rank < k
    weights = _gain(grade[keep], gain) * discount[rank[keep]]
    return np.bincount(row[keep], weights=weights, minlength=judged.n_lists)


def _gain(grades: np.ndarray, gain: Gain) -> np.ndarray:
    return grades if gain == "linear" else np.exp2(grades) - 1.0


def _check_gain(gain: object) -> None:
    if gain not in GAINS:
        raise ValueError(f"unknown gain {gain!r}; choose 'linear' or 'exponential'")
