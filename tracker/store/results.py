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
    RollupItemCumulative,
    RollupItemDay,
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
    for table in (RollupUserDay, RollupItemDay, RollupItemCumulative, RollupMetric,
                  RollupHealth, RollupDay, RollupState):
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


def insert_catalog(conn: sa.Connection, experiment_id: int, day: date,
                   truth_items: Sequence[str]) -> None:
    """The day's catalog as arm-0 rows of ``rollup_item_day``: k -1 for the items of the
    day's ground truths, k 0 for every item served (``k = 0`` rows of the arms) or in a
    ground truth, once each."""
    when = day if conn.dialect.name == "postgresql" else day.isoformat()
    table = RollupItemDay.__table__
    _bulk_insert(conn, table, ["experiment_id", "day", "arm_id", "k", "item_id", "exposures"],
                 ["int4", "date", "int4", "int4", "text", "int8"],
                 ((experiment_id, when, 0, -1, item, 0) for item in truth_items))
    this_day = (table.c.experiment_id == experiment_id, table.c.day == day)
    seen = (sa.select(table.c.item_id)
            .where(*this_day, sa.or_(sa.and_(table.c.arm_id != 0, table.c.k == 0),
                                     sa.and_(table.c.arm_id == 0, table.c.k == -1)))
            .distinct().subquery())
    conn.execute(sa.insert(table).from_select(
        ["experiment_id", "day", "arm_id", "k", "item_id", "exposures"],
        sa.select(sa.literal(experiment_id), sa.literal(day, sa.Date), sa.literal(0),
                  sa.literal(0), seen.c.item_id, sa.literal(0))))


def accumulate_exposure(conn: sa.Connection, experiment_id: int, day: date,
                        previous: date | None) -> None:
    """``rollup_item_cumulative`` for ``day``: the rows of ``previous`` (the last earlier day
    with data, None on the first) plus the day's own (served top-k exposure and catalog)."""
    day_t, cum_t = RollupItemDay.__table__, RollupItemCumulative.__table__
    columns = ("arm_id", "k", "item_id", "exposures")
    parts = [sa.select(*(day_t.c[c] for c in columns)).where(
        day_t.c.experiment_id == experiment_id, day_t.c.day == day,
        sa.or_(day_t.c.k > 0, sa.and_(day_t.c.arm_id == 0, day_t.c.k == 0)))]
    if previous is not None:
        parts.append(sa.select(*(cum_t.c[c] for c in columns)).where(
            cum_t.c.experiment_id == experiment_id, cum_t.c.day == previous))
    both = sa.union_all(*parts).subquery()
    conn.execute(sa.insert(cum_t).from_select(
        ["experiment_id", "day", "arm_id", "k", "item_id", "exposures"],
        sa.select(sa.literal(experiment_id), sa.literal(day, sa.Date), both.c.arm_id,
                  both.c.k, both.c.item_id, sa.func.sum(both.c.exposures))
        .group_by(both.c.arm_id, both.c.k, both.c.item_id)))


def exposure_histogram(conn: sa.Connection, experiment_id: int, day: date,
                       cumulative: bool):
    """Item exposure on ``day`` (or from the first day through it), as a histogram: (arm, k,
    exposure, number of items with that exposure) for exposures > 0, ordered; and the
    catalog size (distinct items served or in a ground truth)."""
    table = (RollupItemCumulative if cumulative else RollupItemDay).__table__
    where = (table.c.experiment_id == experiment_id, table.c.day == day)
    rows = conn.execute(
        sa.select(table.c.arm_id, table.c.k, table.c.exposures, sa.func.count())
        .where(*where, table.c.arm_id != 0, table.c.k > 0, table.c.exposures > 0)
        .group_by(table.c.arm_id, table.c.k, table.c.exposures)
        .order_by(table.c.arm_id, table.c.k, table.c.exposures)).all()
    catalog = conn.execute(sa.select(sa.func.count())
                           .where(*where, table.c.arm_id == 0, table.c.k == 0)).scalar_one()
    return [(int(a), int(k), int(n), int(c)) for a, k, n, c in rows], int(catalog)


def delete_cumulative_exposure(conn: sa.Connection, experiment_id: int, since: date) -> None:
    table = RollupItemCumulative.__table__
    conn.execute(sa.delete(table).where(table.c.experiment_id == experiment_id,
                                        table.c.day >= since))


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
