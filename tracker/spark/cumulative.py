"""The Spark rollup's per-user state for the passes both engines share (the cumulative
pass, :func:`tracker.rollup.cumulative.recompute_cumulative`, and the exposure-day view,
:func:`tracker.rollup.exposure_days.publish_exposure_days`): :class:`DirectoryStore`, their
:class:`~tracker.rollup.stores.Store` over the state directory
(:class:`~tracker.spark.state.StateDir`) instead of ``rollup_units``, ``rollup_exposure``
and ``rollup_first_seen``. The passes, the checkpoint, the sums and the rows the report
reads are the default engine's code; only where the state lives differs.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracker.rollup import covariates as cuped
from tracker.rollup import state
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.exposure import Exposure
from tracker.rollup.outcomes import Layout
from tracker.rollup.stores import FIRST_SEEN, first_seen_table
from tracker.spark.state import StateDir
from tracker.store.experiments import ExperimentInfo

FOLDER = "first_seen"
"""The state directory's folder of first-seen users, one Parquet file per day."""


class DirectoryStore:
    """A state directory as the shared passes' store."""

    def __init__(self, directory: StateDir, info: ExperimentInfo) -> None:
        self.directory, self.cutoffs = directory, list(info.cutoffs)
        self.layout = Layout.for_cutoffs(self.cutoffs)

    def units(self, day: date, cumulative: bool) -> UnitTotals | None:
        return self.directory.units(day, cumulative, self.layout)

    def exposure(self, day: date, cumulative: bool) -> dict[int, Exposure]:
        return self.directory.exposure(day, cumulative, self.cutoffs)

    def checkpoint_day(self, before: date) -> date | None:
        return max((d for d in self.directory.cumulative_unit_days() if d < before),
                   default=None)

    def encode(self, totals: UnitTotals) -> pa.Table:
        return self.directory.encode(totals, self.layout)

    def write_checkpoint(self, day: date, parts: pa.Table | None) -> None:
        if parts is None:
            self.directory.copy_daily_units(day)
        else:
            self.directory.write_table(day, True, parts)

    def write_exposure(self, day: date, exposures: dict[int, Exposure]) -> None:
        self.directory.write_exposure(day, True, exposures, self.cutoffs)

    def delete_cumulative(self, since: date) -> None:
        self.directory.delete_cumulative(since)

    def keep_checkpoint(self, day: date | None) -> None:
        self.directory.keep_cumulative_units(day)

    def settle(self, totals: UnitTotals, covariates: cuped.UserCovariates | None) -> None:
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
