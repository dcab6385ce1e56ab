"""Per-impression metric values, with ``tracker.metrics`` itself.

Every rank metric needs only each list's length and its ground truth as (grade, served
rank) pairs (:class:`tracker.metrics.ServedPositions`: rank 0 for a relevant item the list
did not serve); ``tracker.metrics`` scores those with the very kernels users call
(:func:`tracker.metrics.evaluate_encoded`), so the rollup and the library cannot disagree.

Surprisal and unexpectedness need per-item facts and arrive pre-summed per cutoff:
``Σ ln(users of item)`` over the top k and ``|R_k ∩ B_k|``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracker.metrics import METRICS, ServedPositions, evaluate_encoded
from tracker.metrics.catalog import Kind, names
from tracker.metrics.novelty import surprisal_of_log_users
from tracker.metrics.unexpectedness import unexpectedness_of_overlap
from tracker.rollup.state import column_name

# The metric names, from the catalogue (its order is the stored column order).
PER_USER_AT_K = names(kind=Kind.USER, takes_k=True)
AT_K = tuple(m for m in PER_USER_AT_K if m in METRICS)  # scored by the registry's kernels
BEYOND = tuple(m for m in PER_USER_AT_K if m not in METRICS)  # from per-item facts, below
WHOLE_LIST = names(kind=Kind.USER, takes_k=False)
SET_LEVEL = names(kind=Kind.SET)


@dataclass(frozen=True)
class Layout:
    """The order of the per-impression value columns for an experiment's cutoffs."""

    columns: tuple[tuple[str, int], ...]  # (metric, k); k = 0 when the metric has none

    @classmethod
    def for_cutoffs(cls, cutoffs: Sequence[int]) -> Layout:
        columns = [(m, k) for k in cutoffs for m in PER_USER_AT_K]
        columns += [(m, 0) for m in WHOLE_LIST]
        return cls(tuple(columns))

    @property
    def names(self) -> tuple[str, ...]:
        """The columns' names as stored (``ndcg@10``; ``r_precision`` without a cutoff)."""
        return tuple(column_name(m, k) for m, k in self.columns)

    def index(self, metric: str, k: int) -> int:
        return self.columns.index((metric, k))

    def __len__(self) -> int:
        return len(self.columns)


def impression_values(positions: ServedPositions, layout: Layout, cutoffs: Sequence[int],
                      n_users: int, ln_users: np.ndarray, overlap: np.ndarray,
                      has_baseline: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per impression and layout column: the metric value (0 where undefined), and whether
    it is defined. Both ``(impressions, columns)`` arrays are column-major: the columns are
    written and summed one at a time.

    ``positions``: the lists with the served rank of each ground-truth item; ``ln_users``
    and ``overlap`` ``(impressions, cutoffs)``: Σ ln(users of item) over the top k and
    |R_k ∩ B_k|; ``n_users`` the distinct users of the log before the day; ``has_baseline``
    per impression. The formulas are the kernels of ``tracker.metrics``
    (:func:`~tracker.metrics.novelty.surprisal_of_log_users`,
    :func:`~tracker.metrics.unexpectedness.unexpectedness_of_overlap`). Surprisal is
    undefined when the log before the day has fewer than 2 users and for an empty list;
    unexpectedness when the impression carries no baseline list.
    """
    n = positions.n_lists
    values = np.zeros((len(layout), n)).T
    defined = np.ones((len(layout), n), dtype=bool).T
    if n == 0:
        return values, defined
    names = [f"{m}@{k}" for k in cutoffs for m in AT_K] + list(WHOLE_LIST)
    scored = evaluate_encoded(positions, names, workers=1)  # the rollup runs chunks in parallel
    for k in cutoffs:
        for metric in AT_K:
            values[:, layout.index(metric, k)] = scored[f"{metric}@{k}"]
    for metric in WHOLE_LIST:
        values[:, layout.index(metric, 0)] = scored[metric]
    for j, k in enumerate(cutoffs):
        served = np.minimum(positions.lengths, k)
        col = layout.index("surprisal", k)
        if n_users < 2:
            defined[:, col] = False
        else:
            # undefined for an empty list (ingest refuses one, rows stored before it checked
            # may hold one)
            values[:, col] = surprisal_of_log_users(ln_users[:, j], served, n_users)
            defined[:, col] = served > 0
        col = layout.index("unexpectedness", k)
        values[:, col] = np.where(has_baseline, unexpectedness_of_overlap(
            overlap[:, j], positions.lengths, k), 0.0)
        defined[:, col] = has_baseline
    return values, defined
