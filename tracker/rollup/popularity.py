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
interactions. The union of a window, with the last day each pair occurred on
(:class:`WindowPairs`), is kept beside the newest popularity: the next day's window is that
one with the days entering it added and the pairs last seen before it dropped, the same
pairs as the union of its days without reading the days that stay in it. A day's pairs are
rebuilt only after new rows changed them (interactions of the day's audience, or impressions
served that day).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup import state
from tracker.rollup.codes import Vocabulary, distinct, encode


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

    def same(self, other: DayPairs) -> bool:
        """Whether both hold the same (item, user) pairs."""
        if self.item_index.size != other.item_index.size:
            return False
        (mine_i, other_i), _ = encode([self.items, other.items])
        (mine_u, other_u), users = encode([self.users, other.users])
        width = max(len(users), 1)
        return bool(np.array_equal(
            np.sort(mine_i[self.item_index] * width + mine_u[self.user_index]),
            np.sort(other_i[other.item_index] * width + other_u[other.user_index])))

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


_EPOCH = date(1970, 1, 1)


@dataclass(frozen=True)
class WindowPairs:
    """The distinct (item, user) pairs of the days before a day (its popularity window),
    each with the last of those days it occurred on: the next day's window is this one
    advanced (the days entering it added, the pairs last seen before it dropped), which
    equals the union of its days' pairs without reading the days that stay in it. Pairs
    sorted by (item code, user code), each once."""

    day: date  # the day whose window this is (the pairs are of the days before it)
    items: pa.Array  # string ids; the codes index them
    users: pa.Array
    item_index: np.ndarray  # int32 per pair
    user_index: np.ndarray  # int32 per pair
    last: np.ndarray  # int32 per pair: the last day it occurred on, days since 1970-01-01

    @classmethod
    def of(cls, day: date, days: list[tuple[date, DayPairs]]) -> WindowPairs:
        """From the pairs of each day of the window of ``day`` (in day order).

        >>> a = DayPairs.of(pa.array(["x", "y"]), pa.array(["u", "u"]))
        >>> b = DayPairs.of(pa.array(["x"]), pa.array(["u"]))
        >>> w = WindowPairs.of(date(2026, 1, 3), [(date(2026, 1, 1), a), (date(2026, 1, 2), b)])
        >>> w.items.take(pa.array(w.item_index)).to_pylist(), (w.last - w.last.min()).tolist()
        (['x', 'y'], [1, 0])
        """
        item_codes, items = encode([p.items for _, p in days])
        user_codes, users = encode([p.users for _, p in days])
        width = max(len(users), 1)
        keys = [codes_i[p.item_index] * width + codes_u[p.user_index]
                for (_, p), codes_i, codes_u in zip(days, item_codes, user_codes, strict=True)]
        stamps = np.concatenate([np.full(k.size, (d - _EPOCH).days, dtype=np.int32)
                                 for (d, _), k in zip(days, keys, strict=True)] or
                                [np.zeros(0, dtype=np.int32)])
        key = np.concatenate(keys or [np.zeros(0, dtype=np.int64)])
        order = np.argsort(key, kind="stable")  # each pair's days stay in day order
        key, stamps = key[order], stamps[order]
        final = np.r_[key[1:] != key[:-1], True] if key.size else np.zeros(0, dtype=bool)
        return cls._of_keys(day, items, users, key[final], stamps[final])

    @classmethod
    def _of_keys(cls, day: date, items: pa.Array, users: pa.Array, keys: np.ndarray,
                 last: np.ndarray) -> WindowPairs:
        width = max(len(users), 1)
        return cls(day, items, users, (keys // width).astype(np.int32),
                   (keys % width).astype(np.int32), last.astype(np.int32))

    def advanced(self, day: date, days: list[tuple[date, DayPairs]], span: int) -> WindowPairs:
        """The window of ``day``, ``span`` days long (a later day than this one's): these
        pairs with those of ``days`` (every day from this one's day to the day before
        ``day``, in order), less the pairs last seen before the window."""
        items, users = Vocabulary(), Vocabulary()
        items.codes_of(self.items), users.codes_of(self.users)  # codes kept as they are
        width = max(len(self.users), 1)
        keys = self.item_index.astype(np.int64) * width + self.user_index
        last = self.last
        for other, pairs in days:
            item_codes, user_codes = items.codes_of(pairs.items), users.codes_of(pairs.users)
            if max(len(users), 1) != width:  # the same (item, user) order, a wider key
                keys = keys // width * max(len(users), 1) + keys % width
                width = max(len(users), 1)
            new = np.sort(item_codes[pairs.item_index] * width + user_codes[pairs.user_index])
            at = np.searchsorted(keys, new)
            found = at < keys.size
            found[found] = keys[at[found]] == new[found]
            last = last.copy()
            last[at[found]] = (other - _EPOCH).days
            keys = np.insert(keys, at[~found], new[~found])
            last = np.insert(last, at[~found], (other - _EPOCH).days)
        kept = last >= (day - timedelta(days=span) - _EPOCH).days
        return WindowPairs._of_keys(day, items.ids, users.ids, keys[kept], last[kept])

    def popularity(self) -> Popularity:
        """The popularity of the window (that of :func:`window_popularity` over its days)."""
        return _counted(self.items, self.item_index, len(self.users), self.user_index)

    def encode(self) -> memoryview:
        """A ``rollup_popularity.pairs`` value (``window-pairs/1`` of
        :mod:`tracker.rollup.state`): ids no pair uses any more left out."""
        item_index, items = _used(self.item_index, self.items)
        user_index, users = _used(self.user_index, self.users)
        table = pa.table({
            "item_id": pa.DictionaryArray.from_arrays(pa.array(item_index, pa.int32()), items),
            "user_id": pa.DictionaryArray.from_arrays(pa.array(user_index, pa.int32()), users),
            "last_day": pa.array(self.last, pa.int32())})
        return state.write(table, state.WINDOW_PAIRS, compress=True, day=self.day.isoformat())

    @classmethod
    def decode(cls, data: bytes) -> WindowPairs:
        table = state.read(data, state.WINDOW_PAIRS)
        state.require(table, ["item_id", "user_id", "last_day"], state.WINDOW_PAIRS)
        item, user = (table[name].combine_chunks() for name in ("item_id", "user_id"))
        return cls(date.fromisoformat(state.metadata(table, "day")), item.dictionary,
                   user.dictionary, item.indices.to_numpy().astype(np.int32),
                   user.indices.to_numpy().astype(np.int32),
                   table["last_day"].to_numpy().astype(np.int32))


def _used(codes: np.ndarray, ids: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """The ids some code uses (in their order) and the codes renumbered among them."""
    used = np.bincount(codes, minlength=len(ids)) > 0
    return (np.cumsum(used) - 1)[codes].astype(np.int32), ids.filter(pa.array(used))


def _counted(items: pa.Array, item_index: np.ndarray, n_users: int,
             user_index: np.ndarray) -> Popularity:
    """The popularity of distinct (item, user) pairs given as codes."""
    counts = np.bincount(item_index, minlength=len(items))
    present = np.flatnonzero(counts)
    users = int(np.count_nonzero(np.bincount(user_index, minlength=n_users)))
    return Popularity(items.take(pa.array(present)), counts[present].astype(np.int64), users)


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
    return _counted(items, unique // len(users), len(users), unique % len(users))
