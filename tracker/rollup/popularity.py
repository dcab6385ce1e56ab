"""Item popularity for surprisal: distinct users per item over the days before a day.

The popularity of item j for day D is u_j, the number of distinct users who interacted with
j in the ``popularity_days`` reporting days before D, and N the distinct users of any item
in those days (the rule of :func:`tracker.metrics.surprisal`: the log before the day, no
leakage). **The population is the experiment's own audience**: an interaction counts when
the experiment served its user a list on the interaction's reporting day
(:func:`tracker.rollup.queries.day_interaction_pairs`). So one experiment's surprisal never
moves because another team's logs arrived; it depends only on rows dated before the day
(so an incremental run and ``--full`` agree); and a day's pairs depend on that day's rows
only, so they are kept per day. (Counting a user from their first impression on would need,
for every interaction, a lookup of that user's impressions over the whole history.)

Distinct counts do not add up day by day, so each day keeps its set of distinct
(item, user) pairs (:class:`DayPairs`, one ``rollup_pairs`` row); the window's popularity is
the union of a few such sets, computed in numpy, instead of a count over weeks of raw
interactions. A day's pairs are rebuilt only after new rows changed them (interactions of
the day's audience, or impressions served that day).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup import state
from tracker.rollup.codes import distinct, encode


@dataclass(frozen=True)
class DayPairs:
    """The distinct (item, user) pairs of one day's interactions."""

    items: pa.Array  # distinct item ids (strings)
    users: pa.Array  # distinct user ids (strings)
    item_index: np.ndarray  # int32 per pair, into items
    user_index: np.ndarray  # int32 per pair, into users

    @classmethod
    def of(cls, item_ids: pa.ChunkedArray | pa.Array,
           user_ids: pa.ChunkedArray | pa.Array) -> DayPairs:
        """From one (item, user) per interaction (repeats allowed)."""
        (item_index,), items = encode([item_ids])
        (user_index,), users = encode([user_ids])
        width = max(len(users), 1)
        unique = distinct(item_index * width + user_index)
        return cls(items, users, (unique // width).astype(np.int32),
                   (unique % width).astype(np.int32))

    def encode(self) -> memoryview:
        """A ``rollup_pairs`` value: the pairs as two dictionary-encoded string columns
        (``pairs/2`` of :mod:`tracker.rollup.state`)."""
        table = pa.table({
            "item_id": pa.DictionaryArray.from_arrays(pa.array(self.item_index, pa.int32()),
                                                      self.items),
            "user_id": pa.DictionaryArray.from_arrays(pa.array(self.user_index, pa.int32()),
                                                      self.users)})
        return state.write(table, state.PAIRS)

    @classmethod
    def decode(cls, data: bytes) -> DayPairs:
        table = state.read(data, state.PAIRS)
        state.require(table, ["item_id", "user_id"], state.PAIRS)
        item, user = (table[name].combine_chunks() for name in ("item_id", "user_id"))
        return cls(item.dictionary, user.dictionary,
                   item.indices.to_numpy().astype(np.int32),
                   user.indices.to_numpy().astype(np.int32))


@dataclass(frozen=True)
class Popularity:
    """Item popularity over the days before a day: distinct users per item (items never
    interacted with are absent: they count as one user) and N, the distinct users."""

    items: pa.Array  # string ids
    users: np.ndarray  # int64, distinct users of each item
    n_users: int

    @classmethod
    def empty(cls) -> Popularity:
        return cls(pa.array([], type=pa.string()), np.zeros(0, dtype=np.int64), 0)

    def encode(self) -> memoryview:
        """A ``rollup_popularity`` value (``popularity/2`` of :mod:`tracker.rollup.state`)."""
        table = pa.table({"item_id": self.items, "users": pa.array(self.users, pa.int64())})
        return state.write(table, state.POPULARITY, n_users=str(self.n_users))

    @classmethod
    def decode(cls, data: bytes) -> Popularity:
        table = state.read(data, state.POPULARITY)
        state.require(table, ["item_id", "users"], state.POPULARITY)
        return cls(table["item_id"].combine_chunks(),
                   table["users"].to_numpy().astype(np.int64),
                   int(state.metadata(table, "n_users")))

    def ln_users(self, dictionary: pa.Array) -> np.ndarray:
        """ln(users) of each item of ``dictionary`` (0 for items nobody interacted with),
        plus a trailing 0 for padding."""
        out = np.zeros(len(dictionary) + 1)
        if len(self.items) and len(dictionary):
            where = pc.index_in(dictionary, value_set=self.items)
            known = where.is_valid().to_numpy(zero_copy_only=False)
            out[:-1][known] = np.log(self.users[pc.drop_null(where).to_numpy()])
        return out


def window_popularity(days: list[DayPairs]) -> Popularity:
    """Distinct users per item over the union of the days' pairs, and N, the distinct
    users of the union.

    >>> a = DayPairs.of(pa.array(["x", "x", "y"]), pa.array(["u", "v", "u"]))
    >>> b = DayPairs.of(pa.array(["x", "z"]), pa.array(["u", "w"]))
    >>> p = window_popularity([a, b])
    >>> sorted(zip(p.items.to_pylist(), p.users.tolist())), p.n_users
    ([('x', 2), ('y', 1), ('z', 1)], 3)
    """
    days = [d for d in days if d.item_index.size]
    if not days:
        return Popularity.empty()
    item_codes, items = encode([d.items for d in days])
    user_codes, users = encode([d.users for d in days])
    item = np.concatenate([codes[d.item_index] for codes, d in zip(item_codes, days,
                                                                    strict=True)])
    user = np.concatenate([codes[d.user_index] for codes, d in zip(user_codes, days,
                                                                    strict=True)])
    unique = distinct(item * len(users) + user)
    counts = np.bincount(unique // len(users), minlength=len(items))
    present = np.flatnonzero(counts)
    n_users = int(np.count_nonzero(np.bincount(unique % len(users), minlength=len(users))))
    return Popularity(items.take(pa.array(present)), counts[present].astype(np.int64), n_users)
