"""CUPED's per-user state: each user's covariates and first exposure
(:class:`UserCovariates`; stored one row per user in ``rollup_user_covariates``,
:mod:`tracker.rollup.stored_covariates`, and as the ``covariates/3`` stream of the Spark
engine's ``covariates.parquet``); what they are: :mod:`tracker.rollup.covariates`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup import state
from tracker.rollup.pre_metrics import NO_LISTS, index_in

BASE = ("pre_interactions", "pre_graded", "no_pre_period", NO_LISTS)
"""The covariates every metric column shares (then one ``pre:<column>`` per column)."""
USERS = "covariates/3"  # 2: named pre-period metric columns; 3: first_exposure, event time


@dataclass(frozen=True)
class UserCovariates:
    """Users (sorted, distinct ids), their first exposure (µs) and their covariates, one row
    each in the order of ``names`` (:func:`names_for`)."""

    users: pa.Array
    x: np.ndarray  # (users, covariates) float64
    names: tuple[str, ...]
    first: np.ndarray  # (users,) int64: the first exposure the window ends at

    @classmethod
    def empty(cls, names: tuple[str, ...]) -> UserCovariates:
        return cls(pa.array([], type=pa.string()), np.zeros((0, len(names))), names,
                   np.zeros(0, dtype=np.int64))

    def merged(self, other: UserCovariates) -> UserCovariates:
        """These rows and ``other``'s, ``other``'s replacing those of the same users."""
        mine = self.without(other.users)
        users = pa.concat_arrays([mine.users, other.users])
        order = pc.array_sort_indices(users).to_numpy()
        return UserCovariates(users.take(pa.array(order)),
                              np.concatenate([mine.x, other.x])[order], self.names,
                              np.concatenate([mine.first, other.first])[order])

    def missing(self) -> np.ndarray:
        """The covariates of a user without a row: no pre-period data of either kind."""
        return np.array([1.0 if n in ("no_pre_period", NO_LISTS) else 0.0
                         for n in self.names])

    def _rows(self, keep: np.ndarray) -> UserCovariates:
        return UserCovariates(self.users.filter(pa.array(keep)), self.x[keep], self.names,
                              self.first[keep])

    def subset(self, users: pa.Array) -> UserCovariates:
        """The rows of those of ``users`` it holds."""
        return self._rows(pc.is_in(self.users, value_set=users).to_numpy(zero_copy_only=False))

    def without(self, users: pa.Array) -> UserCovariates:
        """The rows of the users not in ``users``."""
        if not len(users) or not len(self.users):
            return self
        return self._rows(~pc.is_in(self.users, value_set=users).to_numpy(
            zero_copy_only=False))

    def of(self, users: pa.Array) -> np.ndarray:
        """The covariates of ``users`` (a user without a row: no pre-period data)."""
        return self.at(index_in(users, self.users))

    def at(self, index: np.ndarray) -> np.ndarray:
        """The covariates of the rows ``index`` (-1: a user without a row)."""
        found = index >= 0
        x = self.x[np.where(found, index, 0)] if len(self.users) else \
            np.zeros((index.size, len(self.names)))
        x[~found] = self.missing()
        return x

    def encode(self, days: int) -> memoryview:
        """The ``covariates/3`` stream of :func:`tracker.rollup.state.write`, its buffers
        compressed with zstd (Arrow IPC's own buffer compression, which any reader of the
        stream undoes): mostly zeros where users have no pre-period data, 200,000 users'
        27 columns take ~1 MB instead of 45 MB to write and read back."""
        data = {"user_id": self.users,
                "first_exposure": pa.array(self.first, type=pa.int64())}
        data.update({name: pa.array(self.x[:, j]) for j, name in enumerate(self.names)})
        return state.write(pa.table(data), USERS, compress=True, cuped_days=str(days))

    @classmethod
    def decode(cls, data: bytes, days: int, names: tuple[str, ...]) -> UserCovariates | None:
        """The stored covariates, None when they cover another window than ``days``; a
        column of ``names`` missing (cutoffs added since), or another format (``covariates/2``
        was fixed by receipt time), raises :class:`StaleState`."""
        table = state.read(data, USERS)
        if state.metadata(table, "cuped_days") != str(days):
            return None
        state.require(table, ["user_id", "first_exposure", *names], USERS)
        x = np.column_stack([table[name].to_numpy() for name in names]) \
            if table.num_rows else np.zeros((0, len(names)))
        return cls(table["user_id"].combine_chunks().cast(pa.string()), x, names,
                   table["first_exposure"].to_numpy().astype(np.int64))
