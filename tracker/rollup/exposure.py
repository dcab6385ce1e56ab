"""Item exposure per cell, merged and measured in numpy.

A cell's exposure is its served items (sorted ids) with, per cutoff k, the number of lists
that held the item in their top k. Days merge by adding counts item by item, so the
cumulative exposure of day D is that of the previous day plus day D's: one row per cell and
day is read, whatever the history. The catalog is the same structure without counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.metrics.exposure import (
    coverage_of_histogram,
    entropy_of_histogram,
    gini_of_histogram,
    histogram,
)
from tracker.rollup import state
from tracker.rollup.cells import Cells
from tracker.rollup.codes import factorize


@dataclass(frozen=True)
class Exposure:
    items: np.ndarray  # object array of item ids, sorted, unique
    counts: np.ndarray  # int64 (items, cutoffs)

    @classmethod
    def empty(cls, width: int) -> Exposure:
        return cls(np.empty(0, dtype=object), np.zeros((0, width), dtype=np.int64))

    @classmethod
    def of(cls, items, counts: np.ndarray) -> Exposure:
        """Sum the counts of repeated items and sort by item id."""
        items = np.asarray(items, dtype=object)
        counts = np.asarray(counts, dtype=np.int64).reshape(items.size, -1)
        uniques, codes = factorize(items)
        summed = np.zeros((uniques.size, counts.shape[1]), dtype=np.int64)
        for j in range(counts.shape[1]):  # a loop over cutoffs, not over items
            summed[:, j] = np.bincount(codes, weights=counts[:, j], minlength=uniques.size)
        return cls(uniques, summed)

    def __add__(self, other: Exposure) -> Exposure:
        return Exposure.of(np.concatenate((self.items, other.items)),
                           np.concatenate((self.counts, other.counts)))

    def encode(self, cutoffs: Sequence[int]) -> memoryview:
        """A ``rollup_exposure`` value (``exposure/1`` of :mod:`tracker.rollup.state`): the
        items and a ``top@k`` column per cutoff (none for the catalog)."""
        data = {"item_id": pa.array(self.items, type=pa.string())}
        for j, k in enumerate(cutoffs):
            data[f"top@{k}"] = pa.array(self.counts[:, j], type=pa.int64())
        return state.write(pa.table(data), state.EXPOSURE)

    @classmethod
    def decode(cls, data: bytes, cutoffs: Sequence[int]) -> Exposure:
        """The exposure at ``cutoffs`` (read by name; an absent cutoff raises
        :class:`~tracker.errors.StaleState`)."""
        table = state.read(data, state.EXPOSURE)
        names = [f"top@{k}" for k in cutoffs]
        state.require(table, ["item_id", *names], state.EXPOSURE)
        counts = np.zeros((table.num_rows, len(names)), dtype=np.int64)
        for j, name in enumerate(names):
            counts[:, j] = table[name].to_numpy()
        ids = np.asarray(table["item_id"].to_numpy(zero_copy_only=False), dtype=object)
        return cls(ids, counts)


def catalog_size(seen: np.ndarray, declared: pa.Array | None) -> int:
    """The size of the catalog: the items ``seen`` (distinct ids) and the ``declared`` ones
    (distinct ids, or None when the experiment declares no catalog), counted once.

    >>> catalog_size(np.array(["a", "z"], dtype=object), pa.array(["a", "b", "c"]))
    4
    """
    if declared is None or len(declared) == 0 or seen.size == 0:
        return int(seen.size) + (0 if declared is None else len(declared))
    inside = pc.is_in(pa.array(seen, type=pa.string()), value_set=declared)
    return len(declared) + int(seen.size) - int(pc.sum(inside).as_py() or 0)


def set_values(exposure: Exposure, column: int, catalog: int) -> dict[str, float]:
    """Coverage, Gini and entropy (bits) of one cell at the cutoff of ``column``: the
    kernels of :mod:`tracker.metrics.exposure` over the histogram of its exposure counts
    (the catalog's unseen items at exposure 0)."""
    hist = histogram(exposure.counts[:, column])
    return {"coverage": coverage_of_histogram(hist, catalog),
            "gini": gini_of_histogram(hist, catalog), "entropy": entropy_of_histogram(hist)}


def set_metric_rows(exposures: dict[int, Exposure], catalog: int, cutoffs: list[int],
                    users: dict[int, int], cells: Cells) -> list[dict]:
    """``rollup_metric`` rows of the set-level metrics (coverage, gini, entropy) of every cell
    with users."""
    rows = []
    for cell, cell_users in users.items():
        if not cell_users:
            continue  # a cell without users has no set of lists
        exposure = exposures.get(cell, Exposure.empty(len(cutoffs)))
        for j, k in enumerate(cutoffs):
            for metric, value in set_values(exposure, j, catalog).items():
                rows.append({
                    **cells.stored(cell), "metric": metric, "k": k, "kind": "set",
                    "users": cell_users, "sum": value, "sum_sq": value * value,
                    "impressions": 0.0, "impressions_sq": 0.0, "ratio_sum": 0.0,
                    "ratio_sum_sq": 0.0, "ratio_cross": 0.0,
                })
    return rows
