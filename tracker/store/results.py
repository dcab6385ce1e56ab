"""Reading and writing the rollup's tables (see :mod:`tracker.store.rollup_tables`).

Plain values in and out (ints, dates, bytes, dicts); the store knows no metric. The stored
state (Arrow IPC streams) travels as bytes, and is read back in PostgreSQL's binary result
format (:func:`~tracker.store.db.binary_rows`: no hex text to decode).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import sqlalchemy as sa

from tracker.store import bulk
from tracker.store.bulk import IN_LIST_LIMIT
from tracker.store.db import binary_rows
from tracker.store.models import Impression, Interaction
from tracker.store.rollup_tables import (
    WHOLE_ARM,
    RollupCheckpoint,
    RollupDay,
    RollupExposure,
    RollupHealth,
    RollupMetric,
    RollupPopularity,
    RollupSliceCount,
    RollupState,
    RollupUnits,
    RollupUserTotals,
)
from tracker.store.types import from_micros, stored_micros, to_micros


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


@dataclass(frozen=True)
class StateRow:
    """An experiment's rollup state: the watermarks (None after a reset: every day is to be
    recomputed), the generation the next save must find and the source of its results
    (:mod:`tracker.rollup.sources`; None: unknown)."""

    impressions_seen: int | None
    interactions_seen: int | None
    generation: int
    source: str | None = None

    @property
    def watermarks(self) -> tuple[int, int] | None:
        if self.impressions_seen is None or self.interactions_seen is None:
            return None
        return self.impressions_seen, self.interactions_seen


def load_state(conn: sa.Connection, experiment_id: int) -> StateRow | None:
    """The experiment's state row, None when it has none (never rolled up)."""
    row = conn.execute(sa.select(RollupState.impressions_seen, RollupState.interactions_seen,
                                 RollupState.generation, RollupState.source)
                       .where(RollupState.experiment_id == experiment_id)).first()
    return None if row is None else StateRow(*row)


def reset_state(conn: sa.Connection, experiment_id: int, *, declaration: bool,
                source: str | None = None) -> int:
    """Forget the experiment's watermarks (the next run recomputes every day), keeping the
    time of the last run; a ``declaration`` also bumps the generation, so that a run started
    before it does not record its watermarks; ``source``: the results' source from now on
    (a rebuild from it has begun; None: the stored one kept). Returns the generation now
    stored."""
    bump = " + 1" if declaration else ""
    claim = ", source = :source" if source is not None else ""
    return int(conn.execute(sa.text(
        "INSERT INTO rollup_state (experiment_id, impressions_seen, interactions_seen, "
        "updated_at, generation, source) VALUES (:experiment, NULL, NULL, NULL, :first, "
        ":source) ON CONFLICT (experiment_id) DO UPDATE SET impressions_seen = NULL, "
        f"interactions_seen = NULL, generation = rollup_state.generation{bump}{claim} "
        "RETURNING generation"),
        {"experiment": experiment_id, "first": 1 if declaration else 0,
         "source": source}).scalar_one())


def save_state(conn: sa.Connection, experiment_id: int, state: StateRow, now: datetime) -> bool:
    """Record the watermarks of ``state`` if the stored generation is still
    ``state.generation`` (no catalog declaration since the run began); False (nothing
    written) otherwise.

    Each watermark is recorded at most at the highest id stored now: rows deleted since the
    run read its ids (an erasure, an expiry, a deleted experiment, all of which lower the
    stored marks as they go, but not a run's still to be recorded) would otherwise leave it
    above the highest id, and SQLite, whose tables have no AUTOINCREMENT, hands the highest
    id + 1 to the next row: a row under the mark that no run would ever read. The ids in
    between were deleted, so the lower mark loses nothing."""
    seen = {}
    for name, table, value in (("impressions_seen", Impression, state.impressions_seen),
                               ("interactions_seen", Interaction, state.interactions_seen)):
        top = conn.execute(sa.select(sa.func.max(table.id))).scalar() or 0
        seen[name] = value if value is None else min(value, int(top))
    done = conn.execute(sa.update(RollupState).where(
        RollupState.experiment_id == experiment_id, RollupState.generation == state.generation,
    ).values(updated_at=now, **seen,
             **({"source": state.source} if state.source is not None else {})))
    return done.rowcount == 1


def last_run(conn: sa.Connection, experiment_id: int) -> datetime | None:
    return conn.execute(sa.select(RollupState.updated_at)
                        .where(RollupState.experiment_id == experiment_id)).scalar()


def logged(conn: sa.Connection, experiment_id: int) -> bool:
    """Whether any impression of the experiment is stored (one step down an index)."""
    return conn.execute(sa.select(sa.literal(1)).where(
        Impression.experiment_id == experiment_id).limit(1)).first() is not None


@dataclass(frozen=True)
class NewestEvents:
    """The newest event times of an experiment's logs: the newest list served and the newest
    interaction of its users that can answer one of its lists (None: none)."""

    served: datetime | None = None
    interaction: datetime | None = None

    @property
    def newest(self) -> datetime | None:
        known = [at for at in (self.served, self.interaction) if at is not None]
        return max(known) if known else None

    def or_before(self, before: NewestEvents) -> NewestEvents:
        """Each instant never older than ``before``'s (what the previous run found, kept
        when retention has expired its rows, or a run up to an earlier day saw less)."""
        return NewestEvents(_latest(self.served, before.served),
                            _latest(self.interaction, before.interaction))

    @classmethod
    def found(cls, newest_list: datetime | None, window: timedelta,
              newest_answer: Callable[[int, int], int | None],
              before: NewestEvents | None = None) -> NewestEvents:
        """The definition both engines share: the newest list served (``newest_list``),
        and the newest interaction that can answer one of the experiment's lists (same
        user, at most ``window`` after the list), each never older than ``before``'s.

        By event time, not arrival. An interaction can be newer than every list only inside
        the newest list's window, and matters only if newer than both that list and the
        newest interaction known, so only that range is asked for: ``newest_answer(after,
        through)`` (UTC microseconds) is the occurrence of the newest answering interaction
        in ``(after, through]``, None without one (:func:`newest_events` asks the database,
        :func:`tracker.spark.freshness.newest_in_lake` the lake's logs)."""
        known = cls(newest_list).or_before(before or cls())
        if known.served is None:
            return known
        after = to_micros(_latest(known.served, known.interaction))
        newest = newest_answer(after, to_micros(known.served) + window // timedelta(
            microseconds=1))
        return cls(known.served, None if newest is None else from_micros(newest)
                   ).or_before(known)


@dataclass(frozen=True)
class Seen:
    """The logs a rollup run took into account: the rows with ids up to ``impressions`` and
    ``interactions`` (the ids it planned with) and, for a run up to a day (``--until``),
    the lists served before ``served_before`` (UTC microseconds; None: every day)."""

    impressions: int
    interactions: int
    served_before: int | None = None


def newest_events(conn: sa.Connection, experiment_id: int, window: timedelta,
                  seen: Seen | None, before: NewestEvents = NewestEvents()
                  ) -> NewestEvents:
    """The newest event times (:meth:`NewestEvents.found`) among the rows a rollup has seen
    (``seen``; every row when None), never older than ``before``.

    Two index walks, whatever the history: the newest ``served_at`` is one step down
    (experiment, served_at); the interactions of the range asked for are read through the
    ``occurred_at`` index, each checked against the user's lists the run saw (user,
    served_at)."""
    mine = Impression.experiment_id == experiment_id
    listed = stored_micros(Impression.served_at)
    lists_seen = [] if seen is None else [Impression.id <= seen.impressions] + (
        [] if seen.served_before is None else [listed < seen.served_before])
    newest_list = conn.execute(sa.select(sa.func.max(Impression.served_at))
                               .where(mine, *lists_seen)).scalar()
    at = stored_micros(Interaction.occurred_at)
    span = window // timedelta(microseconds=1)
    answered = sa.select(sa.literal(1)).where(
        mine, Impression.user_id == Interaction.user_id, listed <= at, listed >= at - span,
        *lists_seen)

    def newest_answer(after: int, through: int) -> int | None:
        query = sa.select(sa.func.max(at)).where(at > after, at <= through, answered.exists())
        if seen is not None:
            query = query.where(Interaction.id <= seen.interactions)
        return conn.execute(query).scalar()

    return NewestEvents.found(newest_list, window, newest_answer, before)


def _latest(*instants: datetime | None) -> datetime | None:
    known = [at for at in instants if at is not None]
    return max(known) if known else None


def clear_state(conn: sa.Connection, experiment_id: int) -> None:
    """Forget what the rollup keeps of one experiment's days between runs (units,
    exposure, the cumulative checkpoint), before a full rebuild; the results the report
    reads stay until the rebuild replaces them (:func:`delete_results`). Its popularity
    stays: the rebuild's plan
    decides whether to count it again (its logs may have expired)."""
    for table in (RollupUnits, RollupExposure, RollupCheckpoint, RollupUserTotals,
                  RollupSliceCount):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id))


def replace_slice_counts(conn: sa.Connection, experiment_id: int, days: Iterable[date],
                         rows: list[dict]) -> None:
    """The lists per value of the list dimensions on ``days``: ``rows`` of ``day, segment,
    slice, lists`` replace what was stored of those days."""
    days = sorted(set(days))
    for at in range(0, len(days), IN_LIST_LIMIT):
        conn.execute(sa.delete(RollupSliceCount).where(
            RollupSliceCount.experiment_id == experiment_id,
            RollupSliceCount.day.in_(days[at:at + IN_LIST_LIMIT])))
    if rows:
        conn.execute(sa.insert(RollupSliceCount),
                     [dict(row, experiment_id=experiment_id) for row in rows])


def slice_counts(conn: sa.Connection, experiment_id: int) -> list[tuple[str, str, int]]:
    """``(segment, slice, lists)`` over every day counted, by segment and slice."""
    table = RollupSliceCount
    return [(segment, value, int(lists)) for segment, value, lists in conn.execute(
        sa.select(table.segment, table.slice, sa.func.sum(table.lists))
        .where(table.experiment_id == experiment_id)
        .group_by(table.segment, table.slice).order_by(table.segment, table.slice))]


def stored_levels(conn: sa.Connection, experiment_id: int) -> str | None:
    """The levels (JSON) the stored results are sliced by; None: none."""
    return conn.execute(sa.select(RollupState.levels).where(
        RollupState.experiment_id == experiment_id)).scalar()


def save_levels(conn: sa.Connection, experiment_id: int, levels: str | None) -> None:
    """Record the levels (JSON; None: none) of the results the transaction publishes."""
    conn.execute(sa.update(RollupState).where(RollupState.experiment_id == experiment_id)
                 .values(levels=levels))


def delete_results(conn: sa.Connection, experiment_id: int) -> None:
    """Remove every result the report reads of one experiment (days, metrics, health)."""
    for table in (RollupMetric, RollupHealth, RollupDay):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id))


def served_range(conn: sa.Connection, experiment_id: int, after: int = 0,
                 through: int | None = None) -> tuple[int | None, int | None]:
    """(min, max) served_at of the experiment's impressions with ids in (after, through]."""
    served = stored_micros(Impression.served_at)
    if not after:
        # every row (the few above ``through`` are newer than the run: harmless to include):
        # min and max apart, each one step down the (experiment, served_at) index (SQLite
        # reads the whole range when one query asks for both)
        mine = Impression.experiment_id == experiment_id
        return (conn.execute(sa.select(sa.func.min(served)).where(mine)).scalar(),
                conn.execute(sa.select(sa.func.max(served)).where(mine)).scalar())
    # new rows only, through the primary key: "+ 0" keeps both databases off the
    # (experiment, served_at) index, which would walk every row of the experiment
    query = sa.select(sa.func.min(served + 0), sa.func.max(served + 0)).where(
        Impression.experiment_id + 0 == experiment_id, Impression.id > after)
    if through is not None:
        query = query.where(Impression.id <= through)
    low, high = conn.execute(query).one()
    return low, high


def known_days(conn: sa.Connection, experiment_id: int) -> list[tuple[date, int, int]]:
    """(day, closes_at micros, computed_at micros) of the days rolled up so far."""
    rows = conn.execute(sa.select(RollupDay.day, stored_micros(RollupDay.closes_at),
                                  stored_micros(RollupDay.computed_at))
                        .where(RollupDay.experiment_id == experiment_id)
                        .order_by(RollupDay.day)).all()
    return [(r[0], int(r[1]), int(r[2])) for r in rows]


def day_impressions(conn: sa.Connection, experiment_id: int, day: date) -> int | None:
    """The impressions a rolled-up day was computed from (None: not rolled up)."""
    found = conn.execute(sa.select(RollupDay.impressions).where(
        RollupDay.experiment_id == experiment_id, RollupDay.day == day)).scalar()
    return None if found is None else int(found)


def days_with_units(conn: sa.Connection, experiment_id: int, days: Iterable[date]
                    ) -> set[date]:
    """Those of ``days`` whose daily units are stored (a day marked for recompute has
    none: :func:`~tracker.store.lifecycle.mark_for_recompute`)."""
    days = sorted(set(days))
    found: set[date] = set()
    for at in range(0, len(days), IN_LIST_LIMIT):
        found.update(conn.execute(sa.select(RollupUnits.day).distinct().where(
            RollupUnits.experiment_id == experiment_id, RollupUnits.cumulative.is_(False),
            RollupUnits.day.in_(days[at:at + IN_LIST_LIMIT]))).scalars())
    return found


def delete_day_state(conn: sa.Connection, experiment_id: int, day: date) -> None:
    """Remove one day's daily units and exposure (what the cumulative pass reads). Units
    the cumulative checkpoint counted (of a day at or before its day) are set aside
    instead, as the day's *counted* units (``cumulative`` true), unless some already are (a
    run that stopped before its last transaction set them aside): the cumulative pass reads
    them (:func:`counted_units`) and drops them."""
    units = (RollupUnits.experiment_id == experiment_id, RollupUnits.day == day)
    if not conn.execute(sa.select(sa.exists().where(
            *units, RollupUnits.cumulative.is_(True)))).scalar():
        counted = sa.select(RollupCheckpoint.day).where(
            RollupCheckpoint.experiment_id == experiment_id).scalar_subquery()
        conn.execute(sa.update(RollupUnits).where(
            *units, RollupUnits.cumulative.is_(False), RollupUnits.day <= counted)
            .values(cumulative=True))
    for table in (RollupUnits, RollupExposure):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id,
                                            table.day == day, table.cumulative.is_(False)))


def delete_daily_results(conn: sa.Connection, experiment_id: int, days: Iterable[date]) -> None:
    """Remove the status and the daily metric and health rows of ``days``."""
    days = sorted(set(days))
    for at in range(0, len(days), 500):
        chunk = days[at:at + 500]
        conn.execute(sa.delete(RollupDay).where(RollupDay.experiment_id == experiment_id,
                                                RollupDay.day.in_(chunk)))
        for table in (RollupMetric, RollupHealth):
            conn.execute(sa.delete(table).where(table.experiment_id == experiment_id,
                                                table.day.in_(chunk),
                                                table.cumulative.is_(False)))


def delete_cumulative(conn: sa.Connection, experiment_id: int, since: date) -> None:
    """Drop the cumulative rows the report reads of ``since`` and every later day."""
    for table in (RollupMetric, RollupHealth):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id,
                                            table.day >= since, table.cumulative.is_(True)))


def delete_cumulative_state(conn: sa.Connection, experiment_id: int, since: date) -> None:
    """Drop the cumulative unit totals and exposure of ``since`` and every later day."""
    for table in (RollupUnits, RollupExposure):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id,
                                            table.day >= since, table.cumulative.is_(True)))


def take_counted_units(conn: sa.Connection, experiment_id: int, through: date | None
                       ) -> dict[date, list[bytes]]:
    """The encoded parts of each day's counted units (:func:`delete_day_state`) through
    ``through`` (None: none are read); every day's go."""
    mine = (RollupUnits.experiment_id == experiment_id, RollupUnits.cumulative.is_(True))
    found: dict[date, list[bytes]] = {}
    if through is not None:
        for day, data in binary_rows(conn, sa.select(RollupUnits.day, RollupUnits.data)
                                     .where(*mine, RollupUnits.day <= through)
                                     .order_by(RollupUnits.day, RollupUnits.part)):
            found.setdefault(day, []).append(bytes(data))
    conn.execute(sa.delete(RollupUnits).where(*mine))
    return found


def insert_day(conn: sa.Connection, **values) -> None:
    conn.execute(sa.insert(RollupDay).values(**values))


def insert_units(conn: sa.Connection, experiment_id: int, day: date, cumulative: bool,
                 parts: Iterable[bytes | memoryview]) -> None:
    """One day's unit totals (daily or cumulative), encoded by the caller in parts."""
    for part, data in enumerate(parts):
        conn.execute(sa.insert(RollupUnits).values(
            experiment_id=experiment_id, day=day, cumulative=cumulative, part=part, data=data))


def units(conn: sa.Connection, experiment_id: int, day: date,
          cumulative: bool) -> list[bytes] | None:
    """The encoded parts of one day and view, in order; None if absent."""
    rows = binary_rows(conn, sa.select(RollupUnits.data)
                       .where(RollupUnits.experiment_id == experiment_id,
                              RollupUnits.day == day,
                              RollupUnits.cumulative.is_(cumulative))
                       .order_by(RollupUnits.part))
    return [bytes(data) for (data,) in rows] or None


def insert_exposure(conn: sa.Connection, experiment_id: int, day: date, cumulative: bool,
                    rows: Iterable[tuple[Mapping[str, int], bytes | memoryview]]) -> None:
    """Exposure rows ``(key, encoded exposure)`` of one day, ``key`` the row's key columns
    (``{"arm_id": ..., "segment": ..., "slice": ...}``)."""
    bulk.insert_dicts(conn, RollupExposure.__table__, [
        {"experiment_id": experiment_id, "day": day, "cumulative": cumulative, **key,
         "data": data} for key, data in rows])


def exposure(conn: sa.Connection, experiment_id: int, day: date,
             cumulative: bool) -> list[tuple[dict[str, int], bytes]]:
    """The exposure rows of one day: (key columns, encoded exposure)."""
    rows = binary_rows(conn, sa.select(RollupExposure.arm_id, RollupExposure.segment,
                                       RollupExposure.slice, RollupExposure.data).where(
        RollupExposure.experiment_id == experiment_id, RollupExposure.day == day,
        RollupExposure.cumulative.is_(cumulative)))
    return [({"arm_id": int(arm), "segment": segment, "slice": value}, bytes(data))
            for arm, segment, value, data in rows]


def insert_metrics(conn: sa.Connection, rows: list[dict]) -> None:
    bulk.insert_dicts(conn, RollupMetric.__table__, rows)


def insert_health(conn: sa.Connection, rows: list[dict]) -> None:
    bulk.insert_dicts(conn, RollupHealth.__table__, rows)


def metric_rows(conn: sa.Connection, experiment_id: int, cumulative: bool,
                segment: str = WHOLE_ARM) -> list[dict]:
    """Stored cell-day statistics of one experiment, as dicts: the whole arms' (``segment``
    ``""``), or the slices of one declared dimension."""
    table = RollupMetric.__table__
    result = conn.execute(sa.select(table).where(table.c.experiment_id == experiment_id,
                                                 table.c.cumulative.is_(cumulative),
                                                 table.c.segment == segment)
                          .order_by(table.c.day, table.c.arm_id, table.c.slice,
                                    table.c.metric, table.c.k))
    return [dict(row._mapping) for row in result]


def health_rows(conn: sa.Connection, experiment_id: int, cumulative: bool,
                segment: str = WHOLE_ARM) -> list[dict]:
    """Stored health counts per cell and day (as :func:`metric_rows` selects them)."""
    table = RollupHealth.__table__
    result = conn.execute(sa.select(table).where(table.c.experiment_id == experiment_id,
                                                 table.c.cumulative.is_(cumulative),
                                                 table.c.segment == segment)
                          .order_by(table.c.day, table.c.arm_id, table.c.slice))
    return [dict(row._mapping) for row in result]


def day_rows(conn: sa.Connection, experiment_id: int) -> list[dict]:
    table = RollupDay.__table__
    result = conn.execute(sa.select(table).where(table.c.experiment_id == experiment_id)
                          .order_by(table.c.day))
    return [dict(row._mapping) for row in result]


def insert_popularity(conn: sa.Connection, experiment_id: int, first_day: date,
                      window_days: int, data: bytes | memoryview) -> None:
    """The experiment's popularity, of the ``window_days`` days before ``first_day``,
    replacing the stored one."""
    delete_popularity(conn, experiment_id)
    conn.execute(sa.insert(RollupPopularity).values(
        experiment_id=experiment_id, day=first_day, window_days=window_days, data=data))


def popularity(conn: sa.Connection, experiment_id: int
               ) -> tuple[date, int, bytes] | None:
    """The experiment's stored popularity: its first day, window days and encoded value;
    None when none is stored."""
    rows = binary_rows(conn, sa.select(RollupPopularity.day, RollupPopularity.window_days,
                                       RollupPopularity.data)
                       .where(RollupPopularity.experiment_id == experiment_id))
    return (rows[0][0], int(rows[0][1]), bytes(rows[0][2])) if rows else None


def delete_popularity(conn: sa.Connection, experiment_id: int) -> None:
    """Forget the experiment's popularity: the next run computes it again."""
    conn.execute(sa.delete(RollupPopularity).where(
        RollupPopularity.experiment_id == experiment_id))


def popularity_period(conn: sa.Connection, experiment_id: int) -> tuple[date, int] | None:
    """The first day and window days of the experiment's stored popularity (None: none
    stored)."""
    row = conn.execute(sa.select(RollupPopularity.day, RollupPopularity.window_days)
                       .where(RollupPopularity.experiment_id == experiment_id)).first()
    return None if row is None else (row[0], int(row[1]))
