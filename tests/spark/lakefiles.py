"""Lake files written by hand with pyarrow, for the reader's tests."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracker.lake.layout import IMPRESSIONS, INTERACTIONS

T = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)


def impression(impression_id: str, **fields) -> dict:
    row = {"impression_id": impression_id, "experiment": "e", "arm": "a", "user_id": "u",
           "served_at": T, "items": ["i1", "i2"], "scores": None, "baseline_items": None,
           "context": None}
    return {**row, **fields}


def interaction(event_id: str, **fields) -> dict:
    row = {"event_id": event_id, "user_id": "u", "item_id": "i1", "event": "click",
           "value": None, "occurred_at": T, "impression_id": None}
    return {**row, **fields}


def write(path: Path, rows: list[dict], schema: pa.Schema = IMPRESSIONS) -> Path:
    """``rows`` as one Parquet file at ``path`` (folders made), with ``schema``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def write_interactions(path: Path, rows: list[dict]) -> Path:
    return write(path, rows, INTERACTIONS)
