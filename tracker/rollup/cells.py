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
experiment and the exposure row of the catalog. A cell's code is its arm's id, so the
codes of stored state written before cells existed are the cells' codes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from tracker.store.experiments import ExperimentInfo

WHOLE = 0
"""The code of the experiment as a whole (no cell's): its health, its catalog."""

T = TypeVar("T")

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
    def stored(code: int) -> dict[str, int]:
        """The key columns of cell ``code`` (or of :data:`WHOLE`) in the report's tables."""
        return {KEY: int(code)}

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
