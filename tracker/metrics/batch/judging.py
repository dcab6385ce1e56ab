"""Judging: every served item matched against the relevance judgements of its list.

:func:`judge` turns :class:`~tracker.metrics.batch.inputs.EncodedLists` into
:class:`~tracker.metrics.batch.judged.Judged` in one vectorised pass, by one of two sorts
of int64 keys that give the same result (:func:`_judge_by_row`, :func:`_judge_by_sort`);
both return a :class:`Matched`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tracker.metrics.batch.judged import PATTERN_WIDTH, Judged

if TYPE_CHECKING:
    from tracker.metrics.batch.inputs import EncodedLists

# judge sorts each list's keys in one padded matrix while that matrix holds at most
# this many times the keys (judgements + ranks); otherwise it sorts all keys at once.
ROW_SORT_WASTE = 4

_PAD_KEY = np.iinfo(np.int64).max  # sorts last; its rank bits are all ones, never 0


@dataclass(frozen=True, slots=True)
class Matched:
    """What matching found, in the terms of :class:`~tracker.metrics.batch.judged.Judged`:
    |G| per list and the positive judgements (one per distinct item, sorted by list) after
    duplicates are merged; the hits as ``dense_hit`` (a bool matrix) or ``hit_bits`` (one
    pattern per list), exactly one of them; ``hit_grade`` for graded relevance only."""

    n_relevant: np.ndarray
    truth_row: np.ndarray
    truth_grade: np.ndarray | None = None
    dense_hit: np.ndarray | None = None
    hit_bits: np.ndarray | None = None
    hit_grade: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class _Truth:
    """A batch's judgements (COO): list, item code, grade (``None``: binary relevance)."""

    row: np.ndarray
    item: np.ndarray
    grade: np.ndarray | None

    @classmethod
    def positive(cls, lists: EncodedLists) -> _Truth:
        """The judgements with a grade > 0; grades that are all 1 count as binary."""
        row, item, grade = lists.truth_row, lists.truth_item, lists.truth_grade
        if grade is not None:
            positive = grade > 0
            if not positive.all():
                row, item, grade = row[positive], item[positive], grade[positive]
            if np.all(grade == 1.0):
                grade = None  # graded input that is binary in fact: take the cheap path
        return cls(row, item, grade)

    def by_row(self) -> _Truth:
        """Sorted by list (stable); ``self`` when it already is."""
        row = self.row
        if row.size < 2 or not np.any(row[1:] < row[:-1]):
            return self
        order = np.argsort(row, kind="stable")
        grade = None if self.grade is None else self.grade[order]
        return _Truth(row[order], self.item[order], grade)


@dataclass(frozen=True, slots=True)
class _RowLayout:
    """How :func:`_judge_by_row` lays out a batch: row ``r`` of the key matrix holds the
    ``counts[r]`` judgements of list ``r`` (at most ``most``), then its served items;
    a key is ``item << (rank_bits + column_bits) | rank << column_bits | column``."""

    counts: np.ndarray
    most: int
    rank_bits: int
    column_bits: int


@dataclass(frozen=True, slots=True)
class _RowKeys:
    """The sorted ``(n_lists, most + width)`` key matrix, the judgements sorted by list,
    and each judgement's column in its list's row of grades (graded only)."""

    keys: np.ndarray
    truth: _Truth
    column: np.ndarray | None


def judge(lists: EncodedLists, depth: int | None = None) -> Judged:
    """Match every served item against its list's judgements, ranks ``1..depth`` only.

    ``depth=None`` judges whole lists. How: within a list, each judgement becomes the
    int64 key ``item << b`` and each served item the key ``item << b | rank`` (rank
    1-based, ``b`` bits wide). Sorting the keys puts every served item right after the
    judgement of the same item, if any, and after its own earlier copies; a served item
    is a hit exactly when the key before it is that judgement. Two ways to sort, same
    result:

    - by row (the usual case): every list's judgements and served items side by side
      in one ``(n_lists, most judgements + width)`` matrix sorted along its rows; many
      short sorts, cache-friendly;
    - one global sort of ``(row * n_codes + item) << b | rank`` keys, when a few lists
      with very many judgements would make that matrix mostly padding (see
      ``ROW_SORT_WASTE``), or when the item codes are too large for the per-row keys.

    Everything is vectorised over all lists; nothing loops over lists in Python.

    >>> import numpy as np
    >>> from tracker.metrics import EncodedLists
    >>> lists = EncodedLists(np.array([[7, 3, 3], [4, -1, -1]]),
    ...                      truth_row=np.array([0, 1]), truth_item=np.array([3, 8]))
    >>> judge(lists).hit  # the second 3 is a repeat: not relevant
    array([[False,  True, False],
           [False, False, False]])
    """
    items = lists.items if depth is None else lists.items[:, :depth]
    width = items.shape[1]
    lengths = np.minimum(lists.lengths, width)
    truth = _Truth.positive(lists)
    layout = _row_layout(items, truth)
    if layout is not None:
        matched = _judge_by_row(items, lengths, truth, layout)
    else:
        matched = _judge_by_sort(items, truth)
    return Judged(
        width=width,
        hit_grade=matched.hit_grade,
        lengths=lengths,
        n_relevant=matched.n_relevant,
        truth_row=matched.truth_row,
        truth_grade=matched.truth_grade,
        complete=width == lists.items.shape[1],
        hit_bits=matched.hit_bits,
        dense_hit=matched.dense_hit,
    )


def _row_layout(items: np.ndarray, truth: _Truth) -> _RowLayout | None:
    """The layout of :func:`_judge_by_row`, or ``None`` when the global sort is the way:
    the padded matrix would hold more than ``ROW_SORT_WASTE`` times the keys, or the item
    codes leave no room for the rank and column fields."""
    n_lists, width = items.shape
    counts = np.bincount(truth.row, minlength=n_lists)
    most = int(counts.max(initial=0))
    rank_bits = int(width + 1).bit_length()  # room above width: padding is never a rank
    column_bits = 0 if truth.grade is None else max(most - 1, 0).bit_length()
    if n_lists * (most + width) > ROW_SORT_WASTE * (truth.row.size + items.size):
        return None
    n_codes = int(max(truth.item.max(initial=-1), items.max(initial=-1))) + 1
    if n_codes >= 2 ** (62 - rank_bits - column_bits):
        return None
    return _RowLayout(counts, most, rank_bits, column_bits)


def _judge_by_row(
    items: np.ndarray, lengths: np.ndarray, truth: _Truth, layout: _RowLayout
) -> Matched:
    """:func:`judge` by sorting each list's keys in one ``(n_lists, most + width)``
    matrix. Keys: ``item << (b + c) | rank << c | column``: rank 0 for a judgement,
    ``column`` (``c`` bits, graded only) its slot in the list's row of grades. The
    rank field (``b`` bits) can hold more than ``width``, so padding keys (all ones)
    never carry a real rank."""
    n_lists, width = items.shape
    sorted_keys = _row_keys(items, lengths, truth, layout)
    keys, truth = sorted_keys.keys, sorted_keys.truth
    # Without the column field, a key follows its item's judgement exactly when it
    # exceeds the key before it by its own rank (the judgement's rank field is 0).
    ranked = keys >> layout.column_bits if layout.column_bits else keys
    rank_mask = (1 << layout.rank_bits) - 1
    step = np.diff(ranked, axis=1)
    rank = ranked[:, 1:] & rank_mask
    if truth.grade is None and width <= PATTERN_WIDTH:
        return _hit_bits(step == rank, rank, layout.counts, truth.row)
    is_hit = (step == rank) & (rank != 0)
    duplicate = (step == 0) & (rank == 0)  # the same item judged twice in a list
    hit = _scatter_by_rank(is_hit, rank, width, rank_mask)
    if truth.grade is not None:
        return _graded_by_row(sorted_keys, layout, hit, is_hit, duplicate, rank)
    if not duplicate.any():
        return Matched(layout.counts, truth.row, dense_hit=hit)
    n_relevant = layout.counts - np.count_nonzero(duplicate, axis=1)
    truth_row = np.repeat(np.arange(n_lists, dtype=np.int64), n_relevant)
    return Matched(n_relevant, truth_row, dense_hit=hit)


def _row_keys(
    items: np.ndarray, lengths: np.ndarray, truth: _Truth, layout: _RowLayout
) -> _RowKeys:
    """Each list's judgement keys and served keys side by side in one matrix, sorted
    along its rows (padding keys sort last)."""
    n_lists, width = items.shape
    shift = layout.rank_bits + layout.column_bits
    truth = truth.by_row()
    # Judgement j of list r goes to column j - starts[r] of row r, flat index
    # j + offsets[r] (offsets[r] = r * row_width - starts[r]).
    counts, row_width = layout.counts, layout.most + width
    starts = np.cumsum(counts) - counts
    offsets = np.repeat(np.arange(n_lists, dtype=np.int64) * row_width - starts, counts)
    keys = np.full((n_lists, row_width), _PAD_KEY, dtype=np.int64)
    flat = np.arange(truth.row.size, dtype=np.int64) + offsets
    column = None if truth.grade is None else flat - truth.row * row_width
    item = truth.item
    keys.ravel()[flat] = (item << shift) | column if layout.column_bits else item << shift
    served = keys[:, layout.most:]
    np.left_shift(items, shift, out=served)
    served |= np.arange(1, width + 1, dtype=np.int64) << layout.column_bits
    if lengths.size and lengths.min() < width:  # padding only trails the shorter lists
        served[items < 0] = _PAD_KEY
    keys.sort(axis=1)
    return _RowKeys(keys, truth, column)


def _scatter_by_rank(
    is_hit: np.ndarray, rank: np.ndarray, width: int, rank_mask: int
) -> np.ndarray:
    """The ``(n_lists, width)`` hit matrix from flags in sorted-key order. Each rank
    1..width occurs once per row: scatter the flags by rank (judgements and padding land
    in the spare columns 0 and ``rank_mask``, dropped after)."""
    n_lists = is_hit.shape[0]
    slots = rank_mask + 1
    flags = np.zeros(n_lists * slots, dtype=bool)
    flags[(rank + (np.arange(n_lists, dtype=np.int64) * slots)[:, None]).ravel()] = (
        is_hit.ravel()
    )
    return np.ascontiguousarray(flags.reshape(n_lists, slots)[:, 1 : width + 1])


def _graded_by_row(
    sorted_keys: _RowKeys,
    layout: _RowLayout,
    hit: np.ndarray,
    is_hit: np.ndarray,
    duplicate: np.ndarray,
    rank: np.ndarray,
) -> Matched:
    """The graded end of :func:`_judge_by_row`: each hit's grade, read through the column
    field of the judgement key it follows; a judgement listed twice keeps its largest grade."""
    keys, truth, column = sorted_keys.keys, sorted_keys.truth, sorted_keys.column
    n_lists, width = hit.shape
    column_mask = (1 << layout.column_bits) - 1
    grades = np.zeros((n_lists, layout.most), dtype=np.float64)
    grades[truth.row, column] = truth.grade
    has_duplicates = bool(duplicate.any())
    keep = np.ones(truth.row.size, dtype=bool)
    if has_duplicates:
        keep = _merge_duplicates(grades, keys, duplicate, column_mask)[truth.row, column]
    before = keys[:, :-1]
    hit_rows, at = np.nonzero(is_hit)
    hit_grade = np.zeros((n_lists, width), dtype=np.float64)
    hit_grade[hit_rows, rank[hit_rows, at] - 1] = grades[
        hit_rows, before[hit_rows, at] & column_mask
    ]
    truth_row = truth.row[keep]
    n_relevant = layout.counts if not has_duplicates else np.bincount(truth_row, minlength=n_lists)
    return Matched(n_relevant, truth_row, grades[truth.row, column][keep], dense_hit=hit,
                   hit_grade=hit_grade)


def _merge_duplicates(
    grades: np.ndarray, keys: np.ndarray, duplicate: np.ndarray, column_mask: int
) -> np.ndarray:
    """Give the last copy of each judgement listed twice (the one hits follow) the largest
    grade of its copies, in ``grades``; returns which grade slots are such last copies."""
    before, after = keys[:, :-1], keys[:, 1:]
    last = np.ones(grades.shape, dtype=bool)
    for position in np.flatnonzero(duplicate.any(axis=0)):  # left to right: chains
        rows = np.flatnonzero(duplicate[:, position])
        earlier = before[rows, position] & column_mask
        later = after[rows, position] & column_mask
        grades[rows, later] = np.maximum(grades[rows, later], grades[rows, earlier])
        last[rows, earlier] = False
    return last


def _hit_bits(
    follows: np.ndarray, rank: np.ndarray, counts: np.ndarray, row: np.ndarray
) -> Matched:
    """The binary end of :func:`_judge_by_row` as bit patterns: ``follows`` marks the
    sorted keys that come right after their item's judgement (rank 0: the same item
    judged twice), ``rank`` is each key's rank field. OR-ing ``1 << rank`` per row sets
    bit ``r`` for a hit at rank ``r`` (ranks are distinct within a row) and bit 0 for a
    repeated judgement."""
    bits = np.bitwise_or.reduce(np.left_shift(follows, rank), axis=1)
    if not np.any(bits & 1):
        return Matched(counts, row, hit_bits=bits >> 1)
    n_relevant = counts - np.count_nonzero(follows & (rank == 0), axis=1)
    truth_row = np.repeat(np.arange(counts.size, dtype=np.int64), n_relevant)
    return Matched(n_relevant, truth_row, hit_bits=bits >> 1)


def _judge_by_sort(items: np.ndarray, truth: _Truth) -> Matched:
    """:func:`judge` by one global sort of ``(row * n_codes + item) << b | rank`` keys."""
    n_lists, width = items.shape
    row, item, grade = truth.row, truth.item, truth.grade
    rank_bits = int(width).bit_length()
    item, items, n_codes = _key_space(item, items, n_lists, 63 - rank_bits)
    hit = np.zeros((n_lists, width), dtype=bool)

    truth_keys = row * n_codes + item
    served_keys = np.arange(n_lists, dtype=np.int64)[:, None] * n_codes + items
    served_keys <<= rank_bits
    served_keys |= np.arange(1, width + 1, dtype=np.int64)
    served_keys = served_keys.ravel()
    if items.size and items.min() < 0:
        served_keys = served_keys[(items >= 0).ravel()]
    keys = np.concatenate((truth_keys << rank_bits, served_keys))
    keys.sort()
    step = np.diff(keys)
    rank = keys[1:] & ((1 << rank_bits) - 1)
    found = np.flatnonzero((step == rank) & (rank != 0)) + 1
    hit_keys = keys[found]
    hit_rows = (hit_keys >> rank_bits) // n_codes
    hit_cols = (hit_keys & ((1 << rank_bits) - 1)) - 1
    hit[hit_rows, hit_cols] = True

    if grade is None:
        if np.any(step == 0):  # a (list, item) judged twice
            row = np.unique(truth_keys) // n_codes
        return Matched(np.bincount(row, minlength=n_lists), row, dense_hit=hit)
    order = np.argsort(truth_keys)
    truth_keys, grade = truth_keys[order], grade[order]
    if truth_keys.size > 1 and np.any(truth_keys[1:] == truth_keys[:-1]):
        first = np.flatnonzero(np.r_[True, truth_keys[1:] != truth_keys[:-1]])
        grade = np.maximum.reduceat(grade, first)  # keep the largest grade
        truth_keys = truth_keys[first]
    row = truth_keys // n_codes
    hit_grade = np.zeros((n_lists, width), dtype=np.float64)
    hit_grade[hit_rows, hit_cols] = grade[np.searchsorted(truth_keys, hit_keys >> rank_bits)]
    return Matched(np.bincount(row, minlength=n_lists), row, grade, dense_hit=hit,
                   hit_grade=hit_grade)


def _key_space(
    truth_item: np.ndarray, items: np.ndarray, n_lists: int, bits: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Codes such that ``n_lists * n_codes < 2**bits``, and ``n_codes``.

    Codes are kept as they are when they fit; otherwise they are renumbered densely
    over the judged items (served items nobody judged share one spare code).
    """
    n_codes = int(max(truth_item.max(initial=-1), items.max(initial=-1))) + 1
    if n_lists * n_codes < 2**bits:
        return truth_item, items, n_codes
    vocabulary, truth_item = np.unique(truth_item, return_inverse=True)
    spare = vocabulary.size
    if n_lists * (spare + 1) >= 2**bits:
        raise ValueError(
            f"{n_lists} lists with {spare} distinct judged items are too many for one batch; "
            "split the lists into smaller batches"
        )
    where = np.minimum(np.searchsorted(vocabulary, items), max(spare - 1, 0))
    known = (items >= 0) & (vocabulary[where] == items) if spare else np.zeros(items.shape, bool)
    compact = np.where(known, where, spare)
    compact[items < 0] = -1
    return truth_item.astype(np.int64, copy=False), compact, spare + 1


