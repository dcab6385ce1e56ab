"""The item popularity of the window before each day of a run (what surprisal reads).

Stored per day (``rollup_popularity``) until new rows change it; otherwise counted from the
window's distinct (item, user) pairs (:mod:`tracker.rollup.popularity`): the newest window
before the day advanced by the days entering it, or, without one, the union of every day's
pairs. A day's pairs are stored ones, those this run already holds (consecutive days share
most of their window), or those read now from the raw logs (handed back to be stored with
the day).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import sqlalchemy as sa

from tracker.errors import StaleState
from tracker.rollup import queries
from tracker.rollup.days import day_bounds, days_between
from tracker.rollup.popularity import DayPairs, Popularity, WindowPairs
from tracker.store import results
from tracker.store.arrow import ArrowReader
from tracker.store.db import transaction
from tracker.store.experiments import ExperimentInfo


@dataclass(frozen=True)
class WindowPopularity:
    """The popularity before a day; the pairs read now from the raw logs, and whether the
    popularity itself is new (both to be stored with the day)."""

    popularity: Popularity
    fresh_pairs: dict[date, DayPairs]
    new: bool

    @classmethod
    def unchanged(cls) -> WindowPopularity:
        """For a day whose popularity is stored and stays: nothing to write."""
        return cls(Popularity.empty(), {}, False)


class PopularityWindow:
    """The popularity before each day of one run, in the order the run computes them (one
    day at a time: the cache of pairs is not shared between threads).

    A day's window is the newest window before it (this run's, else the one stored with an
    earlier day's popularity: :class:`~tracker.rollup.popularity.WindowPairs`) advanced by
    the days entering it, whose pairs alone are read; without one within reach, the union
    of every day's pairs. A stored window is only ever kept beside the popularity computed
    from it, so it goes whenever that popularity goes (new rows in its days: the plan drops
    it), and :func:`tracker.rollup.day.write_state` forgets it when a day it holds is given
    other pairs. :meth:`keep` stores the run's newest."""

    def __init__(self, engine: sa.Engine, reader: ArrowReader, info: ExperimentInfo,
                 days: int) -> None:
        self.engine, self.reader, self.info, self.days = engine, reader, info, days
        self._cache: dict[date, DayPairs] = {}  # kept for the window only
        self._latest: WindowPairs | None = None  # the newest window this run computed

    def before(self, day: date) -> WindowPopularity:
        with transaction(self.engine) as conn:
            stored = results.popularity(conn, self.info.id, day, self.days)
            if stored is not None:
                return WindowPopularity(Popularity.decode(stored), {}, False)
            window, fresh = self._window(conn, day)
        self._latest = window
        return WindowPopularity(window.popularity(), fresh, True)

    def remember(self, day: date, pairs: DayPairs) -> None:
        """The pairs of ``day``, gathered while it was computed (and stored with it): the
        days after it in this run take them from here."""
        self._cache[day] = pairs

    def keep(self) -> None:
        """Store the newest window this run computed beside its day's popularity (the
        next run's first day is advanced from it), and forget any other."""
        if self._latest is None:
            return
        data = self._latest.encode()
        with transaction(self.engine, write=True) as conn:
            results.keep_window_pairs(conn, self.info.id, self._latest.day, self.days, data)

    def _window(self, conn: sa.Connection, day: date
                ) -> tuple[WindowPairs, dict[date, DayPairs]]:
        """The window of ``day`` and the pairs read for it from the raw logs."""
        first, last = day - timedelta(days=self.days), day - timedelta(days=1)
        for old in [d for d in self._cache if d < first]:
            del self._cache[old]
        start = self._start(conn, day)
        if start is None:
            pairs, fresh = self._pairs(conn, days_between(first, last))
            return WindowPairs.of(day, pairs), fresh
        pairs, fresh = self._pairs(conn, days_between(start.day, last))
        return start.advanced(day, pairs, self.days), fresh

    def _start(self, conn: sa.Connection, day: date) -> WindowPairs | None:
        """The newest window before ``day`` within its reach: this run's, else a stored
        one (None: none, or one that cannot be read)."""
        if self._latest is not None and self._latest.day < day:
            start = self._latest
        else:
            stored = results.window_pairs(conn, self.info.id, day, self.days)
            try:
                start = None if stored is None else WindowPairs.decode(stored[1])
            except StaleState:  # another format: the union, which stores a new one
                return None
        return start if start is not None and (day - start.day).days <= self.days else None

    def _pairs(self, conn: sa.Connection, days: list[date]
               ) -> tuple[list[tuple[date, DayPairs]], dict[date, DayPairs]]:
        """The pairs of each of ``days``: from the cache, stored ones, and those read now
        from the raw interactions (also returned apart, to be stored)."""
        missing = [d for d in days if d not in self._cache]
        stored = results.pairs(conn, self.info.id, missing[0], missing[-1]) if missing else {}
        fresh = {}
        for other in missing:
            if other in stored:
                self._cache[other] = DayPairs.decode(stored[other])
                continue
            table = queries.day_interaction_pairs(self.reader, self.info.id,
                                                  *day_bounds(other, self.info.timezone))
            self._cache[other] = fresh[other] = DayPairs.of(table["item"], table["user"])
        return [(d, self._cache[d]) for d in days], fresh
