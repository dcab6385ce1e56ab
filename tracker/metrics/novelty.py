"""Popularity-based novelty: self-information of the served items (novelty, surprisal)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from tracker.metrics.batch import check_k
from tracker.metrics.encoding import encode_served, ids_of


def novelty(
    recommended: Any, k: int, item_users: Mapping[Any, float], n_users: int
) -> np.ndarray:
    """Mean self-information (bits) of the items in the top k.

    Formula: novelty@k = mean over j in R_k of -log2(u_j / N), u_j the number of
    distinct users who interacted with item j, N the number of users in the log.

    Convention: Zhou et al. 2010 / Evidently's "novelty"; unnormalised (0 for an item
    every user touched, log2 N for an item one user touched); :func:`surprisal` is the
    same divided by log2 N. Items missing from ``item_users`` (or with 0 users) count as
    1 user, like RePlay. Every served position counts, repeats included. Edge cases:
    an empty list gives 0; k < 1, ``n_users`` < 1, or a count outside [0, N] raises
    ValueError.

    With N = 4 users, item "a" seen by 4, "b" by 1:

    >>> novelty([["a", "b"], ["b"]], k=2, item_users={"a": 4, "b": 1}, n_users=4)
    array([1., 2.])
    """
    k = check_k(k)
    return _mean_self_information(recommended, k, item_users, check_k(n_users, "n_users"))


def surprisal(
    recommended: Any, k: int, item_users: Mapping[Any, float], n_users: int
) -> np.ndarray:
    """Mean normalised self-information of the items in the top k, in [0, 1].

    Formula: surprisal@k = mean over j in R_k of -log2(u_j / N) / log2(N), u_j the
    distinct users who interacted with item j, N the users in the log.

    Convention: RePlay's Surprisal (items never interacted with count as 1 user, so
    they score 1, "completely unexpected"), except for lists shorter than k: the mean
    is over the items served, where RePlay divides the sum by k. Every served position
    counts, repeats included. Edge cases: an empty list gives 0; k < 1, ``n_users``
    < 2 (log2 N would be 0), or a count outside [0, N] raises ValueError.

    RePlay's example (N = 3; items 5 and 8 seen by 2 users, 3 and 4 by one, 7 never):

    >>> counts = {5: 2, 6: 1, 8: 2, 9: 2, 2: 2, 11: 1, 1: 1, 3: 1, 4: 1}
    >>> surprisal([[3, 7], [5, 8], [4, 9]], k=2, item_users=counts, n_users=3)
    array([1.        , 0.36907025, 0.68453512])
    """
    k = check_k(k)
    n_users = check_k(n_users, "n_users")
    if n_users < 2:
        raise ValueError("surprisal needs n_users >= 2 (it divides by log2(n_users))")
    items, per_item = _users_per_item(recommended, k, item_users, n_users)
    log_users = np.log(per_item)
    log_users[-1] = 0.0  # the padding slot
    return surprisal_of_log_users(log_users[items].sum(axis=1),
                                  np.count_nonzero(items >= 0, axis=1), n_users)


def surprisal_of_log_users(log_users: np.ndarray, served: np.ndarray,
                           n_users: int) -> np.ndarray:
    """Surprisal@k of lists given, per list, Σ_{j in R_k} ln u_j (u_j >= 1: an item nobody
    interacted with counts as 1 user) and |R_k|, the items served in the top k: the kernel
    of :func:`surprisal`, for callers that sum ln u from their own popularity table.

    Formula: mean over R_k of -log2(u_j / N) / log2 N = 1 - Σ ln u_j / (|R_k| ln N); 0 for
    an empty list. ``n_users`` < 2 raises ValueError.

    N = 4; a list of items seen by 4 and 1 users (Σ ln u = ln 4), and an empty list:

    >>> surprisal_of_log_users(np.array([np.log(4), 0.0]), np.array([2, 0]), n_users=4)
    array([0.5, 0. ])
    """
    if n_users < 2:
        raise ValueError("surprisal needs n_users >= 2 (it divides by log2(n_users))")
    served = np.asarray(served, dtype=np.float64)
    listed = served > 0
    return np.where(listed, 1.0 - np.divide(log_users, served * math.log(n_users),
                                            out=np.ones(served.shape), where=listed), 0.0)


def _mean_self_information(
    recommended: Any, k: int, item_users: Mapping[Any, float], n_users: int
) -> np.ndarray:
    items, per_item = _users_per_item(recommended, k, item_users, n_users)
    information = -np.log2(per_item / n_users)
    information[-1] = 0.0
    served = np.count_nonzero(items >= 0, axis=1)
    total = information[items].sum(axis=1)
    return np.divide(total, served, out=np.zeros(items.shape[0]), where=served > 0)


def _users_per_item(
    recommended: Any, k: int, item_users: Mapping[Any, float], n_users: int
) -> tuple[np.ndarray, np.ndarray]:
    """The top-k item codes (-1 padded) and the users of each code (>= 1), with a
    trailing slot for the padding."""
    if not isinstance(item_users, Mapping):
        raise ValueError("item_users must be a mapping item id -> number of distinct users")
    users = np.fromiter(item_users.values(), dtype=np.float64, count=len(item_users))
    bad = ~(np.isfinite(users) & (users >= 0) & (users <= n_users))
    if bad.any():
        item = list(item_users)[int(np.flatnonzero(bad)[0])]
        raise ValueError(
            f"item_users[{item!r}] = {item_users[item]!r}: a user count must lie in "
            f"[0, n_users={n_users}]"
        )
    items, (counted,), n_codes = encode_served(recommended, k, [ids_of(item_users)])
    per_item = np.ones(n_codes + 1)  # the extra last slot is the -1 padding
    per_item[counted] = np.maximum(users, 1.0)
    return items, per_item
