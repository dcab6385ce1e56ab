"""Reading and writing the rollup's tables (see :mod:`tracker.store.rollup_tables`).

Plain values in and out (ints, dates, bytes, dicts); the store knows no metric. Unit-day
vectors travel as bytes: PostgreSQL receives them through binary ``COPY``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, datetime

import sqlalchemy as sa

from tracker.store.models import Impression, Interaction
from tracker.store.rollup_tables import (
    RollupDay,
    RollupHealth,
    RollupItemDay,
    RollupMetric,
    RollupState,
    RollupUserDay,
)


def _micros(column) -> sa.ColumnElement:
    """A time column as its stored integer (microseconds since the epoch)."""
    return sa.type_coerce(column, sa.BigInteger)


def latest_ids(conn: sa.Connection) -> tuple[int, int]:
    """The highest impression id and interaction id stored (0 when none)."""
    imp = conn.execute(sa.select(sa.func.max(Impression.id))).scalar() or 0
    inter = conn.execute(sa.select(sa.func.max(Interaction.id))).scalar() or 0
    return int(imp), int(inter)


def load_state(conn: sa.Connection, experiment_id: int) -> tuple[int, int] | None:
    row = conn.execute(sa.select(RollupState.impressions_seen, RollupState.interactions_seen)
                       .where(RollupState.experiment_id == experiment_id)).first()
    return None if row is None else (int(row[0]), int(row[1]))


def save_state(conn: sa.Connection, experiment_id: int, impressions_seen: int,
               interactions_seen: int, now: datetime) -> None:
    values = {"impressions_seen": impressions_seen, "interactions_seen": interactions_seen,
              "updated_at": now}
    done = conn.execute(sa.update(RollupState)
                        .where(RollupState.experiment_id == experiment_id).values(**values))
    if done.rowcount == 0:
        conn.execute(sa.insert(RollupState).values(experiment_id=experiment_id, **values))


def last_run(conn: sa.Connection, experiment_id: int) -> datetime | None:
    return conn.execute(sa.select(RollupState.updated_at)
                        .where(RollupState.experiment_id == experiment_id)).scalar()


def clear_experiment(conn: sa.Connection, experiment_id: int) -> None:
    """Forget every rollup result and the state of one experiment (``--full``)."""
    for table in (RollupUserDay, RollupItemDay, RollupMetric, RollupHealth, RollupDay,
                  RollupState):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id))


def served_range(conn: sa.Connection, experiment_id: int, after: int = 0,
                 through: int | None = None) -> tuple[int | None, int | None]:
    """(min, max) served_at of the experiment's impressions with ids in (after, through]."""
    query = sa.select(sa.func.min(_micros(Impression.served_at)),
                      sa.func.max(_micros(Impression.served_at))).where(
        Impression.experiment_id == experiment_id, Impression.id > after)
    if through is not None:
        query = query.where(Impression.id <= through)
    low, high = conn.execute(query).one()
    return low, high


def known_days(conn: sa.Connection, experiment_id: int) -> list[tuple[date, int, int]]:
    """(day, closes_at micros, computed_at micros) of the days rolled up so far."""
    rows = conn.execute(sa.select(RollupDay.day, _micros(RollupDay.closes_at),
                                  _micros(RollupDay.computed_at))
                        .where(RollupDay.experiment_id == experiment_id)
                        .order_by(RollupDay.day)).all()
    return [(r[0], int(r[1]), int(r[2])) for r in rows]


def delete_day(conn: sa.Connection, experiment_id: int, day: date) -> None:
    """Remove one day's unit-day, exposure, daily metric and daily health rows."""
    for table in (RollupUserDay, RollupItemDay, RollupDay):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id,
                                            table.day == day))
    for table in (RollupMetric, RollupHealth):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id,
                                            table.day == day, table.cumulative.is_(False)))


def delete_cumulative(conn: sa.Connection, experiment_id: int, since: date) -> None:
    for table in (RollupMetric, RollupHealth):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id,
                                            table.day >= since, table.cumulative.is_(True)))


def insert_day(conn: sa.Connection, **values) -> None:
    conn.execute(sa.insert(RollupDay).values(**values))


def insert_user_days(conn: sa.Connection, experiment_id: int, day: date,
                     rows: Iterable[tuple[str, int, int, bytes, bytes]]) -> None:
    """Unit-day rows ``(user_id, arm_id, impressions, sums, counts)`` of one day."""
    if conn.dialect.name == "postgresql":
        cursor = conn.connection.driver_connection.cursor()
        with cursor.copy("COPY rollup_user_day (experiment_id, day, user_id, arm_id, "
                         "impressions, sums, counts) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "date", "text", "int4", "int4", "bytea", "bytea"])
            for user, arm, impressions, sums, counts in rows:
                copy.write_row((experiment_id, day, user, arm, impressions, sums, counts))
        return
    conn.execute(sa.insert(RollupUserDay), [
        {"experiment_id": experiment_id, "day": day, "user_id": user, "arm_id": arm,
         "impressions": impressions, "sums": sums, "counts": counts}
        for user, arm, impressions, sums, counts in rows
    ])


def user_days(conn: sa.Connection, experiment_id: int, first: date, last: date):
    """Unit-day rows with ``first <= day <= last``: (day, user, arm, impressions, sums,
    counts), ordered by day, user and arm."""
    return conn.execute(sa.select(
        RollupUserDay.day, RollupUserDay.user_id, RollupUserDay.arm_id,
        RollupUserDay.impressions, RollupUserDay.sums, RollupUserDay.counts,
    ).where(RollupUserDay.experiment_id == experiment_id, RollupUserDay.day >= first,
            RollupUserDay.day <= last)
      .order_by(RollupUserDay.day, RollupUserDay.user_id, RollupUserDay.arm_id)).all()


def insert_catalog_items(conn: sa.Connection, experiment_id: int, day: date,
                         items: Sequence[str]) -> None:
    """Items of the day's ground truth that no arm served (arm 0, k 0, exposure 0)."""
    if not items:
        return
    served = sa.select(RollupItemDay.item_id).where(
        RollupItemDay.experiment_id == experiment_id, RollupItemDay.day == day)
    known = {row[0] for row in conn.execute(served)}
    new = sorted(set(items) - known)
    if new:
        conn.execute(sa.insert(RollupItemDay), [
            {"experiment_id": experiment_id, "day": day, "arm_id": 0, "k": 0, "item_id": item,
             "exposures": 0} for item in new])


def exposure(conn: sa.Connection, experiment_id: int, first: date, last: date):
    """Summed item exposure over ``first..last``: (arm, k, exposures) rows for served items,
    ordered by arm, k and item; and the catalog size (distinct items of those days)."""
    where = (RollupItemDay.experiment_id == experiment_id, RollupItemDay.day >= first,
             RollupItemDay.day <= last)
    rows = conn.execute(
        sa.select(RollupItemDay.arm_id, RollupItemDay.k, RollupItemDay.item_id,
                  sa.func.sum(RollupItemDay.exposures))
        .where(*where, RollupItemDay.arm_id != 0, RollupItemDay.k > 0)
        .group_by(RollupItemDay.arm_id, RollupItemDay.k, RollupItemDay.item_id)
        .order_by(RollupItemDay.arm_id, RollupItemDay.k, RollupItemDay.item_id)).all()
    catalog = conn.execute(sa.select(sa.func.count(sa.distinct(RollupItemDay.item_id)))
                           .where(*where)).scalar_one()
    return [(int(a), int(k), int(n)) for a, k, _, n in rows], int(catalog)


def insert_metrics(conn: sa.Connection, rows: list[dict]) -> None:
    if rows:
        conn.execute(sa.insert(RollupMetric), rows)


def insert_health(conn: sa.Connection, rows: list[dict]) -> None:
    if rows:
        conn.execute(sa.insert(RollupHealth), rows)


def metric_rows(conn: sa.Connection, experiment_id: int, cumulative: bool) -> list[dict]:
    """Stored arm-day statistics of one experiment, as dicts."""
    table = RollupMetric.__table__
    result = conn.execute(sa.select(table).where(table.c.experiment_id == experiment_id,
                                                 table.c.cumulative.is_(cumulative))
                          .order_by(table.c.day, table.c.arm_id, table.c.metric, table.c.k))
    return [dict(row._mapping) for row in result]


def health_rows(conn: sa.Connection, experiment_id: int, cumulative: bool) -> list[dict]:
    table = RollupHealth.__table__
    result = conn.execute(sa.select(table).where(table.c.experiment_id == experiment_id,
                                                 table.c.cumulative.is_(cumulative))
                          .order_by(table.c.day, table.c.arm_id))
    return [dict(row._mapping) for row in result]


def day_rows(conn: sa.Connection, experiment_id: int) -> list[dict]:
    table = RollupDay.__table__
    result = conn.execute(sa.select(table).where(table.c.experiment_id == experiment_id)
                          .order_by(table.c.day))
    return [dict(row._mapping) for row in result]
