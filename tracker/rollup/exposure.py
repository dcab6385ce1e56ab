"""Item exposure per arm, merged and measured in numpy.

An arm's exposure is its served items (sorted ids) with, per cutoff k, the number of lists
that held the item in their top k. Days merge by adding counts item by item, so the
cumulative exposure of day D is that of the previous day plus day D's: one row per arm and
day is read, whatever the history. The catalog is the same structure without counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup import state
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


def set_metric_values(histogram: np.ndarray, catalog: int) -> tuple[float, float, float]:
    """Coverage, Gini index and entropy (bits) of one arm's item exposure at one k, from the
    histogram of exposures (rows ``(exposure, number of items)``, exposure > 0, ascending)
    and the catalog size; the conventions of :mod:`tracker.metrics.exposure` (``coverage``;
    ``gini_index`` with the catalog's unseen items at exposure 0; ``entropy`` in bits).

    With the m catalog items sorted by exposure x (zeros first), Gini = Σ (2i - m - 1) x_i /
    (m Σx); a group of c items at exposure n occupying ranks r+1..r+c adds n·c·(2r + c - m).

    >>> set_metric_values(np.array([[1, 1], [3, 1]]), catalog=4)  # exposures 0, 0, 1, 3
    (0.5, 0.625, 0.8112781244591328)
    """
    if catalog < 1 or histogram.size == 0:
        return 0.0, 0.0, 0.0
    n = histogram[:, 0].astype(np.float64)
    c = histogram[:, 1].astype(np.float64)
    shown = c.sum()
    total = (n * c).sum()
    before = (catalog - shown) + np.concatenate(([0.0], np.cumsum(c)[:-1]))
    gini = float((n * c * (2 * before + c - catalog)).sum() / (catalog * total))
    share = n / total
    entropy = float(-(c * share * np.log2(share)).sum()) + 0.0
    return float(shown / catalog), gini, entropy


def set_values(exposure: Exposure, column: int, catalog: int) -> tuple[float, float, float]:
    """Coverage, Gini and entropy of one arm at the cutoff of ``column``."""
    values, numbers = np.unique(exposure.counts[:, column], return_counts=True)
    keep = values > 0
    return set_metric_values(np.stack((values[keep], numbers[keep]), axis=1), catalog)


def set_metric_rows(exposures: dict[int, Exposure], catalog: int, cutoffs: list[int],
                    users: dict[int, int]) -> list[dict]:
    """``rollup_metric`` rows of the set-level metrics (coverage, gini, entropy) of every arm
    with users."""
    rows = []
    for arm, arm_users in users.items():
        if not arm_users:
            continue  # an arm without users has no set of lists
        exposure = exposures.get(arm, Exposure.empty(len(cutoffs)))
        for j, k in enumerate(cutoffs):
            values = set_values(exposure, j, catalog)
            for metric, value in zip(("coverage", "gini", "entropy"), values, strict=True):
                rows.append({
                    "arm_id": arm, "metric": metric, "k": k, "kind": "set",
                    "users": arm_users, "sum": value, "sum_sq": value * value,
                    "impressions": 0.0, "impressions_sq": 0.0, "ratio_sum": 0.0,
                    "ratio_sum_sq": 0.0, "ratio_cross": 0.0,
                })
    return rows
