"""Cells: what every per-user and per-group result of the rollup is keyed by.

A **cell** is a group of users whose statistics the report compares: an arm of the
experiment, or an arm's slice of a declared dimension (the arm's lists whose value of
the dimension is one level: their own ``context`` value for a list dimension, their user's
at first exposure for a user dimension: :mod:`tracker.rollup.levels`). The
rollup keys a user's totals by (user, cell), and every statistic, health count, exposure
and CUPED sum by cell, as integer **codes**. Only this module knows what a cell is made of:

- which cells a served list falls in (:meth:`Cells.place`: its arm, and its slice of the
  arm in each dimension; :attr:`Cells.logged`: what the lake holds, arms only);
- how a cell is named in the tables the report reads (:meth:`Cells.stored`, the key
  columns ``arm_id``, ``segment`` and ``slice`` of ``rollup_metric``, ``rollup_health``,
  ``rollup_exposure``, ``rollup_exposure_day`` and ``rollup_covariate_sums``;
  :meth:`Cells.code`, back);
- which cells a user may be in at once: a user found in two arms crossed over, and counts
  in no cell's statistics but their first arm's **crossover cell** (:data:`CROSSED`, the
  cumulative view's only); a user's slices of one arm are that arm.

Code :data:`WHOLE` (0) is the experiment as a whole, in no arm: the health row of the whole
experiment and the exposure row of the catalog. A whole arm's code is its arm's id, so the
codes of stored state written before cells existed are the cells' codes. A slice's cell
keeps its arm's id in its low :data:`ARM_BITS` bits (:func:`assignment_of`) and its slice's
number above them: the dimension's place among the dimensions by name, times
:data:`SLICES_PER_DIMENSION`, plus the value's (``(none)``, ``(other)``, then the levels in
sorted order; a dimension whose every value is a level, ``cohort`` or ``activity``, has no
``(none)`` or ``(other)``). The numbers follow the levels, which the rollup keeps beside the
results it computed with them, and a change of which recomputes every day.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.errors import StaleState, TrackerError
from tracker.rollup.levels import NONE, OTHER, closed
from tracker.rollup.queries import slice_column
from tracker.store.rollup_tables import CROSSOVER, WHOLE_ARM

if TYPE_CHECKING:
    from tracker.store.experiments import ExperimentInfo

WHOLE = 0
"""The code of the experiment as a whole (no cell's): its health, its catalog."""

T = TypeVar("T")

ARM_BITS = 24
"""The low bits of a cell's code that hold its arm's id (arm ids stay below 2**24)."""

_ARM_MASK = (1 << ARM_BITS) - 1


def assignment_of(codes: np.ndarray) -> np.ndarray:
    """The assignment (the arm) of each cell code, a user in two of which crossed over
    (:data:`WHOLE` stays itself).

    >>> assignment_of(np.array([7, 7 | 5 << ARM_BITS, 0])).tolist()
    [7, 7, 0]
    """
    return codes & _ARM_MASK


def unsliced(codes: np.ndarray) -> np.ndarray:
    """Per cell code: whether it is a whole arm (or :data:`WHOLE`), in no slice.

    >>> unsliced(np.array([7, 7 | 5 << ARM_BITS, 0])).tolist()
    [True, False, True]
    """
    return codes <= _ARM_MASK

CROSSED = 1 << 20
"""The slice number of a **crossover cell** (above every dimension's): per arm, the users
exposed to more than one arm whose first exposure was in that arm, each with their totals
over every list of the experiment (:func:`~tracker.rollup.aggregate.with_crossed`). Added
to its arm's users, it gives the intent-to-treat population (every user in the arm of
their first exposure), which the report compares beside the arm's own
(:mod:`tracker.stats.crossover`); only the cumulative view holds it."""

FIRST_ARM = "(first arm)"
"""Their ``slice``: the arm of the row's ``arm_id`` is the users' first exposure's."""


def crossed(arms: np.ndarray) -> np.ndarray:
    """The crossover cell (:data:`CROSSED`) of each arm's cell code.

    >>> is_crossed(crossed(np.array([7]))).tolist(), assignment_of(crossed(np.array([7])))
    ([True], array([7]))
    """
    return arms | CROSSED << ARM_BITS


def is_crossed(codes: np.ndarray) -> np.ndarray:
    """Per cell code: whether it is a crossover cell."""
    return (codes >> ARM_BITS) == CROSSED


KEY = "arm_id"
"""The column naming a cell in the tables the report reads."""

SLICES_PER_DIMENSION = 128
"""Slice numbers per dimension: its levels (at most 100), ``(none)`` and ``(other)``."""

CELL_PREFIX = "cell"
""":meth:`Cells.place`'s columns: ``cell`` (the whole arm), ``cell:<dimension>`` (a slice)."""


@dataclass(frozen=True)
class Cells:
    """An experiment's cells, in the order the report lists them: its arms, then each
    dimension's slices of every arm (their levels: ``info.levels``)."""

    codes: tuple[int, ...]
    logged: Mapping[str, int]
    """The cell of a served list by the arm key its log row holds (what the lake keeps)."""
    slices: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    """(dimension, value) by slice number (a code's bits above :data:`ARM_BITS`)."""
    levels: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def of(cls, info: ExperimentInfo) -> Cells:
        too_high = [arm.key for arm in info.arms if arm.id > _ARM_MASK]
        if too_high:
            raise TrackerError(f"arm ids must stay below 2**{ARM_BITS} to name cells; "
                               f"{', '.join(too_high)} of {info.key!r} do not")
        arms = tuple(arm.id for arm in info.arms)
        slices = {}
        shut = closed(info)
        for at, (name, values) in enumerate(sorted(info.levels)):
            for n, value in enumerate((NONE, OTHER, *sorted(values)), 1):
                if not (name in shut and value in (NONE, OTHER)):
                    slices[at * SLICES_PER_DIMENSION + n] = (name, value)
        codes = arms + tuple(arm | number << ARM_BITS for number in slices for arm in arms)
        return cls(codes, {arm.key: arm.id for arm in info.arms}, slices,
                   tuple(sorted(info.levels)))

    @property
    def crossed(self) -> tuple[int, ...]:
        """The crossover cells (:data:`CROSSED`), one per arm, in the arms' order."""
        return tuple(crossed(np.array(list(self.logged.values()), dtype=np.int64)).tolist())

    @property
    def keys(self) -> tuple[str, ...]:
        """The dimensions whose values :meth:`place` reads."""
        return tuple(name for name, _ in self.levels)

    def place(self, lists: pa.Table) -> pa.Table:
        """Served lists as the database's log read them (their arm's id in ``arm``, or their
        whole arm's cell in ``cell``; the values of :attr:`keys` in ``slice:<dimension>``),
        with the cells each falls in instead: ``cell`` (its arm), and per dimension
        ``cell:<dimension>`` (its slice of the arm) (int64)."""
        named = "arm" if "arm" in lists.column_names else CELL_PREFIX
        arm = lists[named].cast(pa.int64())
        at = lists.column_names.index(named)
        placed = lists.set_column(at, CELL_PREFIX, arm)
        arms = arm.to_numpy()
        for d, (name, values) in enumerate(self.levels):
            column = slice_column(name)
            number = self._numbers(placed[column], values) + d * SLICES_PER_DIMENSION
            placed = placed.drop_columns([column]).append_column(
                f"{CELL_PREFIX}:{name}", pa.array(arms | number << ARM_BITS, pa.int64()))
        return placed

    @staticmethod
    def _numbers(found: pa.ChunkedArray, values: tuple[str, ...]) -> np.ndarray:
        """Each list's slice number within its dimension: 1 (none), 2 (other), 3... (its
        level, in sorted order)."""
        level = pc.index_in(found, value_set=pa.array(sorted(values), pa.string()))
        number = pc.fill_null(pc.add(level, 3), 2).to_numpy(zero_copy_only=False)
        missing = found.is_null().to_numpy(zero_copy_only=False)
        return np.where(missing, 1, number).astype(np.int64)

    @staticmethod
    def matrix(lists: pa.Table) -> np.ndarray:
        """The cells of placed lists (:meth:`place`), a column per cell a list falls in:
        (lists, 1 + dimensions), int64."""
        names = [n for n in lists.column_names
                 if n == CELL_PREFIX or n.startswith(CELL_PREFIX + ":")]
        return np.column_stack([lists[n].to_numpy() for n in names]).astype(np.int64)

    def of_keys(self, keys: pa.Array | pa.ChunkedArray) -> pa.Array:
        """The cells of served lists from what their lake rows hold (today the arm key;
        null: in no cell of the experiment, an arm it does not declare)."""
        at = pc.index_in(keys, value_set=pa.array(list(self.logged), pa.string()))
        return pc.take(pa.array(list(self.logged.values()), pa.int64()), at)

    def stored(self, code: int) -> dict[str, int | str]:
        """The key columns of cell ``code`` (or of :data:`WHOLE`) in the report's tables:
        its arm, and its slice (``""`` and ``""`` for the whole arm)."""
        number = int(code) >> ARM_BITS
        segment, value = (WHOLE_ARM, WHOLE_ARM) if not number else \
            (CROSSOVER, FIRST_ARM) if number == CROSSED else self.slices[number]
        return {KEY: int(code) & _ARM_MASK, "segment": segment, "slice": value}

    def code(self, row: Mapping) -> int:
        """The code of the cell a stored row names (:meth:`stored`'s inverse)."""
        if not row.get("segment"):
            return int(row[KEY])
        if row["segment"] == CROSSOVER:
            return int(crossed(np.array([int(row[KEY])]))[0])
        number = self._numbered.get((row["segment"], row["slice"]))
        if number is None:
            raise StaleState(f"a stored row names the slice {row['slice']!r} of "
                             f"{row['segment']!r}, which the levels do not hold")
        return int(row[KEY]) | number << ARM_BITS

    @cached_property
    def _numbered(self) -> dict[tuple[str, str], int]:
        """Slice numbers by (dimension, value): :attr:`slices` inverted."""
        return {named: number for number, named in self.slices.items()}

    def coded(self, rows: Iterable[tuple[Mapping, T]]) -> dict[int, T]:
        """Stored ``(key columns, value)`` rows by cell code."""
        return {self.code(key): value for key, value in rows}

    def keyed(self, values: Mapping[int, T]) -> list[tuple[dict[str, int | str], T]]:
        """``(key columns, value)`` rows of values by cell code, in code order."""
        return [(self.stored(code), value) for code, value in sorted(values.items())]
