"""The users' first exposures among a run's impressions, taken from the days' own reads.

CUPED's covariates follow each user's first exposure: the earliest served of the user's
impressions in the experiment, whenever they were logged (:mod:`tracker.rollup.covariates`);
a run needs it among its impressions (ids in ``(after, through]``). Reading them is a
second pass over every impression of the run; when the run reads a day whole it holds those
rows already. A day's chunks keep, per user, the first exposure among their impressions in
the range (:class:`DayFirsts`, in the day's user codes: a minimum, exact in any chunk
order); the day hands them to the run's :class:`FirstExposures`, which the covariates'
thread waits for.

They stand for the read only when they cover it: when the impressions they counted are
all of the experiment's in the range (:meth:`FirstExposures.covering`, against one count
in the database). A day recomputed for some users only, a row dated outside the range the
rollup takes, a day the retention horizon keeps: the count differs, and the covariates read
the first exposures themselves, as they do when the run reads more than one day whole (the
covariates would otherwise wait for the last day, where they now overlap the days).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup.codes import sorted_codes
from tracker.rollup.plan import Ids, Plan

_NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Firsts:
    """Per user (ids, sorted as :func:`~tracker.rollup.codes.sorted_codes` sorts), the
    served time (µs) of their first exposure."""

    users: pa.Array
    served: np.ndarray


def first_rows(users: np.ndarray, served: np.ndarray) -> np.ndarray:
    """The index of each user's first exposure: the earliest served, the first such row in
    a tie (codes in ``users``), in the order of the codes.

    >>> first_rows(np.array([4, 2, 4, 2]), np.array([1, 9, 7, 8])).tolist()
    [3, 0]
    """
    order = np.lexsort((served, users))  # by user, then served
    ordered = users[order]
    return order[np.r_[True, ordered[1:] != ordered[:-1]]] if order.size else order


class DayFirsts:
    """One day's first exposures per user code, added chunk by chunk (from any thread)."""

    def __init__(self, ids: Ids) -> None:
        self.after, self.through = ids.impressions_after, ids.impressions_through
        self.rows = 0  # the day's impressions in the range
        self._served = np.zeros(0, dtype=np.int64)
        self._lock = threading.Lock()

    def add(self, ids: np.ndarray, users: np.ndarray, served: np.ndarray) -> None:
        """A chunk's impressions (``users``: codes of the day's vocabulary)."""
        inside = np.flatnonzero((ids > self.after) & (ids <= self.through))
        users, served = users[inside], served[inside]
        with self._lock:
            self.rows += inside.size
            if users.size and int(users.max()) >= self._served.size:
                self._served = _grown(self._served,
                                      max(int(users.max()) + 1, 2 * self._served.size))
            np.minimum.at(self._served, users, served)

    def firsts(self, user_ids: pa.Array) -> Firsts:
        """Per user seen (``user_ids[code]``), sorted by id."""
        codes = np.flatnonzero(self._served != _NEVER)
        users = user_ids.take(pa.array(codes))
        order = _by_id(users)
        return Firsts(users.take(pa.array(order)), self._served[codes][order])


class FirstExposures:
    """The run's first exposures as its whole days read them (:meth:`add`), for the
    covariates' thread (:meth:`covering`); :meth:`close` when the days are done."""

    def __init__(self, ids: Ids, days: int) -> None:
        self.ids = ids
        self._days = days  # the days read whole: done once each has added its part
        self._parts: list[Firsts] = []
        self.rows = 0
        self._done = threading.Event()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, plan: Plan, ids: Ids) -> FirstExposures | None:
        """For a run that reads one day whole (None for several: the covariates read the
        first exposures themselves, beside the days)."""
        whole = [d for d, users in plan.days.items() if users is None]
        return cls(ids, len(whole)) if len(whole) == 1 else None

    def day(self) -> DayFirsts:
        return DayFirsts(self.ids)

    def add(self, day: DayFirsts, user_ids: pa.Array) -> None:
        part = day.firsts(user_ids)
        with self._lock:
            self._parts.append(part)
            self.rows += day.rows
            self._days -= 1
            if self._days <= 0:
                self._done.set()

    def close(self) -> None:
        self._done.set()

    def covering(self, impressions: int) -> Firsts | None:
        """Once the days read whole are done: the first exposures, if the impressions
        they counted are the run's ``impressions`` (else None)."""
        self._done.wait()
        with self._lock:
            if self.rows != impressions or not self._parts:
                return None
            if len(self._parts) == 1:
                return self._parts[0]
            users = pa.concat_arrays([p.users for p in self._parts])
            served = np.concatenate([p.served for p in self._parts])
        distinct, codes = sorted_codes(users)
        first = first_rows(codes, served)  # in code order: the users' order
        return Firsts(distinct, served[first])


def _grown(values: np.ndarray, size: int) -> np.ndarray:
    out = np.full(size, _NEVER, dtype=np.int64)
    out[:values.size] = values
    return out


def _by_id(users: pa.Array) -> np.ndarray:
    return pc.array_sort_indices(users).to_numpy()
