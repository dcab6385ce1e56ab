"""Logs for the Spark rollup's tests: the default engine's scenario (tests/rollup/scenario.py)
as lake files written with pyarrow (the generator path), with the duplicates and conflicts a
lake may hold, and a comparison of the rows the report reads."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa

from tracker.lake.layout import IMPRESSIONS, INTERACTIONS

REPORT_TABLES = {
    "rollup_metric": "day, cumulative, arm_id, segment, slice, metric, k",
    "rollup_health": "day, cumulative, arm_id, segment, slice",
    "rollup_day": "day",
}
"""What the report and the dashboard read, with the columns that order them."""

SKIP = {"id", "computed_at", "experiment_id"}


def report_rows(engine: sa.Engine) -> dict[str, list[dict]]:
    out = {}
    with engine.connect() as conn:
        for table, order in REPORT_TABLES.items():
            rows = conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY {order}")).mappings()
            out[table] = [{k: v for k, v in row.items() if k not in SKIP} for row in rows]
    return out


def assert_same_rows(got: dict[str, list[dict]], expected: dict[str, list[dict]]) -> None:
    """Equal keys and integers, floats to a relative 1e-9 (1e-12 absolute near 0)."""
    for table in REPORT_TABLES:
        assert len(got[table]) == len(expected[table]), table
        assert got[table], f"{table}: no rows at all"
        for mine, theirs in zip(got[table], expected[table], strict=True):
            assert mine.keys() == theirs.keys(), table
            for column, value in theirs.items():
                if isinstance(value, float):
                    assert math.isclose(mine[column], value, rel_tol=1e-9, abs_tol=1e-12), \
                        (table, column, mine, theirs)
                else:
                    assert mine[column] == value, (table, column, mine, theirs)


def _row(record: dict, schema: pa.Schema) -> dict:
    return {field.name: record.get(field.name) for field in schema}


def write_lake(folder: Path, impressions: list[dict], interactions: list[dict], *,
               files: int = 2, name: str = "part") -> None:
    """The records as lake files: ``files`` files per log, in folders per UTC day of the
    first record of each file (partition folders, as ``tracker export`` writes)."""
    for log, records, schema in (("imp", impressions, IMPRESSIONS),
                                 ("int", interactions, INTERACTIONS)):
        time = "served_at" if log == "imp" else "occurred_at"
        for n in range(files):
            part = records[n::files]
            if not part:
                continue
            day = part[0][time].date().isoformat()
            path = folder / log / f"day={day}" / f"{name}-{n}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist([_row(r, schema) for r in part], schema=schema),
                           path)


def with_duplicates_and_conflicts(impressions: list[dict], interactions: list[dict]
                                  ) -> tuple[list[dict], list[dict]]:
    """The records plus, for a few ids, the same row again (a duplicate: counts once) and
    another payload served or occurred an hour later (a conflict: the database keeps the
    first logged; the lake keeps the earliest, which is that one)."""
    imps, events = list(impressions), list(interactions)
    for record in impressions[::9]:
        imps.append(dict(record))
        imps.append({**record, "served_at": record["served_at"] + timedelta(hours=1),
                     "items": list(reversed(record["items"])) + ["conflicting-item"]})
    for record in interactions[::7]:
        events.append(dict(record))
        events.append({**record, "occurred_at": record["occurred_at"] + timedelta(hours=1),
                       "item_id": "conflicting-item"})
    return imps, events
