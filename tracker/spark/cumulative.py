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
from collections.abc import Callable
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracker.rollup import covariates as cuped
from tracker.rollup import state
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.deltas import rows_of
from tracker.rollup.exposure import Exposure
from tracker.rollup.outcomes import Layout
from tracker.rollup.stores import FIRST_SEEN, Checkpoint, first_seen_table, stored_columns
from tracker.spark.state import StateDir
from tracker.store.experiments import ExperimentInfo

CHECKPOINT = "spark-checkpoint/1"
"""The format of ``checkpoint/checkpoint.json``."""
FOLDER = "first_seen"
"""The state directory's folder of first-seen users, one Parquet file per day."""


class DirectoryStore:
    """A state directory as the shared passes' store."""

    def __init__(self, directory: StateDir, info: ExperimentInfo,
                 first_cells: Callable[[list[str]], dict[str, int]] | None = None) -> None:
        self.directory, self.cutoffs = directory, list(info.cutoffs)
        self.layout = Layout.for_cutoffs(self.cutoffs)
        self._first_cells = first_cells  # read from the lake (tracker.spark.frames.Frames)

    def first_cells(self, users: list[str]) -> dict[str, int]:
        if self._first_cells is None:
            raise TypeError("this store reads no lake: where its crossover users were "
                            "first exposed is unknown")
        return self._first_cells(users)

    def units(self, day: date) -> UnitTotals | None:
        return self.directory.units(day, False, self.layout)

    def horizon(self) -> date | None:
        """None: the database's expired logs leave a state directory's units alone."""
        return None

    def take_counted(self, through: date | None) -> dict[date, UnitTotals]:
        """None: a day's units are replaced whole here (after expired logs, a final day
        recomputed moves its daily view only)."""
        return {}

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

    def first_seen(self, before: date) -> dict[date, pa.Array]:
        out = {}
        for day, path in self._first_seen_files().items():
            table = pq.read_table(path) if day < before else None
            if table is not None and (table.schema.metadata or {}).get(state.FORMAT) == \
                    FIRST_SEEN.encode():  # another format: left out, rebuilt from the lake
                out[day] = table["user_id"].combine_chunks().cast(pa.string())
        return out

    def write_first_seen(self, day: date, users: pa.Array) -> None:
        folder = self.directory.root / FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        table = state.read(state.write(first_seen_table(users), FIRST_SEEN), FIRST_SEEN)
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
