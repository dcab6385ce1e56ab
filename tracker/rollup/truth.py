"""A chunk's ground truth: per (list, item) the highest grade of the interactions that
answer the list (:class:`Truth`), where each item sits in the list (:func:`first_positions`),
and its compaction to what the metrics read when a list's relevant items are too many to
keep (:func:`compact_truth`: one heavy user's day). :mod:`tracker.rollup.columnar` builds it
from the attribution pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracker.rollup.codes import distinct

BLOCK_CELLS = 4_000_000  # bound on the temporary (rows x positions) arrays
_PACKED_LIMIT = 2**62  # a packed key (pair and grade, or user and time) stays below this


def first_positions(items: np.ndarray, rows: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """1-based first position of ``codes[j]`` in list ``rows[j]`` of ``items``; 0 if absent."""
    out = np.zeros(rows.size, dtype=np.int64)
    width = items.shape[1]
    step = max(1, BLOCK_CELLS // max(width, 1))
    for at in range(0, rows.size, step):
        hit = items[rows[at:at + step]] == codes[at:at + step, None]
        found = hit.any(axis=1)
        out[at:at + step] = np.where(found, hit.argmax(axis=1) + 1, 0)
    return out


@dataclass(frozen=True)
class Truth:
    """A chunk's ground truth: one row per (impression, item) with its highest grade, sorted
    by impression (row of the chunk's lists)."""

    rows: np.ndarray
    items: np.ndarray  # item codes
    grades: np.ndarray

    @classmethod
    def highest(cls, rows: np.ndarray, items: np.ndarray, grades: np.ndarray,
                n_items: int, levels: np.ndarray | None = None) -> Truth:
        """One row per (impression, item) of the pairs given, with its highest grade.
        ``levels``: the distinct grades (any sorted superset), when the caller knows them
        (a chunk made in blocks: not sorted again for each block).

        Each pair and the rank of its grade are packed in one int64 and the keys sorted by
        value (numpy's vectorised sort, without the argsort's gathers: 2.4M pairs of a
        day's new interactions in 0.08 s against 0.14-0.15 s); the last key of each pair
        holds its highest grade. Keys that would not fit, or NaN grades, take the argsort.
        (A zero grade comes back as one of 0.0 and -0.0: the callers keep grades > 0.)

        >>> t = Truth.highest(np.array([1, 0, 1]), np.array([2, 2, 2]), np.array([1., 2., 3.]), 3)
        >>> t.rows.tolist(), t.grades.tolist()
        ([0, 1], [2.0, 3.0])
        """
        width = max(n_items, 1)
        levels = np.unique(grades) if levels is None or not levels.size else levels
        span = max(levels.size, 1)
        if not rows.size or np.isnan(levels[-1]) or \
                (int(rows.max()) + 1) * width * span >= _PACKED_LIMIT:
            pair = rows * width + items
            order = np.argsort(pair)
            pair = pair[order]
            first = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]]) if pair.size else pair
            highest = np.maximum.reduceat(grades[order], first) if first.size else grades
            return cls(rows[order][first], items[order][first], highest)
        key = (rows.astype(np.int64) * width + items) * span + np.searchsorted(levels, grades)
        key.sort()
        pair = key // span
        last = np.flatnonzero(np.r_[pair[1:] != pair[:-1], True])
        pair = pair[last]
        return cls(pair // width, (pair % width).astype(items.dtype, copy=False),
                   levels[key[last] % span])


@dataclass(frozen=True)
class GroundTruth:
    """A chunk's :class:`Truth` as it is scored, with what compaction left out of it
    (:func:`compact_truth`): per list the count of relevant items not listed (None: none
    left out), and the distinct items left out (for the catalog)."""

    truth: Truth
    unlisted: np.ndarray | None
    dropped_items: np.ndarray
    pairs: int  # (impression, item) pairs before compaction


def compact_truth(truth: Truth, served: np.ndarray, keep: int, n_items: int) -> GroundTruth:
    """``truth`` (of the lists ``served``, padded) cut to what the metrics read
    (:class:`~tracker.metrics.ServedPositions`' ``unlisted``): in a list with more than
    ``keep`` relevant items it did not serve, only the ``keep`` highest graded of those
    (ties: the lowest item codes) stay listed, the others are counted. With ``keep`` the
    largest cutoff every metric value is unchanged (graded NDCG@k reads the k highest
    grades; the rest only |G|), whichever tied items are kept, so a day compacted in
    other chunks or codes scores the same.

    Only lists with more than ``keep`` relevant items are looked at (their served
    positions found): ordinary lists cost one count, and come back as they were. No sort:
    ``truth`` is sorted by (list, item), so whether a list served an item is one binary
    search among the (list, item) keys of the heavy lists' served cells, and an unserved
    item's rank in its list is the count of those graded above it (a count per list and
    grade: grades are few, the experiment's) plus its rank among those of its grade (in
    item order already). Item codes are below ``n_items``.
    """
    empty = np.empty(0, dtype=np.int64)
    n_lists = served.shape[0]
    listed = np.bincount(truth.rows, minlength=n_lists)
    heavy = listed > keep  # at most ``keep`` relevant: at most ``keep`` unserved
    if not heavy.any():
        return GroundTruth(truth, None, empty, int(truth.rows.size))
    pairs = np.flatnonzero(heavy[truth.rows])
    lists = np.flatnonzero(heavy)
    width = max(n_items, 1)
    if n_lists * width < _PACKED_LIMIT:
        cells = served[lists]
        keys = (lists[:, None] * width + cells)[cells >= 0]
        keys.sort()
        wanted = truth.rows[pairs] * width + truth.items[pairs]
        at = np.minimum(np.searchsorted(keys, wanted), max(keys.size - 1, 0))
        unserved = pairs[keys[at] != wanted] if keys.size else pairs
    else:  # keys that would not fit: the items' positions found row by row
        unserved = pairs[first_positions(served, truth.rows[pairs], truth.items[pairs]) == 0]
    if not unserved.size:  # every relevant item of the long lists was served: nothing to cut
        return GroundTruth(truth, None, empty, int(truth.rows.size))
    rows, grades = truth.rows[unserved], truth.grades[unserved]
    levels = np.unique(grades)
    down = levels.size - 1 - np.searchsorted(levels, grades)  # 0: the highest grade
    local = (np.cumsum(heavy) - 1)[rows]  # the heavy lists numbered 0, 1, ...
    per_level = np.bincount(local * levels.size + down,
                            minlength=int(heavy.sum()) * levels.size).reshape(-1, levels.size)
    above = (np.cumsum(per_level, axis=1) - per_level)[local, down]
    rank = np.empty(rows.size, dtype=np.int64)
    for level in range(levels.size):  # a pass per grade
        mine = np.flatnonzero(down == level)
        rank[mine] = _ranks_in_runs(rows[mine])
    dropped = unserved[above + rank >= keep]
    if not dropped.size:
        return GroundTruth(truth, None, empty, int(truth.rows.size))
    kept = np.ones(truth.rows.size, dtype=bool)
    kept[dropped] = False
    return GroundTruth(Truth(truth.rows[kept], truth.items[kept], truth.grades[kept]),
                       np.bincount(truth.rows[dropped], minlength=n_lists),
                       distinct(truth.items[dropped]), int(truth.rows.size))


def _ranks_in_runs(values: np.ndarray) -> np.ndarray:
    """Each value's 0-based rank in its run of equal values (``values`` sorted)."""
    if not values.size:
        return np.empty(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    return np.arange(values.size) - np.repeat(starts, np.diff(np.r_[starts, values.size]))
