"""Record sources: pandas DataFrames (here) and files (:mod:`tracker.ingest.files`, whose
``detect_format``, ``count_records`` and ``file_records`` are re-exported) as record streams.

A DataFrame's time columns are converted to epoch microseconds in one vectorised step; its
impressions are then validated a column at a time (:mod:`tracker.ingest.columnar`), and
every row that is not plainly clean goes through the same per-record validation as every other
path.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from tracker.ingest.columnar import ColumnChunk, _all_none
from tracker.ingest.files import (  # noqa: F401  (re-exported: the file readers)
    FORMATS,
    LIST_FIELDS,
    TIME_FIELDS,
    FileRecords,
    _missing,
    count_records,
    detect_format,
    file_records,
)


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


