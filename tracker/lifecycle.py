"""An experiment's lifecycle, a user's erasure and the expiry of old logs.

**Statuses.** ``draft -> running -> stopped -> archived``:

- *stop* (running -> stopped): ingest refuses the experiment's new impressions, each one a
  rejection that says so; interactions still come in, so the rollup finishes the
  attribution windows of the lists served before the stop. *start* (draft or stopped ->
  running) serves again.
- *archive* (stopped -> archived): the experiment leaves the default lists
  (``experiments list``, ``Tracker.experiments()``, the dashboard) and a rollup of every
  experiment skips it once none of its days is left to compute. Archiving needs every
  impression rolled up first (so an archived experiment's results are complete).
- *delete* (any status): removes the experiment, its impressions and everything the rollup
  keeps of it. Interactions stay: they belong to users and may answer other experiments.

Anything else (archive a running or draft experiment, start or stop an archived one) raises
:class:`~tracker.errors.InvalidTransition`; asking for the status an experiment already has
changes nothing.

**Erasure** (GDPR Art. 17, :func:`delete_user`): the user's impressions and interactions go
in one transaction; then each experiment whose stored results those rows entered gets those
days marked for recomputation, under its rollup lock: a rollup that read the rows before
they went finishes first, then its days are marked again. The next rollup recomputes those
days and the cumulative ones after them, so the per-user state (unit totals) is rebuilt
without the user. The per-user state that outlives expired logs (the cumulative
checkpoint's totals, the first-seen users, CUPED's covariates) drops the user at once, the
checkpoint's sums are computed again from the remaining users' totals, and the days after it
are recomputed. What days before the retention horizon published stays as computed, and so
do the cumulative set-level metrics, which add up the items served since the first day
(aggregates that hold no user's id). A user's interaction counts in the item popularity
(surprisal) of every experiment whose reference period it occurred in (the
``TRACKER_ROLLUP_POPULARITY_DAYS`` days before its first day:
:mod:`tracker.rollup.popularity`), so an erasure may drop the stored popularity of
experiments the user never saw, and their next rollup counts it again (and recomputes every
day if it changed); not when logs of its period expired, since it is never counted again
from partial logs (it keeps the user's interactions as counts of distinct users).

**Retention** (:func:`expire_logs`): raw rows dated before the cutoff are deleted and the
cutoff recorded; days whose inputs reach before it keep their results and are never
recomputed (:mod:`tracker.rollup.retention`), and the per-user state no later run can read is
dropped with the logs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import sqlalchemy as sa
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from tracker.config import Settings
from tracker.errors import Busy, ExpiredLogs, InvalidTransition, ValidationError
from tracker.rollup import covariates
from tracker.rollup.days import HOUR, day_of, days_between, days_of_hours, in_range
from tracker.rollup.lock import rollup_lock
from tracker.rollup.popularity import Reference
from tracker.rollup.retention import first_recomputable_day
from tracker.rollup.stores import DatabaseStore
from tracker.store import lifecycle as store
from tracker.store import results
from tracker.store.db import transaction
from tracker.store.experiments import ExperimentInfo, get_experiment, list_experiments
from tracker.store.types import from_micros, to_micros

_ALLOWED = {  # target status -> statuses it may be reached from
    "running": ("draft", "stopped"),
    "stopped": ("running",),
    "archived": ("stopped",),
}
_WHY_NOT = {
    ("archived", "running"): "stop it first (tracker experiments stop)",
    ("archived", "draft"): "a draft never ran: delete it instead",
    ("running", "archived"): "an archived experiment is final; create a new one",
    ("stopped", "archived"): "it is archived, which is final",
    ("stopped", "draft"): "a draft never ran: nothing to stop",
}
LOCK_WAIT_SECONDS = 3600.0
"""How long an erasure or an expiry waits for a running rollup of an experiment."""


@dataclass(frozen=True)
class StatusChange:
    experiment: str
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def change_status(engine: sa.Engine, key: str, target: str) -> StatusChange:
    """Move experiment ``key`` to ``target`` (running, stopped or archived)."""
    with transaction(engine, write=True) as conn:
        info = get_experiment(conn, key)
        if info.status == target:
            return StatusChange(key, target, target)
        if info.status not in _ALLOWED[target]:
            why = _WHY_NOT.get((target, info.status), f"allowed from "
                               f"{' or '.join(_ALLOWED[target])} only")
            raise InvalidTransition(f"experiment {key!r} is {info.status}: cannot make it "
                                    f"{target}; {why}")
        if target == "archived" and store.not_rolled_up(conn, info.id):
            raise InvalidTransition(
                f"experiment {key!r} has impressions its rollup has not taken yet: run "
                f"`tracker rollup {key}` first, then archive it")
        store.set_status(conn, info.id, target)
    return StatusChange(key, info.status, target)


@dataclass(frozen=True)
class ExperimentRemoval:
    """What deleting an experiment removed: rows per table."""

    experiment: str
    rows: dict[str, int]

    def describe(self) -> str:
        removed = ", ".join(f"{n} {t}" for t, n in self.rows.items() if n) or "no logged rows"
        return f"deleted experiment {self.experiment!r}: {removed}"


def experiment_rows(engine: sa.Engine, key: str) -> store.ExperimentRows:
    """What deleting experiment ``key`` would remove, for the confirmation question."""
    with transaction(engine) as conn:
        return store.experiment_rows(conn, get_experiment(conn, key).id)


def delete_experiment(engine: sa.Engine, key: str) -> ExperimentRemoval:
    """Delete experiment ``key`` with its impressions, results and rollup state (not its
    interactions). Raises :class:`Busy` (nothing deleted) while a rollup of it runs."""
    with transaction(engine) as conn:
        info = get_experiment(conn, key)
    with rollup_lock(engine, info.id, key), transaction(engine, write=True) as conn:
        rows = store.delete_experiment(conn, get_experiment(conn, key).id)
    return ExperimentRemoval(key, rows)


@dataclass(frozen=True)
class ErasedFrom:
    """One experiment's part of an erasure: impressions removed, days to recompute."""

    experiment: str
    impressions: int
    days_marked: tuple[date, ...]


@dataclass(frozen=True)
class UserErasure:
    user_id: str
    interactions: int
    experiments: tuple[ErasedFrom, ...] = field(default_factory=tuple)

    @property
    def impressions(self) -> int:
        return sum(e.impressions for e in self.experiments)

    def to_dict(self) -> dict:
        return {"user_id": self.user_id, "impressions": self.impressions,
                "interactions": self.interactions,
                "experiments": [{"experiment": e.experiment, "impressions": e.impressions,
                                 "days_marked": [d.isoformat() for d in e.days_marked]}
                                for e in self.experiments]}


@dataclass(frozen=True)
class _Plan:
    """One experiment's days to mark, and whether its stored popularity counted the
    user."""

    marked: set[date]
    stale: bool = False


def _plan(info: ExperimentInfo, footprint: store.UserFootprint, rolled_up: set[date] | None,
          first_recomputable: date | None, reference: Reference | None = None) -> _Plan:
    """The rule of the rollup's incremental plan (``tracker.rollup.engine``), for rows that
    went: impressions touch the days they were served on; an interaction the days of the
    user's impressions it may answer (within the window before it), or the day of the
    impression it names. Marked: those of them in ``rolled_up`` (None: every one touched).
    Days before the retention horizon are never recomputed: they are not marked. Stale: an
    interaction occurred in ``reference``, the period of the stored popularity."""
    zone = info.timezone
    window = int(info.attribution_window.total_seconds() * 1_000_000)
    served = footprint.served.get(info.id, ())
    touched = days_of_hours(served, zone) | days_of_hours(footprint.named.get(info.id, ()), zone)
    for hour in footprint.occurred if served else ():  # they answer the user's lists only
        touched.update(days_between(day_of(in_range(hour - window), zone),
                                    day_of(in_range(hour + HOUR - 1), zone)))
    marked = touched if rolled_up is None else touched & rolled_up
    if first_recomputable is not None:
        marked = {d for d in marked if d >= first_recomputable}
    stale = False
    if reference is not None:
        start, end = reference.bounds(zone)
        stale = any(hour < end and hour + HOUR > start for hour in footprint.occurred)
    return _Plan(marked, stale)


def delete_user(engine: sa.Engine, settings: Settings, user_id: str, *,
                now: datetime | None = None) -> UserErasure:
    """Erase ``user_id``'s impressions and interactions in every experiment and make the next
    rollup recompute the days they entered (see the module's docstring). ``now`` (tests):
    the clock the marks are set against."""
    if not isinstance(user_id, str) or not user_id:
        raise ValidationError(f"a user id is a non-empty string, got {user_id!r}",
                              field="user_id")
    now_us = to_micros(now or datetime.now(UTC))
    with transaction(engine, write=True) as conn:
        footprint = store.user_footprint(conn, user_id)
        removed = store.delete_user_rows(conn, user_id)
        cutoff = store.expired_before(conn)
        infos = list_experiments(conn)
    parts = []
    for info in infos:
        first = None if cutoff is None else first_recomputable_day(cutoff, info.timezone)
        # every day the rows could have entered, rolled up or not yet, and the popularity
        # (any interaction may lie in its period): a rollup running now may have read them
        # before they went and be computing such a day, or the popularity, for the first
        # time. Under the experiment's lock it has finished, and what it published is read
        # and marked in the same transaction.
        plan = _plan(info, footprint, None, first)
        if plan.marked or footprint.occurred or info.id in footprint.kept:
            with _waiting_lock(engine, info), transaction(engine, write=True) as conn:
                rolled_up = store.rolled_up_days(conn).get(info.id, set())
                period = results.popularity_period(conn, info.id)
                reference = None if period is None else Reference(*period)
                if reference is not None and cutoff is not None and \
                        reference.bounds(info.timezone)[0] < cutoff:
                    reference = None  # its logs expired in part: never counted again
                plan = _plan(info, footprint, rolled_up, first, reference)
                kept = DatabaseStore(conn, info).forget(user_id)
                if kept is not None:  # the days after the checkpoint, whose cumulative
                    plan = _Plan(plan.marked | {  # rows counted the user, are recomputed
                        d for d in rolled_up if d > kept and (first is None or d >= first)},
                        plan.stale)
                if plan.marked:
                    store.mark_for_recompute(conn, info.id, plan.marked, now_us)
                if plan.stale:  # counted again by the next rollup
                    results.delete_popularity(conn, info.id)
                covariates.forget(conn, info, user_id)  # their first exposure goes too
        impressions = removed.impressions.get(info.id, 0)
        if impressions or plan.marked:
            parts.append(ErasedFrom(info.key, impressions, tuple(sorted(plan.marked))))
    return UserErasure(user_id, removed.interactions, tuple(parts))


@contextmanager
def _waiting_lock(engine: sa.Engine, info: ExperimentInfo,
                  wait: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
    """The experiment's rollup lock, waiting up to ``wait`` seconds for a running rollup to
    finish (then :class:`Busy`)."""
    retrying = Retrying(retry=retry_if_exception_type(Busy), stop=stop_after_delay(wait),
                        wait=wait_exponential(multiplier=0.05, max=5.0), reraise=True)
    with ExitStack() as stack:
        for attempt in retrying:
            with attempt:
                stack.enter_context(rollup_lock(engine, info.id, info.key))
        yield


@dataclass(frozen=True)
class LogExpiry:
    """What an expiry removed (or, with ``dry_run``, would remove)."""

    expired_before: datetime
    impressions: int
    interactions: int
    dry_run: bool = False

    def describe(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (f"{verb} {self.impressions} impressions and {self.interactions} interactions "
                f"dated before {self.expired_before.isoformat()}; the rollup's results of "
                "those days stay")


def expire_logs(engine: sa.Engine, settings: Settings, older_than: timedelta, *,
                now: datetime | None = None, dry_run: bool = False) -> LogExpiry:
    """Delete raw impressions and interactions dated more than ``older_than`` before
    ``now``; the rollup's stored results stay, and no later run recomputes a day whose
    inputs reach before the cutoff. Raises :class:`ExpiredLogs` (nothing deleted) while an
    experiment holds impressions older than that its rollup has not taken into account."""
    if older_than <= timedelta(0):
        raise ValidationError(f"the age must be positive, got {older_than}",
                              field="older_than")
    now = now or datetime.now(UTC)
    before_us = to_micros(now - older_than)
    with transaction(engine) as conn:
        pending = store.not_rolled_up_before(conn, before_us)
        if dry_run or pending:
            counts = store.count_logs_before(conn, before_us)
        infos = list_experiments(conn)
    if pending:
        raise ExpiredLogs(
            f"{', '.join(repr(k) for k in pending[:5])} hold impressions older than the "
            f"cutoff ({from_micros(before_us).isoformat()}) that the rollup has not taken "
            "into account, or days an erasure marked that it has not recomputed yet: run "
            "`tracker rollup` first (nothing was deleted)")
    if dry_run:
        return LogExpiry(from_micros(before_us), counts.impressions, counts.interactions,
                         dry_run=True)
    with transaction(engine, write=True) as conn:  # first: no run starting now recomputes
        expiry = store.record_expiry(conn, before_us, to_micros(now))  # an expired day
    for info in infos:  # then every run that started before has finished
        with _waiting_lock(engine, info):
            pass
    with transaction(engine, write=True) as conn:
        removed = store.delete_logs_before(conn, before_us)
        store.set_expiry_counts(conn, expiry, removed)
        for info in infos:
            store.drop_unreadable_state(
                conn, info.id, first_recomputable_day(store.expired_before(conn), info.timezone))
    return LogExpiry(from_micros(before_us), removed.impressions, removed.interactions)
