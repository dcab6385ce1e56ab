"""CUPED's pre-exposure covariates per user (their sums per cell and metric:
:mod:`tracker.rollup.covariate_sums`).

**Per user and experiment** (:class:`UserCovariates`), from the ``cuped_days`` days before
the user's first exposure in the experiment:

- ``pre_interactions``: the user's interactions (any item, any event type);
- ``pre_graded``: their graded sum (the experiment's relevance grades; 1 per event without
  a mapping, 0 for an event type the mapping lacks);
- ``no_pre_period``: 1 for a user with no interaction in the window (both covariates are
  then 0), else 0 (the missing-indicator method of :mod:`tracker.stats.covariates`: new
  users stay in the analysis);
- ``pre:<column>``: the user's mean of the metric column itself over the lists served to
  them in the window, in any experiment, scored with this experiment's definitions, and
  ``no_pre_lists``: 1 for a user without such a list (every ``pre:`` value is then 0); see
  :mod:`tracker.rollup.pre_metrics` (surprisal and unexpectedness have none).

**Event time, whatever the order of arrival.** A user's first exposure is the earliest
served of their impressions in the experiment; the window is the ``cuped_days`` before it,
and it counts the interactions that *occurred* in it and the lists *served* in it, whenever
they were logged. So a history imported after the experiment's lists (a backfill) counts,
and a newer day imported before an older one does not put the treatment's own clicks into
the covariates. A run computes the covariates of the users first seen in it (reads of their
interactions and lists over the window, bounded by user and time: the ``(user_id,
occurred_at)`` and ``(user_id, served_at)`` indexes) and recomputes those of the stored users
whom its new rows change (:func:`_changed`: an earlier impression moves a first exposure, a
row inside a window adds to it; found from the new rows alone, by id); when any changed,
every day's sums are computed again from the stored unit totals (:func:`resum`). They are
kept one row per user (:mod:`tracker.rollup.stored_covariates`: a run reads the rows of the
users it holds and writes those it computed; an erasure drops the user's); a full rebuild
computes every user's from the logs to the same values.

**Per cell, metric column and view**: their sums, :mod:`tracker.rollup.covariate_sums`
(each day's and each cumulative view's from its users' totals, joined to these covariates;
the cumulative view's moved by its users' changes: :class:`~tracker.rollup.deltas.ViewSums`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup import stored_covariates
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.codes import sorted_codes
from tracker.rollup.columnar import grades_of
from tracker.rollup.covariate_sums import (
    PAIRS,
    SUM_COVARIATES,
    add_terms,
    cell_terms,
    covariate_sums,
    delete_all,
    delete_cumulative,
    insert_sums,
    publish_daily,
    sum_columns,
    sums_table,
    write_sums,
)
from tracker.rollup.days import END_INSTANT, FIRST_INSTANT, day_of
from tracker.rollup.first_exposures import FirstExposures, first_rows
from tracker.rollup.outcomes import Layout
from tracker.rollup.plan import Ids
from tracker.rollup.pre_metrics import (
    NO_LISTS,
    PREFIX,
    any_lists,
    index_in,
    interactions,
    pre_columns,
    pre_metrics,
    scored_lists,
)
from tracker.rollup.stored_covariates import RunCovariates, Stored
from tracker.rollup.user_covariates import BASE, USERS, UserCovariates
from tracker.store import lifecycle, results
from tracker.store.arrow import ArrowReader
from tracker.store.db import transaction
from tracker.store.experiments import ExperimentInfo

_EXPOSURES = pa.schema([pa.field("user", pa.string(), False),
                        pa.field("served", pa.int64(), False)])
_TIMES = pa.schema([pa.field("user", pa.string(), False), pa.field("at", pa.int64(), False)])
_CHUNK = 2000  # users per read of their pre-period interactions
_DAY_US = 86_400_000_000


def names_for(cutoffs) -> tuple[str, ...]:
    """The per-user covariates of an experiment with ``cutoffs``, as stored.

    >>> names_for([5])[:5]
    ('pre_interactions', 'pre_graded', 'no_pre_period', 'no_pre_lists', 'pre:hit_rate@5')
    """
    return BASE + tuple(PREFIX + c for c in pre_columns(Layout.for_cutoffs(list(cutoffs))))


@dataclass(frozen=True)
class Refreshed:
    """:func:`refresh`'s answer: every user's covariates (None: CUPED off), whether
    covariates stored before changed (the sums of the days holding those users are then
    stale: :func:`resum`), and from when: the earliest first exposure, old or new, of a
    changed user (µs; None: every day, as after an unreadable state)."""

    covariates: UserCovariates | None
    changed: bool = False
    since: int | None = None


def refresh(conn: sa.Connection, reader: ArrowReader | None, info: ExperimentInfo, ids: Ids,
            rebuild: bool, daily: dict, ahead: UserCovariates | None = None) -> Refreshed:
    """The covariates of the experiment's users (a :class:`~tracker.rollup.
    stored_covariates.RunCovariates`: the stored ones, read for the users asked): those of
    the stored users whom the run's new rows change (:func:`_changed`), and those of the
    users of the run's days (``daily``'s :class:`DayResult`s) that have none yet, computed
    from the logs read through ``reader`` (every user when ``rebuild`` or when the stored
    ones cannot be read); :func:`settle` stores those after the cumulative pass. None (and
    the stored ones dropped) when the experiment's ``cuped_days`` is 0. ``ahead``: those
    :func:`ahead` computed while the days were (the same values); only the users it lacks
    are read here."""
    if info.cuped_days == 0:
        delete_all(conn, info.id)
        return Refreshed(None)
    names = names_for(info.cutoffs)
    stored = None if rebuild else Stored.open(conn, info, names)
    again = stored is None and not rebuild  # unreadable (another window): everyone again
    after = 0 if stored is None else ids.impressions_after
    fresh = UserCovariates.empty(names)
    changed = _changed(conn, reader, info, stored, ids) if stored is not None and \
        stored.first is not None else None
    since = None
    if changed is not None and len(changed[0]):
        computed = _compute(reader, info, *changed)
        since = changed_since(stored.subset(computed.users), computed)
        fresh = computed
    seen = [r.totals.users.cast(pa.string()) for r in daily.values()
            if r.totals is not None and r.totals.size]
    if again:  # every user the experiment served, not only the run's
        seen.append(_first_exposures(reader, info.id, 0, ids.impressions_through)[0])
    users = pc.unique(pa.concat_arrays(seen)) if seen else pa.array([], type=pa.string())
    known = fresh.users if stored is None else \
        pa.concat_arrays([fresh.users, stored.subset(users).users])
    users = users.filter(pc.invert(pc.is_in(users, value_set=known)))
    if ahead is not None and len(users):
        found = ahead.subset(users)
        fresh = fresh.merged(found)
        users = users.filter(pc.invert(pc.is_in(users, value_set=found.users)))
    if len(users):
        fresh = fresh.merged(_of_new_users(conn, reader, info, users, after,
                                           ids.impressions_through))
    covariates = RunCovariates(stored, fresh)
    if again:
        return Refreshed(covariates, True, None)
    return Refreshed(covariates, since is not None, since)


def _changed(conn: sa.Connection, reader: ArrowReader | None, info: ExperimentInfo,
             stored: Stored, ids: Ids) -> tuple[pa.Array, np.ndarray] | None:
    """The stored users whom the rows new in this run (by id) change, with their first
    exposure then: an impression of the experiment served before the stored one (the first
    exposure moves; only impressions the rollup can place on a day count), an interaction
    that occurred, or another experiment's list served, in the window before it. Reads the
    new rows' users and times only. A user whose window would reach before the retention
    horizon (``tracker logs expire``) keeps the covariates computed while the logs were
    whole, as days before the horizon keep their results."""
    if reader is None:
        return None
    span = info.cuped_days * _DAY_US
    # only rows before the latest stored first exposure can matter (most new rows of a
    # night occur after every stored user's): the database filters them, numpy the rest
    bounds = {"experiment": info.id, "after": ids.impressions_after,
              "through": ids.impressions_through, "i_after": ids.interactions_after,
              "i_through": ids.interactions_through, "lo": FIRST_INSTANT,
              "hi": min(stored.first[1], END_INSTANT),
              "window": max(stored.first[0] - span, FIRST_INSTANT)}
    # by primary key: on SQLite a unary + keeps the time indexes out (their ranges can hold
    # far more rows than the new ids, read in random order)
    plus = "" if reader.engine.dialect.name == "postgresql" else "+"
    own = reader.read("SELECT imp.user_id, imp.served_at FROM impression imp "
                      "WHERE imp.id > :after AND imp.id <= :through "
                      f"AND {plus}imp.experiment_id = :experiment AND {plus}imp.served_at >= :lo "
                      f"AND {plus}imp.served_at < :hi", _TIMES, bounds)
    other = reader.read("SELECT imp.user_id, imp.served_at FROM impression imp "
                        "WHERE imp.id > :after AND imp.id <= :through "
                        f"AND {plus}imp.experiment_id <> :experiment "
                        f"AND {plus}imp.served_at >= :window AND {plus}imp.served_at < :hi",
                        _TIMES, bounds)
    events = reader.read("SELECT it.user_id, it.occurred_at FROM interaction it "
                         "WHERE it.id > :i_after AND it.id <= :i_through "
                         f"AND {plus}it.occurred_at >= :window AND {plus}it.occurred_at < :hi",
                         _TIMES, bounds)
    stored = stored.subset(pa.concat_arrays([  # the stored rows of the new rows' users
        t["user"].combine_chunks() for t in (own, other, events)]))
    first = stored.first.copy()
    row = index_in(own["user"].combine_chunks(), stored.users)
    at = own["at"].to_numpy()
    known = row >= 0
    np.minimum.at(first, row[known], at[known])
    hit = first < stored.first  # moved
    for rows in (other, events):
        row = index_in(rows["user"].combine_chunks(), stored.users)
        at = rows["at"].to_numpy()
        known = row >= 0
        row, at = row[known], at[known]
        inside = (at >= first[row] - span) & (at < first[row])
        hit[row[inside]] = True
    cutoff = lifecycle.expired_before(conn)
    if cutoff is not None:  # windows no longer whole: kept as computed
        hit &= first - span >= cutoff
    which = np.flatnonzero(hit)
    return stored.users.take(pa.array(which)), first[which]


def changed_since(stored: UserCovariates, recomputed: UserCovariates) -> int:
    """The earliest first exposure (µs), before or after, of stored users whose covariates
    were recomputed: no day before it holds them (both engines' :attr:`Refreshed.since`)."""
    before = stored.subset(recomputed.users).first
    return int(min(recomputed.first.min(), before.min() if before.size else
                   recomputed.first.min()))


def resum_changed(conn: sa.Connection, info: ExperimentInfo, refreshed: Refreshed,
                  written: Iterable[date],
                  units: Callable[[date], UnitTotals | None]) -> None:
    """After a run's own sums (``written``: its days): when stored covariates changed, the
    daily sums of the other days that hold those users (:func:`resum`, ``units`` its days'
    totals; the cumulative pass rewrites the cumulative ones from the first such day:
    :func:`changed_from`); the step both engines share."""
    if not refreshed.changed or refreshed.covariates is None:
        return
    resum(conn, info, refreshed.covariates, set(written), refreshed.since, units)


def changed_from(conn: sa.Connection, info: ExperimentInfo, refreshed: Refreshed
                 ) -> date | None:
    """The first day whose sums hold a user whose stored covariates changed (None: none
    changed)."""
    if not refreshed.changed or refreshed.covariates is None:
        return None
    days = [day for day, _, _ in results.known_days(conn, info.id)]
    if not days:
        return None
    return days[0] if refreshed.since is None else \
        max(days[0], day_of(refreshed.since, info.timezone))


def forget(conn: sa.Connection, info: ExperimentInfo, user: str) -> None:
    """Drop one user's stored covariates (an erasure: a user served again later is then
    computed from what is left, and no stored state keeps the erased user's first
    exposure)."""
    stored_covariates.forget(conn, info, user)


def ahead(engine: sa.Engine, reader: ArrowReader, info: ExperimentInfo, ids: Ids,
          rebuild: bool, firsts: FirstExposures | None = None) -> UserCovariates | None:
    """What :func:`refresh` will compute for the users first seen, computed beforehand (in a
    thread, while the run's days are read and scored, whose cores it shares with the
    database's waits): the covariates of every user exposed among the run's impressions
    that has none stored (stored ones as :func:`refresh` reads them). None when CUPED is
    off. ``firsts``: the first exposures the run's days gather as they read (waited for,
    and taken when they cover every impression the read would: else read)."""
    if info.cuped_days == 0:
        return None
    with transaction(engine) as conn:
        stored = None if rebuild else Stored.open(conn, info, names_for(info.cutoffs))
        after = 0 if stored is None else ids.impressions_after
        count = None if firsts is None else \
            _impressions(conn, info.id, after, ids.impressions_through)
    first = None if firsts is None else firsts.covering(count)  # no transaction held
    with transaction(engine) as conn:
        first = _first_exposures(reader, info.id, after, ids.impressions_through) \
            if first is None else (first.users, first.served)
        users = first[0] if stored is None else first[0].filter(
            pc.invert(pc.is_in(first[0], value_set=Stored(
                conn, info, stored.names, stored.first).subset(first[0]).users)))
        return _of_new_users(conn, reader, info, users, after, ids.impressions_through,
                             first)


def _of_new_users(conn: sa.Connection, reader: ArrowReader, info: ExperimentInfo,
                  users: pa.Array, after: int, through: int,
                  first: tuple[pa.Array, np.ndarray] | None = None) -> UserCovariates:
    """The covariates of ``users`` (none stored), from their first exposure among the
    impressions with ids in ``(after, through]`` (``first``: those already read): all of a
    user's impressions but for an erased user served again, whose erased ones are gone, and
    rows the rollup never placed on a day, which it leaves out here too."""
    first = first or _first_exposures(reader, info.id, after, through)
    new = pc.is_in(first[0], value_set=users).to_numpy(zero_copy_only=False)
    users, served = first[0].filter(pa.array(new)), first[1][new]
    return _compute(reader, info, users, served, conn)


def settle(conn: sa.Connection, info: ExperimentInfo,
           covariates: RunCovariates | UserCovariates | None) -> None:
    """Store the covariates a run computed, after the cumulative pass (an erased user's
    went with the erasure: :func:`forget`); given every user's (a :class:`UserCovariates`),
    those only."""
    if isinstance(covariates, RunCovariates):
        stored = covariates.stored
        stored_covariates.save(conn, info, covariates.fresh, everyone=stored is None,
                               first=None if stored is None else stored.first)
    elif covariates is not None:
        stored_covariates.save(conn, info, covariates, everyone=True)


def _impressions(conn: sa.Connection, experiment_id: int, after: int, through: int) -> int:
    """How many impressions of the experiment have ids in ``(after, through]`` (by primary
    key; on SQLite off the (experiment, served_at) index, as :func:`_first_exposures`)."""
    plus = "" if conn.dialect.name == "postgresql" else "+"
    return int(conn.execute(sa.text(
        f"SELECT count(*) FROM impression imp WHERE {plus}imp.experiment_id = :experiment "
        "AND imp.id > :after AND imp.id <= :through"),
        {"experiment": experiment_id, "after": after, "through": through}).scalar_one())


def _first_exposures(reader: ArrowReader, experiment_id: int, after: int, through: int
                     ) -> tuple[pa.Array, np.ndarray]:
    """Users with impressions in ``(after, through]`` and, for each, the earliest served of
    those (µs; of the impressions the rollup can place on a day, as its plan takes them).
    One read of the range (by primary key, as Arrow), the rest in numpy: a self-join on
    users, which the impression table has no index for, can make PostgreSQL loop over the
    range once per user. On SQLite a unary ``+`` keeps the read off the
    (experiment, served_at) index, whose order is random on disk: through it, 1M impressions
    took ~10x as long as walking their ids."""
    plus = "" if reader.engine.dialect.name == "postgresql" else "+"
    rows = reader.read("SELECT imp.user_id, imp.served_at FROM impression imp "
                       f"WHERE {plus}imp.experiment_id = :experiment AND imp.id > :after "
                       f"AND imp.id <= :through AND {plus}imp.served_at >= :lo "
                       f"AND {plus}imp.served_at < :hi", _EXPOSURES,
                       {"experiment": experiment_id, "after": after, "through": through,
                        "lo": FIRST_INSTANT, "hi": END_INSTANT})
    if not rows.num_rows:
        return pa.array([], type=pa.string()), np.zeros(0, np.int64)
    users, codes = sorted_codes(rows["user"].combine_chunks())
    served = rows["served"].to_numpy()
    first = first_rows(codes, served)  # in code order: the users' order
    return users, served[first]


def _compute(reader: ArrowReader, info: ExperimentInfo, users: pa.Array, served: np.ndarray,
             conn: sa.Connection | None = None) -> UserCovariates:
    """The covariates of ``users`` first served at ``served`` (µs): per chunk of users
    sorted by first exposure (their windows overlap), one read of their interactions
    (:func:`tracker.rollup.pre_metrics.interactions`) for the counts and the pre-period
    metrics (:func:`~tracker.rollup.pre_metrics.pre_metrics`; when ``conn`` is given and
    :func:`~tracker.rollup.pre_metrics.any_lists` finds none to read, no list is read and
    every user gets what no list gives: ``pre:`` 0, ``no_pre_lists`` 1)."""
    lo = served - info.cuped_days * _DAY_US
    names = names_for(info.cutoffs)
    x = np.zeros((len(users), len(names)))
    lists = len(users) > 0 and (conn is None or any_lists(conn, info.id, lo, served))
    order = np.argsort(served, kind="stable")
    for at in range(0, len(users), _CHUNK):
        part = order[at:at + _CHUNK]
        mine = users.take(pa.array(part))
        window = (lo[part], served[part])
        events = interactions(reader, mine, *window)
        _counted(x, part, info, mine, events)
        if lists:
            x[part, len(BASE):], x[part, BASE.index(NO_LISTS)] = pre_metrics(
                reader, info, mine, *window, events)
    if not lists:
        x[:, BASE.index(NO_LISTS)] = 1.0
    x[:, 2] = (x[:, 0] == 0).astype(float)
    return UserCovariates(users, x, names, np.asarray(served, dtype=np.int64))


def _counted(x: np.ndarray, part: np.ndarray, info: ExperimentInfo, users: pa.Array,
             events: pa.Table) -> None:
    """The interaction covariates (count and graded sum) of ``users`` (rows ``part`` of
    ``x``) from their pre-period ``events``."""
    who = index_in(events["user"].combine_chunks(), users)
    grades = grades_of(events["event"], info.relevance)
    x[part, 0] = np.bincount(who, minlength=part.size)
    x[part, 1] = np.bincount(who, weights=grades, minlength=part.size)


def covariates_of(info: ExperimentInfo, users: pa.Array, events: pa.Table,
                  lists: pa.Table, first: np.ndarray | None = None) -> UserCovariates:
    """The covariates of ``users`` from already read rows (pure: the Spark engine calls it
    on Arrow tables from the lake): their pre-period ``events``
    (:func:`tracker.rollup.pre_metrics.interactions`' columns) and ``lists``
    (:func:`tracker.rollup.pre_metrics.scored_lists`' input), each user's window already
    applied (``first``: their first exposures, 0 when not given); the same values
    :func:`_compute` reads and computes."""
    names = names_for(info.cutoffs)
    x = np.zeros((len(users), len(names)))
    _counted(x, np.arange(len(users)), info, users, events)
    x[:, len(BASE):], x[:, BASE.index(NO_LISTS)] = scored_lists(info, users, lists, events)
    x[:, 2] = (x[:, 0] == 0).astype(float)
    return UserCovariates(users, x, names, np.zeros(len(users), dtype=np.int64)
                          if first is None else np.asarray(first, dtype=np.int64))


def resum(conn: sa.Connection, info: ExperimentInfo, covariates: UserCovariates,
          written: set[date], since: int | None,
          units: Callable[[date], UnitTotals | None]) -> None:
    """The stored days' daily sums again from their unit totals, once stored users'
    covariates changed (a day's sums join its users' covariates): from the day of
    ``since`` (µs: the earliest first exposure of a changed user, before which no day holds
    them; None: every day) on, of the days not in ``written``, which the run wrote itself.
    ``units(day)``: a day's totals (:meth:`~tracker.rollup.stores.Store.units`); a
    day without totals keeps its sums."""
    layout = Layout.for_cutoffs(list(info.cutoffs))
    first = None if since is None else day_of(since, info.timezone)
    for day, _, _ in results.known_days(conn, info.id):
        if (first is not None and day < first) or day in written:
            continue
        totals = units(day)
        if totals is not None:
            write_sums(conn, info, day, False, totals, covariates, layout)


__all__ = ["BASE", "PAIRS", "SUM_COVARIATES", "USERS", "UserCovariates", "add_terms",
           "cell_terms", "covariate_sums", "covariates_of", "delete_cumulative", "insert_sums",
           "names_for", "publish_daily", "refresh", "settle", "sum_columns", "sums_table",
           "write_sums"]
