"""Exact, mergeable per-cell statistics, and a user's change applied to them as a delta.

The rollup core's views (daily, cumulative, exposure-day) are sums over users: per cell
(:mod:`tracker.rollup.cells`) and layout column, the sufficient statistics
``rollup_metric`` stores (users n, Σx, Σx², Σm, Σm², Σy, Σy², Σy·m: x the user's mean, m the
impressions where the metric is defined, y the user's sum), over the users in one cell only
(crossover users, seen in several arms, count in no cell's statistics but the crossover
cell of their first arm, :data:`~tracker.rollup.cells.CROSSED`; they count in health).
:class:`CellSums` keeps them in :class:`~tracker.rollup.accumulate.ExactSums`, so
that a view moved by deltas (:func:`apply_change`: a changed user's old rows retracted, the
new ones added, in any order and grouping) equals, bit for bit, the view rebuilt from every
user's current rows; and its :meth:`CellSums.stats` equal
:func:`~tracker.rollup.aggregate.cell_stats` of the same rows (a float sum: to rounding).
Health counts are integers: a change moves them by plain differences (:func:`health_moved`).

Beam's ``CombineFn`` (create, add, merge, extract) and Flink's ``retract`` are the model; a
user's rows are the accumulator's input, one row per (user, cell).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup.accumulate import ExactSums
from tracker.rollup.aggregate import CellStats, HealthCounts, UnitTotals, counted, health
from tracker.rollup.covariate_sums import (
    add_terms,
    cell_terms,
    covariate_rows,
    sum_columns,
    sums_table,
)
from tracker.rollup.outcomes import Layout
from tracker.rollup.user_covariates import UserCovariates

STATS = ("users", "sum", "sum_sq", "impressions", "impressions_sq", "ratio_sum",
         "ratio_sum_sq", "ratio_cross")
"""The statistics per layout column, in the order of :func:`user_terms`' blocks."""
_BLOCK = 2048  # users per block of terms: their matrices stay in the cache


def user_terms(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each user's contribution to every statistic: ``(users, len(STATS) * columns)``, one
    block of ``columns`` per statistic of :data:`STATS` (0 where the metric is undefined)."""
    present = counts > 0
    x = np.divide(sums, counts, out=np.zeros_like(sums, dtype=np.float64), where=present)
    m = np.where(present, counts, 0.0)
    s = np.where(present, sums, 0.0)
    return np.hstack([present.astype(np.float64), x, x * x, m, m * m, s, s * s, s * m])


class CellSums:
    """Per cell (an integer id) and layout column, the statistics of :data:`STATS` summed
    exactly over the rows added and not retracted (create: ``CellSums(columns)``;
    :meth:`add`, :meth:`retract`, :meth:`merge`; extract: :meth:`stats`, :meth:`exact`)."""

    __slots__ = ("columns", "_cells")

    def __init__(self, columns: int) -> None:
        self.columns = columns
        self._cells: dict[int, ExactSums] = {}

    def add(self, cells: np.ndarray, sums: np.ndarray, counts: np.ndarray,
            sign: int = 1) -> None:
        """Add the rows (``cells[i]``, ``sums[i]``, ``counts[i]``); ``sign=-1`` retracts."""
        cells = np.asarray(cells, dtype=np.int64)
        if sums.shape != counts.shape or sums.shape != (cells.size, self.columns):
            raise ValueError(f"expected sums and counts of shape ({cells.size}, "
                             f"{self.columns}), got {sums.shape} and {counts.shape}")
        for cell in np.unique(cells).tolist():
            rows = np.flatnonzero(cells == cell)
            acc = self._cells.setdefault(cell, ExactSums(len(STATS) * self.columns))
            for at in range(0, rows.size, _BLOCK):
                block = rows[at:at + _BLOCK]
                acc.add(user_terms(sums[block], counts[block]), sign)

    def retract(self, cells: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> None:
        self.add(cells, sums, counts, sign=-1)

    def merge(self, other: CellSums) -> None:
        if other.columns != self.columns:
            raise ValueError(f"cannot merge sums of {other.columns} columns into "
                             f"{self.columns}")
        for cell, acc in other._cells.items():
            self._cells.setdefault(cell, ExactSums(len(STATS) * self.columns)).merge(acc)

    def set(self, cell: int, exact: list[int]) -> None:
        """Make ``cell``'s sums the stored exact ones (of :meth:`exact`)."""
        if len(exact) != len(STATS) * self.columns:
            raise ValueError(f"expected {len(STATS) * self.columns} sums, got {len(exact)}")
        self._cells[cell] = ExactSums.of_exact(exact)

    def exact(self) -> dict[int, list[int]]:
        """Per cell holding any row, its exact sums (for equality and storage)."""
        return {cell: acc.exact() for cell, acc in sorted(self._cells.items())}

    def stats(self, cells: list[int]) -> list[CellStats]:
        """The statistics of ``cells`` (zeros for a cell without rows), each correctly
        rounded once."""
        out = []
        for cell in cells:
            acc = self._cells.get(cell)
            values = acc.sums() if acc is not None else \
                np.zeros(len(STATS) * self.columns)
            blocks = values.reshape(len(STATS), self.columns)
            out.append(CellStats(cell, np.rint(blocks[0]).astype(np.int64), *blocks[1:]))
        return out


def rows_of(totals: UnitTotals, users: pa.Array) -> UnitTotals:
    """Every row of ``totals`` whose user is in ``users``, in their order (a user's rows
    stay adjacent): the old or new rows of changed users."""
    rows = np.flatnonzero(pc.is_in(totals.users, value_set=users).to_numpy(
        zero_copy_only=False))
    return totals.take(rows)


def add_totals(acc: CellSums, totals: UnitTotals, sign: int = 1) -> None:
    """Add (``sign=-1``: retract) the rows of ``totals`` whose user is in one cell only
    (``totals``: every row of each of its users, as :class:`UnitTotals` keeps them)."""
    keep = np.flatnonzero(counted(totals))
    acc.add(totals.cells[keep], totals.sums[keep], totals.counts[keep], sign)


def changed_rows(old: UnitTotals, new: UnitTotals) -> tuple[UnitTotals, UnitTotals]:
    """The rows of some users' change (``old``, ``new``: every row each user had, has) that
    move a view's sums: the rows a view counts (its users in one cell only, as
    :func:`add_totals` finds them among every row of theirs), less each (user, cell) row
    that is the same, to the bit, before and after (retracting and adding it back would
    leave the exact sums as they are). The rows left hold no crossover user, so counting
    them again keeps them all.

    >>> import pyarrow as pa
    >>> def totals(users, cells, sums):
    ...     column = np.array([[s] for s in sums], dtype=float, order="F")
    ...     return UnitTotals(pa.array(users), np.array(cells), np.ones(len(users), np.int64),
    ...                       column, np.ones_like(column))
    >>> sliced = 1 | 5 << 24  # arm 1's slice 5: user a's rows are in arm 1 alone
    >>> before, after = changed_rows(totals(["a", "a", "b"], [1, sliced, 2], [1, 5, 0]),
    ...                              totals(["a", "a", "b"], [1, sliced, 2], [2, 5, 0]))
    >>> before.cells.tolist(), after.cells.tolist(), after.sums[:, 0].tolist()
    ([1], [1], [2.0])
    >>> before, after = changed_rows(totals(["c"], [1], [1]), totals(["c", "c"], [1, 2], [1, 0]))
    >>> before.cells.tolist(), after.cells.tolist()  # c crossed over: counted no more
    ([1], [])
    """
    old = old.take(np.flatnonzero(counted(old))) if old.size else old
    new = new.take(np.flatnonzero(counted(new))) if new.size else new
    if not old.size or not new.size:
        return old, new
    users = pc.unique(pa.concat_arrays([old.users.cast(pa.string()),
                                        new.users.cast(pa.string())]))
    cells = np.unique(np.concatenate([old.cells, new.cells]))
    old_key, new_key = (  # one row per (user, cell) on each side: unique keys
        pc.index_in(t.users.cast(pa.string()), value_set=users).to_numpy().astype(np.int64)
        * cells.size + np.searchsorted(cells, t.cells) for t in (old, new))
    _, both, pair = np.intersect1d(old_key, new_key, assume_unique=True,
                                   return_indices=True)
    same = (old.impressions[both] == new.impressions[pair]) & \
        (old.sums[both] == new.sums[pair]).all(axis=1) & \
        (old.counts[both] == new.counts[pair]).all(axis=1)
    if not same.any():
        return old, new
    kept_old, kept_new = np.ones(old.size, dtype=bool), np.ones(new.size, dtype=bool)
    kept_old[both[same]], kept_new[pair[same]] = False, False
    return old.take(np.flatnonzero(kept_old)), new.take(np.flatnonzero(kept_new))


def apply_change(acc: CellSums, old: UnitTotals, new: UnitTotals) -> None:
    """Move ``acc`` by some users' change: ``old``, every row those users had (empty for
    users new to the view), ``new``, every row they have now (empty for users erased)."""
    add_totals(acc, old, sign=-1)
    add_totals(acc, new)


def health_moved(base: HealthCounts, before: HealthCounts, after: HealthCounts
                 ) -> HealthCounts:
    """A view's health counts ``base`` moved by some users' change: ``before`` and ``after``
    are :func:`~tracker.rollup.aggregate.health` of their old and of their new rows."""
    cells = {}
    for cell in sorted(set(base.cells) | set(before.cells) | set(after.cells)):
        rows = (base.cells.get(cell, (0, 0, 0)), before.cells.get(cell, (0, 0, 0)),
                after.cells.get(cell, (0, 0, 0)))
        moved = tuple(b - o + a for b, o, a in zip(*rows, strict=True))
        if any(moved):
            cells[cell] = moved
    return HealthCounts(cells, base.users - before.users + after.users,
                        base.impressions - before.impressions + after.impressions,
                        base.crossover_users - before.crossover_users + after.crossover_users)


SUMS = "view-sums/2"
"""The stored form of :class:`ViewSums` (JSON: its exact sums as integers, see
:func:`_pack`), with the layout's columns it was computed for. ``/2`` holds the crossover
cells; a checkpoint of ``/1`` sends the cumulative pass back to the first day once
(:func:`current_sums`)."""


def current_sums(data: bytes | None) -> bool:
    """Whether stored sums are of this release's format (:data:`SUMS`); None (migration
    0021's "compute once") and older formats are not: the cumulative view of every day is
    then computed again, once, as the crossover cells of the days before the checkpoint
    were never written."""
    if data is None:
        return False
    try:
        stored = json.loads(bytes(data))
    except ValueError:
        return False
    return isinstance(stored, dict) and stored.get("format") == SUMS


class ViewSums:
    """One view's exact state over its users, moved by their changes: per cell the
    statistics (:class:`CellSums`), the health counts, and CUPED's sums (per cell, the
    terms of :func:`~tracker.rollup.covariates.cell_terms` summed exactly; None when CUPED
    is off). The cumulative pass keeps one at its checkpoint and moves a copy of it by the
    users of the days after (:mod:`tracker.rollup.cumulative`)."""

    __slots__ = ("cuped", "health", "layout", "stats")

    def __init__(self, layout: Layout, cuped: bool) -> None:
        self.layout = layout
        self.stats = CellSums(len(layout))
        self.health = HealthCounts({}, 0, 0, 0)
        self.cuped: dict[int, ExactSums] | None = {} if cuped else None

    @property
    def width(self) -> int:
        """CUPED's sums per cell: one per (layout column, sum)."""
        return len(self.layout) * len(sum_columns())

    def copy(self) -> ViewSums:
        other = ViewSums(self.layout, self.cuped is not None)
        other.stats.merge(self.stats)
        other.health = self.health
        if self.cuped is not None:
            other.cuped = {cell: acc.copy() for cell, acc in self.cuped.items()}
        return other

    def move(self, old: UnitTotals, new: UnitTotals,
             covariates: UserCovariates | None = None) -> None:
        """Some users' change: ``old``, every row they had in the view (empty for users
        new to it), ``new``, every row they have now; ``covariates``: CUPED's, of at least
        those users (required when CUPED is on). Only the counted rows that changed move
        the exact sums (:func:`changed_rows`): a user's rows of the slices a new day did not
        touch would be retracted and added back to the same bits."""
        if covariates is None and self.cuped is not None:
            raise ValueError("CUPED's sums move with the users' covariates: none given")
        self.health = health_moved(self.health, health(old), health(new))
        old, new = changed_rows(old, new)
        apply_change(self.stats, old, new)
        if self.cuped is None:
            return
        self._add_cuped(old, covariates, -1)
        self._add_cuped(new, covariates, 1)

    def recovariate(self, rows: UnitTotals, old: UserCovariates, new: UserCovariates) -> None:
        """CUPED's sums moved from some users' ``old`` covariates to their ``new`` ones
        (``rows``: every row those users have in the view)."""
        if self.cuped is None:
            return
        self._add_cuped(rows, old, -1)
        self._add_cuped(rows, new, 1)

    def _add_cuped(self, rows: UnitTotals, covariates: UserCovariates, sign: int) -> None:
        """CUPED's terms of ``rows`` with ``covariates``, added (``sign`` 1) or retracted
        (-1) exactly."""
        found = covariate_rows(rows, covariates)
        for cell in np.unique(rows.cells).tolist():
            acc = self.cuped.setdefault(cell, ExactSums(self.width))
            for weights in cell_terms(rows, covariates, self.layout, cell, found=found):
                add_terms(acc, *weights, sign=sign)

    def cuped_table(self, codes: list[int]) -> pa.Table | None:
        """CUPED's sums of ``codes`` (zeros for a cell without users), None when off."""
        if self.cuped is None:
            return None
        return sums_table({cell: self.cuped[cell].sums() if cell in self.cuped else
                           np.zeros(self.width) for cell in codes}, self.layout)

    def encode(self) -> bytes:
        """The stored form, cells in code order (the same sums, the same bytes)."""
        stats, cells = self.stats.exact(), self.health.cells
        return json.dumps({
            "format": SUMS, "columns": self.layout.names,
            "stats": {str(c): [_pack(v) for v in stats[c]] for c in sorted(stats)},
            "health": [{str(c): list(cells[c]) for c in sorted(cells)},
                       self.health.users, self.health.impressions,
                       self.health.crossover_users],
            "cuped": None if self.cuped is None else
            {str(c): [_pack(v) for v in self.cuped[c].exact()] for c in sorted(self.cuped)},
        }, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes, layout: Layout, cuped: bool) -> ViewSums | None:
        """Stored sums; None when they are of another format, layout or CUPED setting (the
        pass then starts from the first day)."""
        try:
            stored = json.loads(bytes(data))
        except ValueError:
            return None
        if not isinstance(stored, dict) or stored.get("format") != SUMS or \
                stored.get("columns") != list(layout.names) or \
                (stored.get("cuped") is not None) != cuped:
            return None
        out = cls(layout, cuped)
        for cell, values in stored["stats"].items():
            out.stats.set(int(cell), [_unpack(v) for v in values])
        cells, users, impressions, crossover = stored["health"]
        out.health = HealthCounts({int(c): tuple(n) for c, n in cells.items()}, users,
                                  impressions, crossover)
        if cuped:
            out.cuped = {int(c): ExactSums.of_exact([_unpack(v) for v in values])
                         for c, values in stored["cuped"].items()}
        return out


def _pack(value: int) -> str:
    """An exact sum (an integer over ``2**1126``: long, its low bits mostly zero) as
    ``"<hex>p<shift>"``, ``value == int(hex, 16) << shift``."""
    if value == 0:
        return "0"
    shift = (value & -value).bit_length() - 1
    return f"{value >> shift:x}p{shift}"


def _unpack(text: str) -> int:
    mantissa, _, shift = text.partition("p")
    return int(mantissa, 16) << int(shift or 0)
