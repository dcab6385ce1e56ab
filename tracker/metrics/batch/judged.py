"""Served lists judged against their relevance (:class:`Judged`): what every kernel reads.

Hits come as a ``(lists, width)`` matrix, or, for binary lists judged to at most
``PATTERN_WIDTH`` ranks, as one int64 bit pattern per list; a quantity that depends only
on a list's hits is then one lookup per list in :func:`pattern_table`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, TypeVar

import numpy as np

# Binary lists judged to at most this many ranks are summarised as one bit pattern per
# list, and metrics that read only the hits become one lookup in a table of 2**width
# values (Judged.hit_pattern).
PATTERN_WIDTH = 16

_Value = TypeVar("_Value")


def discounts(k: int) -> np.ndarray:
    """``1 / log2(i + 1)`` for the 1-based ranks ``i = 1..k``."""
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))



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
        listed: the judgements per list in ``truth_row`` when some relevant items are
            only counted in ``n_relevant``, not listed (``ServedPositions.unlisted``);
            ``None`` when every one is listed (then it is ``n_relevant``).
        ideal_depth: with unlisted items, the fewest unserved items listed by a list
            that has some: the ideal DCG@k of graded lists is exact up to this k
            (``None``: any k).

    Exactly one of ``hit_bits`` and ``dense_hit`` is given; :attr:`hit` is the matrix
    either way. Quantities several metrics share (hits in the top k, first hit) are
    computed once per k and cached (:meth:`memo`).
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
    listed: np.ndarray | None = None
    ideal_depth: int | None = None
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
    def n_listed(self) -> np.ndarray:
        """Judgements per list in ``truth_row`` (``n_relevant`` unless some are unlisted)."""
        return self.n_relevant if self.listed is None else self.listed

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

    def memo(self, key: tuple[str, Any], compute: Callable[[], _Value]) -> _Value:
        """``compute()``, once per ``key`` for this batch: for quantities several kernels
        share (hits in the top k, the ideal DCG's prefix sums)."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def hit_count(self, k: int | None) -> np.ndarray:
        """|R_k ∩ G| per list (int64)."""
        return self.memo(("hit_count", k), lambda: self.hit_pattern(k, count_hits))

    def first_hit(self, k: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(found, 0-based rank of the first hit) within the top k, per list."""
        return self.memo(("first_hit", k), lambda: (self.hit_count(k) > 0,
                                                     self.hit_pattern(k, first_hit_rank)))

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

