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

- ``rollup_first_seen``: per day, the users first seen that day (``first_seen/1``: one
  ``user_id`` string column, self-describing as the formats of :mod:`tracker.rollup.state`);
- ``rollup_exposure_day``: per calendar day, the cells' statistics of every exposure day the
  day holds; :func:`tracker.store.computed.exposure_day_table` adds them up over days.

A run that recomputed days from D on rebuilds both tables from D on (a late impression on an
early day can move a user's first day, hence every later day of theirs), from the stored
daily unit rows and the first-seen users of the days before D: the work follows the days
from D on, as the cumulative pass does, never the raw logs. When the days before D lack
their ``rollup_first_seen`` rows (a database upgraded to the schema that added them) both
tables are rebuilt from the first day. Incremental runs and ``--full`` give the same rows
(tests check it).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup import state
from tracker.rollup.aggregate import UnitTotals, cell_stats, metric_rows
from tracker.rollup.cells import Cells
from tracker.rollup.outcomes import Layout
from tracker.store import results
from tracker.store.experiments import ExperimentInfo
from tracker.store.rollup_tables import RollupExposureDay, RollupFirstSeen

FIRST_SEEN = "first_seen/1"


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
        index = pc.index_in(users, value_set=self._known)
        new = pc.is_null(index).to_numpy(zero_copy_only=False)
        found = index.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        first = np.where(new, day.toordinal(), self._days[found] if self._days.size else 0)
        return day.toordinal() - first, pc.unique(users.filter(pa.array(new)))


def publish_exposure_days(conn: sa.Connection, info: ExperimentInfo, since: date | None,
                          recent: Mapping[date, UnitTotals | None], *, rebuild: bool) -> None:
    """Replace the exposure-day rows and first-seen users of every day from ``since`` on
    (None: no day changed), in the run's last transaction; ``rebuild``: forget the
    experiment's rows first. ``recent``: unit totals of days just computed (not read back)."""
    if rebuild:
        _delete(conn, info.id, None)
    if since is None:
        return
    days = results.known_days(conn, info.id)
    stored = _first_seen(conn, info.id, since)
    if set(stored) != {d for d, _, _ in days if d < since}:  # state missing: from day one
        since, stored = (days[0][0] if days else since), {}
    _delete(conn, info.id, since)
    seen = FirstSeen()
    for day, data in sorted(stored.items()):
        seen.add(day, state.read(data, FIRST_SEEN)["user_id"].combine_chunks())
    layout = Layout.for_cutoffs(list(info.cutoffs))
    for day, closes, computed in (d for d in days if d[0] >= since):
        totals = _units(conn, info.id, day, layout, recent)
        offsets, new = seen.offsets(day, totals.users)
        seen.add(day, new)
        conn.execute(sa.insert(RollupFirstSeen).values(
            experiment_id=info.id, day=day,
            data=state.write(pa.table({"user_id": new.cast(pa.string())}), FIRST_SEEN)))
        rows = day_rows(info, totals, offsets, layout)
        for row in rows:
            row.update(experiment_id=info.id, day=day, provisional=computed < closes)
        if rows:
            conn.execute(sa.insert(RollupExposureDay), rows)


def day_rows(info: ExperimentInfo, totals: UnitTotals, offsets: np.ndarray,
             layout: Layout) -> list[dict]:
    """The statistics rows of one day's unit ``totals`` per exposure day (``offsets``: each
    row's days since its user's first exposure), without experiment, day and provisional."""
    codes = list(Cells.of(info).codes)
    rows = []
    for offset in np.unique(offsets):
        pick = np.flatnonzero(offsets == offset)  # a user's rows stay adjacent
        # every row (a first day): the day's own totals, whose statistics are known
        part = totals if pick.size == totals.size else UnitTotals(
            totals.users.take(pa.array(pick)), totals.cells[pick], totals.impressions[pick],
            totals.sums[pick], totals.counts[pick])
        for row in metric_rows(cell_stats(part, codes), layout):
            del row["kind"]
            rows.append(dict(row, exposure_day=int(offset)))
    return rows


def _units(conn: sa.Connection, experiment_id: int, day: date, layout: Layout,
           recent: Mapping[date, UnitTotals | None]) -> UnitTotals:
    totals = recent.get(day)
    if totals is None:
        parts = results.units(conn, experiment_id, day, False)
        totals = UnitTotals.decode(parts, layout) if parts else None
    return UnitTotals.empty(len(layout)) if totals is None else totals


def _first_seen(conn: sa.Connection, experiment_id: int, before: date) -> dict[date, bytes]:
    rows = conn.execute(sa.select(RollupFirstSeen.day, RollupFirstSeen.data).where(
        RollupFirstSeen.experiment_id == experiment_id, RollupFirstSeen.day < before))
    return {day: bytes(data) for day, data in rows}



def forget_first_seen(conn: sa.Connection, experiment_id: int) -> None:
    """Drop the experiment's stored first-seen users (the Spark engine keeps its own in its
    state directory)."""
    _delete_from(conn, RollupFirstSeen, experiment_id, None)


def delete_rows(conn: sa.Connection, experiment_id: int, since: date | None) -> None:
    """The experiment's exposure-day rows from ``since`` on (None: every day)."""
    _delete_from(conn, RollupExposureDay, experiment_id, since)


def insert_rows(conn: sa.Connection, rows: list[dict]) -> None:
    """Store exposure-day rows (:func:`day_rows` with experiment, day and provisional set)."""
    if rows:
        conn.execute(sa.insert(RollupExposureDay), rows)

def _delete(conn: sa.Connection, experiment_id: int, since: date | None) -> None:
    for table in (RollupFirstSeen, RollupExposureDay):
        _delete_from(conn, table, experiment_id, since)


def _delete_from(conn: sa.Connection, table, experiment_id: int, since: date | None) -> None:
    where = [table.experiment_id == experiment_id]
    if since is not None:
        where.append(table.day >= since)
    conn.execute(sa.delete(table).where(*where))
