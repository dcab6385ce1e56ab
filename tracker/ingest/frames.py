"""Record sources: pandas DataFrames and files (CSV, JSON Lines, Parquet) as record streams.

A DataFrame's time columns are converted to epoch microseconds in one vectorised step; its
impressions are then validated a column at a time (:mod:`tracker.ingest.columnar`), and
every row that is not plainly clean goes through the same per-record validation as every other
path.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracker.ingest.columnar import ColumnChunk, _all_none
from tracker.ingest.validate import Unreadable

TIME_FIELDS = ("served_at", "occurred_at")
LIST_FIELDS = ("items", "scores", "baseline_items")
FORMATS = ("csv", "jsonl", "parquet")


def _missing(value: Any) -> bool:
    return value is None or (type(value) is float and math.isnan(value))


def frame_records(frame) -> tuple[FrameRecords, bool]:
    """Records of a DataFrame, and whether its time columns were converted to microseconds."""
    import pandas as pd

    columns: dict[str, Any] = {}
    micros = True
    for name in frame.columns:
        series = frame[name]
        if name in TIME_FIELDS:
            if _holds_numbers(series):  # a number is not a time (pandas would read an epoch)
                micros = False
                continue
            try:
                converted = pd.to_datetime(series, utc=True, format="ISO8601")
            except (ValueError, TypeError, OverflowError):
                micros = False
            else:
                if converted.isna().any():
                    micros = False
                else:
                    series = converted.dt.as_unit("us").astype("int64")
        columns[str(name)] = series
    if not micros:  # per-row parsing reports each bad value where it is
        columns = {str(name): frame[name] for name in frame.columns}
    return FrameRecords(columns, len(frame)), micros


def _holds_numbers(series) -> bool:
    """Whether a column holds numbers (or bools): a numeric column, or numbers among objects."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        return True
    if series.dtype != object:
        return False
    return any(isinstance(v, (int, float)) and not (type(v) is float and math.isnan(v))
               for v in series.tolist())


class FrameRecords:
    """The records of a DataFrame, read a slice of rows at a time.

    Iterating yields one dict per row (missing values left out, as if the field were absent);
    :meth:`column_chunks` yields the same rows as :class:`~tracker.ingest.columnar.ColumnChunk`
    batches for the column-at-a-time validation, without building a dict per row.
    """

    def __init__(self, columns: dict[str, Any], size: int, slice_rows: int = 10_000):
        self.columns = columns
        self.size = size
        self.slice_rows = slice_rows

    def _slice(self, start: int, stop: int) -> dict[str, list]:
        values = {}
        for name, series in self.columns.items():
            part = series.iloc[start:stop].tolist()
            if float in set(map(type, part)):
                part = [None if _missing(v) else v for v in part]
            values[name] = part
        return values

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for start in range(0, self.size, self.slice_rows):
            values = self._slice(start, min(start + self.slice_rows, self.size))
            names = list(values)
            for row in zip(*values.values(), strict=True):
                yield {n: v for n, v in zip(names, row, strict=True) if v is not None}

    def column_chunks(self, size: int, fields: frozenset[str]) -> Iterator[ColumnChunk]:
        """Batches of ``size`` rows as columns of the known ``fields``."""
        for start in range(0, self.size, size):
            stop = min(start + size, self.size)
            values = self._slice(start, stop)
            n = stop - start
            suspect: set[int] = set()
            for name, part in values.items():
                if name not in fields and not _all_none(part):
                    suspect.update(i for i, v in enumerate(part) if v is not None)
            columns = {name: values.get(name) or [None] * n for name in fields}

            def record(i: int, values=values) -> dict[str, Any]:
                return {name: part[i] for name, part in values.items() if part[i] is not None}

            yield ColumnChunk(n, columns, suspect, record)


def detect_format(path: Path, fmt: str | None) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
        return fmt
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise ValueError(f"cannot tell the format of {path.name}: use --format "
                     f"({', '.join(FORMATS)})")


def count_records(path: Path, fmt: str) -> int:
    """How many records a file holds (for progress bars), without parsing them."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    lines = 0
    last = b"\n"
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            lines += block.count(b"\n")
            last = block[-1:]
    lines += last != b"\n"  # a last line without a newline
    return max(lines - 1, 0) if fmt == "csv" else lines


def _decode_csv_lists(record: dict[str, Any]) -> dict[str, Any]:
    for name in LIST_FIELDS:
        value = record.get(name)
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                with contextlib.suppress(ValueError):  # validation reports it as not a list
                    record[name] = json.loads(text)
            else:
                record[name] = text.split("|") if text else []
    context = record.get("context")
    if isinstance(context, str):
        with contextlib.suppress(ValueError):  # validation reports it as not an object
            record["context"] = json.loads(context)
    return record


def _parquet_rows(batch) -> list[dict[str, Any] | Unreadable]:
    """The rows of a Parquet record batch as dicts; when the batch cannot be converted whole
    (a timestamp outside Python's years 1-9999), row by row, each failing row an
    :class:`Unreadable` that validation rejects on its own."""
    try:
        return batch.to_pylist()
    except (OverflowError, ValueError):
        pass
    rows: list[dict[str, Any] | Unreadable] = []
    for i in range(batch.num_rows):
        try:
            rows.extend(batch.slice(i, 1).to_pylist())
        except (OverflowError, ValueError) as exc:
            rows.append(Unreadable(f"row cannot be read: {str(exc)[:200]}"))
    return rows


def file_records(path: Path, fmt: str, chunk_rows: int = 50_000) -> Iterator[dict[str, Any]]:
    """Stream the records of a file.

    - CSV: one record per row; list columns (``items``, ``scores``, ``baseline_items``) hold a
      JSON array (``["a","b"]``) or ids separated by ``|``; ``context`` holds a JSON object.
      Ids are read as text.
    - JSON Lines: one JSON object per line (a line that is not an object is yielded as is and
      rejected by validation with its line number).
    - Parquet: list columns as Parquet lists, read in row batches.
    """
    if fmt == "csv":
        import pandas as pd

        id_columns = {"impression_id", "event_id", "user_id", "item_id", "experiment", "arm",
                      "event"}
        reader = pd.read_csv(path, chunksize=chunk_rows, keep_default_na=False,
                             na_values={"value": [""], "scores": [""], "baseline_items": [""],
                                        "context": [""]},
                             dtype={c: str for c in id_columns | set(LIST_FIELDS) | set(TIME_FIELDS)
                                    | {"context"}})
        for frame in reader:
            for record in frame.to_dict("records"):
                record = {k: v for k, v in record.items() if not _missing(v) and v != ""}
                yield _decode_csv_lists(record)
    elif fmt == "jsonl":
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    yield Unreadable(f"line is not valid JSON: {exc}")
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(batch_size=chunk_rows):
            for record in _parquet_rows(batch):
                yield record if isinstance(record, Unreadable) else {
                    k: v for k, v in record.items() if not _missing(v)}
    else:
        raise ValueError(f"unknown format {fmt!r}")
