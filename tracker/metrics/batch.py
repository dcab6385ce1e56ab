"""The batch kernel every ranking metric shares.

Data path, for any number of lists at once::

    ids (any hashable)  --encoding-->  EncodedLists (integer codes)
                        --judge-->     Judged (a lists x depth hit/grade matrix, or
                                       one hit bit pattern per list)
                        --kernels-->   one float per list per metric

:class:`EncodedLists` is the low-level entry point: a caller that already holds integer
item codes (the rollup job, which reads them from the database) builds one directly and
skips hashing ids. :func:`judge` matches every served item against the relevance
judgements of its list in one vectorised pass (a sort of int64 keys within each list)
and applies the conventions every metric relies on:

- only positive grades are relevant; |G| counts the distinct items with a grade > 0;
- an item repeated within one list is relevant only at its first position;
- a judgement listed twice for the same (list, item) keeps its largest grade.

The metric kernels (one file per family) are then a few array operations over the
matrix; nothing loops over lists in Python. Binary lists judged to at most
``PATTERN_WIDTH`` ranks (the usual top-10 or top-16 evaluation) are summarised as one
int64 bit pattern per list, and a metric that reads only the hits (counts, first hit,
DCG, AP's precision sum) is then one lookup in a table of its value for each of the
``2**k`` patterns (:meth:`Judged.hit_pattern`): no matrix products, no scatter back to
ranks. :func:`score_blocks` runs the kernels over bounded blocks of lists (about
65,000 ranks each): the arrays stay a few MiB, which keeps memory flat and the work in
cache (about 2x faster than blocks of a million lists); large batches are scored by a
few threads, since numpy releases the GIL in its sorts and array operations. The
batching over lists lives only here.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, TypeVar

import numpy as np

# Ranks (list positions) per block of lists judged at once.
BLOCK_RANKS = 1 << 16
# judge sorts each list's keys in one padded matrix while that matrix holds at most
# this many times the keys (judgements + ranks); otherwise it sorts all keys at once.
ROW_SORT_WASTE = 4
# Binary lists judged to at most this many ranks are summarised as one bit pattern per
# list, and metrics that read only the hits become one lookup in a table of 2**width
# values (Judged.hit_pattern).
PATTERN_WIDTH = 16
# Batches of at least this many lists are scored by up to MAX_WORKERS threads.
PARALLEL_LISTS = 50_000
MAX_WORKERS = 4

_Frozen = TypeVar("_Frozen")


def check_k(k: object, name: str = "k") -> int:
    """Return ``k`` as an int, or raise ValueError unless it is an integer >= 1.

    >>> check_k(10)
    10
    >>> check_k(0)
    Traceback (most recent call last):
    ...
    ValueError: k must be an integer >= 1 (the number of top-ranked items to score), got 0
    """
    if isinstance(k, bool):
        raise ValueError(f"{name} must be an integer >= 1, got {k!r}")
    try:
        value = operator.index(k)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{name} must be an integer >= 1, got {k!r}") from None
    if value < 1:
        what = " (the number of top-ranked items to score)" if name == "k" else ""
        raise ValueError(f"{name} must be an integer >= 1{what}, got {value}")
    return value


def discounts(k: int) -> np.ndarray:
    """``1 / log2(i + 1)`` for the 1-based ranks ``i = 1..k``."""
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


@dataclass(frozen=True, eq=False)
class EncodedLists:
    """Ranked lists and their relevance judgements as integer arrays (no hashing needed).

    This is the entry point for callers that hold integer-coded data, e.g. the rollup
    job: build one and pass it to :func:`tracker.metrics.evaluate_encoded`.

    Attributes:
        items: ``(n_lists, width)`` integers. Row ``r`` is list ``r``: the item code at
            each rank (column 0 = rank 1). Codes are any integers >= 0; ``-1`` pads the
            row after the list's last item (padding may only trail).
        truth_row: ``(n_pairs,)`` integers in ``[0, n_lists)``: the list each
            judgement belongs to (COO layout, any order; e.g. one row per attributed
            interaction).
        truth_item: ``(n_pairs,)`` item codes >= 0, same code space as ``items``.
        truth_grade: ``(n_pairs,)`` finite grades >= 0, or ``None`` for binary relevance
            (every listed pair has grade 1). Grade 0 means "not relevant": such pairs are
            ignored. A pair listed twice keeps its largest grade.

    ``lengths`` (derived) is the number of items in each list.

    >>> import numpy as np
    >>> lists = EncodedLists(
    ...     items=np.array([[7, 3, 9], [4, -1, -1]]),
    ...     truth_row=np.array([0, 0, 1]),
    ...     truth_item=np.array([3, 5, 8]),
    ... )
    >>> lists.lengths
    array([3, 1])

    Ragged data (one flat array of codes plus the list lengths) goes through
    :meth:`from_flat`.
    """

    items: np.ndarray
    truth_row: np.ndarray
    truth_item: np.ndarray
    truth_grade: np.ndarray | None = None
    lengths: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        items = _int_array(self.items, "items")
        if items.ndim != 2:
            raise ValueError(
                f"items must be a 2-D (n_lists, width) array of item codes, got {items.ndim}-D"
            )
        if items.size and items.min() < -1:
            raise ValueError("items: item codes must be >= 0, with -1 only as padding")
        padding = items < 0
        if np.any(padding[:, :-1] & ~padding[:, 1:]):
            row = int(np.flatnonzero(np.any(padding[:, :-1] & ~padding[:, 1:], axis=1))[0])
            raise ValueError(
                f"items: row {row} has an item after -1 padding; padding may only follow "
                "the last item of a list"
            )
        n_lists = items.shape[0]
        truth_row = _int_array(self.truth_row, "truth_row").ravel()
        truth_item = _int_array(self.truth_item, "truth_item").ravel()
        if truth_row.shape != truth_item.shape:
            raise ValueError(
                f"truth_row and truth_item must have the same length, got {truth_row.size} "
                f"and {truth_item.size}"
            )
        if truth_row.size:
            if truth_row.min() < 0 or truth_row.max() >= n_lists:
                raise ValueError(
                    f"truth_row values must index the lists, i.e. lie in [0, {n_lists})"
                )
            if truth_item.min() < 0:
                raise ValueError("truth_item: item codes must be >= 0")
        truth_grade = self.truth_grade
        if truth_grade is not None:
            truth_grade = check_grades(np.asarray(truth_grade), "truth_grade").ravel()
            if truth_grade.shape != truth_row.shape:
                raise ValueError(
                    f"truth_grade must have one grade per judgement: got {truth_grade.size} "
                    f"grades for {truth_row.size} pairs"
                )
        set_ = object.__setattr__
        set_(self, "items", items)
        set_(self, "truth_row", truth_row)
        set_(self, "truth_item", truth_item)
        set_(self, "truth_grade", truth_grade)
        set_(self, "lengths", np.count_nonzero(~padding, axis=1))

    @classmethod
    def from_flat(
        cls,
        item_codes: np.ndarray,
        lengths: np.ndarray,
        truth_row: np.ndarray,
        truth_item: np.ndarray,
        truth_grade: np.ndarray | None = None,
        *,
        depth: int | None = None,
    ) -> EncodedLists:
        """Build from ragged lists: ``item_codes`` holds every list back to back.

        ``lengths[r]`` is the length of list ``r``; ``depth`` keeps only the first
        ``depth`` ranks of each list (metrics @k never read further).

        >>> import numpy as np
        >>> lists = EncodedLists.from_flat(
        ...     item_codes=np.array([7, 3, 9, 4]), lengths=np.array([3, 1]),
        ...     truth_row=np.array([0, 1]), truth_item=np.array([3, 4]),
        ... )
        >>> lists.items
        array([[ 7,  3,  9],
               [ 4, -1, -1]])
        """
        codes = _int_array(item_codes, "item_codes").ravel()
        lengths = _int_array(lengths, "lengths").ravel()
        if lengths.size and lengths.min() < 0:
            raise ValueError("lengths must be >= 0")
        if int(lengths.sum()) != codes.size:
            raise ValueError(
                f"lengths add up to {int(lengths.sum())} but item_codes holds {codes.size} codes"
            )
        if codes.size and codes.min() < 0:
            raise ValueError("item_codes must be >= 0")
        items = pad(codes, lengths, depth)
        return cls(items, truth_row, truth_item, truth_grade)

    @classmethod
    def _trusted(
        cls,
        items: np.ndarray,
        truth_row: np.ndarray,
        truth_item: np.ndarray,
        truth_grade: np.ndarray | None,
        lengths: np.ndarray,
    ) -> EncodedLists:
        """Build from arrays already validated (internal: blocks of a validated batch)."""
        return _unchecked(
            cls,
            items=items,
            truth_row=truth_row,
            truth_item=truth_item,
            truth_grade=truth_grade,
            lengths=lengths,
        )

    @property
    def n_lists(self) -> int:
        return self.items.shape[0]

    @property
    def width(self) -> int:
        """Ranks per list in :attr:`items` (the longest list, or the depth it was cut at)."""
        return self.items.shape[1]

    def judged(self, depth: int | None = None) -> Judged:
        """:func:`judge` of these lists."""
        return judge(self, depth)

    def blocks(self, rows: int) -> Iterator[EncodedLists]:
        """Consecutive blocks of at most ``rows`` lists (judgements renumbered per block).

        Judgements sorted by ``truth_row`` are sliced as they are; otherwise they are
        sorted once (stable) first.
        """
        row, item, grade = self.truth_row, self.truth_item, self.truth_grade
        if row.size > 1 and np.any(row[1:] < row[:-1]):
            order = np.argsort(row, kind="stable")
            row, item = row[order], item[order]
            grade = None if grade is None else grade[order]
        starts = np.arange(0, self.n_lists, rows)
        bounds = np.searchsorted(row, np.append(starts, self.n_lists))
        for i, start in enumerate(starts.tolist()):
            stop = min(start + rows, self.n_lists)
            lo, hi = bounds[i], bounds[i + 1]
            yield EncodedLists._trusted(
                self.items[start:stop],
                row[lo:hi] - start,
                item[lo:hi],
                None if grade is None else grade[lo:hi],
                self.lengths[start:stop],
            )


@dataclass(frozen=True, eq=False)
class ServedPositions:
    """Lists whose relevant items were already located in them: for callers that know,
    for every relevant item, the rank at which its list served it (the rollup job reads
    that off the served lists), so no item codes need matching.

    Attributes:
        lengths: ``(n_lists,)`` number of items served in each list.
        truth_row: ``(n_pairs,)`` the list of each relevant item, in ``[0, n_lists)``;
            one entry per distinct relevant item of a list.
        truth_position: ``(n_pairs,)`` the 1-based rank at which the list first served
            the item (a repeated item counts only at its first position), 0 when the
            list did not serve it; a rank holds at most one item.
        truth_grade: ``(n_pairs,)`` grades > 0, or ``None`` for binary relevance.

    Judging these (:meth:`judged`) gives exactly what :func:`judge` gives for the same
    lists as :class:`EncodedLists`, without the sort that matches codes (tests check it).

    >>> import numpy as np
    >>> lists = ServedPositions(lengths=np.array([3, 1]), truth_row=np.array([0, 0, 1]),
    ...                         truth_position=np.array([2, 0, 1]))
    >>> lists.judged().hit
    array([[False,  True, False],
           [ True, False, False]])
    """

    lengths: np.ndarray
    truth_row: np.ndarray
    truth_position: np.ndarray
    truth_grade: np.ndarray | None = None
    _batch_width: int | None = field(default=None, repr=False)  # set on blocks of a batch

    def __post_init__(self) -> None:
        lengths = _int_array(self.lengths, "lengths").ravel()
        if lengths.size and lengths.min() < 0:
            raise ValueError("lengths must be >= 0")
        row = _int_array(self.truth_row, "truth_row").ravel()
        position = _int_array(self.truth_position, "truth_position").ravel()
        if row.shape != position.shape:
            raise ValueError(
                f"truth_row and truth_position must have the same length, got {row.size} "
                f"and {position.size}"
            )
        grade = self.truth_grade
        if grade is not None:
            grade = check_grades(np.asarray(grade), "truth_grade").ravel()
            if grade.shape != row.shape:
                raise ValueError(
                    f"truth_grade must have one grade per judgement: got {grade.size} "
                    f"grades for {row.size} pairs"
                )
            if grade.size and grade.min() <= 0:
                raise ValueError("truth_grade: list relevant items only (grades > 0)")
        if row.size:
            if row.min() < 0 or row.max() >= lengths.size:
                raise ValueError(
                    f"truth_row values must index the lists, i.e. lie in [0, {lengths.size})"
                )
            if position.min() < 0 or np.any(position > lengths[row]):
                raise ValueError(
                    "truth_position must lie in [0, length of its list] (0: not served)"
                )
            served = position > 0
            ranks = row[served] * (int(lengths.max()) + 1) + position[served]
            if ranks.size > 1 and np.any(np.diff(np.sort(ranks)) == 0):
                raise ValueError("truth_position: two relevant items at the same rank of a list")
            if np.any(row[1:] < row[:-1]):  # sorted by list: blocks slice, ideal DCG reads
                order = np.argsort(row, kind="stable")
                row, position = row[order], position[order]
                grade = None if grade is None else grade[order]
        set_ = object.__setattr__
        set_(self, "lengths", lengths)
        set_(self, "truth_row", row)
        set_(self, "truth_position", position)
        set_(self, "truth_grade", grade)

    @classmethod
    def _trusted(
        cls,
        lengths: np.ndarray,
        row: np.ndarray,
        position: np.ndarray,
        grade: np.ndarray | None,
        batch_width: int,
    ) -> ServedPositions:
        """A block of a validated batch (internal)."""
        return _unchecked(
            cls,
            lengths=lengths,
            truth_row=row,
            truth_position=position,
            truth_grade=grade,
            _batch_width=batch_width,
        )

    @property
    def n_lists(self) -> int:
        return self.lengths.size

    @property
    def width(self) -> int:
        """The longest list (of the whole batch, for a block)."""
        if self._batch_width is not None:
            return self._batch_width
        return int(self.lengths.max(initial=0))

    def blocks(self, rows: int) -> Iterator[ServedPositions]:
        """Consecutive blocks of at most ``rows`` lists (judgements renumbered per block);
        each keeps the width of the whole batch (:meth:`judged` of a block is complete
        exactly when the batch's is)."""
        starts = np.arange(0, self.n_lists, rows)
        bounds = np.searchsorted(self.truth_row, np.append(starts, self.n_lists))
        width = self.width
        for i, start in enumerate(starts.tolist()):
            lo, hi = bounds[i], bounds[i + 1]
            yield ServedPositions._trusted(
                self.lengths[start : start + rows],
                self.truth_row[lo:hi] - start,
                self.truth_position[lo:hi],
                None if self.truth_grade is None else self.truth_grade[lo:hi],
                width,
            )

    def judged(self, depth: int | None = None) -> Judged:
        """The lists judged to ``depth`` (``None``: whole lists), as :func:`judge` does."""
        full = self.width
        width = full if depth is None else min(depth, full)
        n_lists = self.n_lists
        row, position, grade = self.truth_row, self.truth_position, self.truth_grade
        if grade is not None and np.all(grade == 1.0):
            grade = None  # graded input that is binary in fact: the cheap path
        shown = (position > 0) & (position <= width)
        cells = row[shown] * width + (position[shown] - 1)
        hit = np.zeros(n_lists * width, dtype=bool)
        hit[cells] = True
        hit_grade = None
        if grade is not None:
            hit_grade = np.zeros(n_lists * width, dtype=np.float64)
            hit_grade[cells] = grade[shown]
            hit_grade = hit_grade.reshape(n_lists, width)
        return Judged(
            width=width,
            hit_grade=hit_grade,
            lengths=np.minimum(self.lengths, width),
            n_relevant=np.bincount(row, minlength=n_lists),
            truth_row=row,
            truth_grade=grade,
            complete=width == full,
            dense_hit=hit.reshape(n_lists, width),
        )


def _unchecked(cls: type[_Frozen], **fields: object) -> _Frozen:
    """An instance of the frozen dataclass ``cls`` with ``fields`` set as given, skipping
    its validation: for blocks cut from a batch that was validated whole."""
    self = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(self, name, value)
    return self


def pad(codes: np.ndarray, lengths: np.ndarray, depth: int | None = None, *,
        fill: int = -1, min_width: int = 0) -> np.ndarray:
    """Lay ragged lists (back to back in ``codes``) into a matrix padded with ``fill``: as
    wide as the longest list, cut at ``depth``, and at least ``min_width`` columns. The
    one ragged-to-padded routine of the project (the library's encoders and the rollup).

    >>> import numpy as np
    >>> pad(np.array([5, 6, 7, 8]), np.array([1, 3]), depth=2)
    array([[ 5, -1],
           [ 6,  7]])
    >>> pad(np.array([5]), np.array([1, 0]), fill=-2, min_width=2)
    array([[ 5, -2],
           [-2, -2]])
    """
    n_lists = lengths.size
    longest = int(lengths.max()) if n_lists else 0
    width = max(longest if depth is None else min(depth, longest), min_width)
    if n_lists and width <= longest and lengths.min() == longest:  # rectangular: a reshape
        return codes.reshape(n_lists, longest)[:, :width]
    items = np.full((n_lists, width), fill, dtype=np.int64)
    if codes.size:
        starts = np.cumsum(lengths) - lengths
        column = np.arange(codes.size, dtype=np.int64) - np.repeat(starts, lengths)
        cells = np.repeat(np.arange(n_lists, dtype=np.int64) * width, lengths) + column
        keep = column < width
        items.ravel()[cells[keep]] = codes[keep]
    return items


@dataclass(frozen=True, eq=False)
class Judged:
    """Served lists judged against their relevance: what every metric kernel reads.

    Attributes:
        width: ranks judged per list.
        hit_grade: ``(n_lists, width)`` float grade of each hit (0 elsewhere), or
            ``None`` for binary relevance.
        lengths: items served in each list within the judged ranks.
        n_relevant: |G|, distinct items with a grade > 0, per list.
        truth_row, truth_grade: the positive judgements sorted by list, one per
            distinct item (for ideal DCG); ``truth_grade`` is ``None`` when binary.
        complete: True when ``width`` covers whole lists (no depth cut).
        hit_bits: binary lists judged to at most ``PATTERN_WIDTH`` ranks may come as
            one int64 per list instead of a matrix: bit ``r - 1`` is set when the item
            at rank ``r`` is relevant (see :meth:`hit_pattern`); ``None`` otherwise.
        dense_hit: the ``(n_lists, width)`` bool hit matrix when given as one.

    Exactly one of ``hit_bits`` and ``dense_hit`` is given; :attr:`hit` is the matrix
    either way. Quantities several metrics share (hits in the top k, first hit) are
    computed once per k and cached.
    """

    width: int
    hit_grade: np.ndarray | None
    lengths: np.ndarray
    n_relevant: np.ndarray
    truth_row: np.ndarray
    truth_grade: np.ndarray | None
    complete: bool
    hit_bits: np.ndarray | None = None
    dense_hit: np.ndarray | None = field(default=None, repr=False)
    _cache: dict[tuple[str, Any], Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if (self.hit_bits is None) == (self.dense_hit is None):
            raise ValueError("Judged takes exactly one of hit_bits and dense_hit")
        bits = self.hit_bits
        if bits is not None and (self.hit_grade is not None or self.width > PATTERN_WIDTH):
            raise ValueError(
                f"hit_bits hold binary lists of at most {PATTERN_WIDTH} ranks, got width "
                f"{self.width}" + (" with grades" if self.hit_grade is not None else "")
            )

    @property
    def binary(self) -> bool:
        return self.truth_grade is None

    @property
    def n_lists(self) -> int:
        return self.lengths.shape[0]

    @cached_property
    def hit(self) -> np.ndarray:
        """``(n_lists, width)`` bool, True where the item at that rank is relevant (a
        repeated item only at its first position)."""
        if self.dense_hit is not None:
            return self.dense_hit
        return _pattern_rows(self.hit_bits, self.width)  # type: ignore[arg-type]

    def top_width(self, k: int | None) -> int:
        """The ranks a metric @k reads: ``min(k, width)`` (``None``: all judged)."""
        if k is None:
            return self.width
        if k > self.width and not self.complete:
            raise RuntimeError(f"the lists were judged to depth {self.width}, not {k}")
        return min(k, self.width)

    def top(self, k: int | None) -> np.ndarray:
        """The hit matrix cut at rank ``k`` (``None``: everything judged)."""
        width = self.top_width(k)
        return self.hit if width == self.width else self.hit[:, :width]

    def hit_pattern(
        self, k: int | None, function: Callable[[np.ndarray], np.ndarray]
    ) -> np.ndarray:
        """``function`` of each list's top-k hits, one value per list.

        ``function`` maps a ``(rows, k)`` matrix of hits (1 or True) and misses (0 or
        False) to one value per row, each row's value depending on that row alone (a
        count, a DCG, ...). Lists judged as bit patterns read it from a table of
        ``function`` over all ``2**k`` patterns (computed once per function and k, then
        cached), one lookup per list; others apply it to :attr:`hit_float`. Same values
        either way.
        """
        width = self.top_width(k)
        if self.hit_bits is None:
            return function(self.hit_float[:, :width])
        bits = self.hit_bits if width == self.width else self.hit_bits & ((1 << width) - 1)
        return pattern_table(function, width)[bits]

    def hit_count(self, k: int | None) -> np.ndarray:
        """|R_k ∩ G| per list (int64)."""
        key = ("hit_count", k)
        if key not in self._cache:
            self._cache[key] = self.hit_pattern(k, count_hits)
        return self._cache[key]

    def first_hit(self, k: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(found, 0-based rank of the first hit) within the top k, per list."""
        key = ("first_hit", k)
        if key not in self._cache:
            self._cache[key] = (self.hit_count(k) > 0, self.hit_pattern(k, first_hit_rank))
        return self._cache[key]

    @cached_property
    def hit_float(self) -> np.ndarray:
        """``hit`` as float64 (0.0 / 1.0), for matrix products."""
        return self.hit.astype(np.float64)

    @property
    def grades(self) -> np.ndarray:
        """``(n_lists, width)`` float grade at each rank, 0 where not relevant."""
        return self.hit_float if self.hit_grade is None else self.hit_grade


def count_hits(hit: np.ndarray) -> np.ndarray:
    """Hits per row (int64) of a 0/1 hit matrix (a matrix product: faster than a count)."""
    return (np.asarray(hit, dtype=np.float64) @ np.ones(hit.shape[1])).astype(np.int64)


def first_hit_rank(hit: np.ndarray) -> np.ndarray:
    """0-based rank of each row's first hit (0 when it has none)."""
    if hit.shape[1] == 0:
        return np.zeros(hit.shape[0], dtype=np.int64)
    return hit.argmax(axis=1).astype(np.int64)


@lru_cache(maxsize=256)
def pattern_table(function: Callable[[np.ndarray], np.ndarray], width: int) -> np.ndarray:
    """``function`` evaluated on every hit pattern of ``width`` ranks: entry ``b`` is
    its value for the row whose rank ``r`` is a hit when bit ``r - 1`` of ``b`` is set.

    >>> pattern_table(count_hits, 2).tolist()  # patterns 00, 01 (rank 1), 10, 11
    [0, 1, 1, 2]
    """
    table = function(_pattern_rows(np.arange(1 << width, dtype=np.int64), width))
    table.setflags(write=False)
    return table


def _pattern_rows(bits: np.ndarray, width: int) -> np.ndarray:
    """Bit patterns as a ``(len(bits), width)`` bool matrix (bit ``r - 1`` -> rank r)."""
    return ((bits[:, None] >> np.arange(width, dtype=np.int64)) & 1).astype(bool)


Kernel = Callable[[Judged], np.ndarray]


def block_rows(width: int) -> int:
    """Lists per block so that a block holds about ``BLOCK_RANKS`` ranks."""
    return max(64, BLOCK_RANKS // max(width, 1))


def score_blocks(
    blocks: Iterable[EncodedLists | ServedPositions],
    n_lists: int,
    kernels: Mapping[str, Kernel],
    depth: int | None,
    workers: int | None = None,
) -> dict[str, np.ndarray]:
    """Judge each block of lists to ``depth`` and run every kernel on it.

    Returns one float64 array of ``n_lists`` values per kernel name; ``blocks`` must
    cover the lists in order. This is the one loop over lists in the package (over
    blocks of thousands of lists, not over single lists). ``workers`` threads score
    blocks at once (numpy's sorts and array operations release the GIL; each block
    writes its own slice of the outputs): ``None`` picks :func:`default_workers`, 1
    scores in the calling thread.
    """
    out = {name: np.empty(n_lists, dtype=np.float64) for name in kernels}

    def score(block: EncodedLists | ServedPositions, start: int) -> None:
        judged = block.judged(depth)
        stop = start + judged.n_lists
        for name, kernel in kernels.items():
            out[name][start:stop] = kernel(judged)

    workers = default_workers(n_lists) if workers is None else check_k(workers, "workers")
    start = 0
    if workers == 1:
        for block in blocks:
            score(block, start)
            start += block.n_lists
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="tracker-metrics") as pool:
            pending = []
            for block in blocks:
                pending.append(pool.submit(score, block, start))
                start += block.n_lists
            for future in pending:
                future.result()  # re-raises a kernel's error
    if start != n_lists:
        raise RuntimeError(f"blocks covered {start} lists, expected {n_lists}")
    return out


def default_workers(n_lists: int) -> int:
    """Threads worth scoring ``n_lists`` lists with: one per CPU up to ``MAX_WORKERS``,
    and one alone for batches too small to pay for a thread pool."""
    if n_lists < PARALLEL_LISTS:
        return 1
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def score_encoded(
    lists: EncodedLists | ServedPositions,
    kernels: Mapping[str, Kernel],
    depth: int | None,
    workers: int | None = None,
) -> dict[str, np.ndarray]:
    """:func:`score_blocks` over an encoded batch cut into blocks."""
    width = lists.width if depth is None else min(depth, lists.width)
    blocks = lists.blocks(block_rows(width))
    return score_blocks(blocks, lists.n_lists, kernels, depth, workers)


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
    >>> lists = EncodedLists(np.array([[7, 3, 3], [4, -1, -1]]),
    ...                      truth_row=np.array([0, 1]), truth_item=np.array([3, 8]))
    >>> judge(lists).hit  # the second 3 is a repeat: not relevant
    array([[False,  True, False],
           [False, False, False]])
    """
    items = lists.items if depth is None else lists.items[:, :depth]
    n_lists, width = items.shape
    row, item, grade = lists.truth_row, lists.truth_item, lists.truth_grade
    if grade is not None:
        positive = grade > 0
        if not positive.all():
            row, item, grade = row[positive], item[positive], grade[positive]
        if np.all(grade == 1.0):
            grade = None  # graded input that is binary in fact: take the cheap path
    lengths = np.minimum(lists.lengths, width)
    complete = width == lists.items.shape[1]
    counts = np.bincount(row, minlength=n_lists)
    most = int(counts.max(initial=0))
    rank_bits = int(width + 1).bit_length()  # room above width: padding is never a rank
    column_bits = 0 if grade is None else max(most - 1, 0).bit_length()
    n_codes = int(max(item.max(initial=-1), items.max(initial=-1))) + 1
    padded = n_lists * (most + width)
    if padded <= ROW_SORT_WASTE * (row.size + items.size) and n_codes < 2 ** (
        62 - rank_bits - column_bits
    ):
        args = (items, lengths, row, item, grade, counts, most, rank_bits, column_bits)
        hit, bits, hit_grade, n_relevant, row, grade = _judge_by_row(*args)
    else:
        hit, bits, hit_grade, n_relevant, row, grade = _judge_by_sort(items, row, item, grade)
    return Judged(
        width=width,
        hit_grade=hit_grade,
        lengths=lengths,
        n_relevant=n_relevant,
        truth_row=row,
        truth_grade=grade,
        complete=complete,
        hit_bits=bits,
        dense_hit=hit,
    )


# (dense_hit, hit_bits, hit_grade, n_relevant, truth_row, truth_grade) as documented on
# Judged: one of dense_hit and hit_bits is None.
_Matched = tuple[
    np.ndarray | None, np.ndarray | None, np.ndarray | None, np.ndarray, np.ndarray,
    np.ndarray | None,
]

_PAD_KEY = np.iinfo(np.int64).max  # sorts last; its rank bits are all ones, never 0


def _judge_by_row(
    items: np.ndarray,
    lengths: np.ndarray,
    row: np.ndarray,
    item: np.ndarray,
    grade: np.ndarray | None,
    counts: np.ndarray,
    most: int,
    rank_bits: int,
    column_bits: int,
) -> _Matched:
    """:func:`judge` by sorting each list's keys in one ``(n_lists, most + width)``
    matrix. Keys: ``item << (b + c) | rank << c | column``: rank 0 for a judgement,
    ``column`` (``c`` bits, graded only) its slot in the list's row of grades. The
    rank field (``b`` bits) can hold more than ``width``, so padding keys (all ones)
    never carry a real rank."""
    n_lists, width = items.shape
    shift = rank_bits + column_bits
    if row.size > 1 and np.any(row[1:] < row[:-1]):
        order = np.argsort(row, kind="stable")
        row, item = row[order], item[order]
        grade = None if grade is None else grade[order]
    # Judgement j of list r goes to column j - starts[r] of row r, flat index
    # j + offsets[r] (offsets[r] = r * row_width - starts[r]).
    row_width = most + width
    starts = np.cumsum(counts) - counts
    offsets = np.repeat(np.arange(n_lists, dtype=np.int64) * row_width - starts, counts)
    keys = np.full((n_lists, row_width), _PAD_KEY, dtype=np.int64)
    flat = np.arange(row.size, dtype=np.int64) + offsets
    column = None if grade is None else flat - row * row_width
    keys.ravel()[flat] = (item << shift) | column if column_bits else item << shift
    served = keys[:, most:]
    np.left_shift(items, shift, out=served)
    served |= np.arange(1, width + 1, dtype=np.int64) << column_bits
    if lengths.size and lengths.min() < width:  # padding only trails the shorter lists
        served[items < 0] = _PAD_KEY
    keys.sort(axis=1)

    # Without the column field, a key follows its item's judgement exactly when it
    # exceeds the key before it by its own rank (the judgement's rank field is 0).
    ranked = keys >> column_bits if column_bits else keys
    rank_mask = (1 << rank_bits) - 1
    step = np.diff(ranked, axis=1)
    rank = ranked[:, 1:] & rank_mask
    if grade is None and width <= PATTERN_WIDTH:
        return _hit_bits(step == rank, rank, counts, row)
    is_hit = (step == rank) & (rank != 0)
    duplicate = (step == 0) & (rank == 0)  # the same item judged twice in a list
    # Each rank 1..width occurs once per row: scatter the flags by rank (judgements and
    # padding land in the spare columns 0 and rank_mask, dropped after).
    slots = rank_mask + 1
    flags = np.zeros(n_lists * slots, dtype=bool)
    flags[(rank + (np.arange(n_lists, dtype=np.int64) * slots)[:, None]).ravel()] = (
        is_hit.ravel()
    )
    hit = np.ascontiguousarray(flags.reshape(n_lists, slots)[:, 1 : width + 1])
    has_duplicates = bool(duplicate.any())

    if grade is None:
        if not has_duplicates:
            return hit, None, None, counts, row, None
        n_relevant = counts - np.count_nonzero(duplicate, axis=1)
        truth_row = np.repeat(np.arange(n_lists, dtype=np.int64), n_relevant)
        return hit, None, None, n_relevant, truth_row, None

    column_mask = (1 << column_bits) - 1
    before, after = keys[:, :-1], keys[:, 1:]
    grades = np.zeros((n_lists, most), dtype=np.float64)
    grades[row, column] = grade
    keep = np.ones(row.size, dtype=bool)
    if has_duplicates:  # keep the largest grade, on the last copy (the one hits follow)
        last = np.ones((n_lists, most), dtype=bool)
        for position in np.flatnonzero(duplicate.any(axis=0)):  # left to right: chains
            rows = np.flatnonzero(duplicate[:, position])
            earlier = before[rows, position] & column_mask
            later = after[rows, position] & column_mask
            grades[rows, later] = np.maximum(grades[rows, later], grades[rows, earlier])
            last[rows, earlier] = False
        keep = last[row, column]
    hit_rows, at = np.nonzero(is_hit)
    hit_grade = np.zeros((n_lists, width), dtype=np.float64)
    hit_grade[hit_rows, rank[hit_rows, at] - 1] = grades[
        hit_rows, before[hit_rows, at] & column_mask
    ]
    truth_row = row[keep]
    n_relevant = counts if not has_duplicates else np.bincount(truth_row, minlength=n_lists)
    return hit, None, hit_grade, n_relevant, truth_row, grades[row, column][keep]


def _hit_bits(
    follows: np.ndarray, rank: np.ndarray, counts: np.ndarray, row: np.ndarray
) -> _Matched:
    """The binary end of :func:`_judge_by_row` as bit patterns: ``follows`` marks the
    sorted keys that come right after their item's judgement (rank 0: the same item
    judged twice), ``rank`` is each key's rank field. OR-ing ``1 << rank`` per row sets
    bit ``r`` for a hit at rank ``r`` (ranks are distinct within a row) and bit 0 for a
    repeated judgement."""
    bits = np.bitwise_or.reduce(np.left_shift(follows, rank), axis=1)
    if not np.any(bits & 1):
        return None, bits >> 1, None, counts, row, None
    n_relevant = counts - np.count_nonzero(follows & (rank == 0), axis=1)
    truth_row = np.repeat(np.arange(counts.size, dtype=np.int64), n_relevant)
    return None, bits >> 1, None, n_relevant, truth_row, None


def _judge_by_sort(
    items: np.ndarray, row: np.ndarray, item: np.ndarray, grade: np.ndarray | None
) -> _Matched:
    """:func:`judge` by one global sort of ``(row * n_codes + item) << b | rank`` keys."""
    n_lists, width = items.shape
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
        return hit, None, None, np.bincount(row, minlength=n_lists), row, None
    order = np.argsort(truth_keys)
    truth_keys, grade = truth_keys[order], grade[order]
    if truth_keys.size > 1 and np.any(truth_keys[1:] == truth_keys[:-1]):
        first = np.flatnonzero(np.r_[True, truth_keys[1:] != truth_keys[:-1]])
        grade = np.maximum.reduceat(grade, first)  # keep the largest grade
        truth_keys = truth_keys[first]
    row = truth_keys // n_codes
    hit_grade = np.zeros((n_lists, width), dtype=np.float64)
    hit_grade[hit_rows, hit_cols] = grade[np.searchsorted(truth_keys, hit_keys >> rank_bits)]
    return hit, None, hit_grade, np.bincount(row, minlength=n_lists), row, grade


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


def check_grades(grades: np.ndarray, name: str) -> np.ndarray:
    """Grades as float64; ValueError unless every one is finite and >= 0."""
    try:
        grades = grades.astype(np.float64, copy=False)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: grades must be numbers >= 0") from None
    bad = ~(np.isfinite(grades) & (grades >= 0))
    if bad.any():
        index = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(
            f"{name}[{index}] = {float(grades.ravel()[index])!r}: grades must be finite and >= 0 "
            "(0 = not relevant)"
        )
    return grades


def _int_array(values: object, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.size == 0 and array.dtype.kind not in "iu":
        return array.astype(np.int64)
    if array.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    if array.dtype.kind == "u" and array.size and array.max() >= 2**63:
        raise ValueError(f"{name}: codes must be below 2**63")
    return array.astype(np.int64, copy=False)
