"""The ``exposure_day`` view: per-user metrics by days since each user's first exposure.

A user's **first exposure day** in an experiment is the first reporting day with a unit row
of theirs (an impression of the experiment, in any arm); a unit row of day D then belongs to
exposure day e = D − first. The view's statistics for (cell, e) are the sufficient statistics
of ``rollup_metric``'s per-user metrics over the (user, D) units with D − first = e: a user
counts once per exposure day on which they were served (users who did not come back that
day are not in it), with their mean over that day's impressions; crossover users of a day
are left out of that day as in the daily view. Set-level metrics (coverage, Gini, entropy)
describe a cell's lists of a calendar day and have no exposure-day value.

Stored in the run's last transaction (:func:`publish_exposure_days`, after the daily rows):

- the users first seen on each day (``first_seen/1``: one ``user_id`` string column,
  self-describing as the formats of :mod:`tracker.rollup.state`), in the engine's store
  (:mod:`tracker.rollup.stores`: ``rollup_first_seen``, or a Spark state directory);
- ``rollup_exposure_day``: per calendar day, the cells' statistics of every exposure day the
  day holds; :func:`tracker.store.computed.exposure_day_table` adds them up over days.

A run that recomputed days from D on rebuilds both tables from D on (a late impression on an
early day can move a user's first day, hence every later day of theirs), from the stored
daily unit rows and the first-seen users of the days before D: the work follows the days
from D on, as the cumulative pass does, never the raw logs. When the days before D lack
their first-seen users (a database upgraded to the schema that added them, a state written
in another format) both are rebuilt from the first day. One code for both engines.
Incremental runs and ``--full`` give the same rows (tests check it).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup.aggregate import UnitTotals, cell_stats, metric_rows
from tracker.rollup.cells import Cells
from tracker.rollup.outcomes import Layout
from tracker.rollup.stores import DatabaseStore, Store
from tracker.store import bulk, results
from tracker.store.experiments import ExperimentInfo
from tracker.store.rollup_tables import RollupExposureDay


class FirstSeen:
    """The users seen so far with the ordinal of their first day (grows day by day)."""

    def __init__(self) -> None:
        self._users: list[pa.Array] = []
        self._first: list[np.ndarray] = []
        self._known = pa.array([], type=pa.string())
        self._days = np.empty(0, dtype=np.int64)

    def add(self, day: date, users: pa.Array) -> None:
        """Record ``users`` (distinct, none seen before) as first seen on ``day``."""
        self._users.append(users)
        self._first.append(np.full(len(users), day.toordinal(), dtype=np.int64))
        self._known = None

    def offsets(self, day: date, users: pa.Array) -> tuple[np.ndarray, pa.Array]:
        """Per entry of ``users`` (a day's unit rows), the days since its user's first day
        (0 for users not seen before), and the distinct users not seen before (in order of
        first appearance)."""
        if self._known is None:
            self._known = pa.concat_arrays(self._users) if self._users else pa.array(
                [], type=pa.string())
            self._days = np.concatenate(self._first) if self._first else np.empty(0, np.int64)
        # the day's few users hashed, every user seen probed (not every user seen hashed)
        distinct = pc.unique(users)
        first = np.full(len(distinct), day.toordinal(), dtype=np.int64)
        seen = np.zeros(len(distinct), dtype=bool)
        if len(self._known):
            at = pc.index_in(self._known, value_set=distinct)
            known = pc.is_valid(at).to_numpy(zero_copy_only=False)
            places = at.filter(pa.array(known)).to_numpy(zero_copy_only=False)
            first[places], seen[places] = self._days[known], True
        rows = pc.index_in(users, value_set=distinct).to_numpy(zero_copy_only=False)
        return day.toordinal() - first[rows], distinct.filter(pa.array(~seen))


def publish_exposure_days(conn: sa.Connection, info: ExperimentInfo, since: date | None,
                          recent: Mapping[date, UnitTotals | None], *, rebuild: bool,
                          store: Store | None = None) -> None:
    """Replace the exposure-day rows and first-seen users of every day from ``since`` on
    (None: no day changed), in the run's last transaction; ``rebuild``: forget the
    experiment's rows first. ``recent``: unit totals of days just computed (not read back);
    ``store``: where the first-seen users and daily units are, by default the database's."""
    store = store if store is not None else DatabaseStore(conn, info)
    if rebuild:
        store.delete_first_seen(None)
        _delete_rows(conn, info.id, None)
    if since is None:
        return
    days = results.known_days(conn, info.id)
    stored = store.first_seen(since)
    if set(stored) != {d for d, _, _ in days if d < since}:  # state missing: from day one
        since, stored = (days[0][0] if days else since), {}
    _delete_rows(conn, info.id, since)
    store.delete_first_seen(since)
    seen = FirstSeen()
    for day, users in sorted(stored.items()):
        seen.add(day, users)
    layout = Layout.for_cutoffs(list(info.cutoffs))
    for day, closes, computed in (d for d in days if d[0] >= since):
        totals = recent.get(day)
        totals = store.units(day) if totals is None else totals
        totals = UnitTotals.empty(len(layout)) if totals is None else totals
        offsets, new = seen.offsets(day, totals.users.cast(pa.string()))
        seen.add(day, new)
        store.write_first_seen(day, new)
        rows = day_rows(info, totals, offsets, layout)
        for row in rows:
            row.update(experiment_id=info.id, day=day, provisional=computed < closes)
        bulk.insert_dicts(conn, RollupExposureDay.__table__, rows)


def day_rows(info: ExperimentInfo, totals: UnitTotals, offsets: np.ndarray,
             layout: Layout) -> list[dict]:
    """The statistics rows of one day's unit ``totals`` per exposure day (``offsets``: each
    row's days since its user's first exposure), without experiment, day and provisional."""
    cells = Cells.of(info)
    codes = list(cells.codes)
    rows = []
    for offset in np.unique(offsets):
        pick = np.flatnonzero(offsets == offset)  # a user's rows stay adjacent
        # every row (a first day): the day's own totals, whose statistics are known
        part = totals if pick.size == totals.size else totals.take(pick)
        for row in metric_rows(cell_stats(part, codes), layout, cells):
            del row["kind"]
            rows.append(dict(row, exposure_day=int(offset)))
    return rows


def _delete_rows(conn: sa.Connection, experiment_id: int, since: date | None) -> None:
    """The experiment's exposure-day rows from ``since`` on (None: every day)."""
    where = [RollupExposureDay.experiment_id == experiment_id]
    if since is not None:
        where.append(RollupExposureDay.day >= since)
    conn.execute(sa.delete(RollupExposureDay).where(*where))
