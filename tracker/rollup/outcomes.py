"""Per-impression metric values from what the SQL returns, with ``tracker.metrics`` itself.

The database hands back, per impression, its list length and its ground truth as
(item, grade, served position) pairs; the item ids of the served list never leave it. That
is enough for every rank metric: list r is rebuilt as the integer codes ``0..length-1``
(position p holds code p-1), a relevant served item becomes the code of its position, and a
relevant item that was not served gets a code past the list. ``tracker.metrics`` then scores
those lists with the very functions users call (:func:`tracker.metrics.evaluate_encoded`),
so the rollup and the library cannot disagree.

Surprisal and unexpectedness need per-item facts and arrive pre-summed per cutoff:
``Σ ln(users of item)`` over the top k and ``|R_k ∩ B_k|``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracker.metrics import EncodedLists, evaluate_encoded

AT_K = ("hit_rate", "precision", "recall", "mrr", "map", "ndcg", "roc_auc")
WHOLE_LIST = ("r_precision", "song_clicks")
BEYOND = ("surprisal", "unexpectedness")
SET_LEVEL = ("coverage", "gini", "entropy")


@dataclass(frozen=True)
class Layout:
    """The order of the per-impression value columns for an experiment's cutoffs."""

    columns: tuple[tuple[str, int], ...]  # (metric, k); k = 0 when the metric has none

    @classmethod
    def for_cutoffs(cls, cutoffs: Sequence[int]) -> Layout:
        columns = [(m, k) for k in cutoffs for m in AT_K + BEYOND]
        columns += [(m, 0) for m in WHOLE_LIST]
        return cls(tuple(columns))

    def index(self, metric: str, k: int) -> int:
        return self.columns.index((metric, k))

    def __len__(self) -> int:
        return len(self.columns)


@dataclass(frozen=True)
class Chunk:
    """One bounded chunk of a day's impressions, as the SQL returned it (numpy arrays).

    ``lengths`` (n,); ``truth_row``/``truth_grade``/``truth_position`` (m,) with position 0
    when the item was not served; ``ln_users`` and ``overlap`` (n, cutoffs);
    ``has_baseline`` (n,) bool.
    """

    lengths: np.ndarray
    truth_row: np.ndarray
    truth_grade: np.ndarray
    truth_position: np.ndarray
    ln_users: np.ndarray
    overlap: np.ndarray
    has_baseline: np.ndarray


def encoded_lists(chunk: Chunk) -> EncodedLists:
    """The chunk's lists as position codes, with the ground truth on the same codes."""
    n = chunk.lengths.size
    width = int(chunk.lengths.max()) if n else 1
    ranks = np.arange(width, dtype=np.int64)
    items = np.where(ranks[None, :] < chunk.lengths[:, None], ranks[None, :], -1)
    served = chunk.truth_position > 0
    codes = chunk.truth_position.astype(np.int64) - 1
    # relevant items that were not served: codes width, width+1, ... within each list
    rows = chunk.truth_row[~served]
    order = np.argsort(rows, kind="stable")
    sorted_rows = rows[order]
    first = np.searchsorted(sorted_rows, sorted_rows, side="left")
    ordinal = np.empty(rows.size, dtype=np.int64)
    ordinal[order] = np.arange(rows.size) - first
    codes[~served] = width + ordinal
    return EncodedLists(items=items, truth_row=chunk.truth_row, truth_item=codes,
                        truth_grade=chunk.truth_grade)


def impression_values(chunk: Chunk, layout: Layout, cutoffs: Sequence[int],
                      ln_n_users: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per impression and layout column: the metric value, and whether it is defined.

    Surprisal is undefined when the log before the day has fewer than 2 users
    (``ln_n_users`` None); unexpectedness when the impression carries no baseline list.
    """
    n = chunk.lengths.size
    values = np.zeros((n, len(layout)))
    defined = np.ones((n, len(layout)), dtype=bool)
    if n == 0:
        return values, defined
    names = [f"{m}@{k}" for k in cutoffs for m in AT_K] + list(WHOLE_LIST)
    scored = evaluate_encoded(encoded_lists(chunk), names)
    for k in cutoffs:
        for metric in AT_K:
            values[:, layout.index(metric, k)] = scored[f"{metric}@{k}"]
    for metric in WHOLE_LIST:
        values[:, layout.index(metric, 0)] = scored[metric]
    for j, k in enumerate(cutoffs):
        served = np.minimum(chunk.lengths, k).astype(np.float64)
        col = layout.index("surprisal", k)
        if ln_n_users is None:
            defined[:, col] = False
        else:
            # mean over R_k of -log2(u/N)/log2(N) = 1 - Σ ln u / (|R_k| ln N)
            values[:, col] = 1.0 - chunk.ln_users[:, j] / (served * ln_n_users)
        col = layout.index("unexpectedness", k)
        values[:, col] = np.where(chunk.has_baseline, 1.0 - chunk.overlap[:, j] / k, 0.0)
        defined[:, col] = chunk.has_baseline
    return values, defined
