"""Reading and writing the rollup's tables (see :mod:`tracker.store.rollup_tables`).

Plain values in and out (ints, dates, bytes, dicts); the store knows no metric. Unit-day
vectors travel as bytes: PostgreSQL receives them through binary ``COPY``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime

import sqlalchemy as sa

from tracker.store.models import Impression, Interaction
from tracker.store.rollup_tables import (
    RollupDay,
    RollupExposure,
    RollupHealth,
    RollupMetric,
    RollupState,
    RollupUserDay,
)


def _micros(column) -> sa.ColumnElement:
    """A time column as its stored integer (microseconds since the epoch)."""
    return sa.type_coerce(column, sa.BigInteger)


def latest_ids(conn: sa.Connection) -> tuple[int, int]:
    """The highest impression id and interaction id stored (0 when none), such that every
    row with a lower id is already committed.

    On PostgreSQL ids come from sequences and transactions commit in any order, so a batch
    still being written may hold ids below the current maximum; a ``SHARE`` lock on the two
    tables waits for those writers to finish (and holds new ones back for the few
    milliseconds of this transaction), so that no committed row can later appear below the
    returned ids. SQLite has one writer at a time and assigns ids at insert: uncommitted rows
    always lie above the committed maximum.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("LOCK TABLE impression, interaction IN SHARE MODE"))
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
    for table in (RollupUserDay, RollupExposure, RollupMetric, RollupHealth, RollupDay,
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
    for table in (RollupUserDay, RollupDay):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id,
                                            table.day == day))
    for table in (RollupMetric, RollupHealth, RollupExposure):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id,
                                            table.day == day, table.cumulative.is_(False)))


def delete_cumulative(conn: sa.Connection, experiment_id: int, since: date) -> None:
    for table in (RollupMetric, RollupHealth, RollupExposure):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id,
                                            table.day >= since, table.cumulative.is_(True)))


def insert_day(conn: sa.Connection, **values) -> None:
    conn.execute(sa.insert(RollupDay).values(**values))


def _bulk_insert(conn: sa.Connection, table: sa.Table, columns: list[str],
                 pg_types: list[str], rows: Iterable[tuple]) -> None:
    """Insert many rows: binary ``COPY`` on PostgreSQL, ``executemany`` on SQLite."""
    if conn.dialect.name == "postgresql":
        cursor = conn.connection.driver_connection.cursor()
        with cursor.copy(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN "
                         "(FORMAT BINARY)") as copy:
            copy.set_types(pg_types)
            for row in rows:
                copy.write_row(row)
        return
    rows = list(rows)
    if not rows:
        return
    marks = ", ".join("?" for _ in columns)
    conn.exec_driver_sql(f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({marks})",
                         list(rows))


def insert_user_days(conn: sa.Connection, experiment_id: int, day: date,
                     rows: Iterable[tuple[str, int, int, bytes, bytes]]) -> None:
    """Unit-day rows ``(user_id, arm_id, impressions, sums, counts)`` of one day."""
    _bulk_insert(conn, RollupUserDay.__table__,
                 ["experiment_id", "day", "user_id", "arm_id", "impressions", "sums", "counts"],
                 ["int4", "date", "text", "int4", "int4", "bytea", "bytea"],
                 ((experiment_id, day if conn.dialect.name == "postgresql" else day.isoformat(),
                   user, arm, impressions, sums, counts)
                  for user, arm, impressions, sums, counts in rows))


def user_days(conn: sa.Connection, experiment_id: int, first: date, last: date):
    """Unit-day rows with ``first <= day <= last``: (day, user, arm, impressions, sums,
    counts), ordered by day, user and arm."""
    return conn.execute(sa.select(
        RollupUserDay.day, RollupUserDay.user_id, RollupUserDay.arm_id,
        RollupUserDay.impressions, RollupUserDay.sums, RollupUserDay.counts,
    ).where(RollupUserDay.experiment_id == experiment_id, RollupUserDay.day >= first,
            RollupUserDay.day <= last)
      .order_by(RollupUserDay.day, RollupUserDay.user_id, RollupUserDay.arm_id)).all()


def insert_exposure(conn: sa.Connection, experiment_id: int, day: date, cumulative: bool,
                    rows: Iterable[tuple[int, str, bytes]]) -> None:
    """Exposure rows ``(arm_id, items JSON, counts bytes)`` of one day."""
    conn.execute(sa.insert(RollupExposure), [
        {"experiment_id": experiment_id, "day": day, "cumulative": cumulative, "arm_id": arm,
         "items": items, "counts": counts} for arm, items, counts in rows])


def exposure(conn: sa.Connection, experiment_id: int, day: date,
             cumulative: bool) -> dict[int, tuple[str, bytes]]:
    """The exposure rows of one day: arm -> (items JSON, counts bytes)."""
    table = RollupExposure.__table__
    rows = conn.execute(sa.select(table.c.arm_id, table.c["items"], table.c.counts).where(
        table.c.experiment_id == experiment_id, table.c.day == day,
        table.c.cumulative.is_(cumulative)))
    return {int(arm): (items, bytes(counts)) for arm, items, counts in rows}


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
