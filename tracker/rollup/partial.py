"""A day recomputed for some of its users only: the users whose outcomes new interactions
changed (:mod:`tracker.rollup.plan`), when nothing else of the day changed.

New interactions of a day already computed change the ground truth of some impressions and
nothing else: not the served lists (so not the exposure), not the experiment's popularity
(the plan recomputes whole the days whose impressions changed, and every day when the
popularity did). So the day's
stored units are kept for every other user, and the changed users' impressions are read and
scored again (the same chunks, the same kernels) and replace their rows; the catalog gains
the items of their new ground truth (ground truths only grow with new interactions); the
day's cell statistics are then computed again from the units, which costs a few numpy passes
over one row per user. Every user's rows are still a function of the raw logs, never a
delta: a run killed after writing the day and run again recomputes the same users from the
same rows.

The same holds while the day is provisional: the next day's interactions that answer its
last lists change a few of its users, and those are read again (a benchmark showed that
keeping a provisional day's encoded lists to score them from did not pay: writing the state
of every new day cost more than reading the answered users' lists again).
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup import cells, queries
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.day import DayScorer, DayScores, RunContext, store_day, stored_day
from tracker.rollup.days import day_bounds
from tracker.rollup.plan import WHOLE_DAY_SHARE, Ids
from tracker.rollup.published import DayResult
from tracker.rollup.summary import RollupSummary
from tracker.store import results
from tracker.store.db import transaction


def recompute_users(run: RunContext, day: date, users: frozenset[str], ids: Ids,
                    summary: RollupSummary, impressions: np.ndarray | None = None
                    ) -> DayResult | None:
    """Recompute ``users`` of ``day`` over the stored state of its other users; None when
    the whole day is to be recomputed instead (no stored state, or most of its users).

    ``impressions``: the ids of every impression of ``users`` that day (the plan's), read
    by primary key; without them, the users are selected again in each read through the
    new interactions of ``ids`` (:func:`~tracker.rollup.queries.changed_users`)."""
    start, end = day_bounds(day, run.info.timezone)
    with transaction(run.engine) as conn:
        queries.tune(conn)
        extent = queries.day_extent(conn, run.info.id, start, end)
        stored = results.units(conn, run.info.id, day, False)
        exposed = run.cells.coded(results.exposure(conn, run.info.id, day, False))
        day_wide = queries.count_window_interactions(
            conn, start, end, run.window_us) <= run.settings.rollup_chunk_cells
    if not extent.impressions or stored is None or cells.WHOLE not in exposed:
        return None
    before, exposures, catalog = stored_day(run, stored, exposed)
    if len(users) > WHOLE_DAY_SHARE * _distinct(before.users):
        return None
    only = queries.impressions_in(impressions) if impressions is not None else \
        queries.changed_users(ids.interactions_after, ids.interactions_through, start, end,
                              run.window_us)
    scores = DayScorer(run, day, extent, day_wide, users=only).score(summary)
    merged = DayScores(replaced(before, scores.totals, owned=True), exposures,
                       _union(catalog, scores.catalog))
    result = store_day(run, day, extent, merged)
    summary.days_in_part += 1
    summary.users_recomputed += _distinct(scores.totals.users)
    return result


def replaced(stored: UnitTotals, changed: UnitTotals, *, owned: bool = False) -> UnitTotals:
    """``stored.replacing_users(changed)``: the rows of ``changed``'s users replaced by
    its rows. When ``stored`` is sorted by (user, cell) and holds exactly the (user, cell)
    rows ``changed`` has for its users (a day scored again for some of its users: the same
    impressions, so the same rows), they are overwritten where they are: no sort of every
    user id again, and with ``owned`` (totals the caller just decoded and gives up, with
    nothing :meth:`~UnitTotals.derived` from them yet) no copy of their matrices either:
    ``stored``'s are overwritten. Else
    :meth:`~UnitTotals.replacing_users`."""
    if changed.size == 0:
        return stored
    rows = np.flatnonzero(pc.is_in(stored.users, value_set=changed.users).to_numpy(
        zero_copy_only=False))
    if rows.size != changed.size or not _sorted(stored) or not (
            pc.all(pc.equal(stored.users.take(pa.array(rows)), changed.users)).as_py()
            and np.array_equal(stored.cells[rows], changed.cells)):
        return stored.replacing_users(changed)
    sums, counts, impressions = (a if owned and a.flags.writeable else a.copy(order="F")
                                 for a in (stored.sums, stored.counts, stored.impressions))
    sums[rows], counts[rows] = changed.sums, changed.counts
    impressions[rows] = changed.impressions
    return UnitTotals(stored.users, stored.cells, impressions, sums, counts)


def _sorted(totals: UnitTotals) -> bool:
    """Whether the rows are sorted by (user, cell), each (user, cell) once (as
    :meth:`~UnitTotals.reduce` leaves them)."""
    if totals.size < 2:
        return True
    users = totals.users
    earlier, later = users.slice(0, len(users) - 1), users.slice(1)
    before = pc.less(earlier, later).to_numpy(zero_copy_only=False)
    same = pc.equal(earlier, later).to_numpy(zero_copy_only=False)
    return bool((before | (same & (totals.cells[:-1] < totals.cells[1:]))).all())


def _distinct(users: pa.Array) -> int:
    return len(users.unique()) if len(users) else 0


def _union(stored: pa.Array, new: pa.Array) -> pa.Array:
    """The stored catalog items with the new ones, distinct."""
    if len(new) == 0:
        return stored
    return pa.concat_arrays([stored, new]).unique()
