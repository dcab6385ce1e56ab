"""A provisional day's final pass from its stored state: once its windows close, the day is
computed final without reading its impressions again.

A day computed while provisional keeps its scoring inputs (:mod:`tracker.rollup.provisional`)
and each later run merges the new interactions (ids above the watermark) into them. An id
watermark can skip a row, though: an interaction whose transaction committed after a run
read the highest id, with an id below it, is never above a later watermark. Reading the day
whole from the raw logs at its final pass caught such rows; it also read and scored every
impression again. Here the final pass reads only what a missed row could change:

- **every interaction of the day's windows** (those that occurred in ``[start, end +
  window)``, and those naming one of its impressions, whatever their id: the reads of a
  whole day, :func:`~tracker.rollup.queries.window_interactions` and
  :func:`~tracker.rollup.queries.keyed_interactions`, without the served lists), from which
  the ground truth of every stored impression is **built again** (not merged: a missed row
  is in it). The users whose ground truth differs from the stored one in any (impression,
  item) pair are scored again; every other user's rows stay, which the rebuilt ground truth
  shows to be those of a whole-day read;
- **the count and id range of the day's impressions**: a late impression (the same id
  hazard) makes them differ from the state's, and the day is then read whole (None).

Beyond the memory bound on the day's interactions
(``TRACKER_ROLLUP_CHUNK_CELLS``), the day is read whole instead, in chunks (None).
"""

from __future__ import annotations

from datetime import date

import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup import cells, queries
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.day import DayScores, RunContext, closes_at, store_day
from tracker.rollup.days import day_bounds
from tracker.rollup.exposure import Exposure
from tracker.rollup.provisional import ProvisionalDay
from tracker.rollup.published import DayResult
from tracker.rollup.summary import RollupSummary
from tracker.store import results
from tracker.store.db import transaction
from tracker.store.types import to_micros


def is_due(conn: sa.Connection, experiment_id: int, day: date, now_us: int) -> bool:
    """Whether the plan's rule recomputes ``day`` whole (``computed_at < closes_at <=
    now``): its windows closed since it was computed, or it was marked for recompute
    (:func:`~tracker.store.lifecycle.mark_for_recompute`: a user's rows erased)."""
    return any(computed < closes <= now_us
               for known, closes, computed in results.known_days(conn, experiment_id)
               if known == day)


def final_pass(run: RunContext, day: date, kept: ProvisionalDay, stored: bytes,
               exposed: dict[int, bytes], summary: RollupSummary) -> DayResult | None:
    """The day computed from ``kept`` and every interaction of its windows, replacing its
    units (``stored``) for the users whose ground truth changed; its state dropped when
    the day is final, else kept with the rebuilt ground truth (a day marked for
    recompute). None when it is to be read whole instead (see the module)."""
    info = run.info
    start, end = day_bounds(day, info.timezone)
    extent = kept.extent
    with transaction(run.engine) as conn:
        queries.tune(conn)
        if _impressions(conn, info.id, start, end) != \
                (extent.impressions, extent.first_id, extent.last_id) or \
                queries.count_window_interactions(conn, start, end, run.window_us) > \
                run.settings.rollup_chunk_cells:
            return None
    table = queries.window_interactions(run.reader, info.id, start, end, run.window_us)
    keyed = queries.keyed_interactions(run.reader, info.id, start, end, extent.first_id,
                                       extent.last_id)
    timed = table.filter(pc.equal(table["keyed"], 0)).drop_columns(["keyed"])
    rebuilt = kept.rebuilt(timed, keyed, info.relevance, run.window_us, run.pair_limit)
    if rebuilt is None:  # too heavy to keep: read whole from the logs, the state dropped
        return None
    changed = rebuilt.day.totals_of(rebuilt.changed_users, run.layout, run.cutoffs)
    exposures = {cell: Exposure.decode(data, run.cutoffs)
                 for cell, data in exposed.items() if cell != cells.WHOLE}
    final = closes_at(run, extent) <= to_micros(run.clock)
    merged = DayScores(UnitTotals.decode(stored, run.layout).replacing_users(changed),
                       exposures, rebuilt.day.catalog(),
                       kept=None if final else rebuilt.day.encode(run.cutoffs))
    result = store_day(run, day, extent, merged)
    summary.days_in_part += 1
    summary.users_recomputed += int(rebuilt.changed_users.size)
    summary.truth_pairs_read += int(rebuilt.day.lists.truth.rows.size)
    return result


def _impressions(conn: sa.Connection, experiment_id: int, start: int, end: int
                 ) -> tuple[int, int | None, int | None]:
    """The count, lowest and highest id of the day's impressions (from the (experiment,
    served_at) index)."""
    count, low, high = conn.execute(sa.text(
        "SELECT count(*), min(id), max(id) FROM impression WHERE experiment_id = :experiment "
        "AND served_at >= :start AND served_at < :end"),
        {"experiment": experiment_id, "start": start, "end": end}).one()
    return int(count), None if low is None else int(low), None if high is None else int(high)
