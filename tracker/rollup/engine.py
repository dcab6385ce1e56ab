"""The incremental rollup job: raw logs -> unit-day outcomes -> cell-day statistics.

One run, per experiment:

1. **What changed** (:mod:`tracker.rollup.plan`). The watermarks in ``rollup_state`` are the
   highest impression and interaction ids already taken into account (ids, never event
   times: late rows carry old event times). New impressions touch the days they were served
   on; a new interaction touches a day only where its user has an impression of the
   experiment that it answers (served within the attribution window before it, or the
   impression it names); a change of the experiment's item popularity (surprisal's, over a
   reference period before its first day: :mod:`tracker.rollup.popularity`) touches every
   day. Days computed while still provisional whose windows have closed since, and that
   nothing new touches, are final as they stand (published from their stored rows, no log
   read). Only days that hold impressions are touched, found from
   the distinct hours of the impressions (never the calendar span), and rows dated outside
   the range :mod:`tracker.rollup.days` can place are left out and counted. The lists of
   the days read whole are counted per value of each declared list dimension
   (:mod:`tracker.rollup.levels`): when the values that keep a slice differ from those the
   stored results used, the run recomputes every day instead.
2. **Each touched day** (:mod:`tracker.rollup.day`) is recomputed from the raw logs
   (set-based SQL, then vectorised numpy over bounded chunks of impressions, read ahead
   while scored: :mod:`tracker.rollup.pipeline`); its per-user units and exposure (what the
   cumulative pass reads) are replaced in one write transaction, its cell-level rows (what
   the report reads: a few per cell and metric) are kept for the end. A day only new ground
   truth changed is recomputed for the users it changes, by reading those users'
   impressions again (:mod:`tracker.rollup.partial`).
3. **One last transaction** publishes those daily rows (:mod:`tracker.rollup.published`),
   recomputes the cumulative rows of every day from the first touched one on from the
   unit-day rows (:mod:`tracker.rollup.cumulative`) and the exposure-day rows
   (:mod:`tracker.rollup.exposure_days`), and advances the watermarks if no
   catalog was declared since the run began (compare-and-set on the state's generation).
   CUPED's covariates of the run's new users are read and computed in a thread while the
   days are (:func:`tracker.rollup.covariates.ahead`: their reads mostly wait on the
   database); the last transaction takes them, reads only those of users that thread
   did not see, recomputes the stored users whose pre-period the run's new rows change
   (event time) and then the sums of the days holding them
   (:func:`tracker.rollup.covariates.resum`).

Crash-safe: a run killed at any point leaves the results the report reads, daily and
cumulative, as the previous run left them, and the watermarks where they were; every step is
a deterministic replacement, so the next run produces the tables an uninterrupted run would
have. ``full=True`` forgets everything about the experiment first (the results the report
reads only in the last transaction) and must give the same tables as any sequence of
incremental runs (tests check both).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime

import pyarrow as pa
import sqlalchemy as sa
from threadpoolctl import threadpool_limits

from tracker.config import Settings
from tracker.rollup import covariates, levels, queries, retention, sources
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.cumulative import recompute_cumulative
from tracker.rollup.day import RunContext, finalize_day, recompute_day
from tracker.rollup.days import day_bounds
from tracker.rollup.exposure_days import publish_exposure_days
from tracker.rollup.first_exposures import FirstExposures
from tracker.rollup.job import Done, run_each, targets
from tracker.rollup.lock import HeldLock
from tracker.rollup.partial import recompute_users
from tracker.rollup.plan import Ids, KnownDay, Plan, PopularityPlan, plan_popularity, plan_run
from tracker.rollup.published import DayResult, publish_daily
from tracker.rollup.stores import DatabaseStore
from tracker.rollup.summary import Progress, RollupSummary
from tracker.store import results
from tracker.store.arrow import ArrowReader
from tracker.store.db import transaction
from tracker.store.experiments import ExperimentInfo
from tracker.store.experiments import catalog as declared_items
from tracker.store.types import to_micros

__all__ = ["Progress", "RollupSummary", "run_rollup"]

log = logging.getLogger(__name__)

_KEEP_DAYS = 2  # daily unit totals kept in memory for the cumulative pass


def run_rollup(engine: sa.Engine, settings: Settings, experiment: str | None = None, *,
               full: bool = False, until: date | None = None, now: datetime | None = None,
               progress: Progress | None = None) -> list[RollupSummary]:
    """Roll up one experiment (by key) or every experiment; returns one summary each.

    ``until``: compute days up to this one only; the watermarks then stay where they were,
    so a later unbounded run still sees everything. ``now`` (tests) fixes the clock that
    decides which days are provisional. Raises :class:`~tracker.errors.Busy` when another
    rollup of the named experiment is running.

    Every experiment: one that fails (unreadable state, a bug, another rollup of it running)
    does not stop the others; once they have run, :class:`~tracker.errors.RollupIncomplete`
    names the failed ones and carries the others' summaries (``only_busy`` when each was
    only busy in another rollup, which is not a :class:`~tracker.errors.Busy`). An
    unreachable database
    (:class:`~tracker.errors.StoreUnavailable`) still stops the run at once.
    """
    def run_one(info: ExperimentInfo, lock: HeldLock) -> Done:
        job = _Run(engine, settings, info, lock, full, until, now or datetime.now(UTC),
                   progress, named=experiment is not None)
        summary = job.run()
        return Done(summary, seen=job.seen)

    return run_each(engine, settings, targets(engine, experiment),
                    named=experiment is not None, now=now, run_one=run_one)


@dataclass(frozen=True)
class _Start:
    """Where a run starts: its plan, the ids it will record, the generation it found."""

    plan: Plan
    ids: Ids
    advance_to: results.StateRow
    rebuild: bool
    popularity: PopularityPlan


@dataclass
class _Run:
    """One run of one experiment."""

    engine: sa.Engine
    settings: Settings
    info: ExperimentInfo
    lock: HeldLock
    full: bool
    until: date | None
    clock: datetime
    progress: Progress | None
    named: bool = True  # the run names the experiment (else: a run over every experiment)
    seen: results.Seen | None = None  # the rows the run took into account, once planned
    relevel: bool = False  # the list dimensions' levels changed: every day recomputed

    def run(self) -> RollupSummary:
        started = time.perf_counter()
        summary = RollupSummary(self.info.key, self.full)
        start = self._plan(summary)
        if start is None:  # left (summary.skipped): another engine's, or one it would erase
            return summary
        # what the run rolls up: the rows up to the ids it planned with, and, up to a day
        # only, the lists served before that day's end (the watermarks then stay: "data
        # through" still moves to what it rolled up)
        self.seen = results.Seen(start.ids.impressions_through,
                                 start.ids.interactions_through,
                                 None if self.until is None else
                                 day_bounds(self.until, self.info.timezone)[1])
        plan = start.plan.until(self.until)
        ordered = plan.ordered
        declared = self._declared_catalog() if ordered else None
        # one reader for the days and for the last transaction's covariates (none: no day)
        # (CUPED on: the last transaction reads the new rows that may change covariates)
        with ArrowReader(self.engine) if ordered or self.info.cuped_days else nullcontext() \
                as reader, \
                ThreadPoolExecutor(max_workers=1) as aside:
            # the CUPED covariates of the run's new users, read while the days are
            # computed (their reads wait on the database, the days' scoring on the cores)
            ahead_of = ordered and self.until is None and self.info.cuped_days
            firsts = FirstExposures.of(plan, start.ids) if ahead_of else None
            ahead = aside.submit(covariates.ahead, self.engine, reader, self.info,
                                 start.ids, start.rebuild, firsts) if ahead_of else None
            try:
                daily, recent = self._compute_days(plan, start, declared, summary, reader,
                                                   firsts)
            except BaseException:
                if ahead is not None:
                    ahead.cancel()
                raise
            finally:
                if firsts is not None:
                    firsts.close()  # the thread waits no longer
            summary.days_recomputed = ordered
            advance = self.until is None
            if ordered or advance or start.rebuild:
                self._commit(daily, recent, declared, start, summary, advance, reader,
                             ahead)
        summary.seconds = time.perf_counter() - started
        return summary

    def _plan(self, summary: RollupSummary) -> _Start | None:
        """The plan; on a rebuild the watermarks are reset first (a run killed from then on
        leaves a rebuild to do). None: the experiment is left to the other engine
        (:mod:`tracker.rollup.sources`)."""
        with transaction(self.engine) as conn:  # short: it may hold writers back a moment
            top_impression, top_interaction = results.latest_ids(conn)
        with transaction(self.engine) as conn:
            queries.tune(conn)
            stored = results.load_state(conn, self.info.id)
            if not self._ours(conn, None if stored is None else stored.source, summary):
                return None
            watermarks = None if self.full or self.relevel or stored is None \
                or summary.taken_over else stored.watermarks
            known = [] if watermarks is None else [KnownDay(*d) for d in
                                                    results.known_days(conn, self.info.id)]
            after = watermarks or (0, 0)
            ids = Ids(after[0], top_impression, after[1], top_interaction)
            plan = plan_run(conn, self.info, ids, watermarks is None, known,
                            to_micros(self.clock))
            popularity = plan_popularity(conn, self.engine, self.info, plan, ids,
                                         watermarks is None,
                                         self.settings.rollup_popularity_days)
            # days whose inputs reach before the retention horizon keep their results (a
            # rebuild that would lose them is refused here, before anything changes)
            plan = plan.only(retention.recomputable(
                conn, self.info, plan.touched, rebuild=watermarks is None,
                **({"because": summary.taken_over} if summary.taken_over else {})))
        _count_new(summary, plan)
        if watermarks is None:
            with transaction(self.engine, write=True) as conn:
                generation = results.reset_state(conn, self.info.id, declaration=False,
                                                 source=sources.DATABASE)
                results.clear_state(conn, self.info.id)
        else:
            generation = stored.generation
        found, changed = levels.refresh(self.engine, self.info, plan.read_whole,
                                        rebuild=watermarks is None)
        if changed:  # other slices: every day again, with them
            self.relevel = True
            return self._plan(summary)
        self.info = replace(self.info, levels=tuple(sorted(found.items())))
        return _Start(plan, ids, results.StateRow(top_impression, top_interaction, generation,
                                                  sources.DATABASE),
                      watermarks is None, popularity)

    def _ours(self, conn: sa.Connection, source: str | None, summary: RollupSummary) -> bool:
        """Whether this run rolls the experiment up, given the source of its results:
        another engine's experiment is taken over (rebuilt: ``summary.taken_over`` says
        why) only by a run that names it, and never when the database holds none of its
        lists (:func:`~tracker.rollup.sources.guard_erasure`: refused when named, else
        left)."""
        mine = sources.DATABASE
        summary.skipped = sources.left_alone(source, mine, named=self.named) or \
            sources.guard_erasure(
                self.info.key, source, mine, logged=results.logged(conn, self.info.id),
                rolled_up=bool(results.known_days(conn, self.info.id)), named=self.named,
                way_out="roll it up on Spark, or log its lists into the database first")
        if summary.skipped is not None:
            return False
        summary.taken_over = sources.taken_over(source, mine)
        return True

    def _compute_days(self, plan: Plan, start: _Start, declared: pa.Array | None,
                      summary: RollupSummary, reader: ArrowReader | None,
                      firsts: FirstExposures | None = None
                      ) -> tuple[dict[date, DayResult], dict[date, UnitTotals | None]]:
        """Each day of the plan recomputed, whole or for its changed users; the rows the
        report reads (published at the end), and the unit totals of the last days (for the
        cumulative pass)."""
        ordered, ids = plan.ordered, start.ids
        daily: dict[date, DayResult] = {}
        recent: dict[date, UnitTotals | None] = {}
        if not ordered:
            return daily, recent
        # one BLAS thread: the metric kernels' small matrix products gain nothing from a
        # second one, which only spins and takes a core from the database and the readers
        with threadpool_limits(limits=1, user_api="blas"):
            run = RunContext(self.engine, reader, self.settings, self.info, self.clock,
                             declared, start.popularity.popularity, firsts)
            for done, day in enumerate(ordered, 1):
                daily[day] = _one_day(run, plan, day, ids, summary)
                recent[day] = daily[day].totals
                if len(recent) > _KEEP_DAYS:
                    del recent[min(recent)]
                if self.progress:
                    self.progress("day", done, len(ordered), day)
        return daily, recent

    def _commit(self, daily: dict[date, DayResult], recent: dict[date, UnitTotals | None],
                declared: pa.Array | None, start: _Start, summary: RollupSummary,
                advance: bool, reader: ArrowReader | None, ahead: Future | None = None
                ) -> None:
        """The run's last transaction: the days' rows the report reads, the cumulative rows
        from the first of them on, and the watermarks (when ``advance``: the ids taken into
        account, with the generation the run started from). Either all of it is committed
        or none: a run killed before leaves the previous results, daily and cumulative
        alike. The watermarks are recorded only if no catalog was declared meanwhile
        (compare-and-set on the generation); a run that lost its lock commits nothing.
        ``ahead``: the covariates :func:`~tracker.rollup.covariates.ahead` is computing."""
        found = None if ahead is None else ahead.result()  # before the write lock
        # one BLAS thread, as for the days: CUPED's sums are matrix products over every
        # user of a day, which a second thread made 1.5-2.7x slower on two busy cores
        with threadpool_limits(limits=1, user_api="blas"), \
                transaction(self.engine, write=True) as conn:
            queries.tune(conn)
            publish_daily(conn, self.info, daily, everything=start.rebuild)
            results.save_levels(conn, self.info.id, levels.encode(dict(self.info.levels)))
            _store_popularity(conn, self.info, start.popularity)
            publish_exposure_days(conn, self.info, min(daily) if daily else None, recent,
                                  rebuild=start.rebuild)
            refreshed = covariates.refresh(conn, reader, self.info, start.ids,
                                           start.rebuild, daily, found)
            users = refreshed.covariates
            covariates.publish_daily(conn, self.info, daily, users, start.rebuild)
            summary.cumulative_from = recompute_cumulative(
                conn, self.info, daily, to_micros(self.clock), self.progress, recent=recent,
                declared=declared, refreshed=refreshed)
            covariates.resum_changed(conn, self.info, refreshed, daily,  # late rows
                                     DatabaseStore(conn, self.info).units)
            if advance:
                summary.superseded = not results.save_state(conn, self.info.id,
                                                            start.advance_to, self.clock)
            self.lock.confirm()

    def _declared_catalog(self) -> pa.Array | None:
        """The experiment's declared catalog (distinct ids), None when it declares none."""
        with transaction(self.engine) as conn:
            items = declared_items(conn, self.info.id)
        return pa.array(items, type=pa.string()) if items else None


def _one_day(run: RunContext, plan: Plan, day: date, ids: Ids, summary: RollupSummary
             ) -> DayResult:
    """One day of the plan: final as stored, or recomputed for its changed users, or
    whole."""
    if day in plan.final:
        result = finalize_day(run, day)
        if result is not None:
            summary.days_final_as_stored += 1
            return result
    users = plan.days.get(day)
    partial = recompute_users(run, day, users, ids, summary, plan.impressions.get(day)) \
        if users is not None else None
    return partial or recompute_day(run, day, summary)


def _store_popularity(conn: sa.Connection, info: ExperimentInfo, plan: PopularityPlan
                      ) -> None:
    """The popularity the run counted from the logs, kept for the next runs."""
    if plan.computed and plan.reference is not None:
        results.insert_popularity(conn, info.id, plan.reference.first_day,
                                  plan.reference.days, plan.popularity.encode())


def _count_new(summary: RollupSummary, plan: Plan) -> None:
    summary.new_impressions = plan.new.impressions
    summary.new_interactions = plan.new.interactions
    summary.ignored_impressions = plan.new.ignored_impressions
    summary.ignored_interactions = plan.new.ignored_interactions
