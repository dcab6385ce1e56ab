"""The batch's inputs: ranked lists and their relevance as validated integer arrays.

:class:`EncodedLists` holds served item codes and the judgements of each list (what
:func:`~tracker.metrics.batch.judging.judge` matches); :class:`ServedPositions` holds the
rank at which each relevant item was served, for callers that know it (the rollup), so no
codes need matching. Both validate once, and cut into blocks
(:func:`~tracker.metrics.batch.scoring.score_blocks`) without validating again.
:func:`pad` is the project's one ragged-to-padded routine.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from tracker.metrics.batch.judged import Judged
from tracker.metrics.batch.judging import judge

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
        unlisted: ``(n_lists,)`` counts >= 0 of relevant items each list did not serve
            and that are not among its truth rows, or ``None`` (every relevant item is
            listed). A list's relevant set can be far larger than any metric reads (a bot
            clicking thousands of items answers each of its lists with all of them): the
            metrics need the served ones with their grades, |G| (recall, MAP,
            R-precision) and, for NDCG's ideal DCG@k, the k highest grades. So a caller
            may list the served relevant items and only the highest-graded unserved ones,
            and count the rest here: every value is the same provided that, in each
            list with ``unlisted > 0``, no unlisted item is graded above a listed unserved
            one, and, for graded NDCG@k, at least k unserved items are listed (judging
            with fewer raises, see :attr:`Judged.ideal_depth`).

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
    unlisted: np.ndarray | None = None
    _batch_width: int | None = field(default=None, repr=False)  # set on blocks of a batch

    def __post_init__(self) -> None:
        lengths = _int_array(self.lengths, "lengths").ravel()
        if lengths.size and lengths.min() < 0:
            raise ValueError("lengths must be >= 0")
        unlisted = self.unlisted
        if unlisted is not None:
            unlisted = _int_array(unlisted, "unlisted").ravel()
            if unlisted.shape != lengths.shape:
                raise ValueError(
                    f"unlisted must hold one count per list: got {unlisted.size} counts "
                    f"for {lengths.size} lists"
                )
            if unlisted.size and unlisted.min() < 0:
                raise ValueError("unlisted: counts of relevant items must be >= 0")
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
        set_(self, "unlisted", unlisted)

    @classmethod
    def _trusted(
        cls,
        lengths: np.ndarray,
        row: np.ndarray,
        position: np.ndarray,
        grade: np.ndarray | None,
        batch_width: int,
        unlisted: np.ndarray | None = None,
    ) -> ServedPositions:
        """A block of a validated batch (internal)."""
        return _unchecked(
            cls,
            lengths=lengths,
            truth_row=row,
            truth_position=position,
            truth_grade=grade,
            unlisted=unlisted,
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
                None if self.unlisted is None else self.unlisted[start : start + rows],
            )

    def judged(self, depth: int | None = None) -> Judged:
        """The lists judged to ``depth`` (``None``: whole lists), as :func:`judge` does."""
        full = self.width
        width = full if depth is None else min(depth, full)
        n_lists = self.n_lists
        row, position, grade = self.truth_row, self.truth_position, self.truth_grade
        graded = grade is not None  # unlisted grades may be lower than the listed ones
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
        listed = np.bincount(row, minlength=n_lists)
        n_relevant, ideal_depth = listed, None
        if self.unlisted is not None and self.unlisted.any():
            n_relevant = listed + self.unlisted
            if graded:
                unserved = np.bincount(row[position == 0], minlength=n_lists)
                ideal_depth = int(unserved[self.unlisted > 0].min())
        return Judged(
            width=width,
            hit_grade=hit_grade,
            lengths=np.minimum(self.lengths, width),
            n_relevant=n_relevant,
            truth_row=row,
            truth_grade=grade,
            complete=width == full,
            dense_hit=hit.reshape(n_lists, width),
            listed=None if n_relevant is listed else listed,
            ideal_depth=ideal_depth,
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
