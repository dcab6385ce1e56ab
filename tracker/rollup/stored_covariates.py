"""CUPED's per-user covariates as the default engine stores them: one row per user
(``rollup_user_covariates``: the first exposure, and the covariates as little-endian float64
in the order of their names), described once per experiment (``rollup_checkpoint``'s
``covariates``: the format, ``cuped_days``, the names, and the bounds of the stored first
exposures). A run reads the rows of the users it holds (:meth:`Stored.subset`) and writes
those it computed (:func:`save`), never every user's: the nightly cost follows the new data.

:class:`RunCovariates` is what a run's passes read (``subset``): the covariates it computed
over the stored ones. The Spark engine keeps its own (one Parquet file:
:mod:`tracker.spark.covariates`); both give :class:`~tracker.rollup.user_covariates.
UserCovariates` for the users asked.
"""

from __future__ import annotations

import json
from itertools import repeat
from operator import itemgetter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup.user_covariates import UserCovariates
from tracker.store import bulk
from tracker.store.experiments import ExperimentInfo
from tracker.store.rollup_tables import RollupCheckpoint, RollupUserCovariates

FORMAT = "covariates/4"
"""The described form of ``rollup_user_covariates`` (``covariates/3``: one Arrow stream of
every user's, which migration 0021 turns into rows)."""


class Stored:
    """The stored covariates of an experiment (:meth:`open`)."""

    def __init__(self, conn: sa.Connection, info: ExperimentInfo, names: tuple[str, ...],
                 first: tuple[int, int] | None) -> None:
        self.conn, self.info, self.names, self.first = conn, info, names, first

    @classmethod
    def open(cls, conn: sa.Connection, info: ExperimentInfo, names: tuple[str, ...]
             ) -> Stored | None:
        """The stored covariates when they are of ``names`` and the experiment's
        ``cuped_days`` (None: none, or of another window or layout: computed again)."""
        text = conn.execute(sa.select(RollupCheckpoint.covariates).where(
            RollupCheckpoint.experiment_id == info.id)).scalar()
        described = None if text is None else json.loads(text)
        if not isinstance(described, dict) or described.get("format") != FORMAT or \
                described.get("cuped_days") != info.cuped_days or \
                tuple(described.get("names", ())) != names:
            return None
        first = described.get("first")
        return cls(conn, info, names, None if first is None else (first[0], first[1]))

    def subset(self, users: pa.Array | None) -> UserCovariates:
        """The stored rows of those of ``users`` that have one (None: every row)."""
        table = RollupUserCovariates
        query = sa.select(table.user_id, table.first_exposure, table.data).where(
            table.experiment_id == self.info.id)
        if users is None:
            found = self.conn.execute(query).all()
        else:
            found = self.conn.execute(query.where(bulk.one_of(
                self.conn, table.user_id, pc.unique(users.cast(pa.string())).to_pylist()))).all()
        found.sort(key=itemgetter(0))  # by code point, as Arrow sorts (the ids are distinct)
        x = np.frombuffer(b"".join(bytes(d) for _, _, d in found), dtype="<f8").reshape(
            len(found), len(self.names)) if found else np.zeros((0, len(self.names)))
        return UserCovariates(pa.array([u for u, _, _ in found], type=pa.string()),
                              x.astype(np.float64), self.names,
                              np.array([f for _, f, _ in found], dtype=np.int64))


class RunCovariates:
    """A run's covariates: those it computed (``fresh``) over the stored ones, read for
    the users asked (once each)."""

    def __init__(self, stored: Stored | None, fresh: UserCovariates) -> None:
        self.stored, self.fresh, self.names = stored, fresh, fresh.names
        self._read = UserCovariates.empty(fresh.names)  # stored rows read so far
        self._asked = pa.array([], type=pa.string())

    def subset(self, users: pa.Array) -> UserCovariates:
        """The covariates of those of ``users`` that have any."""
        users = users.cast(pa.string())
        mine = self.fresh.subset(users)
        if self.stored is None:
            return mine
        rest = users.filter(pc.invert(pc.is_in(users, value_set=mine.users)))
        new = rest.filter(pc.invert(pc.is_in(rest, value_set=self._asked)))
        if len(new):
            self._read = self._read.merged(self.stored.subset(new))
            self._asked = pa.concat_arrays([self._asked, pc.unique(new)])
        return self._read.subset(rest).merged(mine)


def save(conn: sa.Connection, info: ExperimentInfo, covariates: UserCovariates,
         everyone: bool, first: tuple[int, int] | None = None) -> None:
    """Write the rows of ``covariates`` (``everyone``: they are every user's; the others
    go) and the description (``first``: the stored first exposures' bounds before)."""
    table, mine = RollupUserCovariates, RollupUserCovariates.experiment_id == info.id
    users = covariates.users.cast(pa.string()).to_pylist()
    if everyone:
        conn.execute(sa.delete(table).where(mine))
        first = None
    else:
        conn.execute(sa.delete(table).where(mine, bulk.one_of(conn, table.user_id, users)))
    bulk.insert_rows(conn, table.__table__, ("experiment_id", "user_id", "first_exposure",
                                             "data"),
                     list(zip(repeat(info.id), users, covariates.first.tolist(),
                              row_bytes(covariates.x), strict=False)))
    bounds = [int(covariates.first.min()), int(covariates.first.max())] \
        if len(users) else None
    if first is not None:
        bounds = [min(first[0], bounds[0]), max(first[1], bounds[1])] if bounds else \
            list(first)
    describe(conn, info, covariates.names, bounds)


def row_bytes(x: np.ndarray) -> list[bytes]:
    """Each row of ``x`` as its little-endian float64 bytes (one ``bytes`` per row).

    >>> row_bytes(np.array([[1.0, 0.0]])) == [np.array([1.0, 0.0]).astype("<f8").tobytes()]
    True
    """
    x = np.ascontiguousarray(x, dtype="<f8")
    return x.view(np.dtype((np.void, 8 * x.shape[1]))).ravel().tolist() if x.shape[1] else \
        [b""] * x.shape[0]


def describe(conn: sa.Connection, info: ExperimentInfo, names: tuple[str, ...] | None,
             first: list[int] | None = None) -> None:
    """Record what the stored covariates are (``names`` None: none are stored)."""
    text = None if names is None else json.dumps(
        {"format": FORMAT, "cuped_days": info.cuped_days, "names": list(names),
         "first": first})
    found = conn.execute(sa.update(RollupCheckpoint).where(
        RollupCheckpoint.experiment_id == info.id).values(covariates=text)).rowcount
    if not found and text is not None:
        conn.execute(sa.insert(RollupCheckpoint).values(experiment_id=info.id,
                                                        covariates=text))


def forget(conn: sa.Connection, info: ExperimentInfo, user: str) -> None:
    """Drop one user's row (an erasure)."""
    conn.execute(sa.delete(RollupUserCovariates).where(
        RollupUserCovariates.experiment_id == info.id, RollupUserCovariates.user_id == user))
