"""Item exposure per cell, merged and measured in Arrow and numpy.

A cell's exposure is its served items (distinct ids, an Arrow string array sorted as UTF-8
bytes: ids stay in Arrow from the query to the stored row, never Python strings) with, per
cutoff k, the number of lists that held the item in their top k. Days merge by adding counts
item by item, so the cumulative exposure of day D is that of the previous day plus day D's:
one row per cell and day is read, whatever the history. The catalog is the same structure
without counts.
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
from tracker.rollup.codes import sorted_codes


@dataclass(frozen=True)
class Exposure:
    items: pa.Array  # item ids (strings), sorted, unique; any sequence of str is taken
    counts: np.ndarray  # int64 (items, cutoffs)

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", strings(self.items))

    @classmethod
    def empty(cls, width: int) -> Exposure:
        return cls(pa.array([], pa.string()), np.zeros((0, width), dtype=np.int64))

    @classmethod
    def of(cls, items, counts: np.ndarray) -> Exposure:
        """Sum the counts of repeated items and sort by item id (UTF-8 bytes)."""
        items = strings(items)
        counts = np.asarray(counts, dtype=np.int64)
        if counts.ndim != 2:  # a column of a single cutoff
            counts = counts.reshape(len(items), -1)
        uniques, codes = sorted_codes(items)
        summed = np.zeros((len(uniques), counts.shape[1]), dtype=np.int64)
        for j in range(counts.shape[1]):  # a loop over cutoffs, not over items
            summed[:, j] = np.bincount(codes, weights=counts[:, j], minlength=len(uniques))
        return cls(uniques, summed)

    def __add__(self, other: Exposure) -> Exposure:
        return Exposure.of(pa.concat_arrays([self.items, other.items]),
                           np.concatenate((self.counts, other.counts)))

    def encode(self, cutoffs: Sequence[int]) -> memoryview:
        """A ``rollup_exposure`` value (``exposure/1`` of :mod:`tracker.rollup.state`): the
        items and a ``top@k`` column per cutoff (none for the catalog)."""
        data = {"item_id": self.items}
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
        return cls(table["item_id"], counts)


def strings(values) -> pa.Array:
    """``values`` (an Arrow array or chunked array of strings, or a sequence of str) as one
    Arrow string array.

    >>> strings(["b", "a"]).to_pylist(), strings(pa.chunked_array([["x"], ["y"]])).type
    (['b', 'a'], DataType(string))
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if not isinstance(values, pa.Array):
        values = pa.array(np.asarray(values, dtype=object), type=pa.string())
    return values if values.type == pa.string() else values.cast(pa.string())


def catalog_size(seen: pa.Array, declared: pa.Array | None) -> int:
    """The size of the catalog: the items ``seen`` (distinct ids) and the ``declared`` ones
    (distinct ids, or None when the experiment declares no catalog), counted once.

    >>> catalog_size(pa.array(["a", "z"]), pa.array(["a", "b", "c"]))
    4
    """
    if declared is None or len(declared) == 0 or len(seen) == 0:
        return len(seen) + (0 if declared is None else len(declared))
    inside = pc.is_in(seen, value_set=declared)
    return len(declared) + len(seen) - int(pc.sum(inside).as_py() or 0)


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
