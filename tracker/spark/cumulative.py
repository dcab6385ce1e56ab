"""The Spark rollup's per-user state for the one cumulative pass
(:func:`tracker.rollup.cumulative.recompute_cumulative`): :class:`DirectoryStore`, the
pass's :class:`~tracker.rollup.cumulative.Store` over the state directory
(:class:`~tracker.spark.state.StateDir`) instead of ``rollup_units`` and
``rollup_exposure``. The pass, its checkpoint, the sums and the rows the report reads are
the default engine's code; only where the state lives differs.
"""

from __future__ import annotations

from datetime import date

import pyarrow as pa

from tracker.rollup import covariates as cuped
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.exposure import Exposure
from tracker.rollup.outcomes import Layout
from tracker.spark.state import StateDir
from tracker.store.experiments import ExperimentInfo


class DirectoryStore:
    """A state directory as the cumulative pass's store."""

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
