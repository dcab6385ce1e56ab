"""The cumulative pass (step 3 of :mod:`tracker.rollup.engine`): each user's mean over all
their impressions from the first day through day D, for every D from the first day a run
recomputed, in the run's last transaction.

The cumulative units and exposure of a day are those of the day before plus the day's: the
pass starts from the stored cumulative rows of the day before and reads one daily row per
day after it, whatever the history (and not even that for the days the run just computed,
whose unit totals it still holds).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date

import numpy as np
import pyarrow as pa
import sqlalchemy as sa

from tracker.rollup import covariates as cuped
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.exposure import Exposure, catalog_size
from tracker.rollup.outcomes import Layout
from tracker.rollup.published import View, insert_stats, stats_rows
from tracker.rollup.summary import Progress
from tracker.store import results
from tracker.store.experiments import ExperimentInfo


@dataclass
class Running:
    """The cumulative state through the last day passed: unit totals, exposure per arm (arm
    0: the catalog), and whether any day so far was provisional."""

    totals: UnitTotals
    exposure: dict[int, Exposure]
    provisional: bool = False
    covariates: cuped.UserCovariates | None = None  # CUPED's, None when off


def recompute_cumulative(conn: sa.Connection, info: ExperimentInfo, since: date, now_us: int,
                         progress: Progress | None = None,
                         recent: dict[date, UnitTotals | None] | None = None,
                         declared: pa.Array | None = None,
                         covariates: cuped.UserCovariates | None = None) -> None:
    """Replace the cumulative rows of every day from ``since`` on (``recent``: unit totals
    of days just computed, which need not be read back; ``declared``: the declared
    catalog; ``covariates``: CUPED's per-user covariates, whose sums are written too)."""
    layout = Layout.for_cutoffs(list(info.cutoffs))
    days = results.known_days(conn, info.id)
    if not days:
        return
    results.delete_cumulative(conn, info.id, since)
    before = [d for d, _, _ in days if d < since]
    running = _start(conn, info, before[-1] if before else None, layout)
    running.covariates = covariates
    cuped.delete_cumulative(conn, info.id, since)
    running.provisional = any(computed < closes for day, closes, computed in days
                              if day < since)
    total = sum(1 for d in days if d[0] >= since)
    for done, (day, closes, computed) in enumerate((d for d in days if d[0] >= since), 1):
        running.provisional |= computed < closes
        _add_day(conn, info, day, running, layout, recent or {})
        view = View(info, day, True, running.provisional or now_us < closes)
        # the experiment's first day: its cumulative totals are its daily ones (one object)
        own = running.totals is (recent or {}).get(day)
        _write_day(conn, view, running, layout, declared, own)
        if progress:
            progress("cumulative", done, total, day)
    cuped.settle(conn, info, running.totals, running.covariates)


def _start(conn: sa.Connection, info: ExperimentInfo, previous: date | None,
           layout: Layout) -> Running:
    """The stored cumulative state of the day ``previous`` (None: an empty one)."""
    if previous is None:
        return Running(UnitTotals.empty(len(layout)), {})
    cutoffs = list(info.cutoffs)
    stored = results.units(conn, info.id, previous, True)
    totals = UnitTotals.decode(stored, layout) if stored else UnitTotals.empty(len(layout))
    exposed = results.exposure(conn, info.id, previous, True)
    return Running(totals, {arm: _decode(v, arm, cutoffs) for arm, v in exposed.items()})


def _add_day(conn: sa.Connection, info: ExperimentInfo, day: date, running: Running,
             layout: Layout, recent: dict[date, UnitTotals | None]) -> None:
    """Add one day's daily units and exposure to the running state."""
    if day in recent:  # just computed: not read back
        today = recent[day]
    else:
        daily = results.units(conn, info.id, day, False)
        today = None if daily is None else UnitTotals.decode(daily, layout)
    if today is not None:
        running.totals = UnitTotals.added([running.totals, today], len(layout)) \
            if running.totals.size else today
    for arm, value in results.exposure(conn, info.id, day, False).items():
        exposure = _decode(value, arm, list(info.cutoffs))
        running.exposure[arm] = running.exposure[arm] + exposure \
            if arm in running.exposure else exposure


def _write_day(conn: sa.Connection, view: View, running: Running, layout: Layout,
               declared: pa.Array | None, own: bool = False) -> None:
    """The cumulative units, exposure and report rows of one day (``own``: its cumulative
    totals are the daily ones the run just computed and wrote, with their CUPED sums)."""
    info, cutoffs = view.info, list(view.info.cutoffs)
    # the units encoded (Arrow and zstd, which release the GIL) in a thread while the
    # statistics and CUPED's sums are computed from the same totals in this one
    with ThreadPoolExecutor(max_workers=1) as aside:
        encoding = None if own else aside.submit(running.totals.encode, layout)
        results.insert_exposure(conn, info.id, view.day, True,
                                [(arm, e.encode(cutoffs if arm else []))
                                 for arm, e in sorted(running.exposure.items())])
        seen = running.exposure[0].items if 0 in running.exposure else \
            np.empty(0, dtype=object)
        arms = {arm: e for arm, e in running.exposure.items() if arm}
        insert_stats(conn, stats_rows(view, running.totals, layout, arms,
                                      catalog_size(seen, declared)))
        if own and running.covariates is not None:
            cuped.copy_daily_sums(conn, info.id, view.day)  # the same sums, not again
        else:
            cuped.write_sums(conn, info, view.day, True, running.totals, running.covariates,
                             layout)
        if encoding is None:  # the daily rows this run wrote of the same totals: copied
            results.copy_daily_units(conn, info.id, view.day)
        else:
            results.insert_units(conn, info.id, view.day, True, encoding.result())


def _decode(data: bytes, arm: int, cutoffs: list[int]) -> Exposure:
    """One stored exposure row (arm 0, the catalog, has no counts)."""
    return Exposure.decode(data, cutoffs if arm else [])
