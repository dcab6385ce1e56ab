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

import json
from dataclasses import dataclass
from datetime import date
from operator import itemgetter
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.errors import StaleState
from tracker.rollup import cells, state, user_queries
from tracker.rollup import covariates as cuped
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.cells import Cells
from tracker.rollup.exposure import Exposure
from tracker.rollup.outcomes import Layout
from tracker.rollup.retention import first_recomputable_day
from tracker.store import bulk, lifecycle, results
from tracker.store.db import binary_rows
from tracker.store.experiments import ExperimentInfo
from tracker.store.rollup_tables import RollupCheckpoint, RollupFirstSeen, RollupUserTotals

FIRST_SEEN = "first_seen/1"
"""The format of a day's first-seen users: one ``user_id`` string column."""


class Store(Protocol):
    """An engine's per-user state (module docstring)."""

    def units(self, day: date) -> UnitTotals | None:
        """A day's daily unit totals (None: none stored)."""

    def horizon(self) -> date | None:
        """The first day whose daily unit totals the store holds when expired logs took
        those of the days before (None: it holds every day's)."""

    def take_counted(self, through: date | None) -> dict[date, UnitTotals]:
        """The daily unit totals the checkpoint counted of days recomputed since, set aside
        when the days were (:func:`tracker.store.results.delete_day_state`), of the days
        through ``through`` (None: of none); every one goes."""

    def exposure(self, day: date, cumulative: bool) -> dict[int, Exposure]:
        """A day's exposure by cell (:data:`~tracker.rollup.cells.WHOLE`: the catalog)."""

    def checkpoint(self) -> Checkpoint | None:
        """The stored checkpoint (None: none, or of another layout)."""

    def checkpoint_rows(self, users: pa.Array | None) -> UnitTotals:
        """The checkpoint's totals of those of ``users`` it holds (None: of every user),
        sorted by user and cell."""

    def write_checkpoint(self, day: date, sums: bytes, rows: UnitTotals,
                         everyone: bool) -> None:
        """Move the checkpoint to ``day`` with its view's ``sums``
        (:meth:`~tracker.rollup.deltas.ViewSums.encode`) and the totals of the users of
        ``rows`` (``everyone``: they are every user's, the others are dropped)."""

    def drop_checkpoint(self) -> None:
        """Forget the checkpoint."""

    def write_exposure(self, day: date, exposures: dict[int, Exposure]) -> None:
        """A day's cumulative exposure."""

    def delete_cumulative(self, since: date) -> None:
        """Forget the cumulative totals and exposure of ``since`` and every later day."""

    def settle(self, covariates: cuped.UserCovariates | None) -> None:
        """The cumulative pass is over: ``covariates`` are the experiment's users'."""

    def first_seen(self, before: date) -> dict[date, pa.Array]:
        """The users first seen on each day before ``before`` (a day the store cannot read
        is left out, and the pass starts from the first day; or it raises
        :class:`~tracker.errors.StaleState`)."""

    def write_first_seen(self, day: date, users: pa.Array) -> None:
        """The users first seen on ``day``."""

    def delete_first_seen(self, since: date | None) -> None:
        """Forget the first-seen users of ``since`` and every later day (None: all)."""

    def first_cells(self, users: list[str]) -> dict[str, int]:
        """From the engine's logs, the arm id of each of ``users``' first exposure (the
        earliest served of their lists, the smaller impression id in a tie; a user without
        lists is absent): the crossover cell they count in
        (:func:`~tracker.rollup.aggregate.with_crossed`)."""


USER_TOTALS = "user-totals/2"
"""The format of ``rollup_user_totals.data``: a user's ``user-totals/1`` records
(:func:`encode_users`) compressed (:func:`pack`; migration 0026 converts the plain records
an earlier release stored)."""
_CODEC = "lz4"  # LZ4 frames (pyarrow's codec): most of a user's sums are 0 (no hit, no
# pre-period), and a row per slice multiplies them; about 5x smaller, compressed at about
# 0.3 GB/s, where every byte written costs the database more
_SIZE = np.dtype("<u8")  # the plain records' size, before the frame: LZ4 frames need it
_MAX_RATIO = 256  # LZ4 never compresses more than 255 to 1: a larger size is no record's


@dataclass(frozen=True)
class Checkpoint:
    """A stored checkpoint: its day and its view's exact sums (None: to compute once from
    every user's totals, as migration 0021 leaves an upgraded one)."""

    day: date
    sums: bytes | None


def stored_columns(stored: list[str], layout: Layout) -> list[int]:
    """Where each column of ``layout`` is among the ``stored`` ones (a column dropped since
    is left out); one it lacks raises :class:`~tracker.errors.StaleState`."""
    missing = [f"sum:{name}" for name in layout.names if name not in stored]
    if missing:
        raise StaleState(f"the stored cumulative checkpoint ({USER_TOTALS}) has no column "
                         f"{', '.join(repr(n) for n in missing[:5])}: the metrics or cutoffs "
                         "changed since it was written; run `tracker rollup --full` to "
                         "recompute the stored state")
    return [stored.index(name) for name in layout.names]


def _record(columns: int) -> np.dtype:
    """One (user, cell) row of ``user-totals/1`` (``rollup_user_totals.data``)."""
    return np.dtype([("cell", "<i8"), ("impressions", "<i8"), ("sums", "<f8", (columns,)),
                     ("counts", "<f8", (columns,))])


def encode_users(totals: UnitTotals) -> list[tuple[str, bytes]]:
    """Per user of ``totals`` (rows of a user adjacent), their rows as ``user-totals/1``."""
    if totals.size == 0:
        return []
    records = np.empty(totals.size, dtype=_record(totals.sums.shape[1]))
    records["cell"], records["impressions"] = totals.cells, totals.impressions
    records["sums"], records["counts"] = totals.sums, totals.counts
    users = totals.users.cast(pa.string())
    starts = np.flatnonzero(np.r_[True, ~pc.equal(users[1:], users[:-1]).to_numpy(
        zero_copy_only=False)]).tolist()
    names = users.take(pa.array(starts, type=pa.int64())).to_pylist()
    ends = starts[1:] + [totals.size]
    return [(name, records[a:b].tobytes()) for name, a, b in zip(names, starts, ends,
                                                                strict=True)]


def pack(records: bytes) -> bytes:
    """A user's plain records as ``user-totals/2``: their size (uint64, little-endian), then
    the records compressed as an LZ4 frame.

    >>> unpack(pack(b"abc" * 100)) == b"abc" * 100
    True
    """
    return np.array([len(records)], dtype=_SIZE).tobytes() + pa.compress(
        records, codec=_CODEC, asbytes=True)


def unpack(data: bytes) -> bytes:
    """The plain records of a ``user-totals/2`` value (:func:`pack`'s inverse); a value
    that is none raises :class:`~tracker.errors.StaleState`."""
    head = _SIZE.itemsize
    size = int(np.frombuffer(data[:head], dtype=_SIZE)[0]) if len(data) > head else -1
    try:
        if not 0 < size <= _MAX_RATIO * (len(data) - head):  # none LZ4 could have written
            raise ValueError(f"{len(data)} bytes")
        return pa.decompress(data[head:], decompressed_size=size, codec=_CODEC, asbytes=True)
    except (OSError, ValueError) as error:
        raise StaleState(f"a stored cumulative total is not in the {USER_TOTALS} format "
                         f"({error}); run `tracker rollup --full` to recompute the stored "
                         "state") from None


def decode_users(rows: list[tuple[str, bytes]], columns: int,
                 keep: list[int] | None = None) -> UnitTotals:
    """The totals of ``(user, data)`` rows (sorted by user) of ``columns`` columns, as
    :func:`encode_users` wrote them (``keep``: only those columns, in that order); a row of
    another size raises :class:`~tracker.errors.StaleState`."""
    keep = list(range(columns)) if keep is None else keep
    if not rows:
        return UnitTotals.empty(len(keep))
    record = _record(columns)
    blobs = [bytes(data) for _, data in rows]
    sizes = np.array([len(b) for b in blobs], dtype=np.int64)
    if ((sizes % record.itemsize) != 0).any() or not sizes.all():
        user = rows[int(np.flatnonzero((sizes % record.itemsize != 0) | (sizes == 0))[0])][0]
        raise StaleState(f"the stored cumulative totals of user {user!r} are not in the "
                         f"{USER_TOTALS} format of {columns} columns; run `tracker rollup "
                         "--full` to recompute the stored state")
    records = np.frombuffer(b"".join(blobs), dtype=record)
    users = pa.array([user for user, _ in rows], type=pa.string()).take(
        pa.array(np.repeat(np.arange(len(rows)), sizes // record.itemsize)))
    return UnitTotals(users, records["cell"].astype(np.int64),
                      records["impressions"].astype(np.int64),
                      np.asfortranarray(records["sums"][:, keep]),
                      np.asfortranarray(records["counts"][:, keep]))


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
        self._stored = list(self.layout.names)  # the checkpoint's columns, once read
        self._keep: list[int] | None = None

    def units(self, day: date) -> UnitTotals | None:
        parts = results.units(self.conn, self.info.id, day, False)
        return UnitTotals.decode(parts, self.layout) if parts else None

    def horizon(self) -> date | None:
        cutoff = lifecycle.expired_before(self.conn)  # the retention horizon
        return None if cutoff is None else first_recomputable_day(cutoff, self.info.timezone)

    def take_counted(self, through: date | None) -> dict[date, UnitTotals]:
        return {day: UnitTotals.decode(parts, self.layout) for day, parts in
                results.take_counted_units(self.conn, self.info.id, through).items()}

    def exposure(self, day: date, cumulative: bool) -> dict[int, Exposure]:
        stored = Cells.of(self.info).coded(results.exposure(self.conn, self.info.id, day,
                                                            cumulative))
        return {cell: decode_exposure(data, cell, list(self.info.cutoffs))
                for cell, data in stored.items()}

    def checkpoint(self) -> Checkpoint | None:
        row = self.conn.execute(sa.select(
            RollupCheckpoint.day, RollupCheckpoint.columns, RollupCheckpoint.sums).where(
            RollupCheckpoint.experiment_id == self.info.id)).one_or_none()
        if row is None or row.day is None:
            return None
        described = json.loads(row.columns)
        if not isinstance(described, dict) or described.get("format") != USER_TOTALS:
            raise StaleState(f"the stored cumulative checkpoint is not in the {USER_TOTALS} "
                             "format this release reads; run `tracker rollup --full` to "
                             "recompute the stored state")
        self._stored = described["columns"]
        self._keep = stored_columns(self._stored, self.layout)
        return Checkpoint(row.day, None if row.sums is None else bytes(row.sums))

    def checkpoint_rows(self, users: pa.Array | None) -> UnitTotals:
        table = RollupUserTotals
        query = sa.select(table.user_id, table.data).where(
            table.experiment_id == self.info.id)
        if users is not None:
            query = query.where(bulk.one_of(self.conn, table.user_id,
                                            users.cast(pa.string()).to_pylist()))
        found = binary_rows(self.conn, query)  # PostgreSQL: bytea as bytes, not hex text
        # by code point, as Arrow sorts (never the database's collation); by the id alone:
        # comparing SQLAlchemy's rows cost 2 s for 200,000 of them
        found.sort(key=itemgetter(0))
        return decode_users([(user, unpack(bytes(data))) for user, data in found],
                            len(self._stored), self._keep)

    def write_checkpoint(self, day: date, sums: bytes, rows: UnitTotals,
                         everyone: bool) -> None:
        table, mine = RollupUserTotals, RollupUserTotals.experiment_id == self.info.id
        if not everyone and self._stored != list(self.layout.names):  # another layout:
            rows = self.checkpoint_rows(None).replacing_users(rows)  # every row in this one
            everyone = True
        if everyone:
            self.conn.execute(sa.delete(table).where(mine))
        else:
            self.conn.execute(sa.delete(table).where(mine, bulk.one_of(
                self.conn, table.user_id, pc.unique(rows.users).cast(pa.string()).to_pylist())))
        bulk.insert_rows(self.conn, table.__table__, ("experiment_id", "user_id", "data"),
                         [(self.info.id, user, pack(data))
                          for user, data in encode_users(rows)])
        self._describe(day=day, sums=sums, columns=json.dumps(
            {"format": USER_TOTALS, "columns": list(self.layout.names)}))
        self._stored, self._keep = list(self.layout.names), None

    def forget(self, user: str) -> date | None:
        """Take an erased user out of the per-user state a later run reads (their own rows
        go with :func:`tracker.rollup.engine.run_rollup` only when the days that hold them
        are recomputed, and days before the retention horizon never are): their checkpoint
        row goes, and the checkpoint's sums, which counted it, are left to the next pass to
        compute once from the remaining users' totals (exact sums: a rebuild's); and their
        id leaves the first-seen users. Returns the checkpoint's day when it held the user
        (the cumulative rows of the days after it were moved from sums that counted them),
        else None."""
        table = RollupUserTotals
        for day, data in self.conn.execute(sa.select(RollupFirstSeen.day, RollupFirstSeen.data)
                                           .where(RollupFirstSeen.experiment_id == self.info.id)
                                           ).all():
            seen = state.read(bytes(data), FIRST_SEEN)["user_id"].combine_chunks()
            kept = seen.filter(pc.not_equal(seen, user))
            if len(kept) < len(seen):
                self.conn.execute(sa.update(RollupFirstSeen).where(
                    RollupFirstSeen.experiment_id == self.info.id, RollupFirstSeen.day == day)
                    .values(data=state.write(first_seen_table(kept), FIRST_SEEN)))
        if not self.conn.execute(sa.delete(table).where(
                table.experiment_id == self.info.id, table.user_id == user)).rowcount:
            return None
        self._describe(sums=None)
        return self.conn.execute(sa.select(RollupCheckpoint.day).where(
            RollupCheckpoint.experiment_id == self.info.id)).scalar()

    def drop_checkpoint(self) -> None:
        self.conn.execute(sa.delete(RollupUserTotals).where(
            RollupUserTotals.experiment_id == self.info.id))
        self._describe(day=None, sums=None, columns=None)

    def _describe(self, **values) -> None:
        """Set the checkpoint's columns of ``rollup_checkpoint`` (the row also describes
        CUPED's covariates: :mod:`tracker.rollup.stored_covariates`)."""
        where = RollupCheckpoint.experiment_id == self.info.id
        if not self.conn.execute(sa.update(RollupCheckpoint).where(where).values(
                **values)).rowcount:
            self.conn.execute(sa.insert(RollupCheckpoint).values(
                experiment_id=self.info.id, **values))

    def write_exposure(self, day: date, exposures: dict[int, Exposure]) -> None:
        cutoffs = list(self.info.cutoffs)
        named = Cells.of(self.info).keyed(
            {cell: e.encode([] if cell == cells.WHOLE else cutoffs)
             for cell, e in exposures.items()})
        results.insert_exposure(self.conn, self.info.id, day, True, named)

    def delete_cumulative(self, since: date) -> None:
        results.delete_cumulative_state(self.conn, self.info.id, since)

    def settle(self, covariates: cuped.UserCovariates | None) -> None:
        cuped.settle(self.conn, self.info, covariates)

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

    def first_cells(self, users: list[str]) -> dict[str, int]:
        return user_queries.first_cells(self.conn, self.info.id, users)
