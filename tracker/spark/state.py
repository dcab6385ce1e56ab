"""The Spark rollup's state directory: what it keeps between runs, outside the database.

- ``manifest.json``: the lake files already taken into account (path, size, mtime in ns),
  the experiment and the settings the state was computed with (a change of either means
  a rebuild), written last in a run (atomically), so that a run killed before it leaves
  the files to be taken again.
- ``units/daily/DAY.parquet``: per-user totals of a day, in the ``units/2`` columns of
  :mod:`tracker.rollup.state` (Parquet with the same schema metadata: read by name, a
  stale layout raises :class:`~tracker.errors.StaleState`).
- ``checkpoint/``: the cumulative pass's checkpoint (:mod:`tracker.rollup.cumulative`):
  ``users.parquet``, each user's totals through its day (``units/2``), and
  ``checkpoint.json``, its day, layout columns and view sums (written last);
  :mod:`tracker.spark.cumulative`.
- ``exposure/{daily,cumulative}/DAY/cell=CODE.parquet``: item exposure per cell
  (``exposure/1``); the whole experiment's (:data:`~tracker.rollup.cells.WHOLE`) is the
  catalog.
- ``covariates.parquet``: CUPED's per-user covariates (``covariates/2``,
  :mod:`tracker.spark.covariates`); ``first_seen/DAY.parquet``: the users first seen on a
  day (``first_seen/1``, :mod:`tracker.spark.cumulative`).
- ``slices.parquet``: with user dimensions declared, each user's slice of each
  (``user``, ``slice:<dimension>``; :mod:`tracker.spark.slices`).
- ``scored/``: the groups' output of the last run (Arrow IPC files written by the Python workers:
  :func:`tracker.spark.groups.write_group`).

It must be a path the driver and the executors both reach (a local path for ``local[*]``,
a shared mount on a cluster).
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracker.rollup import state
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.cells import WHOLE
from tracker.rollup.exposure import Exposure
from tracker.rollup.outcomes import Layout
from tracker.rollup.stores import decode_exposure

FORMAT = "spark-state/2"  # 2: cells (``units/2``, ``cell=`` exposure files)
Files = dict[str, list[int]]  # path -> [size, mtime_ns]


def _view(cumulative: bool) -> str:
    return "cumulative" if cumulative else "daily"


class StateDir:
    """One experiment's state directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def scored(self) -> Path:
        return self.root / "scored"

    def fresh_scored(self) -> str:
        """The ``scored/`` folder, emptied (a run's groups write into it)."""
        if self.scored.is_dir():
            shutil.rmtree(self.scored)
        self.scored.mkdir(parents=True)
        return str(self.scored)

    def manifest(self) -> dict | None:
        """The manifest, None when there is none (or of another format: a rebuild)."""
        path = self.root / "manifest.json"
        if not path.exists():
            return None
        found = json.loads(path.read_text())
        return found if found.get("format") == FORMAT else None

    def save_manifest(self, experiment: str, config: dict, impressions: Files,
                      interactions: Files) -> None:
        text = json.dumps({"format": FORMAT, "experiment": experiment, "config": config,
                           "impressions": impressions, "interactions": interactions},
                          indent=1, sort_keys=True)
        temporary = self.root / "manifest.json.tmp"
        temporary.write_text(text)
        os.replace(temporary, self.root / "manifest.json")

    def clear(self) -> None:
        """Forget everything (a rebuild)."""
        for name in ("manifest.json", "units", "exposure", "scored", "covariates.parquet",
                     "first_seen", "checkpoint", "slices.parquet"):
            path = self.root / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        self.root.mkdir(parents=True, exist_ok=True)

    def _units_path(self, day: date, cumulative: bool) -> Path:
        return self.root / "units" / _view(cumulative) / f"{day.isoformat()}.parquet"

    def write_units(self, day: date, cumulative: bool, totals: UnitTotals,
                    layout: Layout) -> None:
        self.write_table(day, cumulative, self.encode(totals, layout))

    @staticmethod
    def encode(totals: UnitTotals, layout: Layout) -> pa.Table:
        """``totals`` as the table :meth:`write_table` writes (``units/2`` columns)."""
        tables = [state.read(part, state.UNITS) for part in totals.encode(layout)]
        return pa.concat_tables(tables, promote_options="default")

    def write_table(self, day: date, cumulative: bool, table: pa.Table) -> None:
        path = self._units_path(day, cumulative)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)

    def delete_cumulative(self, since: date) -> None:
        """Forget the cumulative exposure of ``since`` and every later day."""
        folder = self.root / "exposure" / _view(True)
        for path in sorted(folder.glob("????-??-??")) if folder.exists() else []:
            if date.fromisoformat(path.name) >= since:
                shutil.rmtree(path)

    def units(self, day: date, cumulative: bool, layout: Layout) -> UnitTotals | None:
        path = self._units_path(day, cumulative)
        if not path.exists():
            return None
        table = pq.read_table(path)
        return UnitTotals.decode([state.write(table, state.UNITS)], layout)

    def _exposure_dir(self, day: date, cumulative: bool) -> Path:
        return self.root / "exposure" / _view(cumulative) / day.isoformat()

    def write_exposure(self, day: date, cumulative: bool, exposures: dict[int, Exposure],
                       cutoffs: list[int]) -> None:
        folder = self._exposure_dir(day, cumulative)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for cell, exposure in exposures.items():
            data = exposure.encode([] if cell == WHOLE else cutoffs)
            pq.write_table(state.read(data, state.EXPOSURE), folder / f"cell={cell}.parquet")

    def exposure(self, day: date, cumulative: bool, cutoffs: list[int]) -> dict[int, Exposure]:
        folder = self._exposure_dir(day, cumulative)
        out = {}
        for path in sorted(folder.glob("cell=*.parquet")) if folder.exists() else []:
            cell = int(path.stem.split("=", 1)[1])
            table = pq.read_table(path)
            out[cell] = decode_exposure(state.write(table, state.EXPOSURE), cell, cutoffs)
        return out

