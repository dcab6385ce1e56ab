"""From impression values to unit-day outcomes, and from units to cell sufficient statistics.

- **Unit = user.** A user's value for a metric over a period is the mean of that metric over
  the user's impressions in the period (impressions where the metric is defined); the cell's
  value is the mean over its users. Users with impressions but no interactions count, with 0.
- **Crossover users** (seen in more than one cell over the period: in two arms,
  :mod:`tracker.rollup.cells`) are counted, and excluded from the metrics.
- Stored per (cell, metric, k): users n, Σx, Σx² over the users' values, and for the ratio
  (per-impression) view with the user as the unit: Σm, Σm², Σy, Σy², Σy·m where m is the
  user's number of impressions and y = x·m the user's sum (see
  :class:`tracker.stats.RatioStats`).

Everything is vectorised numpy over (user, cell) rows; no Python loop per user.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup import state
from tracker.rollup.cells import WHOLE, Cells, assignment_of, crossed, is_crossed, unsliced
from tracker.rollup.codes import sorted_codes
from tracker.rollup.outcomes import Layout

PART_BYTES = 1 << 28
"""Largest sums matrix in one ``rollup_units`` row (a PostgreSQL value or a SQLite blob may
hold 1 GiB)."""


@dataclass(frozen=True)
class UnitTotals:
    """Per (user, cell) totals over a period: impressions, and per layout column the sum of
    the values and the number of impressions where the metric is defined. Once reduced,
    one row per (user, cell), the rows of a user adjacent."""

    users: pa.Array  # user ids (strings): kept in Arrow, never a Python string per user
    cells: np.ndarray  # int64 cell codes
    impressions: np.ndarray  # int64
    sums: np.ndarray  # float64 (rows, columns), column-major
    counts: np.ndarray  # float64 (rows, columns), column-major
    # what was derived from these totals (they never change): the experiment's first day
    # publishes one object as its daily and its cumulative totals, encoded and summed once
    _derived: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _deriving: threading.RLock = field(default_factory=threading.RLock, init=False,
                                       repr=False, compare=False)

    @property
    def size(self) -> int:
        return len(self.users)

    def __getstate__(self) -> dict:  # pickled without what was derived (memoryviews)
        return {k: v for k, v in self.__dict__.items() if k not in ("_derived", "_deriving")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _derived={}, _deriving=threading.RLock())

    def derived(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per ``key`` for these totals, whichever thread asks first
        (the others asking for that key wait for it; another key is computed meanwhile:
        the cumulative pass encodes the totals in one thread while it sums them in
        another); its result is shared: read it, never change it."""
        with self._deriving:  # held only to find the key's own lock
            lock = self._derived.setdefault(("lock", *key), threading.Lock())
        with lock:
            if key not in self._derived:
                self._derived[key] = compute()
            return self._derived[key]

    @classmethod
    def empty(cls, columns: int) -> UnitTotals:
        return cls(pa.array([], type=pa.string()), np.empty(0, dtype=np.int64),
                   np.empty(0, dtype=np.int64), _columns(columns, 0), _columns(columns, 0))

    @classmethod
    def concat(cls, parts: list[UnitTotals], columns: int) -> UnitTotals:
        if len(parts) < 2:  # nothing to copy
            return parts[0] if parts else cls.empty(columns)
        return cls(pa.concat_arrays([p.users for p in parts]),
                   np.concatenate([p.cells for p in parts]),
                   np.concatenate([p.impressions for p in parts]),
                   _stack([p.sums for p in parts]), _stack([p.counts for p in parts]))

    def encode(self, layout: Layout) -> list[memoryview]:
        """``rollup_units`` parts: Arrow IPC streams in the ``units/2`` format of
        :mod:`tracker.rollup.state`, each of at most :data:`PART_BYTES` of sums, the columns
        named after ``layout`` (the layout of ``sums`` and ``counts``), their buffers
        zstd-compressed."""
        columns = max(len(layout), 1)
        rows = max(1, PART_BYTES // (8 * columns))
        return self.derived(("encode", tuple(layout.names), PART_BYTES), lambda: [
            self._encode(slice(at, at + rows), layout)
            for at in range(0, max(self.size, 1), rows)])

    def _encode(self, part: slice, layout: Layout) -> memoryview:
        impressions, sums, counts = self.impressions[part], self.sums[part], self.counts[part]
        # most metrics are defined on every impression: their counts equal the unit's
        # impressions and are not stored (an absent count column means exactly that)
        full = (counts == impressions[:, None]).all(axis=0)
        data = {"user_id": self.users[part],
                "cell": pa.array(self.cells[part], type=pa.int64()),
                "impressions": pa.array(impressions, type=pa.int64())}
        for j, name in enumerate(layout.names):
            data[f"sum:{name}"] = pa.array(sums[:, j], type=pa.float64())
        for j, name in enumerate(layout.names):
            if not full[j]:
                data[f"count:{name}"] = pa.array(counts[:, j], type=pa.float64())
        # zstd-compressed buffers (any Arrow reader undoes it; plain streams still read):
        # a day of 200,000 users is 56 MB plain, 13 MB compressed, which PostgreSQL stores
        # and returns 4x faster (it does not compress such values itself)
        return state.write(pa.table(data), state.UNITS, compress=True)

    @classmethod
    def decode(cls, parts: list[bytes], layout: Layout) -> UnitTotals:
        """The totals of :meth:`encode`'s parts, their columns in the order of ``layout``
        (read by name: a stored reorder reads the same; a column of ``layout`` the parts
        lack raises :class:`~tracker.errors.StaleState`)."""
        return cls.concat([cls._decode(part, layout) for part in parts], len(layout))

    @classmethod
    def _decode(cls, data: bytes, layout: Layout) -> UnitTotals:
        table = state.read(data, state.UNITS)
        state.require(table, ["user_id", "cell", "impressions"]
                      + [f"sum:{name}" for name in layout.names], state.UNITS)
        if table.num_rows == 0:
            return cls.empty(len(layout))
        impressions = table["impressions"].to_numpy().astype(np.int64)
        sums, counts = _columns(len(layout), table.num_rows), _columns(len(layout),
                                                                       table.num_rows)
        for j, name in enumerate(layout.names):
            sums[:, j] = table[f"sum:{name}"].to_numpy()
            count = f"count:{name}"
            counts[:, j] = table[count].to_numpy() if count in table.column_names \
                else impressions
        return cls(table["user_id"].combine_chunks(),
                   table["cell"].to_numpy().astype(np.int64), impressions, sums, counts)

    def replacing_users(self, new: UnitTotals) -> UnitTotals:
        """These totals with every row of the users of ``new`` replaced by ``new``'s rows
        (the users' other rows dropped), sorted like :meth:`reduce`."""
        if new.size == 0:
            return self
        keep = np.flatnonzero(~pc.is_in(self.users, value_set=new.users).to_numpy(
            zero_copy_only=False))
        return UnitTotals.added([self.take(keep), new], self.sums.shape[1])

    def take(self, rows: np.ndarray) -> UnitTotals:
        """The rows at positions ``rows`` (int64), in that order."""
        return UnitTotals(self.users.take(pa.array(rows, type=pa.int64())), self.cells[rows],
                          self.impressions[rows], _rows(self.sums, rows),
                          _rows(self.counts, rows))

    def reduce(self) -> UnitTotals:
        """Add up rows of the same (user, cell); rows come out sorted by (user, cell)."""
        return UnitTotals.added([self], self.sums.shape[1]) if self.size else self

    @classmethod
    def added(cls, parts: list[UnitTotals], columns: int) -> UnitTotals:
        """``concat(parts).reduce()`` without stacking the parts' matrices (two copies of
        every row, 90 MB each for 400,000 rows): each column is gathered and added up on
        its own, the same values in the same order, so the same sums to the bit."""
        if not parts:
            return cls.empty(columns)
        users = parts[0].users if len(parts) == 1 else pa.concat_arrays([p.users for p in parts])
        if len(users) == 0:
            return cls.empty(columns)
        user_codes, user_index = sorted_codes(users)
        cell_codes, cell_index = np.unique(np.concatenate([p.cells for p in parts]),
                                         return_inverse=True)
        keys, index = np.unique(user_index.astype(np.int64) * cell_codes.size + cell_index,
                                return_inverse=True)
        impressions = np.concatenate([p.impressions for p in parts])
        return cls(user_codes.take(pa.array(keys // cell_codes.size)),
                   cell_codes[keys % cell_codes.size],
                   np.bincount(index, weights=impressions, minlength=keys.size).astype(np.int64),
                   _column_sums(index, [p.sums for p in parts], keys.size),
                   _column_sums(index, [p.counts for p in parts], keys.size))


def _column_sums(index: np.ndarray, values: np.ndarray | list[np.ndarray], size: int
                 ) -> np.ndarray:
    """Rows of ``values`` (or of several matrices one under the other, never stacked)
    added up by ``index`` (one ``bincount`` per column), column-major like the input should
    be (a column is then read and written contiguously: 4-5x faster than striding through
    rows)."""
    parts = values if isinstance(values, list) else [values]
    out = _columns(parts[0].shape[1], size)
    for j in range(out.shape[1]):  # a loop over metric columns, not over rows
        column = parts[0][:, j] if len(parts) == 1 else \
            np.concatenate([part[:, j] for part in parts])
        out[:, j] = np.bincount(index, weights=column, minlength=size)
    return out


def _columns(columns: int, rows: int) -> np.ndarray:
    """A zeroed ``(rows, columns)`` float64 matrix, column-major."""
    return np.zeros((columns, rows)).T


def _rows(matrix: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Rows of a column-major matrix, column-major."""
    return matrix.T[:, rows].T


def _stack(matrices: list[np.ndarray]) -> np.ndarray:
    """Column-major matrices one under the other, column-major."""
    return np.concatenate([m.T for m in matrices], axis=1).T


@dataclass(frozen=True)
class CodedTotals:
    """Per (user, cell) totals like :class:`UnitTotals`, users as integer codes of a
    :class:`~tracker.rollup.codes.Vocabulary` (what a chunk produces: the chunks of a day
    add up without touching a user id)."""

    users: np.ndarray  # int64 codes
    cells: np.ndarray
    impressions: np.ndarray
    sums: np.ndarray
    counts: np.ndarray

    @classmethod
    def merge(cls, parts: list[CodedTotals]) -> CodedTotals:
        """The parts added up per (user, cell), in the order of the parts (a day's chunks
        are folded as they come: memory follows the day's users, not its chunks)."""
        codes = np.concatenate([p.users for p in parts])
        cells = np.concatenate([p.cells for p in parts])
        cell_codes, cell_index = np.unique(cells, return_inverse=True)
        keys, index = np.unique(codes * cell_codes.size + cell_index, return_inverse=True)
        impressions = np.bincount(index, weights=np.concatenate([p.impressions for p in parts]),
                                  minlength=keys.size).astype(np.int64)
        return cls(keys // cell_codes.size, cell_codes[keys % cell_codes.size].astype(np.int64),
                   impressions, _column_sums(index, [p.sums for p in parts], keys.size),
                   _column_sums(index, [p.counts for p in parts], keys.size))


def unit_totals_of_codes(user_codes: np.ndarray, cells: np.ndarray, values: np.ndarray,
                         defined: np.ndarray) -> CodedTotals:
    """Per (user, cell) totals of per-impression values (0 where not ``defined``); one
    ``bincount`` per column."""
    width = values.shape[1]
    if user_codes.size == 0:
        return CodedTotals(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64),
                           np.empty(0, dtype=np.int64), _columns(width, 0),
                           _columns(width, 0))
    cell_codes, cell_index = np.unique(cells, return_inverse=True)
    key = user_codes * cell_codes.size + cell_index  # dense: no sort needed
    present = np.bincount(key) > 0
    keys = np.flatnonzero(present)
    index = (np.cumsum(present) - 1)[key]
    sums = _column_sums(index, values, keys.size)
    impressions = np.bincount(index, minlength=keys.size).astype(np.int64)
    counts = _columns(width, keys.size)
    counts[:] = impressions[:, None]
    partial = np.flatnonzero(~defined.all(axis=0))  # columns undefined somewhere
    if partial.size:
        counts[:, partial] = _column_sums(index, defined[:, partial].astype(np.float64),
                                          keys.size)
    return CodedTotals(keys // cell_codes.size, cell_codes[keys % cell_codes.size].astype(np.int64),
                       impressions, sums, counts)


def totals_of_parts(parts: list[CodedTotals], user_ids: pa.Array, columns: int) -> UnitTotals:
    """The chunks' totals added up per (user, cell), with the user ids of their codes
    (``user_ids[code]``), sorted by (user, cell) as :meth:`UnitTotals.reduce` sorts."""
    parts = [p for p in parts if p.users.size]
    if not parts:
        return UnitTotals.empty(columns)
    return totals_of_coded(CodedTotals.merge(parts), user_ids)


def totals_of_coded(merged: CodedTotals, user_ids: pa.Array) -> UnitTotals:
    """``merged`` (one row per (user, cell)) with the user ids of its codes, sorted by
    (user, cell) as :meth:`UnitTotals.reduce` sorts."""
    order = pc.array_sort_indices(user_ids).to_numpy()
    rank = np.empty(order.size, dtype=np.int64)  # a user's place in id order
    rank[order] = np.arange(order.size, dtype=np.int64)
    cell_codes, cell_index = np.unique(merged.cells, return_inverse=True)
    rows = np.argsort(rank[merged.users] * cell_codes.size + cell_index)
    return UnitTotals(user_ids.take(pa.array(merged.users[rows])), merged.cells[rows],
                      merged.impressions[rows], _rows(merged.sums, rows),
                      _rows(merged.counts, rows))


class CodedSums:
    """Per (user code, cell) totals added up chunk after chunk, in place: a row per (user,
    cell) seen so far, each chunk's rows added to theirs (a chunk holds a (user, cell) once).
    The same sums as :meth:`CodedTotals.merge` of the chunks in the order added, to the
    bit: each row is added up in that order from 0, as ``bincount`` adds; without
    concatenating the chunks or adding up again the rows already summed.

    >>> sums = CodedSums(1)
    >>> one = np.ones((2, 1))
    >>> sums.add(CodedTotals(np.array([0, 1]), np.array([7, 7]), np.array([1, 2]), one, one))
    >>> sums.add(CodedTotals(np.array([1, 0]), np.array([7, 8]), np.array([3, 4]), one, one))
    >>> t = sums.totals()
    >>> t.users.tolist(), t.cells.tolist(), t.impressions.tolist(), t.sums[:, 0].tolist()
    ([0, 1, 0], [7, 7, 8], [1, 5, 4], [1.0, 2.0, 1.0])
    """

    def __init__(self, columns: int) -> None:
        self.size = 0
        self._row_of: dict[int, np.ndarray] = {}  # cell -> row of each user code (-1: none)
        self._users = self._cells = self._impressions = np.zeros(0, dtype=np.int64)
        self._sums, self._counts = _columns(columns, 0), _columns(columns, 0)

    def add(self, part: CodedTotals) -> None:
        rows = np.empty(part.users.size, dtype=np.int64)
        for cell in np.unique(part.cells).tolist():
            mine = np.flatnonzero(part.cells == cell)
            rows[mine] = self._rows(int(cell), part.users[mine])
        self._impressions[rows] += part.impressions
        for j in range(self._sums.shape[1]):  # columns: contiguous in column-major
            self._sums[:, j][rows] += part.sums[:, j]
            self._counts[:, j][rows] += part.counts[:, j]

    def _rows(self, cell: int, codes: np.ndarray) -> np.ndarray:
        """The rows of ``codes`` in ``cell``, new rows appended for codes not seen yet."""
        table = self._row_of.get(cell, np.zeros(0, dtype=np.int64))
        if codes.size and int(codes.max()) >= table.size:
            grown = np.full(max(int(codes.max()) + 1, 2 * table.size), -1, dtype=np.int64)
            grown[:table.size] = table
            self._row_of[cell] = table = grown
        rows = table[codes]
        new = np.flatnonzero(rows < 0)
        if new.size:
            rows[new] = self.size + np.arange(new.size)
            table[codes[new]] = rows[new]
            self._grow(self.size + new.size)
            self._users[rows[new]] = codes[new]
            self._cells[rows[new]] = cell
            self.size += new.size
        return rows

    def _grow(self, size: int) -> None:
        if size <= self._users.size:
            return
        capacity = max(size, 2 * self._users.size)
        for name in ("_users", "_cells", "_impressions"):
            old = getattr(self, name)
            setattr(self, name, np.concatenate((old, np.zeros(capacity - old.size, np.int64))))
        for name in ("_sums", "_counts"):
            old = getattr(self, name)
            grown = _columns(old.shape[1], capacity)
            grown[:old.shape[0]] = old
            setattr(self, name, grown)

    def totals(self) -> CodedTotals:
        n = self.size
        return CodedTotals(self._users[:n], self._cells[:n], self._impressions[:n],
                           self._sums[:n], self._counts[:n])


@dataclass(frozen=True)
class CellStats:
    """Sufficient statistics of one cell for every layout column (arrays over columns)."""

    cell: int
    users: np.ndarray
    sum: np.ndarray
    sum_sq: np.ndarray
    impressions: np.ndarray
    impressions_sq: np.ndarray
    ratio_sum: np.ndarray
    ratio_sum_sq: np.ndarray
    ratio_cross: np.ndarray


@dataclass(frozen=True)
class HealthCounts:
    """Users and impressions per cell (crossover users included in each cell they were in),
    crossover users per cell, and the experiment's distinct users and crossover users."""

    cells: dict[int, tuple[int, int, int]]  # cell -> (users, impressions, crossover users)
    users: int
    impressions: int
    crossover_users: int


def _same_user_as_previous(totals: UnitTotals) -> np.ndarray:
    """Per row after the first: its user is the previous row's (rows of a user adjacent)."""
    return pc.equal(totals.users[1:], totals.users[:-1]).to_numpy(zero_copy_only=False)


def crossover_mask(totals: UnitTotals) -> np.ndarray:
    """Rows whose user appears in more than one arm (``totals`` with one row per (user,
    cell) and the rows of a user adjacent, as :meth:`UnitTotals.reduce` and
    :func:`unit_totals_of_codes` give them). A user's slices of one arm are one arm
    (:func:`~tracker.rollup.cells.assignment_of`)."""
    if totals.size == 0:
        return np.zeros(0, dtype=bool)

    def crossed() -> np.ndarray:
        same = _same_user_as_previous(totals)
        if unsliced(totals.cells).all():  # a row per assignment: a second is another
            return np.r_[same, False] | np.r_[False, same]
        starts = np.r_[True, ~same]
        at = np.flatnonzero(starts)
        assigned = assignment_of(totals.cells)
        mixed = np.minimum.reduceat(assigned, at) != np.maximum.reduceat(assigned, at)
        return mixed[np.cumsum(starts) - 1]
    return totals.derived(("crossover",), crossed)


def counted(totals: UnitTotals) -> np.ndarray:
    """The rows a view's statistics count: those of users in one arm, and the crossover
    cells' (:data:`~tracker.rollup.cells.CROSSED`: the crossover users' own)."""
    crossed_rows = crossover_mask(totals)
    return ~crossed_rows | is_crossed(totals.cells) if crossed_rows.any() else ~crossed_rows


def without_crossed(totals: UnitTotals) -> UnitTotals:
    """``totals`` less its crossover cells' rows (:func:`with_crossed` derives them)."""
    rows = is_crossed(totals.cells)
    return totals.take(np.flatnonzero(~rows)) if rows.any() else totals


def with_crossed(totals: UnitTotals, first_cells: Callable[[pa.Array], np.ndarray]
                 ) -> UnitTotals:
    """``totals`` (no crossover cell rows) with a row per crossover user in the crossover
    cell of their first arm (``first_cells``: the cell code of the arm of each of some
    users' first exposure, -1 when the logs no longer hold it: then their arm of the
    smallest id): their whole arms' rows added up, every list of theirs."""
    crossed_rows = crossover_mask(totals) & unsliced(totals.cells) & (totals.cells != WHOLE)
    if not crossed_rows.any():
        return totals
    rows = totals.take(np.flatnonzero(crossed_rows))
    users = pc.unique(rows.users)
    at = pc.index_in(rows.users, value_set=users).to_numpy(zero_copy_only=False)
    first = np.asarray(first_cells(users), dtype=np.int64)
    lost = first < 0
    if lost.any():
        smallest = np.full(len(users), np.iinfo(np.int64).max)
        np.minimum.at(smallest, at, rows.cells)
        first = np.where(lost, smallest, first)
    moved = UnitTotals(rows.users, crossed(first[at]), rows.impressions, rows.sums, rows.counts)
    return UnitTotals.added([totals, moved], totals.sums.shape[1])


def health(totals: UnitTotals) -> HealthCounts:
    """Per cell its users, impressions and crossover users; the experiment's distinct
    users, impressions (its whole arms', counted once) and crossover users."""
    crossed = crossover_mask(totals)
    cells = {}
    for cell in np.unique(totals.cells):
        rows = totals.cells == cell
        cells[int(cell)] = (int(rows.sum()), int(totals.impressions[rows].sum()),
                            int((rows & crossed).sum()))
    first = np.r_[True, ~_same_user_as_previous(totals)] if totals.size else crossed
    impressions = totals.impressions[unsliced(totals.cells)].sum()
    return HealthCounts(cells, int(first.sum()), int(impressions),
                        int((first & crossed).sum()))


def cell_stats(totals: UnitTotals, cell_codes: list[int]) -> list[CellStats]:
    """Per cell, the sufficient statistics of every column over its non-crossover users
    (computed once per ``totals`` and cells)."""
    return totals.derived(("cell_stats", tuple(cell_codes)),
                          lambda: _cell_stats(totals, cell_codes))


def _cell_stats(totals: UnitTotals, cell_codes: list[int]) -> list[CellStats]:
    keep = counted(totals)
    out = []
    for cell in cell_codes:
        users = np.zeros(totals.sums.shape[1], dtype=np.int64)
        sums = np.zeros((7, totals.sums.shape[1]))
        for block in cell_blocks(totals, cell, keep):
            x, m, s = block.means, block.weights, block.sums
            users += block.present.sum(axis=0)
            sums += [x.sum(axis=0), (x * x).sum(axis=0), m.sum(axis=0), (m * m).sum(axis=0),
                     s.sum(axis=0), (s * s).sum(axis=0), (s * m).sum(axis=0)]
        out.append(CellStats(int(cell), users, *sums))
    return out


@dataclass(frozen=True)
class UserBlock:
    """Some users' rows of one cell (:func:`cell_blocks`): per (user, column) the sums,
    counts, whether the metric is defined, the user's mean and weight (0 where not)."""

    rows: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    present: np.ndarray
    means: np.ndarray
    weights: np.ndarray


BLOCK_USERS = 2048
"""Users per :class:`UserBlock`: a block's matrices (29 columns: 0.5 MB each) stay in the
cache. One matrix per cell was ~90 MB each for 384k users, and its page faults cost as much
as the arithmetic: CUPED's sums took 0.9-2.1 s against 0.35 s in blocks (1-4k users
alike)."""


def cell_blocks(totals: UnitTotals, cell: int, keep: np.ndarray) -> Iterator[UserBlock]:
    """The rows of ``cell`` that ``keep`` holds, in blocks of :data:`BLOCK_USERS` users
    in row order (sums over them are added block by block)."""
    rows = np.flatnonzero(keep & (totals.cells == cell))
    for at in range(0, rows.size, BLOCK_USERS):
        block = rows[at:at + BLOCK_USERS]
        sums, counts = totals.sums[block], totals.counts[block]
        present = counts > 0
        yield UserBlock(block, sums, counts, present,
                        np.divide(sums, counts, out=np.zeros_like(sums), where=present),
                        np.where(present, counts, 0.0))


def metric_rows(stats: list[CellStats], layout: Layout, cells: Cells) -> list[dict]:
    """``rollup_metric`` rows (without experiment, day, cumulative, provisional), their
    cells named as ``cells`` names them."""
    rows = []
    for stat in stats:
        for j, (metric, k) in enumerate(layout.columns):
            rows.append({
                **cells.stored(stat.cell), "metric": metric, "k": k, "kind": "user",
                "users": int(stat.users[j]), "sum": float(stat.sum[j]),
                "sum_sq": float(stat.sum_sq[j]), "impressions": float(stat.impressions[j]),
                "impressions_sq": float(stat.impressions_sq[j]),
                "ratio_sum": float(stat.ratio_sum[j]), "ratio_sum_sq": float(stat.ratio_sum_sq[j]),
                "ratio_cross": float(stat.ratio_cross[j]),
            })
    return rows
