"""The cumulative pass (step 3 of :mod:`tracker.rollup.engine`): each user's mean over all
their impressions from the first day through day D, for every D from the first day a run
recomputed, in the run's last transaction. One pass for both engines: they differ only in
where the per-user state lives (a :class:`~tracker.rollup.stores.Store`: the database's
tables, or a Spark state directory); the rows the report reads go into the database either
way.

**A checkpoint and deltas.** One day's cumulative state is stored, the **checkpoint**: the
newest day whose cumulative view is final (every day through it computed after its windows
closed), which no ordinary run recomputes again. It holds each user's totals through that
day, one stored row per user, and the view's exact sums on it
(:class:`~tracker.rollup.deltas.ViewSums`: the cells' statistics, health and CUPED's sums).
The cumulative view of a later day D is the checkpoint's moved by the users of the days
between (:meth:`Running.view`): their rows at the checkpoint retracted and those rows plus
their daily rows since added, in exact sums, so the view is a function of the users' rows
whatever their order, and a run reads and writes only the users its days hold (nightly: the
users of the last few days, not every user seen). When a day turns final the checkpoint
moves to it (:meth:`Running.rebase`); at the end only the users that moved are written.

It is a function of the days, whatever runs computed them: a late list that turns a final
day provisional again moves it back. A run that recomputes from the checkpoint's day or
before (late lists on an old day, an erasure, a new popularity, changed covariates) starts
from nothing and adds the daily rows from the first day: rare, and it reads daily rows,
not the logs. When expired logs took the daily rows of the first days, it starts from the
checkpoint instead, and the users of its days recomputed since move by their change: a day
at or before the checkpoint's sets aside the rows the checkpoint counted when it is
recomputed (:func:`tracker.store.results.delete_day_state`), and the pass moves those users'
totals by the new rows less those (:meth:`Running.revise`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import date, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup import cells
from tracker.rollup import covariates as cuped
from tracker.rollup.aggregate import (
    CellStats,
    HealthCounts,
    UnitTotals,
    cell_stats,
    crossover_mask,
    health,
    with_crossed,
    without_crossed,
)
from tracker.rollup.cells import Cells
from tracker.rollup.deltas import ViewSums, changed_rows, current_sums, health_moved, rows_of
from tracker.rollup.exposure import Exposure, catalog_size
from tracker.rollup.outcomes import Layout
from tracker.rollup.published import View, insert_stats, stats_rows_of
from tracker.rollup.stored_covariates import RunCovariates
from tracker.rollup.stores import Checkpoint, DatabaseStore, Store, encode_users
from tracker.rollup.summary import Progress
from tracker.rollup.user_covariates import UserCovariates
from tracker.store import results
from tracker.store.experiments import ExperimentInfo

log = logging.getLogger(__name__)


def recompute_cumulative(conn: sa.Connection, info: ExperimentInfo, daily: Iterable[date],
                         now_us: int, progress: Progress | None = None,
                         recent: dict[date, UnitTotals | None] | None = None,
                         declared: pa.Array | None = None,
                         refreshed: cuped.Refreshed | None = None,
                         store: Store | None = None) -> date | None:
    """A run's cumulative pass: the cumulative rows of every day from the first of the
    run's days (``daily``) on, or from the first day holding a user whose stored covariates
    changed (``refreshed``: CUPED's, whose sums are written too; the checkpoint's sums are
    moved from those users' old covariates to their new ones, or, when the old ones are
    unknown, the pass starts from nothing); returns the first day rewritten (None: no
    pass; a checkpoint whose sums an older release stored is one, :func:`current_sums`).
    ``recent``: unit totals of days just computed, which need not be read back;
    ``declared``: the declared catalog; ``store``: where the per-user state is, by default
    the database's."""
    since = min(daily, default=None)
    changed = None if refreshed is None else cuped.changed_from(conn, info, refreshed)
    covariates = None if refreshed is None else refreshed.covariates
    moved = None
    if changed is not None:
        since = changed if since is None else min(since, changed)
        if isinstance(covariates, RunCovariates) and covariates.stored is not None:
            old = covariates.stored.subset(covariates.fresh.users)
            moved = (old, covariates.fresh.subset(old.users))
    if since is None:  # nothing new: a pass only for an older release's checkpoint
        found = (store if store is not None else DatabaseStore(conn, info)).checkpoint()
        if found is None or current_sums(found.sums):
            return None
        since = found.day  # from the first day (cumulative_from)
    return cumulative_from(conn, info, since, now_us, progress, recent, declared, covariates,
                           store, restart=changed is not None and moved is None, moved=moved)


def cumulative_from(conn: sa.Connection, info: ExperimentInfo, since: date, now_us: int,
                    progress: Progress | None = None,
                    recent: dict[date, UnitTotals | None] | None = None,
                    declared: pa.Array | None = None,
                    covariates: cuped.UserCovariates | None = None,
                    store: Store | None = None, restart: bool = False,
                    moved: tuple[UserCovariates, UserCovariates] | None = None) -> date:
    """Replace the cumulative rows of every day from ``since`` on (``restart``: from the
    first day, not the checkpoint; ``moved``: the old and new covariates of users whose
    covariates changed, moved in the checkpoint's sums); returns the first day rewritten:
    later than ``since`` only when it lies at or before the checkpoint and expired logs
    took the daily rows a pass from the first day would read (those days keep their rows,
    see :func:`_base`)."""
    store = store if store is not None else DatabaseStore(conn, info)
    layout = Layout.for_cutoffs(list(info.cutoffs))
    days = results.known_days(conn, info.id)
    if not days:
        return since
    keep = _checkpoint(days, now_us)
    horizon = store.horizon()
    frozen = horizon is not None and days[0][0] < horizon
    found = None if restart and not frozen else store.checkpoint()
    if found is not None and not frozen and not current_sums(found.sums):
        # an older release's sums (no crossover cells): every cumulative day again, once
        found, since = None, days[0][0]
    found, since = _base(found, since, keep, frozen)
    if found is not None and (keep is None or keep < found.day):  # frozen: see _base
        keep = found.day
    counted = store.take_counted(None if found is None else found.day)
    results.delete_cumulative(conn, info.id, since)
    store.delete_cumulative(since)
    cuped.delete_cumulative(conn, info.id, since)
    running = Running.start(store, layout, covariates, found, moved)
    if found is not None:  # days in it recomputed since: their users move by the change
        running.revise([(counted[day], (recent or {}).get(day) if day in (recent or {})
                         else store.units(day)) for day in sorted(counted)], keep)
    before = [d for d, _, _ in days if d < since]
    running.exposure = store.exposure(before[-1], True) if before else {}
    running.provisional = any(computed < closes for day, closes, computed in days
                              if day < since)
    for day in (d for d in before if running.after(d)):  # replayed onto the base
        running.add(day, store.units(day), keep)
    ahead = [d for d in days if d[0] >= since]
    for done, (day, closes, computed) in enumerate(ahead, 1):
        running.provisional |= computed < closes
        running.add(day, (recent or {}).get(day) if day in (recent or {}) else
                    store.units(day), keep)
        for cell, exposure in store.exposure(day, False).items():
            running.exposure[cell] = running.exposure[cell] + exposure \
                if cell in running.exposure else exposure
        view = View(info, day, True, running.provisional or now_us < closes)
        _write_day(conn, store, view, running, declared)
        if progress:
            progress("cumulative", done, len(ahead), day)
    running.save(keep)
    store.settle(covariates)
    return since


def _base(found: Checkpoint | None, since: date, keep: date | None, frozen: bool
          ) -> tuple[Checkpoint | None, date]:
    """Where the pass starts: the stored checkpoint when it lies before ``since`` and not
    after ``keep`` (the day the checkpoint is to be), else nothing (every day from the
    first), and the first day it rewrites. When ``frozen`` daily rows make a pass from the
    first day impossible, it starts from the checkpoint whatever ``keep`` (which the caller
    then raises to the checkpoint's day: it cannot move back) and rewrites the days after it
    only (the days up to it keep their cumulative rows, as days before the retention
    horizon keep theirs; the users of those recomputed move in the checkpoint:
    :meth:`Running.revise`)."""
    if found is None:
        return None, since
    if frozen:
        if found.day >= since:
            log.warning("cumulative rows through %s kept: the daily rows before the "
                        "retention horizon that a pass from the first day reads have "
                        "expired", found.day)
        return found, max(since, found.day + timedelta(days=1))
    if keep is None or found.day > keep or found.day >= since:
        return None, since
    return found, since


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


class Running:
    """The cumulative state while the pass goes through the days: the view's exact sums
    through the last day added (moved in place by each day's users), and the totals through
    it of every user looked up (a day's users, from the stored checkpoint the first time);
    on the checkpoint's day, a copy of what the checkpoint keeps."""

    def __init__(self, store: Store, layout: Layout, covariates: cuped.UserCovariates | None,
                 day: date | None, sums: ViewSums, stored: bool) -> None:
        self.store, self.layout, self.covariates = store, layout, covariates
        self.day, self.sums = day, sums  # the base: the stored checkpoint's (None: nothing)
        self.stored = stored  # the store holds the base's rows of users not looked up
        self.rows = UnitTotals.empty(len(layout))  # users looked up: totals through now
        self.looked = pa.array([], type=pa.string())
        self.moved = pa.array([], type=pa.string())  # users of the days through the keep
        self.kept: tuple[date, bytes, UnitTotals] | None = None  # the new checkpoint
        self.tail = pa.array([], type=pa.string())  # users of the days after the keep
        self.tail_old: list[UnitTotals] = []  # their totals on the keep's day
        self.exposure: dict[int, Exposure] = {}
        self.provisional = False
        self.unsaved = False  # the base's sums were computed here, not read
        self.firsts: dict[str, int] = {}  # crossover users' first cells, looked up once
        # after expired logs, a stored crossover row's arm stands (its exposure may be gone)
        self.expired = store.horizon() is not None

    @classmethod
    def start(cls, store: Store, layout: Layout, covariates: cuped.UserCovariates | None,
              found: Checkpoint | None,
              moved: tuple[UserCovariates, UserCovariates] | None = None) -> Running:
        """From the checkpoint ``found`` (None: from nothing); ``moved``: users' old and
        new covariates, moved in its CUPED sums."""
        empty = ViewSums(layout, covariates is not None)
        if found is None:
            return cls(store, layout, covariates, None, empty, stored=False)
        sums = None if found.sums is None else ViewSums.decode(found.sums, layout,
                                                                covariates is not None)
        computed = sums is None
        running = cls(store, layout, covariates, found.day, empty if computed else sums,
                      stored=True)
        if computed:  # upgraded, or another CUPED setting: once, from every user
            every = store.checkpoint_rows(None)
            running._keep_first(every)
            derived = running._crossing(without_crossed(every))
            empty.move(UnitTotals.empty(len(layout)), derived, _of(covariates, derived))
            crossed = pc.unique(derived.users.filter(cells.is_crossed(derived.cells)))
            if len(crossed):  # their crossover cells, which the stored rows may lack
                running.rows = rows_of(derived, crossed)
                running.looked = running.moved = crossed.cast(pa.string())
        elif moved is not None and sums.cuped is not None and len(moved[0].users):
            sums.recovariate(store.checkpoint_rows(moved[0].users), *moved)
        running.unsaved = computed or moved is not None
        return running

    def after(self, day: date) -> bool:
        """Whether ``day``'s daily rows are not in the base."""
        return self.day is None or day > self.day

    def add(self, day: date, daily: UnitTotals | None, keep: date | None) -> None:
        """Add a day's daily rows: its users' totals move on, and the view's sums by their
        change; on ``keep``'s day, what the checkpoint keeps is set aside."""
        if daily is not None and daily.size:
            users = pc.unique(daily.users).cast(pa.string())
            old = self._current(users)
            self._keep_first(old)
            base = without_crossed(old)
            new = self._crossing(UnitTotals.added([base, daily], len(self.layout))
                                 if base.size else daily)
            if keep is not None and day <= keep:  # a final day: the exact sums move
                self.sums.move(old, new, _of(self.covariates, new))
                self.moved = _union(self.moved, users)
            else:  # after the keep: its users' totals on the keep's day, for :meth:`view`
                first = pc.invert(pc.is_in(users, value_set=self.tail))
                self.tail_old.append(rows_of(old, users.filter(first)) if old.size else old)
                self.tail = _union(self.tail, users)
            self.rows = self.rows.replacing_users(new) if self.rows.size else new
        if day == keep:
            self.kept = (day, self.sums.encode(), rows_of(self.rows, self.moved)
                         if self.stored else self.rows)

    def revise(self, changes: list[tuple[UnitTotals, UnitTotals | None]],
               keep: date | None) -> None:
        """Days in the base recomputed since it was stored, as (the rows it counted, the
        rows now) each: the users whose rows changed move to their totals less the old rows
        plus the new (a pass from the first day would add the days again, which the
        expired logs that made it start from the base do not allow; floating-point sums, so
        a user's totals may differ from such a pass in their last bits). A user gone from a
        day was erased, and left the base with the erasure
        (:meth:`~tracker.rollup.stores.DatabaseStore.forget`). On ``keep``'s day, the base's
        own, what the checkpoint keeps is set aside."""
        columns = len(self.layout)
        for old, new in changes:
            users = _changed(old, new)
            if not len(users):
                continue
            current = self._current(users)
            self._keep_first(current)
            revised = self._crossing(_nonzero(UnitTotals.added(
                [without_crossed(current), _negated(rows_of(old, users)), rows_of(new, users)],
                columns)))
            self.sums.move(current, revised, _of(self.covariates, revised))
            self.moved = _union(self.moved, users)
            self.rows = self.rows.replacing_users(revised)
            if keep == self.day:
                self.kept = (self.day, self.sums.encode(), rows_of(self.rows, self.moved))

    def view(self, codes: list[int]) -> tuple[list[CellStats], HealthCounts, pa.Table | None]:
        """The view through the last day added: its cells' statistics, health and CUPED's
        sums. Through the keep, the exact sums rounded once; after it, those plus the
        change of the users of the days since (their rows that changed:
        :func:`~tracker.rollup.deltas.changed_rows`), summed in float in user order (a day
        after the checkpoint is provisional and recomputed until it is final: a rebuild
        sums the same users' same rows in the same order, so it gives the same bits)."""
        stats, state = self.sums.stats.stats(codes), self.sums.health
        sums = self.sums.cuped_table(codes)
        if not len(self.tail):
            return stats, state, sums
        columns = len(self.layout)
        old = UnitTotals.added(self.tail_old, columns) if any(
            t.size for t in self.tail_old) else UnitTotals.empty(columns)
        new = self.rows if len(self.tail) == len(pc.unique(self.rows.users)) else \
            rows_of(self.rows, self.tail)  # the whole totals: what the daily view derived
        state = health_moved(state, health(old), health(new))
        if old.size:  # the rows that move the view (else every row: summed once, shared)
            old, new = changed_rows(old, new)
        moved = [_plus(b, n, o) for b, n, o in zip(
            stats, cell_stats(new, codes), cell_stats(old, codes), strict=True)]
        if sums is not None:
            sums = _plus_table(sums, cuped.covariate_sums(new, self.covariates, self.layout,
                                                          codes),
                               cuped.covariate_sums(old, self.covariates, self.layout, codes))
        return moved, state, sums

    def save(self, keep: date | None) -> None:
        """The checkpoint stored at ``keep`` (None: none): only the users that moved when
        it went on from the stored one."""
        if keep is None:
            self.store.drop_checkpoint()
        elif self.kept is not None:
            day, sums, rows = self.kept
            self.store.write_checkpoint(day, sums, rows, everyone=not self.stored)
        elif self.unsaved:  # the stored day, its sums computed once
            self.store.write_checkpoint(keep, self.sums.encode(),
                                        rows_of(self.rows, self.moved) if len(self.moved)
                                        else UnitTotals.empty(len(self.layout)),
                                        everyone=False)

    def _crossing(self, totals: UnitTotals) -> UnitTotals:
        """``totals`` with their crossover users' crossover cells
        (:func:`~tracker.rollup.aggregate.with_crossed`), each user's first arm read from
        the store's logs once per run."""
        return with_crossed(totals, self._first_cells)

    def _keep_first(self, rows: UnitTotals) -> None:
        """After expired logs (the store has a horizon), the first arm of each user of
        ``rows`` is the one their stored rows name: a crossover user's crossover row's, else
        the one arm of a user in one (their lists before any new one, expired ones
        included); the logs may no longer hold that exposure, and their earliest list left
        could name another arm."""
        if not self.expired or not rows.size:
            return
        alone = ~crossover_mask(rows) & cells.unsliced(rows.cells) & (rows.cells != cells.WHOLE)
        for mask in (alone, cells.is_crossed(rows.cells)):  # a crossover row's arm stands
            at = np.flatnonzero(mask)
            self.firsts.update(zip(rows.users.take(pa.array(at, type=pa.int64())).to_pylist(),
                                   cells.assignment_of(rows.cells[at]).tolist(), strict=True))

    def _first_cells(self, users: pa.Array) -> np.ndarray:
        names = users.to_pylist()
        wanted = [u for u in names if u not in self.firsts]
        if wanted:  # a user the logs cannot place is not asked again
            found = self.store.first_cells(wanted)
            self.firsts.update((u, found.get(u, -1)) for u in wanted)
        return np.array([self.firsts.get(u, -1) for u in names], dtype=np.int64)

    def _current(self, users: pa.Array) -> UnitTotals:
        """The totals through now of ``users`` (the base's of a user not looked up yet,
        read from the store once)."""
        if self.stored:
            missing = users.filter(pc.invert(pc.is_in(users, value_set=self.looked)))
            if len(missing):
                found = self.store.checkpoint_rows(missing)
                self.rows = UnitTotals.added([self.rows, found], len(self.layout)) \
                    if self.rows.size else found
                self.looked = _union(self.looked, missing)
        return rows_of(self.rows, users) if self.rows.size else self.rows


def _plus(base: CellStats, new: CellStats, old: CellStats) -> CellStats:
    """``base`` moved by ``new - old``, statistic by statistic."""
    return CellStats(base.cell, *(getattr(base, f) + (getattr(new, f) - getattr(old, f))
                                  for f in ("users", "sum", "sum_sq", "impressions",
                                            "impressions_sq", "ratio_sum", "ratio_sum_sq",
                                            "ratio_cross")))


def _plus_table(base: pa.Table, new: pa.Table, old: pa.Table) -> pa.Table:
    """CUPED's sums ``base`` moved by ``new - old`` (tables of the same cells and rows)."""
    for name in cuped.sum_columns():
        at = base.column_names.index(name)
        base = base.set_column(at, name, pa.array(
            base[name].to_numpy() + (new[name].to_numpy() - old[name].to_numpy())))
    return base


def _of(covariates: cuped.UserCovariates | None, totals: UnitTotals
        ) -> cuped.UserCovariates | None:
    """The covariates of the users of ``totals`` (looked up among few, not every user)."""
    return None if covariates is None else covariates.subset(pc.unique(totals.users))


def _changed(old: UnitTotals, new: UnitTotals | None) -> pa.Array:
    """The users of ``new`` whose rows are not those of ``old`` (byte for byte)."""
    before = dict(encode_users(old))
    return pa.array([user for user, data in ([] if new is None else encode_users(new))
                     if before.get(user) != data], type=pa.string())


def _negated(totals: UnitTotals) -> UnitTotals:
    return UnitTotals(totals.users, totals.cells, -totals.impressions, -totals.sums,
                      -totals.counts)


def _nonzero(totals: UnitTotals) -> UnitTotals:
    """The rows of ``totals`` that hold impressions."""
    rows = np.flatnonzero(totals.impressions != 0)
    return totals if rows.size == totals.size else totals.take(rows)


def _union(a: pa.Array, b: pa.Array) -> pa.Array:
    return pc.unique(pa.concat_arrays([a.cast(pa.string()), b.cast(pa.string())]))


def _write_day(conn: sa.Connection, store: Store, view: View, running: Running,
               declared: pa.Array | None) -> None:
    """The cumulative exposure, report rows and CUPED sums of one day."""
    info, exposure = view.info, running.exposure
    found = Cells.of(info)
    store.write_exposure(view.day, exposure)
    whole = exposure.get(cells.WHOLE)
    seen = whole.items if whole is not None else pa.array([], pa.string())
    exposures = {cell: e for cell, e in exposure.items() if cell != cells.WHOLE}
    stats, state, sums = running.view([*found.codes, *found.crossed])
    # a crossover cell is written when it holds users (most experiments have none)
    empty = {s.cell for s in stats if cells.is_crossed(np.int64(s.cell)) and not s.users.any()}
    if empty:
        stats = [s for s in stats if s.cell not in empty]
        if sums is not None:
            sums = sums.filter(pc.invert(pc.is_in(sums["cell"], value_set=pa.array(
                sorted(empty), pa.int64()))))
    insert_stats(conn, stats_rows_of(view, stats, state, running.layout, exposures,
                                     catalog_size(seen, declared)))
    cuped.insert_sums(conn, info, view.day, True, sums)
