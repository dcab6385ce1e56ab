"""The Spark rollup's per-user state for the passes both engines share (the cumulative
pass, :func:`tracker.rollup.cumulative.recompute_cumulative`, and the exposure-day view,
:func:`tracker.rollup.exposure_days.publish_exposure_days`): :class:`DirectoryStore`, their
:class:`~tracker.rollup.stores.Store` over the state directory
(:class:`~tracker.spark.state.StateDir`) instead of ``rollup_units``, ``rollup_exposure``
and ``rollup_first_seen``. The passes, the checkpoint, the sums and the rows the report
reads are the default engine's code; only where the state lives differs.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracker.rollup import covariates as cuped
from tracker.rollup import state
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.deltas import rows_of
from tracker.rollup.exposure import Exposure
from tracker.rollup.outcomes import Layout
from tracker.rollup.stores import Checkpoint, stored_columns
from tracker.spark.state import StateDir
from tracker.store.experiments import ExperimentInfo

CHECKPOINT = "spark-checkpoint/1"
"""The format of ``checkpoint/checkpoint.json``."""
FOLDER = "first_seen"
"""The state directory's folder of first-seen users, one Parquet file per day."""
FIRST_SEEN = "first_seen/1"
"""The format of a day's first-seen users: one ``user_id`` string column."""


class DirectoryStore:
    """A state directory as the shared passes' store."""

    def __init__(self, directory: StateDir, info: ExperimentInfo) -> None:
        self.directory, self.cutoffs = directory, list(info.cutoffs)
        self.layout = Layout.for_cutoffs(self.cutoffs)

    def units(self, day: date) -> UnitTotals | None:
        return self.directory.units(day, False, self.layout)

    def exposure(self, day: date, cumulative: bool) -> dict[int, Exposure]:
        return self.directory.exposure(day, cumulative, self.cutoffs)

    def checkpoint(self) -> Checkpoint | None:
        path = self._checkpoint / "checkpoint.json"
        if not path.exists():
            return None
        found = json.loads(path.read_text())
        if found.get("format") != CHECKPOINT:  # another format: from the first day
            return None
        stored_columns(found["columns"], self.layout)  # a missing one raises StaleState
        return Checkpoint(date.fromisoformat(found["day"]), found["sums"].encode())

    def checkpoint_rows(self, users: pa.Array | None) -> UnitTotals:
        """The rows of ``users``, read from the one file of every user's (this store is
        not keyed by user: a Spark state directory holds one Parquet file per checkpoint,
        the one ``checkpoint.json`` names)."""
        path = self._users_file()
        if path is None or not path.exists():
            return UnitTotals.empty(len(self.layout))
        every = UnitTotals.decode([state.write(pq.read_table(path), state.UNITS)],
                                  self.layout)
        return every if users is None else rows_of(every, users.cast(pa.string()))

    def write_checkpoint(self, day: date, sums: bytes, rows: UnitTotals,
                         everyone: bool) -> None:
        every = rows if everyone else \
            self.checkpoint_rows(None).replacing_users(rows) if rows.size else \
            self.checkpoint_rows(None)
        self._checkpoint.mkdir(parents=True, exist_ok=True)
        before = self._users_file()
        name = f"users-{day.isoformat()}-{uuid.uuid4().hex}.parquet"  # never overwritten
        pq.write_table(self.directory.encode(every, self.layout), self._checkpoint / name)
        temporary = self._checkpoint / "checkpoint.json.tmp"
        temporary.write_text(json.dumps({"format": CHECKPOINT, "day": day.isoformat(),
                                         "columns": list(self.layout.names),
                                         "sums": sums.decode(), "users": name}))
        os.replace(temporary, self._checkpoint / "checkpoint.json")  # the switch: atomic
        if before is not None and before.exists():
            before.unlink()

    def _users_file(self) -> Path | None:
        """The users' file the stored ``checkpoint.json`` names (None: none)."""
        path = self._checkpoint / "checkpoint.json"
        if not path.exists():
            return None
        return self._checkpoint / json.loads(path.read_text()).get("users", "users.parquet")

    def drop_checkpoint(self) -> None:
        if self._checkpoint.exists():
            shutil.rmtree(self._checkpoint)

    @property
    def _checkpoint(self) -> Path:
        return self.directory.root / "checkpoint"

    def write_exposure(self, day: date, exposures: dict[int, Exposure]) -> None:
        self.directory.write_exposure(day, True, exposures, self.cutoffs)

    def delete_cumulative(self, since: date) -> None:
        self.directory.delete_cumulative(since)

    def settle(self, covariates: cuped.UserCovariates | None) -> None:
        """Nothing: the run saves its covariates after the database commit
        (:func:`tracker.spark.covariates.save`)."""

    def first_seen_whole(self, before: date, days: set[date]) -> bool:
        return set(self._first_seen(before)) == days

    def first_days(self, users: pa.Array, before: date) -> np.ndarray:
        """From every day's file before ``before`` (this store is not keyed by user)."""
        stored = self._first_seen(before)
        if not stored:
            return np.full(len(users), -1, dtype=np.int64)
        known = pa.concat_arrays(list(stored.values()))
        days = np.concatenate([np.full(len(u), d.toordinal(), np.int64)
                               for d, u in stored.items()])
        index = pc.index_in(users.cast(pa.string()), value_set=known)
        found = index.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        return np.where(found >= 0, days[np.maximum(found, 0)], -1)

    def _first_seen(self, before: date) -> dict[date, pa.Array]:
        """The users first seen on each day before ``before`` (a file of another format
        left out: the pass then starts from the first day, rebuilt from the lake)."""
        out = {}
        for day, path in self._first_seen_files().items():
            table = pq.read_table(path) if day < before else None
            if table is not None and (table.schema.metadata or {}).get(state.FORMAT) == \
                    FIRST_SEEN.encode():
                out[day] = table["user_id"].combine_chunks().cast(pa.string())
        return out

    def write_first_seen(self, firsts: dict[date, pa.Array]) -> None:
        folder = self.directory.root / FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        for day, users in firsts.items():
            table = state.read(state.write(pa.table({"user_id": users.cast(pa.string())}),
                                           FIRST_SEEN), FIRST_SEEN)
            pq.write_table(table, folder / f"{day.isoformat()}.parquet")

    def delete_first_seen(self, since: date | None) -> None:
        for day, path in self._first_seen_files().items():
            if since is None or day >= since:
                path.unlink()

    def _first_seen_files(self) -> dict[date, Path]:
        folder = self.directory.root / FOLDER
        if not folder.is_dir():
            return {}
        return {date.fromisoformat(path.stem): path for path in folder.glob("*.parquet")}
