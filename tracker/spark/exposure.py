"""The ``exposure_day`` view on Spark: :mod:`tracker.rollup.exposure_days` with the per-user
part (each day's first-seen users) in the state directory instead of ``rollup_first_seen``.

The rows are the default engine's: each recomputed day's per-user unit totals (just computed,
or the daily units of the state directory) go through :class:`~tracker.rollup.exposure_days.
FirstSeen` and :func:`~tracker.rollup.exposure_days.day_rows`, and are inserted into
``rollup_exposure_day`` in the run's one transaction. As there, a run that recomputed days
from D on rebuilds the rows from D on, from the first-seen users of the days before D
(``first_seen/DAY.parquet``, format ``first_seen/1``); when one of those days lacks its file
the rows are rebuilt from the first day. ``rollup_first_seen`` (the default engine's state)
is cleared: the experiment's results are the state directory's now, so a default-engine run
takes it over with a rebuild (:mod:`tracker.rollup.sources`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracker.rollup import state
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.exposure_days import (
    FIRST_SEEN,
    FirstSeen,
    day_rows,
    delete_rows,
    forget_first_seen,
    insert_rows,
)
from tracker.rollup.outcomes import Layout
from tracker.spark.state import StateDir
from tracker.store import results
from tracker.store.experiments import ExperimentInfo

FOLDER = "first_seen"
"""The state directory's folder of first-seen users, one Parquet file per day."""


def publish(conn, info: ExperimentInfo, store: StateDir, since: date | None,
            recent: Mapping[date, UnitTotals], *, rebuild: bool) -> None:
    """Replace the exposure-day rows (database) and first-seen users (state directory) of
    every day from ``since`` on (None: no day changed); ``rebuild``: forget the
    experiment's rows first. ``recent``: unit totals of days just computed."""
    forget_first_seen(conn, info.id)
    if rebuild:
        delete_rows(conn, info.id, None)
    if since is None:
        return
    days = results.known_days(conn, info.id)
    stored = {day: _read(path) for day, path in _files(store).items() if day < since}
    stored = {day: users for day, users in stored.items() if users is not None}
    if set(stored) != {d for d, _, _ in days if d < since}:  # state missing: from day one
        since, stored = (days[0][0] if days else since), {}
    delete_rows(conn, info.id, since)
    for day, path in _files(store).items():
        if day >= since:
            path.unlink()
    seen = FirstSeen()
    for day, users in sorted(stored.items()):
        seen.add(day, users)
    layout = Layout.for_cutoffs(list(info.cutoffs))
    for day, closes, computed in (d for d in days if d[0] >= since):
        totals = recent[day] if day in recent else store.units(day, False, layout)
        totals = UnitTotals.empty(len(layout)) if totals is None else totals
        offsets, new = seen.offsets(day, totals.users.cast(pa.string()))
        seen.add(day, new)
        _write(store, day, new)
        rows = day_rows(info, totals, offsets, layout)
        for row in rows:
            row.update(experiment_id=info.id, day=day, provisional=computed < closes)
        insert_rows(conn, rows)


def _files(store: StateDir) -> dict[date, Path]:
    folder = store.root / FOLDER
    if not folder.is_dir():
        return {}
    return {date.fromisoformat(path.stem): path for path in folder.glob("*.parquet")}


def _read(path: Path) -> pa.Array | None:
    """One day's first-seen users, None when the file is of another format."""
    table = pq.read_table(path)
    if (table.schema.metadata or {}).get(state.FORMAT) != FIRST_SEEN.encode():
        return None
    return table["user_id"].combine_chunks().cast(pa.string())


def _write(store: StateDir, day: date, users: pa.Array) -> None:
    folder = store.root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    table = state.read(state.write(pa.table({"user_id": users.cast(pa.string())}),
                                   FIRST_SEEN), FIRST_SEEN)
    pq.write_table(table, folder / f"{day.isoformat()}.parquet")

