"""The cumulative pass of the Spark rollup: :mod:`tracker.rollup.cumulative`'s pass with the
per-user state in the state directory (:class:`~tracker.spark.state.StateDir`) instead of
``rollup_units`` and ``rollup_exposure``.

The running state (:class:`tracker.rollup.cumulative.Running`) starts from the stored
cumulative state of the last day before ``since`` and adds each later day's daily units and
exposure; each day's rows come from the default engine's own
:func:`~tracker.rollup.published.stats_rows` and are inserted in the caller's transaction.
Only the storage differs from the default engine's pass (``_start``, ``_add_day`` and
``_write_day`` there): the sums, the views and the rows are the same code.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pyarrow as pa

from tracker.rollup import covariates as cuped
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.cells import WHOLE
from tracker.rollup.cumulative import Running
from tracker.rollup.exposure import catalog_size
from tracker.rollup.outcomes import Layout
from tracker.rollup.published import View, insert_stats, stats_rows
from tracker.spark.state import StateDir
from tracker.store import results
from tracker.store.experiments import ExperimentInfo


def cumulative_rows(conn, info: ExperimentInfo, store: StateDir, since: date, now_us: int,
                    recent: dict[date, UnitTotals], declared: pa.Array | None,
                    covariates: cuped.UserCovariates | None = None) -> None:
    """Replace the cumulative rows (database) and state (directory) of every day from
    ``since`` on; ``recent``: daily totals of days just computed (not read back);
    ``covariates``: CUPED's per-user covariates, whose sums are written too."""
    layout = Layout.for_cutoffs(list(info.cutoffs))
    cutoffs = list(info.cutoffs)
    days = results.known_days(conn, info.id)
    results.delete_cumulative(conn, info.id, since)
    cuped.delete_cumulative(conn, info.id, since)
    before = [d for d, _, _ in days if d < since]
    running = Running(UnitTotals.empty(len(layout)), {})
    if before:
        running.totals = store.units(before[-1], True, layout) or running.totals
        running.exposure = store.exposure(before[-1], True, cutoffs)
    running.provisional = any(computed < closes for day, closes, computed in days
                              if day < since)
    for day, closes, computed in (d for d in days if d[0] >= since):
        running.provisional |= computed < closes
        today = recent[day] if day in recent else store.units(day, False, layout)
        if today is not None:
            running.totals = UnitTotals.concat([running.totals, today], len(layout)).reduce() \
                if running.totals.size else today
        for cell, exposure in store.exposure(day, False, cutoffs).items():
            running.exposure[cell] = running.exposure[cell] + exposure \
                if cell in running.exposure else exposure
        store.write_units(day, True, running.totals, layout)
        store.write_exposure(day, True, running.exposure, cutoffs)
        whole = running.exposure.get(WHOLE)
        seen = whole.items if whole is not None else np.empty(0, dtype=object)
        exposures = {cell: e for cell, e in running.exposure.items() if cell != WHOLE}
        view = View(info, day, True, running.provisional or now_us < closes)
        insert_stats(conn, stats_rows(view, running.totals, layout, exposures,
                                      catalog_size(seen, declared)))
        cuped.write_sums(conn, info, day, True, running.totals, covariates, layout)
