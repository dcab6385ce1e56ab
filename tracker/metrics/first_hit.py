"""Metrics of the rank of the first relevant item: mrr and song_clicks."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from tracker.metrics.batch import Judged, check_k
from tracker.metrics.encoding import score_lists


def mrr(recommended: Any, relevant: Any, k: int) -> np.ndarray:
    """Reciprocal rank of the first relevant item in the top k.

    Formula: mrr@k = 1 / rank of the first relevant item in R_k (ranks start at 1),
    0 when R_k holds none. The mean over lists is the mean reciprocal rank.

    Convention: ranx, RePlay, trec_eval (recip_rank). Beware the common off-by-one of
    enumerating ranks from 0 (which scores a first-rank hit 1/0 or shifts every value).
    Edge cases: empty G or empty list gives 0; k < 1 raises ValueError.

    >>> mrr([["a", "b", "c"], ["d", "e"]], [{"c"}, {"d", "e"}], k=3)
    array([0.33333333, 1.        ])
    """
    k = check_k(k)
    return score_lists(recommended, relevant, partial(mrr_kernel, k=k), k)


def song_clicks(
    recommended: Any, relevant: Any, page_size: int = 10, max_items: int = 500
) -> np.ndarray:
    """Spotify's "recommended songs clicks": refreshes before a relevant item shows.

    Formula: song_clicks = floor((rank of the first relevant item - 1) / page_size),
    the list capped at ``max_items``; when no relevant item is in the capped list the
    value is ``ceil(max_items / page_size) + 1`` (51 by default).

    Convention: the RecSys Challenge 2018 definition: the user sees ``page_size`` items,
    each click refreshes to the next page, a hit on the first page costs 0 clicks.
    Counting pages from 1 (a common notebook mistake) gives 1 and 50 where the official
    formula gives 0 and 49. Lower is better. Edge cases: empty G or empty list gives
    the miss value; ``page_size`` or ``max_items`` < 1 raises ValueError.

    Targets 1, 499 and 500 against the list 0..499 (the last is not in it):

    >>> song_clicks([list(range(500))] * 3, [{1}, {499}, {500}])
    array([ 0., 49., 51.])
    """
    page_size = check_k(page_size, "page_size")
    max_items = check_k(max_items, "max_items")
    kernel = partial(song_clicks_kernel, page_size=page_size, max_items=max_items)
    return score_lists(recommended, relevant, kernel, max_items)


def mrr_kernel(judged: Judged, k: int | None) -> np.ndarray:
    found, first = judged.first_hit(k)
    return np.where(found, 1.0 / (first + 1.0), 0.0)


def song_clicks_kernel(
    judged: Judged, k: int | None = None, *, page_size: int = 10, max_items: int = 500
) -> np.ndarray:
    found, first = judged.first_hit(max_items)
    miss = math.ceil(max_items / page_size) + 1
    return np.where(found, first // page_size, miss).astype(np.float64)
