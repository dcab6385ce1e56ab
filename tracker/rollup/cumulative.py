"""The cumulative pass (step 3 of :mod:`tracker.rollup.engine`): each user's mean over all
their impressions from the first day through day D, for every D from the first day a run
recomputed, in the run's last transaction. One pass for both engines: they differ only in
where the per-user state lives (a :class:`~tracker.rollup.stores.Store`: the database's
``rollup_units`` and ``rollup_exposure``, or a Spark state directory); the rows the report
reads go into the database either way.

The cumulative units of a day are those of the day before plus the day's. One set of them is
stored, a **checkpoint**: the totals through the newest day whose cumulative view is final
(every day through it computed after its windows closed), which no ordinary run recomputes
again. It is a function of the days, whatever runs computed them: a late list that turns a
final day provisional again moves it back (written on the way from the daily rows). A run
starts from the checkpoint before its first day and adds the daily rows of the days between
(none, nightly: the run's first day is the one after the checkpoint), writes the totals of
the new checkpoint only, and drops the old one. A run that recomputes from before the
checkpoint (late lists on an old day, an erasure, a new popularity) starts from the first
day's daily rows: rare, and it reads daily rows, not history in another form.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date

import numpy as np
import pyarrow as pa
import sqlalchemy as sa

from tracker.rollup import cells
from tracker.rollup import covariates as cuped
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.exposure import Exposure, catalog_size
from tracker.rollup.outcomes import Layout
from tracker.rollup.published import View, insert_stats, stats_rows
from tracker.rollup.stores import DatabaseStore, Store
from tracker.rollup.summary import Progress
from tracker.store import results
from tracker.store.experiments import ExperimentInfo


@dataclass
class Running:
    """The cumulative state through the last day passed: unit totals, exposure per cell
    (:data:`~tracker.rollup.cells.WHOLE`: the catalog), and whether any day so far was
    provisional."""

    totals: UnitTotals
    exposure: dict[int, Exposure]
    provisional: bool = False
    covariates: cuped.UserCovariates | None = None  # CUPED's, None when off


def recompute_cumulative(conn: sa.Connection, info: ExperimentInfo, since: date, now_us: int,
                         progress: Progress | None = None,
                         recent: dict[date, UnitTotals | None] | None = None,
                         declared: pa.Array | None = None,
                         covariates: cuped.UserCovariates | None = None,
                         store: Store | None = None) -> None:
    """Replace the cumulative rows of every day from ``since`` on (``recent``: unit totals
    of days just computed, which need not be read back; ``declared``: the declared
    catalog; ``covariates``: CUPED's per-user covariates, whose sums are written too;
    ``store``: where the per-user state is, by default the database's)."""
    store = store if store is not None else DatabaseStore(conn, info)
    layout = Layout.for_cutoffs(list(info.cutoffs))
    days = results.known_days(conn, info.id)
    if not days:
        return
    results.delete_cumulative(conn, info.id, since)
    store.delete_cumulative(since)
    keep = _checkpoint(days, now_us)
    before = [d for d, _, _ in days if d < since]
    running = _start(store, before, layout, since, keep)
    running.covariates = covariates
    cuped.delete_cumulative(conn, info.id, since)
    running.provisional = any(computed < closes for day, closes, computed in days
                              if day < since)
    ahead = [d for d in days if d[0] >= since]
    for done, (day, closes, computed) in enumerate(ahead, 1):
        running.provisional |= computed < closes
        _add_day(store, day, running, layout, recent or {})
        view = View(info, day, True, running.provisional or now_us < closes)
        # the experiment's first day: its cumulative totals are its daily ones (one object)
        own = running.totals is (recent or {}).get(day)
        _write_day(conn, store, view, running, layout, declared, own, keep == day)
        if progress:
            progress("cumulative", done, len(ahead), day)
    store.keep_checkpoint(keep)
    store.settle(running.totals, running.covariates)


def _checkpoint(days: list[tuple[date, int, int]], now_us: int) -> date | None:
    """The day of the checkpoint: the newest day through which every day is final
    (computed after its windows closed, and closed now); None when the first is not. A
    function of the days alone, whichever run computed them."""
    final = None
    for day, closes, computed in days:
        if computed < closes or now_us < closes:
            break
        final = day
    return final


def _start(store: Store, before: list[date], layout: Layout, since: date,
           keep: date | None) -> Running:
    """The cumulative state through the last of the days ``before`` (none: an empty one):
    the stored checkpoint before ``since`` plus the daily rows of the days after it; on
    the way, the checkpoint of ``keep`` when it lies among those days (a day after it
    became provisional again: the checkpoint moves back)."""
    if not before:
        return Running(UnitTotals.empty(len(layout)), {})
    stored = store.checkpoint_day(since)
    if stored is not None and keep is not None and keep < stored:
        stored = None  # not a day the totals may start from: from the first day
    replay = Replay(store, layout, [d for d in before if stored is None or d > stored],
                    None if stored is None else store.units(stored, True))
    while replay.pending:
        day = replay.step()
        if day == keep:
            store.write_checkpoint(day, store.encode(replay.through))
    return Running(replay.through, store.exposure(before[-1], True))


class Replay:
    """The daily rows of ``days`` (in order) added up one day after another onto ``start``,
    as the cumulative pass adds them (the same sums, bit for bit): after each
    :meth:`step`, the day's totals (``daily``) and those through it (``through``)."""

    def __init__(self, store: Store, layout: Layout, days: list[date],
                 start: UnitTotals | None = None) -> None:
        self.store, self.layout, self.days = store, layout, days
        self.daily: UnitTotals | None = None
        self.through = start if start is not None else UnitTotals.empty(len(layout))
        self.done = 0  # days added

    @classmethod
    def of(cls, conn: sa.Connection, info: ExperimentInfo,
           store: Store | None = None) -> Replay:
        """Every rolled-up day of the experiment, from nothing (``store``: where the daily
        rows are, by default the database's)."""
        return cls(store if store is not None else DatabaseStore(conn, info),
                   Layout.for_cutoffs(list(info.cutoffs)),
                   [day for day, _, _ in results.known_days(conn, info.id)])

    @property
    def pending(self) -> bool:
        return self.done < len(self.days)

    def step(self) -> date:
        """Add the next day's daily rows; returns that day."""
        day = self.days[self.done]
        self.done += 1
        self.daily = self.store.units(day, False)
        if self.daily is not None:
            self.through = self.daily if not self.through.size else \
                UnitTotals.added([self.through, self.daily], len(self.layout))
        return day

    def units(self, day: date, cumulative: bool) -> UnitTotals | None:
        """The totals of ``day`` (one of ``days``; asked in day order), daily or cumulative,
        the days up to it added first (None: no such rows)."""
        while self.pending and self.days[self.done] <= day:
            self.step()
        if not cumulative:
            return self.daily if self.done and self.days[self.done - 1] == day else None
        return self.through if self.through.size else None


def _add_day(store: Store, day: date, running: Running, layout: Layout,
             recent: dict[date, UnitTotals | None]) -> None:
    """Add one day's daily units and exposure to the running state."""
    today = recent[day] if day in recent else store.units(day, False)  # just computed: kept
    if today is not None:
        running.totals = UnitTotals.added([running.totals, today], len(layout)) \
            if running.totals.size else today
    for cell, exposure in store.exposure(day, False).items():
        running.exposure[cell] = running.exposure[cell] + exposure \
            if cell in running.exposure else exposure


def _write_day(conn: sa.Connection, store: Store, view: View, running: Running,
               layout: Layout, declared: pa.Array | None, own: bool, checkpoint: bool) -> None:
    """The cumulative exposure and report rows of one day, and its units when it is the
    ``checkpoint`` (``own``: its cumulative totals are the daily ones the run just computed
    and wrote, with their CUPED sums)."""
    info = view.info
    # the units encoded (Arrow and zstd, which release the GIL) in a thread while the
    # statistics and CUPED's sums are computed from the same totals in this one
    with ThreadPoolExecutor(max_workers=1) as aside:
        encoding = None if own or not checkpoint else \
            aside.submit(store.encode, running.totals)
        store.write_exposure(view.day, running.exposure)
        whole = running.exposure.get(cells.WHOLE)
        seen = whole.items if whole is not None else np.empty(0, dtype=object)
        exposures = {cell: e for cell, e in running.exposure.items() if cell != cells.WHOLE}
        insert_stats(conn, stats_rows(view, running.totals, layout, exposures,
                                      catalog_size(seen, declared)))
        if own and running.covariates is not None:
            cuped.copy_daily_sums(conn, info.id, view.day)  # the same sums, not again
        else:
            cuped.write_sums(conn, info, view.day, True, running.totals, running.covariates,
                             layout)
        if checkpoint:  # own: the daily rows this run wrote of the same totals, copied
            store.write_checkpoint(view.day, None if own else encoding.result())
