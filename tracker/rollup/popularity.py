"""Item popularity for surprisal: distinct users per item over a **reference period fixed at
the experiment's start**.

The popularity of item j is u_j, the number of distinct users who interacted with j in the
``popularity_days`` reporting days before the experiment's **first day** (its earliest
reporting day holding a list), and N the distinct users who interacted with any item in
those days: every user of the product counts (before its first day the experiment has no
audience of its own). One popularity serves every day of the experiment, as an offline
evaluation scores a test period against the popularity of its training log
(:func:`tracker.metrics.surprisal`: the log before the lists, no leakage).

Why fixed rather than a window sliding with each day: results follow what happened, never
the order it arrived in, and nothing that happens during the experiment changes it. A late
click dated inside the experiment moves only the day whose lists it answers, where a
sliding window made every one of the ``popularity_days`` days after its own recompute whole
(and the nightly cost grew as the window filled). It changes only when what happened in
the reference period changes: rows dated in it logged late (a backfill) or erased, or lists
backfilled before the first day (which moves the period); the rollup then computes it again
and recomputes every day (:mod:`tracker.rollup.plan`). Stored once per experiment
(``rollup_popularity``), computed by the database (one ``GROUP BY`` over the period).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup import state
from tracker.rollup.days import day_start


@dataclass(frozen=True)
class Reference:
    """The reference period of an experiment whose first day is ``first_day``: the
    ``days`` reporting days before it."""

    first_day: date
    days: int

    @property
    def first(self) -> date:
        """The period's first reporting day."""
        return self.first_day - timedelta(days=self.days)

    def bounds(self, zone: str) -> tuple[int, int]:
        """The period as UTC microseconds ``[start, end)`` in the time zone ``zone``.

        >>> Reference(date(2026, 3, 29), 28).bounds("UTC") == (
        ...     day_start(date(2026, 3, 1), "UTC"), day_start(date(2026, 3, 29), "UTC"))
        True
        """
        return day_start(self.first, zone), day_start(self.first_day, zone)


@dataclass(frozen=True)
class Popularity:
    """Item popularity over a reference period: distinct users per item (items never
    interacted with are absent: they count as one user) and N, the distinct users."""

    items: pa.Array  # string ids
    users: np.ndarray  # int64, distinct users of each item
    n_users: int

    @classmethod
    def empty(cls) -> Popularity:
        return cls(pa.array([], type=pa.string()), np.zeros(0, dtype=np.int64), 0)

    @classmethod
    def of(cls, item_users: pa.Table, n_users: int) -> Popularity:
        """From one row per item (``item``, ``users``: its distinct users) and N, sorted by
        item (two counts of the same interactions are then :meth:`same`)."""
        order = pc.sort_indices(item_users, [("item", "ascending")])
        table = item_users.take(order)
        return cls(table["item"].combine_chunks(),
                   table["users"].to_numpy().astype(np.int64), int(n_users))

    def same(self, other: Popularity) -> bool:
        """Whether ``other`` holds the same counts (both sorted by item, as :meth:`of`
        and :meth:`decode` give them)."""
        return self.n_users == other.n_users and self.items.equals(other.items) and \
            np.array_equal(self.users, other.users)

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

