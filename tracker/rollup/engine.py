"""The incremental rollup job: raw logs -> unit-day outcomes -> arm-day statistics.

One run, per experiment:

1. **What changed.** The watermarks in ``rollup_state`` are the highest impression and
   interaction ids already taken into account (ids, never event times: late rows carry old
   event times). New impressions touch the days they were served on; a new interaction
   touches the days of the impressions it may answer (served within the attribution window
   before it, or the impression it names). Days computed while still provisional whose
   windows have closed since are recomputed too. Only days that hold impressions are
   touched, found from the distinct hours of the impressions (never the calendar span), and
   rows dated outside the range :mod:`tracker.rollup.days` can place are left out and
   counted.
2. **Each touched day** is recomputed from the raw logs (set-based SQL, then vectorised numpy
   over bounded chunks of impressions); its per-user units and exposure (what the
   cumulative pass reads) are replaced in one write transaction, its arm-level rows (what
   the report reads: a few per arm and metric) are kept for the end.
3. **One last transaction** publishes those daily rows, recomputes the cumulative rows of
   every day from the first touched one on from the unit-day rows, and advances the
   watermarks if no catalog was declared since the run began (compare-and-set on the
   state's generation).

Crash-safe: a run killed at any point leaves the results the report reads, daily and
cumulative, as the previous run left them, and the watermarks where they were; every step is
a deterministic replacement, so the next run produces the tables an uninterrupted run would
have. ``full=True`` forgets everything about the experiment first (the results the report
reads only in the last transaction) and must give the same tables as any sequence of
incremental runs (tests check both).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pyarrow as pa
import sqlalchemy as sa
from threadpoolctl import threadpool_limits

from tracker.config import Settings
from tracker.errors import NotFound
from tracker.rollup import queries, retention
from tracker.rollup.aggregate import (
    CodedTotals,
    UnitTotals,
    arm_stats,
    health,
    metric_rows,
    totals_of_parts,
)
from tracker.rollup.codes import Vocabulary, distinct, take
from tracker.rollup.columnar import ChunkResult, Interactions, score_chunk
from tracker.rollup.days import (
    HOUR,
    day_bounds,
    day_of,
    days_between,
    days_of_hours,
    in_range,
)
from tracker.rollup.exposure import Exposure, catalog_size, set_metric_rows
from tracker.rollup.lock import HeldLock, rollup_lock
from tracker.rollup.outcomes import Layout
from tracker.rollup.popularity import DayPairs, Popularity, window_popularity
from tracker.store import lifecycle, results
from tracker.store.arrow import ArrowReader
from tracker.store.db import require_current_schema, transaction
from tracker.store.experiments import ExperimentInfo, get_experiment
from tracker.store.experiments import catalog as declared_items
from tracker.store.types import to_micros

_SCORERS = 2  # chunks of a day scored at once (the machines this runs on: 2+ cores)
_IN_FLIGHT = 2  # chunks read or being scored at once (more only contend for the cores)
_KEEP_DAYS = 2  # daily unit totals kept in memory for the cumulative pass


@dataclass
class RollupSummary:
    """What one run did for one experiment."""

    experiment: str
    full: bool
    days_recomputed: list[date] = field(default_factory=list)
    cumulative_from: date | None = None
    impressions_read: int = 0
    truth_pairs_read: int = 0
    new_impressions: int = 0
    new_interactions: int = 0
    ignored_impressions: int = 0  # outside the range the rollup takes (tracker.rollup.days)
    ignored_interactions: int = 0
    superseded: bool = False  # a catalog declared during the run: the next run recomputes
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {
            "experiment": self.experiment, "full": self.full,
            "days_recomputed": [d.isoformat() for d in self.days_recomputed],
            "cumulative_from": self.cumulative_from.isoformat() if self.cumulative_from
            else None,
            "impressions_read": self.impressions_read,
            "truth_pairs_read": self.truth_pairs_read,
            "new_impressions": self.new_impressions, "new_interactions": self.new_interactions,
            "ignored_impressions": self.ignored_impressions,
            "ignored_interactions": self.ignored_interactions,
            "superseded": self.superseded,
            "seconds": round(self.seconds, 3),
        }

    def describe(self) -> str:
        """One line for people."""
        if self.days_recomputed:
            days = (f"{len(self.days_recomputed)} day(s) recomputed "
                    f"({self.days_recomputed[0]} .. {self.days_recomputed[-1]})")
        else:
            days = "nothing new"
        return (f"{self.experiment}: {days}; {self.new_impressions} new impressions, "
                f"{self.new_interactions} new interactions; read {self.impressions_read} "
                f"impressions and {self.truth_pairs_read} attributed (impression, item) pairs "
                f"in {self.seconds:.2f} s" + self._ignored()
                + ("; a catalog was declared meanwhile: the next run recomputes every day"
                   if self.superseded else "")
                + (" [full rebuild]" if self.full else ""))

    def _ignored(self) -> str:
        if not (self.ignored_impressions or self.ignored_interactions):
            return ""
        return (f"; left out {self.ignored_impressions} impressions and "
                f"{self.ignored_interactions} interactions dated outside 0002-01-01 .. "
                "9998-01-01 UTC")


Progress = Callable[[str, int, int, date], None]
"""``progress(stage, done, total, day)``: stage "day" or "cumulative", after each day."""


def run_rollup(engine: sa.Engine, settings: Settings, experiment: str | None = None, *,
               full: bool = False, until: date | None = None, now: datetime | None = None,
               progress: Progress | None = None) -> list[RollupSummary]:
    """Roll up one experiment (by key) or every experiment; returns one summary each.

    ``until``: compute days up to this one only; the watermarks then stay where they were,
    so a later unbounded run still sees everything. ``now`` (tests) fixes the clock that
    decides which days are provisional. Raises :class:`~tracker.errors.Busy` when another
    rollup of the experiment is running.
    """
    require_current_schema(engine)
    with transaction(engine) as conn:
        if experiment is not None:
            targets = [get_experiment(conn, experiment)]
        else:
            targets = lifecycle.rollup_targets(conn)  # archived ones only with work left
    if experiment is not None and not targets:
        raise NotFound(f"no experiment {experiment!r}")
    summaries = []
    for info in targets:
        with rollup_lock(engine, info.id, info.key) as lock:
            summaries.append(_run_one(engine, settings, info, lock, full=full, until=until,
                                      now=now, progress=progress))
    return summaries


def _run_one(engine: sa.Engine, settings: Settings, info: ExperimentInfo, lock: HeldLock, *,
             full: bool, until: date | None, now: datetime | None,
             progress: Progress | None) -> RollupSummary:
    started = time.perf_counter()
    summary = RollupSummary(info.key, full)
    clock = now or datetime.now(UTC)
    with transaction(engine) as conn:  # short: it may hold writers back for a moment
        top_impression, top_interaction = results.latest_ids(conn)
    with transaction(engine) as conn:
        queries.tune(conn)
        stored = results.load_state(conn, info.id)
        watermarks = None if full or stored is None else stored.watermarks
        known = [] if watermarks is None else results.known_days(conn, info.id)
        touched, stale = _touched_days(conn, info, watermarks, top_impression,
                                       top_interaction, {d for d, _, _ in known}, summary,
                                       settings.rollup_popularity_days)
        now_us = to_micros(clock)
        touched |= {d for d, closes, computed in known if computed < closes <= now_us}
        touched = retention.recomputable(conn, info, touched, rebuild=watermarks is None,
                                         popularity_days=settings.rollup_popularity_days)
    rebuild = watermarks is None
    if rebuild:  # the watermarks go first: a run killed from here on leaves a rebuild to do
        with transaction(engine, write=True) as conn:
            generation = results.reset_state(conn, info.id, declaration=False)
            results.clear_state(conn, info.id)
    else:
        generation = stored.generation
        if stale:  # days whose interaction pairs new interactions changed: rebuilt when
            # needed, and the popularity of the days whose window holds them
            reach = settings.rollup_popularity_days
            with transaction(engine, write=True) as conn:
                results.delete_pairs(conn, info.id, stale)
                results.delete_popularity(conn, info.id, {d + timedelta(days=i)
                                                          for d in stale
                                                          for i in range(1, reach + 1)})
    if until is not None:
        touched = {d for d in touched if d <= until}
    ordered = sorted(touched)
    pairs_cache: dict[date, DayPairs] = {}  # consecutive days share most of their window
    recent: dict[date, UnitTotals | None] = {}  # the last days computed, for the cumulative pass
    daily: dict[date, DayResult] = {}  # what the report reads, published at the end
    # one BLAS thread: the metric kernels' small matrix products gain nothing from a second
    # one, which only spins and takes a core from the database and the readers
    declared = _declared_catalog(engine, info) if ordered else None
    with ArrowReader(engine) if ordered else nullcontext() as reader, \
            threadpool_limits(limits=1, user_api="blas"):
        for done, day in enumerate(ordered, 1):
            daily[day] = _recompute_day(engine, reader, settings, info, day, clock, summary,
                                        pairs_cache, declared)
            recent[day] = daily[day].totals
            if len(recent) > _KEEP_DAYS:
                del recent[min(recent)]
            if progress:
                progress("day", done, len(ordered), day)
    summary.days_recomputed = ordered
    advance = until is None
    if ordered or advance or rebuild:
        _commit_run(engine, info, lock, daily, rebuild, clock, summary, progress,
                    recent=recent, declared=declared,
                    advance_to=results.StateRow(top_impression, top_interaction, generation)
                    if advance else None)
    summary.seconds = time.perf_counter() - started
    return summary


def _commit_run(engine: sa.Engine, info: ExperimentInfo, lock: HeldLock,
                daily: dict[date, DayResult], rebuild: bool, clock: datetime,
                summary: RollupSummary, progress: Progress | None,
                recent: dict[date, UnitTotals | None], declared: pa.Array | None,
                advance_to: results.StateRow | None) -> None:
    """The run's last transaction: the days' rows the report reads, the cumulative rows
    from the first of them on, and the watermarks (``advance_to``: the ids taken into
    account, with the generation the run started from; None: they stay). Either all of it is
    committed or none: a run killed before leaves the previous results, daily and
    cumulative alike. The watermarks are recorded only if no catalog was declared
    meanwhile (compare-and-set on the generation); a run that lost its lock commits
    nothing."""
    with transaction(engine, write=True) as conn:
        queries.tune(conn)
        _publish_daily(conn, info, daily, everything=rebuild)
        if daily:
            _recompute_cumulative(conn, info, min(daily), clock, summary, progress,
                                  recent=recent, declared=declared)
        if advance_to is not None:
            summary.superseded = not results.save_state(conn, info.id, advance_to, clock)
        lock.confirm()


def _publish_daily(conn: sa.Connection, info: ExperimentInfo, daily: dict[date, DayResult],
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
            _insert_stats(conn, result.stats)
            results.insert_day(conn, **result.status)


def _touched_days(conn: sa.Connection, info: ExperimentInfo, state: tuple[int, int] | None,
                  top_impression: int, top_interaction: int, known: set[date],
                  summary: RollupSummary, popularity_days: int
                  ) -> tuple[set[date], set[date]]:
    """The days to recompute, and the days in which new interactions occurred.

    Only days that hold impressions are ever computed, found from the distinct hours of the
    impressions (a full run: all of them; else the new ones, and the days computed before):
    the cost follows the days with data, never the calendar span between them. Rows outside
    the range the rollup takes (:mod:`tracker.rollup.days`) are counted and left out."""
    zone = info.timezone
    after_impression, after_interaction = state or (0, 0)
    summary.new_impressions = top_impression - after_impression
    summary.new_interactions = top_interaction - after_interaction
    summary.ignored_impressions = queries.untaken_impressions(conn, info.id, after_impression,
                                                              top_impression)
    summary.ignored_interactions = queries.untaken_interactions(conn, after_interaction,
                                                                top_interaction)
    fresh = days_of_hours(queries.served_hours(conn, info.id, after_impression,
                                               top_impression), zone)
    if state is None:
        return fresh, set()
    holding = known | fresh
    touched, stale = set(fresh), set()
    window = int(info.attribution_window.total_seconds() * 1_000_000)
    reach = popularity_days * 86_400 * 1_000_000 + 2 * HOUR  # DST-safe over-estimate
    for experiment_id, hour in queries.changed_hours(conn, after_interaction,
                                                     top_interaction):
        if experiment_id is None:
            # it may answer impressions served in [hour - window, hour + 1h), and it counts
            # in the popularity (surprisal) of the days that start within the next
            # popularity_days days
            reached = days_between(day_of(in_range(hour - window), zone),
                                   day_of(in_range(hour + reach), zone))
            touched |= holding.intersection(reached)
            stale |= days_of_hours([hour], zone)
        elif experiment_id == info.id:  # the impression it names
            touched |= days_of_hours([hour], zone)
    return touched, stale


def _recompute_day(engine: sa.Engine, reader: ArrowReader, settings: Settings,
                   info: ExperimentInfo, day: date, clock: datetime, summary: RollupSummary,
                   pairs_cache: dict[date, DayPairs], declared: pa.Array | None
                   ) -> DayResult:
    """Recompute one day from the raw logs and replace its daily units and exposure (what
    the cumulative pass reads); returns them with the rows the report reads, which the run
    publishes at its end."""
    start, end = day_bounds(day, info.timezone)
    cutoffs = list(info.cutoffs)
    layout = Layout.for_cutoffs(cutoffs)
    window = int(info.attribution_window.total_seconds() * 1_000_000)
    with transaction(engine) as conn:
        queries.tune(conn)
        count, first_id, last_id, last_served, longest = queries.day_extent(
            conn, info.id, start, end)
        # the day's interactions are read once when they fit the memory bound, else with
        # each chunk (only the chunk's users')
        day_wide = bool(count) and queries.count_window_interactions(
            conn, start, end, window) <= settings.rollup_chunk_cells
    if not count:
        with transaction(engine, write=True) as conn:
            results.delete_day_state(conn, info.id, day)
        return DayResult(None, None, None)
    # a pipeline over the day's chunks: while one is scored the next ones are read; the
    # memory bound is split between the chunks in flight
    rows = max(1_000, settings.rollup_chunk_cells // _IN_FLIGHT // max(int(longest), 1))
    top = max(cutoffs)
    users, items = Vocabulary(), Vocabulary()  # the day's codes, shared by its chunks

    def read(query, *args):
        return query(reader, info.id, start, end, *args)

    def popularity_before() -> tuple[Popularity, dict[date, DayPairs], bool]:
        """The popularity of the window before the day (stored, or the union of its days'
        pairs), the pairs read now from the raw logs, and whether it is to be stored."""
        window_days = settings.rollup_popularity_days
        with transaction(engine) as conn:
            stored = results.popularity(conn, info.id, day, window_days)
            if stored is not None:
                return Popularity.decode(stored), {}, False
            days, fresh = _window_pairs(reader, conn, info, day, window_days, pairs_cache)
        return window_popularity(days), fresh, True

    def whole_day_interactions() -> Interactions:
        return Interactions.of(read(queries.window_interactions, window), info.relevance,
                               users)

    def read_chunk(chunk: tuple[int, int]):
        return (read(queries.served_lists, *chunk, top),
                read(queries.keyed_interactions, *chunk),
                None if day_wide else read(queries.window_interactions, window, chunk))

    parts: list[CodedTotals] = []
    exposed: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    catalog: list[np.ndarray] = []
    with ThreadPoolExecutor(max_workers=_IN_FLIGHT + 2) as reads, \
            ThreadPoolExecutor(max_workers=_SCORERS) as scorers:
        whole_day = reads.submit(whole_day_interactions) if day_wide else None
        popular = reads.submit(popularity_before)
        bounds = [(first_id, last_id)] if count <= rows else queries.chunk_bounds(
            queries.day_ids(reader, info.id, start, end), rows)

        slots = threading.Semaphore(_IN_FLIGHT)  # chunks read or being scored

        def score(tables) -> ChunkResult:
            try:
                lists, keyed, timed = tables.result()
                interactions = whole_day.result() if timed is None else Interactions.of(
                    timed, info.relevance, users)
                return score_chunk(lists, interactions, keyed, popular.result()[0],
                                   info.relevance, window, cutoffs, layout, items, users)
            finally:
                slots.release()

        def fold(result: ChunkResult) -> None:  # in chunk order, as they come
            parts.append(result.totals)
            if len(parts) > _IN_FLIGHT:  # memory follows the day's users, not its chunks
                parts[:] = [CodedTotals.merge(parts)]
            catalog.append(result.catalog)
            for arm, counts in result.exposures.items():
                exposed.setdefault(arm, []).append(counts)
            summary.impressions_read += result.impressions
            summary.truth_pairs_read += result.truth_pairs

        started: deque = deque()
        for chunk in bounds:  # the next chunk is read as soon as any chunk is done
            slots.acquire()
            started.append(scorers.submit(score, reads.submit(read_chunk, chunk)))
            while started and started[0].done():
                fold(started.popleft().result())
        while started:
            fold(started.popleft().result())
        popularity, new_pairs, new_popularity = popular.result()
    totals = totals_of_parts(parts, users.ids, len(layout))
    exposures = {arm: _exposure(pieces, items.ids, len(cutoffs))
                 for arm, pieces in exposed.items()}
    catalog_items = take(items.ids, distinct(np.concatenate(catalog)))
    now_us = to_micros(clock)
    grace = int(settings.rollup_grace_seconds * 1_000_000)
    closes_at = in_range(int(last_served) + window + grace)  # a window past 9998 ends there
    with transaction(engine, write=True) as conn:
        queries.tune(conn)
        results.delete_day_state(conn, info.id, day)
        for other, pairs in sorted(new_pairs.items()):
            results.insert_pairs(conn, info.id, other, pairs.encode())
        if new_popularity:
            results.insert_popularity(conn, info.id, day, settings.rollup_popularity_days,
                                      popularity.encode())
        catalog_row = Exposure.of(catalog_items, np.zeros((catalog_items.size, 0)))
        results.insert_exposure(conn, info.id, day, False,
                                [(arm, e.encode(cutoffs)) for arm, e in sorted(exposures.items())]
                                + [(0, catalog_row.encode([]))])
        results.insert_units(conn, info.id, day, False, totals.encode(layout))
    base = {"experiment_id": info.id, "day": day, "cumulative": False,
            "provisional": now_us < closes_at}
    stats = _stats_rows(info, totals, layout, base, exposures,
                        catalog_size(catalog_items, declared))
    status = dict(experiment_id=info.id, day=day, impressions=int(count),
                  users=int(health(totals).users), closes_at=closes_at, computed_at=now_us)
    return DayResult(totals, stats, status)


def _declared_catalog(engine: sa.Engine, info: ExperimentInfo) -> pa.Array | None:
    """The experiment's declared catalog (distinct ids), None when it declares none."""
    with transaction(engine) as conn:
        items = declared_items(conn, info.id)
    return pa.array(items, type=pa.string()) if items else None


def _exposure(pieces: list[tuple[np.ndarray, np.ndarray]], ids: pa.Array,
              cutoffs: int) -> Exposure:
    """One arm's exposure from its chunks' (item codes, counts)."""
    codes = np.concatenate([c for c, _ in pieces])
    counts = np.concatenate([n for _, n in pieces]).reshape(codes.size, cutoffs)
    present, index = np.unique(codes, return_inverse=True)
    summed = np.zeros((present.size, cutoffs), dtype=np.int64)
    for j in range(cutoffs):
        summed[:, j] = np.bincount(index, weights=counts[:, j], minlength=present.size)
    return Exposure.of(take(ids, present), summed)


def _window_pairs(reader: ArrowReader, conn: sa.Connection, info: ExperimentInfo, day: date,
                  days_back: int, cache: dict[date, DayPairs]
                  ) -> tuple[list[DayPairs], dict[date, DayPairs]]:
    """The interaction pairs of each of the ``days_back`` days before ``day``: from
    ``cache`` (this run's, kept for the window only), stored ones, and those read now from
    the raw interactions (also returned apart, to be stored)."""
    first, last = day - timedelta(days=days_back), day - timedelta(days=1)
    for old in [d for d in cache if d < first]:
        del cache[old]
    missing = [d for d in days_between(first, last) if d not in cache]
    stored = results.pairs(conn, info.id, missing[0], missing[-1]) if missing else {}
    fresh = {}
    for other in missing:
        if other in stored:
            cache[other] = DayPairs.decode(stored[other])
            continue
        table = queries.day_interaction_pairs(reader, *day_bounds(other, info.timezone))
        cache[other] = fresh[other] = DayPairs.of(table["item"], table["user"])
    return [cache[d] for d in days_between(first, last)], fresh


@dataclass(frozen=True)
class StatsRows:
    """The rows the report reads of one day and view: ``rollup_metric`` and
    ``rollup_health`` (a few per arm and metric, whatever the traffic)."""

    metrics: list[dict]
    health: list[dict]


@dataclass(frozen=True)
class DayResult:
    """One recomputed day: its unit totals, and the daily rows the report reads with the
    day's ``rollup_day`` status (all None when the day has no impressions)."""

    totals: UnitTotals | None
    stats: StatsRows | None
    status: dict | None


def _stats_rows(info: ExperimentInfo, totals: UnitTotals, layout: Layout, base: dict,
                exposures: dict[int, Exposure], catalog: int) -> StatsRows:
    arm_ids = [arm.id for arm in info.arms]
    stats = arm_stats(totals, arm_ids)
    state = health(totals)
    users = {arm: state.arms.get(arm, (0, 0, 0))[0] for arm in arm_ids}
    rows = [dict(base, **row) for row in metric_rows(stats, layout)]
    rows += [dict(base, **row)
             for row in set_metric_rows(exposures, catalog, list(info.cutoffs), users)]
    health_rows = [dict(base, arm_id=arm, users=u, impressions=i, crossover_users=c)
                   for arm, (u, i, c) in ((a, state.arms.get(a, (0, 0, 0))) for a in arm_ids)]
    health_rows.append(dict(base, arm_id=0, users=state.users, impressions=state.impressions,
                            crossover_users=state.crossover_users))
    return StatsRows(rows, health_rows)


def _insert_stats(conn: sa.Connection, stats: StatsRows) -> None:
    results.insert_metrics(conn, stats.metrics)
    results.insert_health(conn, stats.health)


def _decode(data: bytes, arm: int, cutoffs: list[int]) -> Exposure:
    """One stored exposure row (arm 0, the catalog, has no counts)."""
    return Exposure.decode(data, cutoffs if arm else [])


def _recompute_cumulative(conn: sa.Connection, info: ExperimentInfo, since: date,
                          clock: datetime, summary: RollupSummary, progress: Progress | None,
                          recent: dict[date, UnitTotals | None] | None = None,
                          declared: pa.Array | None = None) -> None:
    """Cumulative rows of every day from ``since`` on (each user's mean over all their
    impressions from the first day through that day), in the run's last transaction.

    The cumulative units and exposure of a day are those of the day before plus the day's:
    the pass starts from the stored cumulative rows of the day before ``since`` and reads
    one daily row per day after it, whatever the history (``recent``: unit totals of days
    just computed, which need not be read back)."""
    layout = Layout.for_cutoffs(list(info.cutoffs))
    width = len(layout)
    cutoffs = list(info.cutoffs)
    days = results.known_days(conn, info.id)
    if not days:
        return
    results.delete_cumulative(conn, info.id, since)
    before = [d for d, _, _ in days if d < since]
    previous = before[-1] if before else None
    stored = results.units(conn, info.id, previous, True) if previous else None
    running = UnitTotals.decode(stored, layout) if stored else UnitTotals.empty(width)
    exposed = results.exposure(conn, info.id, previous, True) if previous else {}
    exposure = {arm: _decode(v, arm, cutoffs) for arm, v in exposed.items()}
    now_us = to_micros(clock)
    provisional_so_far = False
    total = sum(1 for d in days if d[0] >= since)
    done = 0
    for day, closes, computed in days:
        provisional_so_far |= computed < closes
        if day < since:
            continue
        if recent and day in recent:  # just computed: not read back
            today = recent[day]
        else:
            daily = results.units(conn, info.id, day, False)
            today = None if daily is None else UnitTotals.decode(daily, layout)
        if today is not None:
            running = UnitTotals.concat([running, today], width).reduce() \
                if running.size else today
        results.insert_units(conn, info.id, day, True, running.encode(layout))
        for arm, value in results.exposure(conn, info.id, day, False).items():
            today = _decode(value, arm, cutoffs)
            exposure[arm] = exposure[arm] + today if arm in exposure else today
        results.insert_exposure(conn, info.id, day, True,
                                [(arm, e.encode(cutoffs if arm else []))
                                 for arm, e in sorted(exposure.items())])
        seen = exposure[0].items if 0 in exposure else np.empty(0, dtype=object)
        catalog = catalog_size(seen, declared)
        base = {"experiment_id": info.id, "day": day, "cumulative": True,
                "provisional": provisional_so_far or now_us < closes}
        _insert_stats(conn, _stats_rows(info, running, layout, base,
                                        {arm: e for arm, e in exposure.items() if arm},
                                        catalog))
        done += 1
        if progress:
            progress("cumulative", done, total, day)
    summary.cumulative_from = since
