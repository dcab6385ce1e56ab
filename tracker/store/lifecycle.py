"""The store's side of an experiment's lifecycle, of a user's erasure and of log retention.

Plain values in and out; the calendar (which days a row touches) is the rollup's business
(:mod:`tracker.rollup.retention`, :mod:`tracker.lifecycle`).

- **Status.** ``experiment.status`` moves draft -> running -> stopped -> archived (the rules:
  :mod:`tracker.lifecycle`). Ingest refuses impressions of stopped and archived experiments.
- **Deleting an experiment** removes its row, arms, declared catalog, impressions and
  everything the rollup keeps of it. Interactions stay: they belong to users, not to
  experiments (one click may answer impressions of several experiments, and counts in the
  item popularity of all of them).
- **Erasing a user** removes their impressions (every experiment) and interactions, and marks
  the rolled-up days those rows entered for recomputation: ``rollup_day.computed_at`` below
  ``closes_at``, ``closes_at`` no later than now, the rule by which the rollup recomputes a
  day (so even a day whose windows are still open is recomputed by the next run).
- **Retention** deletes raw impressions served and interactions that occurred before a
  cutoff and records it in ``log_expiry`` (one row per expiry: an audit trail, and the
  horizon before which the rollup never recomputes a day).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

import sqlalchemy as sa

from tracker.store import results
from tracker.store.bulk import IN_LIST_LIMIT
from tracker.store.experiments import ExperimentInfo, list_experiments
from tracker.store.log_expiry import LogExpiry
from tracker.store.models import Arm, CatalogItem, Experiment, Impression, Interaction
from tracker.store.rollup_tables import (
    ROLLUP_TABLES,
    SOURCE_DATABASE,
    RollupDay,
    RollupExposure,
    RollupState,
    RollupUnits,
    RollupUserCovariates,
    RollupUserTotals,
)
from tracker.store.types import from_micros, stored_micros

_HOUR = 3_600 * 1_000_000


def _hour(column) -> sa.ColumnElement:
    """The UTC hour (micros, floored; ``%`` keeps the dividend's sign on both engines)."""
    micros = stored_micros(column)
    return micros - ((micros % _HOUR) + _HOUR) % _HOUR


def _clamp_watermarks(conn: sa.Connection) -> None:
    """After raw rows were deleted: no watermark above the highest id left. SQLite gives a
    new row the highest id + 1 (the tables have no AUTOINCREMENT), so deleting the newest
    rows would hand their ids again to rows the rollup then takes for already seen; ids up
    to the highest one left were all taken into account, so the lowered marks lose nothing
    (on PostgreSQL, whose sequences never go back, this changes nothing the rollup reads)."""
    for table, column in ((Impression, RollupState.impressions_seen),
                          (Interaction, RollupState.interactions_seen)):
        top = sa.select(sa.func.coalesce(sa.func.max(table.id), 0)).scalar_subquery()
        conn.execute(sa.update(RollupState).where(column > top).values({column: top}))


# ---------------------------------------------------------------------------- status
def set_status(conn: sa.Connection, experiment_id: int, status: str) -> None:
    conn.execute(sa.update(Experiment).where(Experiment.id == experiment_id)
                 .values(status=status))


@dataclass(frozen=True)
class ExperimentRows:
    """An experiment's logged impressions and rolled-up days."""

    impressions: int
    days: int


def experiment_rows(conn: sa.Connection, experiment_id: int) -> ExperimentRows:
    return ExperimentRows(
        int(conn.execute(sa.select(sa.func.count()).where(
            Impression.experiment_id == experiment_id)).scalar_one()),
        int(conn.execute(sa.select(sa.func.count()).where(
            RollupDay.experiment_id == experiment_id)).scalar_one()))


def delete_experiment(conn: sa.Connection, experiment_id: int) -> dict[str, int]:
    """Remove one experiment and every row that names it; returns rows removed per table
    (``impression``, the ``rollup_*`` tables, ``catalog_item``, ``arm``)."""
    removed: dict[str, int] = {}

    def delete(table: sa.Table, where) -> None:
        removed[table.name] = conn.execute(sa.delete(table).where(where)).rowcount

    delete(Impression.__table__, Impression.experiment_id == experiment_id)
    for table in ROLLUP_TABLES:
        delete(table, table.c.experiment_id == experiment_id)
    delete(CatalogItem.__table__, CatalogItem.experiment_id == experiment_id)
    delete(Arm.__table__, Arm.experiment_id == experiment_id)
    conn.execute(sa.delete(Experiment).where(Experiment.id == experiment_id))
    _clamp_watermarks(conn)
    return removed


# ---------------------------------------------------------------------------- erasure
@dataclass(frozen=True)
class UserFootprint:
    """Where a user's rows lie, as UTC hours (micros, floored): ``served``: experiment id ->
    hours of their impressions; ``occurred``: hours of their interactions; ``named``:
    experiment id -> serving hours of the impressions their interactions name; ``kept``:
    experiments whose rollup keeps per-user state of theirs (a checkpoint's totals, CUPED's
    covariates), which outlives expired logs."""

    served: dict[int, set[int]]
    occurred: set[int]
    named: dict[int, set[int]]
    kept: set[int]


def user_footprint(conn: sa.Connection, user_id: str) -> UserFootprint:
    served: dict[int, set[int]] = {}
    for experiment_id, hour in conn.execute(
            sa.select(Impression.experiment_id, _hour(Impression.served_at)).distinct()
            .where(Impression.user_id == user_id)):
        served.setdefault(int(experiment_id), set()).add(int(hour))
    occurred = {int(h) for h in conn.execute(
        sa.select(_hour(Interaction.occurred_at)).distinct()
        .where(Interaction.user_id == user_id)).scalars()}
    named: dict[int, set[int]] = {}
    for experiment_id, hour in conn.execute(
            sa.select(Impression.experiment_id, _hour(Impression.served_at)).distinct()
            .join(Interaction, Interaction.impression_key == Impression.impression_key)
            .where(Interaction.user_id == user_id)):
        named.setdefault(int(experiment_id), set()).add(int(hour))
    kept = set(conn.execute(sa.select(Experiment.id).where(sa.or_(*(  # primary key probes
        sa.exists().where(table.experiment_id == Experiment.id, table.user_id == user_id)
        for table in (RollupUserTotals, RollupUserCovariates))))).scalars())
    return UserFootprint(served, occurred, named, kept)


@dataclass(frozen=True)
class UserRows:
    """Rows of one user removed: impressions per experiment id, and interactions."""

    impressions: dict[int, int]
    interactions: int


def delete_user_rows(conn: sa.Connection, user_id: str) -> UserRows:
    """Delete every impression and interaction of ``user_id`` (found through the tables'
    (user, time) indexes)."""
    per_experiment = {int(e): int(n) for e, n in conn.execute(
        sa.select(Impression.experiment_id, sa.func.count())
        .where(Impression.user_id == user_id).group_by(Impression.experiment_id))}
    if per_experiment:
        conn.execute(sa.delete(Impression).where(Impression.user_id == user_id))
    interactions = conn.execute(sa.delete(Interaction)
                                .where(Interaction.user_id == user_id)).rowcount
    _clamp_watermarks(conn)
    return UserRows(per_experiment, int(interactions))


def rolled_up_days(conn: sa.Connection) -> dict[int, set[date]]:
    """experiment id -> the days it has results for (``rollup_day``)."""
    out: dict[int, set[date]] = {}
    for experiment_id, day in conn.execute(sa.select(RollupDay.experiment_id, RollupDay.day)):
        out.setdefault(int(experiment_id), set()).add(day)
    return out


def mark_for_recompute(conn: sa.Connection, experiment_id: int, days: Iterable[date],
                       now_us: int) -> int:
    """Make the next rollup recompute ``days`` of the experiment from the logs: their
    stored per-user rows go (daily units and exposure: they hold the erased user; units the
    cumulative checkpoint counted are set aside for its next pass, which drops them:
    :func:`~tracker.store.results.delete_day_state`), and they
    are due (the rule: ``computed_at < closes_at <= now``): ``closes_at`` is brought down
    to ``now_us`` if later, ``computed_at`` to a microsecond before it. A due day without
    stored rows is recomputed whole (one with them is final as it stands:
    :mod:`tracker.rollup.plan`). Until then the days read as provisional.
    Returns the days marked (those rolled up)."""
    closes = stored_micros(RollupDay.closes_at)
    capped = sa.case((closes > now_us, sa.literal(now_us, sa.BigInteger)), else_=closes)
    days = sorted(set(days))
    marked = 0
    for at in range(0, len(days), IN_LIST_LIMIT):
        chunk = days[at:at + IN_LIST_LIMIT]
        marked += conn.execute(
            sa.update(RollupDay)
            .where(RollupDay.experiment_id == experiment_id, RollupDay.day.in_(chunk))
            .values({RollupDay.closes_at: capped, RollupDay.computed_at: capped - 1})
        ).rowcount
    for day in days:
        results.delete_day_state(conn, experiment_id, day)
    return marked


# ---------------------------------------------------------------------------- retention
def expired_before(conn: sa.Connection) -> int | None:
    """The latest retention cutoff (micros): raw rows dated before it were deleted; None
    when logs never expired."""
    value = conn.execute(sa.select(sa.func.max(stored_micros(LogExpiry.expired_before)))).scalar()
    return None if value is None else int(value)


def _from_lake(source) -> sa.ColumnElement[bool]:
    """``source`` (``rollup_state.source``) names logs outside the database (a Spark state
    directory's lake, :mod:`tracker.rollup.sources`): the experiment's database rows are
    not what its rollup takes into account."""
    return sa.and_(source.is_not(None), source != SOURCE_DATABASE)


def _elsewhere(experiment_id) -> sa.ColumnElement[bool]:
    """:func:`_from_lake` of the experiment's stored source."""
    return _from_lake(sa.select(RollupState.source)
                      .where(RollupState.experiment_id == experiment_id).scalar_subquery())


def not_rolled_up_before(conn: sa.Connection, before_us: int) -> list[str]:
    """Keys of the experiments holding impressions served before ``before_us`` that their
    rollup has not taken into account yet (never run, reset, or above its watermark), or
    a day an erasure marked for recompute that may lie before it (its stored rows went
    with the erasure: it must be recomputed before its logs expire); not those rolled up
    from a lake."""
    # the impression's own experiment's watermark (correlated to the impression: through
    # ``Experiment`` it would read every experiment's, and take one)
    seen = (sa.select(RollupState.impressions_seen)
            .where(RollupState.experiment_id == Impression.experiment_id).scalar_subquery())
    pending = sa.exists().where(
        Impression.experiment_id == Experiment.id,
        stored_micros(Impression.served_at) < before_us,
        sa.or_(seen.is_(None), Impression.id > seen))
    # the day in any time zone: a calendar day after the cutoff's UTC date is safe
    last = from_micros(before_us).date() + timedelta(days=1)
    marked = sa.exists().where(
        RollupDay.experiment_id == Experiment.id, RollupDay.day <= last,
        stored_micros(RollupDay.computed_at) < stored_micros(RollupDay.closes_at),
        sa.not_(sa.exists().where(RollupUnits.experiment_id == RollupDay.experiment_id,
                                  RollupUnits.day == RollupDay.day,
                                  RollupUnits.cumulative.is_(False))))
    return list(conn.execute(sa.select(Experiment.key).where(
        sa.or_(pending, marked), sa.not_(_elsewhere(Experiment.id)))
        .order_by(Experiment.key)).scalars())


@dataclass(frozen=True)
class ExpiredRows:
    impressions: int
    interactions: int


def count_logs_before(conn: sa.Connection, before_us: int) -> ExpiredRows:
    """Raw rows dated before ``before_us`` (what :func:`expire_logs` would delete)."""
    return ExpiredRows(
        int(conn.execute(sa.select(sa.func.count()).where(
            stored_micros(Impression.served_at) < before_us)).scalar_one()),
        int(conn.execute(sa.select(sa.func.count()).where(
            stored_micros(Interaction.occurred_at) < before_us)).scalar_one()))


def record_expiry(conn: sa.Connection, before_us: int, now_us: int) -> int:
    """Record an expiry at ``before_us`` (rows counted later: :func:`set_expiry_counts`);
    from its commit on, no rollup recomputes a day whose inputs reach before it."""
    return int(conn.execute(sa.insert(LogExpiry).values(
        expired_before=before_us, ran_at=now_us, impressions=0, interactions=0,
    ).returning(LogExpiry.id)).scalar_one())


def delete_logs_before(conn: sa.Connection, before_us: int) -> ExpiredRows:
    """Delete raw impressions served and interactions that occurred before ``before_us``."""
    impressions = conn.execute(sa.delete(Impression).where(
        stored_micros(Impression.served_at) < before_us)).rowcount
    interactions = conn.execute(sa.delete(Interaction).where(
        stored_micros(Interaction.occurred_at) < before_us)).rowcount
    _clamp_watermarks(conn)
    return ExpiredRows(int(impressions), int(interactions))


def set_expiry_counts(conn: sa.Connection, expiry_id: int, rows: ExpiredRows) -> None:
    conn.execute(sa.update(LogExpiry).where(LogExpiry.id == expiry_id)
                 .values(impressions=rows.impressions, interactions=rows.interactions))


def drop_unreadable_state(conn: sa.Connection, experiment_id: int,
                          first_recomputable: date) -> None:
    """Drop the per-user rollup state of one experiment that no run can read any more once
    days before ``first_recomputable`` are never recomputed: their daily units and
    exposure, and every cumulative row but that of the last rolled-up day before
    ``first_recomputable`` (the one the next cumulative pass starts from). The results the
    report reads stay, and so does the item popularity (its logs cannot be counted
    again)."""
    mine = {RollupUnits: RollupUnits.experiment_id == experiment_id,
            RollupExposure: RollupExposure.experiment_id == experiment_id}
    last_kept = conn.execute(sa.select(sa.func.max(RollupDay.day)).where(
        RollupDay.experiment_id == experiment_id, RollupDay.day < first_recomputable)).scalar()
    for table, where in mine.items():
        conn.execute(sa.delete(table).where(where, table.cumulative.is_(False),
                                            table.day < first_recomputable))
        if last_kept is not None:
            conn.execute(sa.delete(table).where(where, table.cumulative.is_(True),
                                                table.day < last_kept))


def first_rolled_up_day(conn: sa.Connection, experiment_id: int) -> date | None:
    return conn.execute(sa.select(sa.func.min(RollupDay.day))
                        .where(RollupDay.experiment_id == experiment_id)).scalar()


# ---------------------------------------------------------------------------- listing
def not_rolled_up(conn: sa.Connection, experiment_id: int) -> bool:
    """Whether the experiment holds impressions its rollup has not taken into account
    (never run, reset, or above its watermark; never when it is rolled up from a lake).
    Walks the experiment's impressions once."""
    if conn.execute(sa.select(_elsewhere(experiment_id))).scalar():
        return False
    seen = conn.execute(sa.select(RollupState.impressions_seen)
                        .where(RollupState.experiment_id == experiment_id)).scalar()
    query = sa.select(Impression.id).where(Impression.experiment_id == experiment_id)
    if seen is not None:
        query = query.where(Impression.id > seen)
    return conn.execute(query.limit(1)).first() is not None


def rollup_targets(conn: sa.Connection) -> list[ExperimentInfo]:
    """The experiments a rollup of every experiment takes: all but the archived ones with
    nothing left to do. An archived experiment (every impression rolled up when it was
    archived: :mod:`tracker.lifecycle`) is still taken while a day of it is not final
    (windows still open, or marked by an erasure) or its state was reset (a catalog
    declaration, a migration). Reads ``rollup_day`` and ``rollup_state`` only."""
    everything = list_experiments(conn)
    archived = [e.id for e in everything if e.status == "archived"]
    if not archived:
        return everything
    open_days = set(conn.execute(sa.select(RollupDay.experiment_id).distinct().where(
        RollupDay.experiment_id.in_(archived),
        stored_micros(RollupDay.computed_at) < stored_micros(RollupDay.closes_at))).scalars())
    ready = set(conn.execute(sa.select(RollupState.experiment_id).where(
        RollupState.experiment_id.in_(archived),
        sa.or_(RollupState.impressions_seen.is_not(None),
               _from_lake(RollupState.source)))).scalars())
    holding = {e for e in set(archived) - ready
               if conn.execute(sa.select(Impression.id).where(Impression.experiment_id == e)
                               .limit(1)).first() is not None}
    busy = open_days | holding
    return [e for e in everything if e.status != "archived" or e.id in busy]
