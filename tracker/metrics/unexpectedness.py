"""Unexpectedness: how much of a list the baseline (control) would not have served."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from tracker.metrics.batch import Judged, check_k, score_encoded
from tracker.metrics.encoding import encode_against_lists


def unexpectedness(recommended: Any, baseline: Any, k: int) -> np.ndarray:
    """Share of the top k that the baseline's top k for the same user does not hold.

    Formula: unexpectedness@k = 1 - |R_k ∩ B_k| / k, B the baseline list of the same
    user (``baseline[i]`` goes with ``recommended[i]``); in an A/B test the baseline is
    the control arm's list for that user.

    Convention: RePlay's Unexpectedness: set intersection (a repeated item counts once)
    and division by k even when a list is shorter. Edge cases: an empty recommended list
    gives 0 (nothing was served); an empty baseline gives 1 (every served item is
    unexpected; RePlay returns 0 there); k < 1 raises ValueError.

    RePlay's example, at k = 2 and k = 4:

    >>> served = [[3, 7, 10, 11, 2], [5, 8, 11, 1, 3], [4, 9, 2]]
    >>> base = [[2, 3, 7], [5, 8, 3], [4, 9]]
    >>> unexpectedness(served, base, k=2)
    array([0.5, 0. , 0. ])
    >>> unexpectedness(served, base, k=4)
    array([0.5, 0.5, 0.5])
    """
    k = check_k(k)
    lists = encode_against_lists(recommended, baseline, k)
    return score_encoded(lists, {"value": partial(_unexpectedness_kernel, k=k)}, k)["value"]


def _unexpectedness_kernel(judged: Judged, k: int) -> np.ndarray:
    shared = np.count_nonzero(judged.top(k), axis=1)  # |R_k ∩ B_k|: B_k is the "relevant"
    return unexpectedness_of_overlap(shared, judged.lengths, k)


def unexpectedness_of_overlap(overlap: np.ndarray, lengths: np.ndarray, k: int) -> np.ndarray:
    """Unexpectedness@k of lists given, per list, |R_k ∩ B_k| (distinct items the list's
    top k shares with its baseline's top k) and the list's length: the kernel of
    :func:`unexpectedness`, for callers that count the overlap themselves.

    Formula: 1 - |R_k ∩ B_k| / k; 0 for an empty list (nothing was served).

    >>> unexpectedness_of_overlap(np.array([1, 0, 3]), np.array([5, 0, 3]), k=4)
    array([0.75, 0.  , 0.25])
    """
    return np.where(np.asarray(lengths) > 0, 1.0 - np.asarray(overlap) / k, 0.0)
