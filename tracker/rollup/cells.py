"""Cells: what every per-user and per-group result of the rollup is keyed by.

A **cell** is a group of users whose statistics the report compares: today an arm of the
experiment; with segments, an arm and the values of the experiment's slices. The rollup
keys a user's totals by (user, cell), and every statistic, health count, exposure and
CUPED sum by cell, as integer **codes**. Only this module knows what a cell is made of:

- which cell a served list falls in (:meth:`Cells.place`, :attr:`Cells.logged`: from what
  the logs hold about the list, today its arm);
- how a cell is named in the tables the report reads (:meth:`Cells.stored`, the key
  columns of ``rollup_metric``, ``rollup_health``, ``rollup_exposure`` and
  ``rollup_covariate_sums``; :meth:`Cells.code`, back);
- which cells a user may be in at once: a user found in two cells of the experiment
  crossed over (seen in two arms), and counts in no cell's statistics.

Code :data:`WHOLE` (0) is the experiment as a whole, in no arm: the health row of the whole
experiment and the exposure row of the catalog. A whole arm's code is its arm's id, so the
codes of stored state written before cells existed are the cells' codes. A slice's cell
keeps its arm's id in its low :data:`ARM_BITS` bits (:func:`assignment_of`) and names its slice
above them, so a user's slices of one arm never make the user a crossover
(:func:`assignment_of`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.errors import TrackerError
from tracker.store.rollup_tables import WHOLE_ARM

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

KEY = "arm_id"
"""The column naming a cell in the tables the report reads."""


@dataclass(frozen=True)
class Cells:
    """An experiment's cells, in the order the report lists them."""

    codes: tuple[int, ...]
    logged: Mapping[str, int]
    """The cell of a served list by the arm key its log row holds (what the lake keeps)."""

    @classmethod
    def of(cls, info: ExperimentInfo) -> Cells:
        too_high = [arm.key for arm in info.arms if arm.id > _ARM_MASK]
        if too_high:
            raise TrackerError(f"arm ids must stay below 2**{ARM_BITS} to name cells; "
                               f"{', '.join(too_high)} of {info.key!r} do not")
        return cls(tuple(arm.id for arm in info.arms), {arm.key: arm.id for arm in info.arms})

    @staticmethod
    def place(lists: pa.Table) -> pa.Table:
        """Served lists as the database's log read them (their arm's id in ``arm``), with
        the cell each falls in (``cell``, int64) instead."""
        at = lists.column_names.index("arm")
        return lists.set_column(at, "cell", lists["arm"].cast(pa.int64()))

    def of_keys(self, keys: pa.Array | pa.ChunkedArray) -> pa.Array:
        """The cells of served lists from what their lake rows hold (today the arm key;
        null: in no cell of the experiment, an arm it does not declare)."""
        at = pc.index_in(keys, value_set=pa.array(list(self.logged), pa.string()))
        return pc.take(pa.array(list(self.logged.values()), pa.int64()), at)

    @staticmethod
    def stored(code: int) -> dict[str, int | str]:
        """The key columns of cell ``code`` (or of :data:`WHOLE`) in the report's tables:
        its arm, and its slice (none yet: the whole arm's)."""
        return {KEY: int(code), "segment": WHOLE_ARM, "slice": WHOLE_ARM}

    @staticmethod
    def code(row: Mapping) -> int:
        """The code of the cell a stored row names (:meth:`stored`'s inverse)."""
        return int(row[KEY])


def coded(rows: Iterable[tuple[Mapping, T]]) -> dict[int, T]:
    """Stored ``(key columns, value)`` rows by cell code."""
    return {Cells.code(key): value for key, value in rows}


def keyed(values: Mapping[int, T]) -> list[tuple[dict[str, int], T]]:
    """``(key columns, value)`` rows of values by cell code, in code order."""
    return [(Cells.stored(code), value) for code, value in sorted(values.items())]
