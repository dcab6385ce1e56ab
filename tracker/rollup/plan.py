"""What one run recomputes: the days, and within a day the users, that changed since the
last run (step 1 of :mod:`tracker.rollup.engine`).

The watermarks are the highest impression and interaction ids already taken into account
(ids, never event times: late rows carry old event times). From the rows above them:

- **New impressions** touch the days they were served on (the whole day).
- **A new interaction naming no impression** touches a day of this experiment only when its
  user has an impression of the experiment on that day that it answers (the same user,
  served within the attribution window before it): the day's impressions and the new
  interactions are read (by primary key) and matched in numpy, which also gives the users
  whose outcomes change and, for a day recomputed for them only, the ids of their
  impressions (a day most of whose users changed is recomputed whole). An interaction of a
  user the experiment never served touches nothing.
- **A new interaction naming an impression** touches that impression's day and user.
- **A user dimension's slice** is the user's at their first exposure, on each of their
  days: a new impression served before it, or (``cohort``, ``activity``) a new interaction
  in the window before it, touches every day of that user, recomputed whole: the user's
  lists move between slices, and the slices' item exposure with them (:func:`_relabelled`).
- **The item popularity** (surprisal's, :mod:`tracker.rollup.popularity`) is the
  experiment's reference period's, one for every day: when it changes (a new interaction
  occurred in the period, an erasure dropped it, the first day moved), every day holding
  lists is recomputed whole (:func:`plan_popularity`). Nothing else touches it.
- **Days computed while provisional** whose windows have closed since (``computed_at <
  closes_at <= now``) and that nothing new touches are **final as they stand**
  (``Plan.final``): every row that could answer them lies at or below the watermarks
  (:func:`~tracker.store.results.latest_ids` returns ids below which every row is
  committed), so their stored per-user rows are what a read of the logs would give, and
  they are published final from those rows without reading a log
  (:func:`~tracker.rollup.day.finalize_day`). A day marked for recompute
  (:func:`~tracker.store.lifecycle.mark_for_recompute`: a user's rows erased) has no
  stored rows left and is recomputed whole.

A day touched only through its ground truth (new interactions answering or naming its
impressions: no new impression of it, no change in the popularity) is recomputed for its
changed users, from the logs (:mod:`tracker.rollup.partial`).

Only days that hold impressions are ever touched, found from the distinct hours of the
impressions (a full run: all of them; else the new ones, and the days computed before):
the cost follows the days with data, never the calendar span between them. Rows dated
outside the range :mod:`tracker.rollup.days` can place are counted and left out.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup import levels, queries, user_queries
from tracker.rollup.codes import encode
from tracker.rollup.columnar import answered
from tracker.rollup.days import (
    HOUR,
    day_bounds,
    day_of,
    days_between,
    days_of_hours,
    in_range,
)
from tracker.rollup.popularity import Popularity, Reference
from tracker.store import lifecycle, results
from tracker.store.arrow import ArrowReader
from tracker.store.experiments import ExperimentInfo

WHOLE_DAY_SHARE = 0.5
"""Past this share of a day's users, the whole day is recomputed: reading it in id order
costs less than selecting most of its users (and the plan knows it before anything of the
day is read again)."""


@dataclass(frozen=True)
class KnownDay:
    """A day rolled up before: when its windows close and when it was computed (UTC
    microseconds)."""

    day: date
    closes_at: int
    computed_at: int


@dataclass(frozen=True)
class NewRows:
    """What arrived since the watermarks, and what of it the rollup leaves out."""

    impressions: int = 0
    interactions: int = 0
    ignored_impressions: int = 0  # dated outside the range the rollup takes
    ignored_interactions: int = 0


@dataclass
class Plan:
    """The days to recompute: each with the users whose outcomes changed (None: the whole
    day); ``holding``: every day of the experiment that holds lists (computed before, or
    new)."""

    days: dict[date, frozenset[str] | None] = field(default_factory=dict)
    holding: set[date] = field(default_factory=set)
    new: NewRows = NewRows()
    # per day recomputed for some users: the ids of every impression of those users
    impressions: dict[date, np.ndarray] = field(default_factory=dict)
    # the days final since they were computed, with nothing new: published from their
    # stored rows (:func:`~tracker.rollup.day.finalize_day`), no log read
    final: set[date] = field(default_factory=set)
    # the days marked for recompute (their stored rows went): recomputed by any run, even
    # past ``until``, since the views after them would read their rows
    marked: set[date] = field(default_factory=set)

    def whole(self, days) -> None:
        for day in days:
            self.days[day] = None

    def everything(self) -> None:
        """Every day holding lists recomputed whole, from the logs."""
        self.whole(self.holding)
        self.impressions, self.final = {}, set()

    @property
    def read_whole(self) -> list[date]:
        """The days recomputed whole, from the logs (their lists read: new, erased)."""
        return sorted(day for day, users in self.days.items() if users is None)

    @property
    def first_day(self) -> date | None:
        """The experiment's first day: the earliest holding lists."""
        return min(self.holding) if self.holding else None

    def users(self, day: date, users) -> None:
        """``users`` of ``day`` changed (nothing when empty; a whole day stays whole)."""
        users = frozenset(users)
        if not users or (day in self.days and self.days[day] is None):
            return
        self.days[day] = users | self.days.get(day, frozenset())

    def until(self, last: date | None) -> Plan:
        """The plan for the days up to ``last`` only (None: every day)."""
        if last is None:
            return self
        return self._of({d for d in self.touched if d <= last} | self.marked)

    def only(self, days: set[date]) -> Plan:
        """The plan for ``days`` only (e.g. those the retention horizon leaves)."""
        return self._of(self.touched & days)

    def _of(self, days: set[date]) -> Plan:
        return Plan({d: u for d, u in self.days.items() if d in days}, self.holding,
                    self.new, {d: i for d, i in self.impressions.items() if d in days},
                    self.final & days, self.marked & days)

    @property
    def touched(self) -> set[date]:
        """The days the run writes: recomputed, or final from their stored rows."""
        return set(self.days) | self.final

    @property
    def ordered(self) -> list[date]:
        """The days the run writes, in order."""
        return sorted(self.touched)


@dataclass(frozen=True)
class Ids:
    """An id range ``(after, through]`` of impressions and of interactions."""

    impressions_after: int
    impressions_through: int
    interactions_after: int
    interactions_through: int


def plan_run(conn: sa.Connection, info: ExperimentInfo, ids: Ids, rebuild: bool,
             known: list[KnownDay], now_us: int) -> Plan:
    """The plan of a run over the rows of ``ids`` (``rebuild``: every day, whole)."""
    plan = Plan(new=_new_rows(conn, info, ids))
    fresh = days_of_hours(queries.served_hours(conn, info.id, ids.impressions_after,
                                               ids.impressions_through), info.timezone)
    plan.whole(fresh)
    plan.holding = holding = {k.day for k in known} | fresh
    if rebuild:
        return plan
    closed = {k.day for k in known if k.computed_at < k.closes_at <= now_us}
    kept = results.days_with_units(conn, info.id, closed)
    plan.marked = closed - kept  # marked for recompute: their stored rows went
    plan.whole(plan.marked)
    changed = queries.changed_hours(conn, ids.interactions_after, ids.interactions_through)
    timed = sorted({hour for experiment, hour in changed if experiment is None})
    named = sorted({hour for experiment, hour in changed if experiment == info.id})
    with _DayImpressions(conn, info) as served:
        _answered(served, ids, plan, holding, timed)
        _named(conn, info, ids, plan, named)
        _relabelled(conn, info, ids, plan)
        for day, users in list(plan.days.items()):
            if users is not None and served.most_users(day, users):
                plan.whole([day])
            elif users is not None:
                plan.impressions[day] = served.ids_of(day, users)
    plan.final = (closed & kept) - set(plan.days)
    return plan


def _new_rows(conn: sa.Connection, info: ExperimentInfo, ids: Ids) -> NewRows:
    return NewRows(
        ids.impressions_through - ids.impressions_after,
        ids.interactions_through - ids.interactions_after,
        queries.untaken_impressions(conn, info.id, ids.impressions_after,
                                    ids.impressions_through),
        queries.untaken_interactions(conn, ids.interactions_after, ids.interactions_through))


class _DayImpressions:
    """The ``id, user, served`` of the impressions of the days the plan looks into, read
    once from the raw logs (by id range: :func:`~tracker.rollup.queries.day_impressions`)
    and kept for the plan."""

    def __init__(self, conn: sa.Connection, info: ExperimentInfo) -> None:
        self.conn, self.info = conn, info
        self._reader: ArrowReader | None = None
        self._tables: dict[date, pa.Table] = {}

    def __enter__(self) -> _DayImpressions:
        return self

    def __exit__(self, *exc) -> None:
        if self._reader is not None:
            self._reader.close()

    @property
    def reader(self) -> ArrowReader:
        if self._reader is None:
            self._reader = ArrowReader(self.conn.engine)
        return self._reader

    def of(self, day: date) -> pa.Table:
        """The day's ``id, user, served``, read once."""
        if day not in self._tables:
            self._tables[day] = self._read(day)
        return self._tables[day]

    def _read(self, day: date) -> pa.Table:
        start, end = day_bounds(day, self.info.timezone)
        extent = queries.day_id_range(self.conn, self.info.id, start, end)
        return queries.day_impressions(self.reader, self.info.id, start, end, *extent) \
            if extent else queries.DAY_IMPRESSIONS.empty_table()

    def most_users(self, day: date, users: frozenset[str]) -> bool:
        """Whether ``users`` are more than :data:`WHOLE_DAY_SHARE` of the day's users."""
        table = self.of(day)
        return len(users) > WHOLE_DAY_SHARE * len(table["user"].unique())

    def ids_of(self, day: date, users: frozenset[str]) -> np.ndarray:
        """The ids of every impression of ``users`` on ``day``."""
        table = self.of(day)
        mine = pc.is_in(table["user"], value_set=pa.array(sorted(users), pa.string()))
        return np.sort(table["id"].to_numpy()[mine.to_numpy(zero_copy_only=False)])


def _answered(served: _DayImpressions, ids: Ids, plan: Plan, holding: set[date],
              hours: list[int]) -> None:
    """The users of each day whose impressions the new interactions naming none answer.

    An interaction in the hour ``h`` may answer impressions served in ``[h - window, h +
    1h)``: those days are candidates. For each, the day's impressions and the new
    interactions that may answer them by time are read (both through a primary key) and
    matched in numpy (:func:`~tracker.rollup.columnar.answered`: which impressions are
    answered, never every (impression, interaction) pair: one heavy user's are billions):
    a join in the database made SQLite probe the interactions' index once per impression
    of the day."""
    info = served.info
    window = int(info.attribution_window.total_seconds() * 1_000_000)
    zone = info.timezone
    candidates = {day for hour in hours
                  for day in days_between(day_of(in_range(hour - window), zone),
                                          day_of(in_range(hour + HOUR - 1), zone))}
    for day in sorted(holding & candidates):
        if day in plan.days and plan.days[day] is None:
            continue  # recomputed whole anyway
        # the new interactions read while the day's impressions are
        with ThreadPoolExecutor(max_workers=1) as aside:
            reading = aside.submit(queries.new_window_interactions, served.reader,
                                   *day_bounds(day, zone), window, ids.interactions_after,
                                   ids.interactions_through)
            table = served.of(day)
            new = reading.result()
        if not table.num_rows:
            continue
        (imp_users, it_users), _ = encode([table["user"], new["user"]])
        rows = np.flatnonzero(answered(imp_users, table["served"].to_numpy(), it_users,
                                       new["at"].to_numpy(), window))
        plan.users(day, table["user"].take(pa.array(rows)).to_pylist())


def _named(conn: sa.Connection, info: ExperimentInfo, ids: Ids, plan: Plan,
           hours: list[int]) -> None:
    """The users of the impressions that new interactions name, on their days."""
    for day in sorted(days_of_hours(hours, info.timezone)):
        plan.users(day, queries.named_users(conn, info.id, *day_bounds(day, info.timezone),
                                            ids.interactions_after, ids.interactions_through))


def _relabelled(conn: sa.Connection, info: ExperimentInfo, ids: Ids, plan: Plan) -> None:
    """The users whose slice of a user dimension the new rows may change, on every day
    they were served: an impression served before the user's first exposure moves it (a
    context key's value is the new first list's), an interaction in the window before it
    may make a new user returning (``cohort``) or change their count (``activity``)."""
    users = [s for s in levels.sliced(info) if s.kind == "user"]
    if not users:
        return
    window = levels.pre_period_us(info) \
        if any(s.name in (levels.COHORT, levels.ACTIVITY) for s in users) else None
    found = sorted(user_queries.relabelled_users(
        conn, info.id, ids.impressions_after, ids.impressions_through,
        ids.interactions_after, ids.interactions_through, window))
    # whole days: the users' lists move between slices, so the slices' item exposure
    # (coverage and the other set-level metrics) moves with them, which a day recomputed
    # for some users only keeps as stored (tracker.rollup.partial)
    plan.whole({day_of(served, info.timezone) for _, served in user_queries.user_days(
        conn, info.id, found, ids.impressions_through)})


@dataclass(frozen=True)
class PopularityPlan:
    """The experiment's popularity for a run, of ``reference`` (None: no day holds lists);
    ``computed``: read from the logs now, to be stored with the run's results. ``counts``:
    the popularity, or its stored encoding, decoded when a day needs it (a run with no day
    to compute never pays the decoder's first use, 0.4 s)."""

    counts: Popularity | bytes
    reference: Reference | None = None
    computed: bool = False

    @cached_property
    def popularity(self) -> Popularity:
        return self.counts if isinstance(self.counts, Popularity) else \
            Popularity.decode(self.counts)


def plan_popularity(conn: sa.Connection, engine: sa.Engine, info: ExperimentInfo, plan: Plan,
                    ids: Ids, rebuild: bool, days: int) -> PopularityPlan:
    """The popularity of the experiment's reference period (``days`` days before its first
    day): the stored one while the period is the same and no interaction of ``ids``
    occurred in it (or, once its logs expired, whatever happened since); else counted from
    the logs again, and when that differs from the stored one every day holding lists is
    recomputed whole (``plan`` changed in place)."""
    if plan.first_day is None:
        return PopularityPlan(Popularity.empty())
    reference = Reference(plan.first_day, days)
    start, end = reference.bounds(info.timezone)
    stored = results.popularity(conn, info.id)
    same = stored is not None and stored[:2] == (reference.first_day, days)
    cutoff = lifecycle.expired_before(conn)
    if same and ((cutoff is not None and start < cutoff) or not rebuild and not
                 queries.occurred_in(conn, start, end, ids.interactions_after,
                                     ids.interactions_through)):
        return PopularityPlan(bytes(stored[2]), reference)
    with ArrowReader(engine) as reader:
        popularity = Popularity.of(*queries.item_users(reader, start, end))
    if not (same and popularity.same(Popularity.decode(stored[2]))):
        plan.everything()
    return PopularityPlan(popularity, reference, computed=True)
