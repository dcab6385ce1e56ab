"""Where a rollup keeps the per-user state it reads again in later runs: each day's daily
unit totals and exposure (written when the day is computed), the cumulative exposure of
every day and the cumulative pass's checkpoint (:mod:`tracker.rollup.cumulative`), and the
users first seen on each day (:mod:`tracker.rollup.exposure_days`).

The passes over that state are one code for both engines; they differ only in the
:class:`Store`: the database's tables (:class:`DatabaseStore`, the default engine) or a
Spark state directory (:class:`tracker.spark.cumulative.DirectoryStore`). The rows the report
reads go into the database either way.
"""

from __future__ import annotations

from datetime import date
from typing import Protocol

import pyarrow as pa
import sqlalchemy as sa

from tracker.rollup import cells, state
from tracker.rollup import covariates as cuped
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.exposure import Exposure
from tracker.rollup.outcomes import Layout
from tracker.store import results
from tracker.store.experiments import ExperimentInfo
from tracker.store.rollup_tables import RollupFirstSeen

FIRST_SEEN = "first_seen/1"
"""The format of a day's first-seen users: one ``user_id`` string column."""


class Store(Protocol):
    """An engine's per-user state (module docstring)."""

    def units(self, day: date, cumulative: bool) -> UnitTotals | None:
        """A day's unit totals, daily or cumulative (None: none stored)."""

    def exposure(self, day: date, cumulative: bool) -> dict[int, Exposure]:
        """A day's exposure by cell (:data:`~tracker.rollup.cells.WHOLE`: the catalog)."""

    def checkpoint_day(self, before: date) -> date | None:
        """The newest day before ``before`` whose cumulative totals are stored."""

    def encode(self, totals: UnitTotals) -> object:
        """``totals`` as :meth:`write_checkpoint` takes them (any thread)."""

    def write_checkpoint(self, day: date, parts: object | None) -> None:
        """The checkpoint's totals (``None``: the day's daily ones, the same totals)."""

    def write_exposure(self, day: date, exposures: dict[int, Exposure]) -> None:
        """A day's cumulative exposure."""

    def delete_cumulative(self, since: date) -> None:
        """Forget the cumulative totals and exposure of ``since`` and every later day."""

    def keep_checkpoint(self, day: date | None) -> None:
        """Forget every cumulative unit totals but ``day``'s (None: every one)."""

    def settle(self, totals: UnitTotals, covariates: cuped.UserCovariates | None) -> None:
        """The cumulative pass is over: ``totals`` are every user the experiment has."""

    def first_seen(self, before: date) -> dict[date, pa.Array]:
        """The users first seen on each day before ``before`` (a day the store cannot read
        is left out, and the pass starts from the first day; or it raises
        :class:`~tracker.errors.StaleState`)."""

    def write_first_seen(self, day: date, users: pa.Array) -> None:
        """The users first seen on ``day``."""

    def delete_first_seen(self, since: date | None) -> None:
        """Forget the first-seen users of ``since`` and every later day (None: all)."""


def decode_exposure(data: bytes, cell: int, cutoffs: list[int]) -> Exposure:
    """One stored exposure row (the whole experiment's, the catalog, has no counts)."""
    return Exposure.decode(data, [] if cell == cells.WHOLE else cutoffs)


def first_seen_table(users: pa.Array) -> pa.Table:
    """A day's first-seen users as the ``first_seen/1`` table."""
    return pa.table({"user_id": users.cast(pa.string())})


class DatabaseStore:
    """The default engine's :class:`Store`: ``rollup_units``, ``rollup_exposure``,
    ``rollup_first_seen``."""

    def __init__(self, conn: sa.Connection, info: ExperimentInfo) -> None:
        self.conn, self.info = conn, info
        self.layout = Layout.for_cutoffs(list(info.cutoffs))

    def units(self, day: date, cumulative: bool) -> UnitTotals | None:
        parts = results.units(self.conn, self.info.id, day, cumulative)
        return UnitTotals.decode(parts, self.layout) if parts else None

    def exposure(self, day: date, cumulative: bool) -> dict[int, Exposure]:
        stored = cells.coded(results.exposure(self.conn, self.info.id, day, cumulative))
        return {cell: decode_exposure(data, cell, list(self.info.cutoffs))
                for cell, data in stored.items()}

    def checkpoint_day(self, before: date) -> date | None:
        return results.checkpoint_day(self.conn, self.info.id, before)

    def encode(self, totals: UnitTotals) -> list:
        return totals.encode(self.layout)

    def write_checkpoint(self, day: date, parts: list | None) -> None:
        if parts is None:  # the daily rows this run wrote of the same totals: copied
            results.copy_daily_units(self.conn, self.info.id, day)
        else:
            results.insert_units(self.conn, self.info.id, day, True, parts)

    def write_exposure(self, day: date, exposures: dict[int, Exposure]) -> None:
        cutoffs = list(self.info.cutoffs)
        results.insert_exposure(self.conn, self.info.id, day, True, cells.keyed(
            {cell: e.encode([] if cell == cells.WHOLE else cutoffs)
             for cell, e in exposures.items()}))

    def delete_cumulative(self, since: date) -> None:
        results.delete_cumulative_state(self.conn, self.info.id, since)

    def keep_checkpoint(self, day: date | None) -> None:
        results.delete_cumulative_units_except(self.conn, self.info.id, day)

    def settle(self, totals: UnitTotals, covariates: cuped.UserCovariates | None) -> None:
        cuped.settle(self.conn, self.info, totals, covariates)

    def first_seen(self, before: date) -> dict[date, pa.Array]:
        rows = self.conn.execute(sa.select(RollupFirstSeen.day, RollupFirstSeen.data).where(
            RollupFirstSeen.experiment_id == self.info.id, RollupFirstSeen.day < before))
        # another format raises StaleState (``tracker rollup --full``): rebuilding from the
        # first day would rewrite days whose daily units expired logs took with them
        return {day: state.read(bytes(data), FIRST_SEEN)["user_id"].combine_chunks()
                for day, data in rows}

    def write_first_seen(self, day: date, users: pa.Array) -> None:
        self.conn.execute(sa.insert(RollupFirstSeen).values(
            experiment_id=self.info.id, day=day,
            data=state.write(first_seen_table(users), FIRST_SEEN)))

    def delete_first_seen(self, since: date | None) -> None:
        table = RollupFirstSeen
        where = [table.experiment_id == self.info.id]
        if since is not None:
            where.append(table.day >= since)
        self.conn.execute(sa.delete(table).where(*where))
