"""The interactions a provisional day's stored state was built from: the set of their ids,
kept with the state so that its final pass need not read them again
(:mod:`tracker.rollup.final`).

A provisional day's ground truth is built from the interactions read when it is computed
(every interaction of its windows, and those naming one of its impressions) and grows with
the new ones each later run reads by id (:mod:`tracker.rollup.provisional`). An id
watermark can skip a row committed out of id order, and an erasure can remove rows: the
final pass must see the ground truth of the interactions there are then. It reads only
their ids: when they are exactly the ids the state holds, the stored ground truth is the
one a whole read would build (the same rows, merged by the highest grade, which neither
order nor repeats change); else the day's interactions are read whole.

``pairs``: the day's stored popularity pairs were built from these rows too (the day's
whole read wrote them, and no row read since could change them: none occurred during the
day by one of its users, none names an impression). Stored as ``provisional-seen/1``
(:mod:`tracker.rollup.state`): the ids as sorted ranges, which rows logged in time order
make few.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup import state


@dataclass(frozen=True)
class Seen:
    """Sorted distinct interaction ids, and whether the day's stored pairs follow them."""

    ids: np.ndarray  # int64
    pairs: bool

    @classmethod
    def of(cls, arrays, pairs: bool) -> Seen:
        """The ids of ``arrays`` (Arrow or numpy integer arrays, repeats allowed)."""
        return cls(_distinct(arrays), pairs)

    def adding(self, arrays, pairs: bool) -> Seen:
        """With the ids of ``arrays``; ``pairs``: those rows leave the day's pairs as they
        were."""
        return Seen(_distinct([self.ids, *arrays]), self.pairs and pairs)

    def same(self, ids: np.ndarray) -> bool:
        """Whether ``ids`` (sorted, distinct) are exactly these."""
        return ids.size == self.ids.size and bool(np.array_equal(ids, self.ids))

    def encode(self) -> memoryview:
        ids = self.ids
        breaks = np.flatnonzero(np.diff(ids) != 1) + 1
        first = np.r_[0, breaks] if ids.size else np.empty(0, np.int64)
        last = np.r_[breaks - 1, ids.size - 1] if ids.size else np.empty(0, np.int64)
        return state.write(pa.table({"first": pa.array(ids[first], pa.int64()),
                                     "last": pa.array(ids[last], pa.int64())}),
                           state.PROVISIONAL_SEEN, compress=True,
                           pairs="1" if self.pairs else "0")

    @classmethod
    def decode(cls, data: bytes) -> Seen:
        table = state.read(data, state.PROVISIONAL_SEEN)
        state.require(table, ["first", "last"], state.PROVISIONAL_SEEN)
        first, last = table["first"].to_numpy(), table["last"].to_numpy()
        lengths = last - first + 1
        ids = np.repeat(first - np.r_[0, np.cumsum(lengths)[:-1]], lengths) \
            + np.arange(int(lengths.sum()))
        return cls(ids.astype(np.int64), state.metadata(table, "pairs") == "1")


def may_change_pairs(timed: pa.Table, keyed: pa.Table, users: pa.Array, end: int) -> bool:
    """Whether rows read for a provisional day may change its popularity pairs: one that
    occurred before the day's ``end`` by one of its ``users``, or any naming an impression
    (its time is not read)."""
    if keyed.num_rows:
        return True
    during = timed.filter(pc.less(timed["at"], end))
    return bool(during.num_rows) and bool(
        pc.any(pc.is_in(during["user"], value_set=users)).as_py())


def _distinct(arrays) -> np.ndarray:
    parts = [np.asarray(a.to_numpy() if hasattr(a, "to_numpy") and not isinstance(
        a, np.ndarray) else a, dtype=np.int64) for a in arrays]
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)
