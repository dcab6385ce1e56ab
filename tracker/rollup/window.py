"""The item popularity of the window before each day of a run (what surprisal reads).

Stored per day (``rollup_popularity``) until new rows change it; otherwise the union of the
window's days' distinct (item, user) pairs (:mod:`tracker.rollup.popularity`): stored ones,
those this run already holds (consecutive days share most of their window), and those read
now from the raw logs (handed back to be stored with the day).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import sqlalchemy as sa

from tracker.rollup import queries
from tracker.rollup.days import day_bounds, days_between
from tracker.rollup.popularity import DayPairs, Popularity, window_popularity
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
    day at a time: the cache of pairs is not shared between threads)."""

    def __init__(self, engine: sa.Engine, reader: ArrowReader, info: ExperimentInfo,
                 days: int) -> None:
        self.engine, self.reader, self.info, self.days = engine, reader, info, days
        self._cache: dict[date, DayPairs] = {}  # kept for the window only

    def before(self, day: date) -> WindowPopularity:
        with transaction(self.engine) as conn:
            stored = results.popularity(conn, self.info.id, day, self.days)
            if stored is not None:
                return WindowPopularity(Popularity.decode(stored), {}, False)
            pairs, fresh = self._pairs(conn, day)
        return WindowPopularity(window_popularity(pairs), fresh, True)

    def remember(self, day: date, pairs: DayPairs) -> None:
        """The pairs of ``day``, gathered while it was computed (and stored with it): the
        days after it in this run take them from here."""
        self._cache[day] = pairs

    def _pairs(self, conn: sa.Connection, day: date
               ) -> tuple[list[DayPairs], dict[date, DayPairs]]:
        """The pairs of each of the window's days: from the cache, stored ones, and those
        read now from the raw interactions (also returned apart, to be stored)."""
        first, last = day - timedelta(days=self.days), day - timedelta(days=1)
        for old in [d for d in self._cache if d < first]:
            del self._cache[old]
        missing = [d for d in days_between(first, last) if d not in self._cache]
        stored = results.pairs(conn, self.info.id, missing[0], missing[-1]) if missing else {}
        fresh = {}
        for other in missing:
            if other in stored:
                self._cache[other] = DayPairs.decode(stored[other])
                continue
            table = queries.day_interaction_pairs(self.reader, self.info.id,
                                                  *day_bounds(other, self.info.timezone))
            self._cache[other] = fresh[other] = DayPairs.of(table["item"], table["user"])
        return [self._cache[d] for d in days_between(first, last)], fresh
