"""The rows the report reads, built from a day's (or a period's) unit totals and exposure:
``rollup_metric`` (a few per cell and metric, whatever the traffic), ``rollup_health`` and
the day's ``rollup_day`` status. A run holds its days' rows and publishes them in its last
transaction (:func:`publish_daily`), beside the cumulative rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import sqlalchemy as sa

from tracker.rollup.aggregate import (
    CellStats,
    HealthCounts,
    UnitTotals,
    cell_stats,
    health,
    metric_rows,
)
from tracker.rollup.cells import WHOLE, Cells
from tracker.rollup.exposure import Exposure, set_metric_rows
from tracker.rollup.outcomes import Layout
from tracker.store import results
from tracker.store.experiments import ExperimentInfo


@dataclass(frozen=True)
class StatsRows:
    """The rows the report reads of one day and view: ``rollup_metric`` and
    ``rollup_health`` (a few per cell and metric, whatever the traffic)."""

    metrics: list[dict]
    health: list[dict]


@dataclass(frozen=True)
class DayResult:
    """One recomputed day: its unit totals, and the daily rows the report reads with the
    day's ``rollup_day`` status (all None when the day has no impressions)."""

    totals: UnitTotals | None
    stats: StatsRows | None
    status: dict | None

    @classmethod
    def empty(cls) -> DayResult:
        return cls(None, None, None)


@dataclass(frozen=True)
class View:
    """Which rows: an experiment's day, daily or cumulative, and whether provisional."""

    info: ExperimentInfo
    day: date
    cumulative: bool
    provisional: bool

    @property
    def base(self) -> dict:
        return {"experiment_id": self.info.id, "day": self.day, "cumulative": self.cumulative,
                "provisional": self.provisional}


def stats_rows(view: View, totals: UnitTotals, layout: Layout,
               exposures: dict[int, Exposure], catalog: int) -> StatsRows:
    """The metric rows (per-user metrics from ``totals``, set metrics from ``exposures``
    over a catalog of ``catalog`` items) and the health rows of one view."""
    codes = list(Cells.of(view.info).codes)
    return stats_rows_of(view, cell_stats(totals, codes), health(totals), layout, exposures,
                         catalog)


def stats_rows_of(view: View, stats: list[CellStats], state: HealthCounts, layout: Layout,
                  exposures: dict[int, Exposure], catalog: int) -> StatsRows:
    """:func:`stats_rows` of a view's cell statistics and health counts (the cumulative
    view's, from its exact sums: :class:`~tracker.rollup.deltas.ViewSums`)."""
    info, base = view.info, view.base
    cells = Cells.of(info)
    counts = {cell: state.cells.get(cell, (0, 0, 0)) for cell in cells.codes}
    rows = [dict(base, **row) for row in metric_rows(stats, layout, cells)]
    rows += [dict(base, **row) for row in set_metric_rows(
        exposures, catalog, list(info.cutoffs), {cell: n[0] for cell, n in counts.items()},
        cells)]
    health_rows = [dict(base, **cells.stored(cell), users=u, impressions=i, crossover_users=c)
                   for cell, (u, i, c) in counts.items()]
    health_rows.append(dict(base, **cells.stored(WHOLE), users=state.users,
                            impressions=state.impressions,
                            crossover_users=state.crossover_users))
    return StatsRows(rows, health_rows)


def insert_stats(conn: sa.Connection, stats: StatsRows) -> None:
    results.insert_metrics(conn, stats.metrics)
    results.insert_health(conn, stats.health)


def publish_daily(conn: sa.Connection, info: ExperimentInfo, daily: dict[date, DayResult],
                  everything: bool) -> None:
    """Replace the daily rows the report reads by the run's (all of the experiment's rows
    when ``everything``): in the run's last transaction, with the cumulative rows and the
    watermarks, so that the report never reads the daily rows of one run beside the
    cumulative rows of another."""
    if everything:
        results.delete_results(conn, info.id)
    else:
        results.delete_daily_results(conn, info.id, daily)
    for result in daily.values():
        if result.status is not None:
            insert_stats(conn, result.stats)
            results.insert_day(conn, **result.status)
