"""The census of a lake bucketed by user (:class:`tracker.spark.frames.Census`: each day's
extent, the heavy users, a row per user and day), counted bucket by bucket in the Python
workers instead of a scan and aggregation of the experiment's impressions in the JVM.

Each task reads one bucket's impression files with pyarrow (only the experiment's rows of
the arms it declares: ``user_id, served_at``; every row checked to be of the
bucket, :func:`tracker.spark.buckets.read_rows`), and reduces them file by file to a row per
(user, day): ``n`` impressions, ``last`` served, ``first`` the earliest served. A
user's rows all lie in the user's bucket, so these are the census's rows; Spark caches them
(a tenth of the impressions here) and the days' extents and heavy users come from them as
on any lake (:func:`tracker.spark.frames.census_of`). Days are the experiment's calendar
days, from :func:`tracker.rollup.days.day_start` (the default engine's boundaries).

Taken only where the lake's rows are its files' rows
(:func:`tracker.spark.buckets.lake_buckets`). Memory per task: one file's rows and the
bucket's (user, day) rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import SparkSession

from tracker.rollup.cells import Cells
from tracker.rollup.days import day_start
from tracker.spark.buckets import Files, collected, read_rows
from tracker.spark.frames import Census, census_of
from tracker.store.experiments import ExperimentInfo

_DAY_US = 86_400_000_000
_EPOCH = date(1970, 1, 1)
OUT = "user string, _day date, n long, last long, first long"


def local_days(micros: np.ndarray, zone: str) -> np.ndarray:
    """The calendar day in ``zone`` of each instant (UTC µs), as days since the epoch.

    A zone's offset is under a day, so an instant of UTC day ``d`` falls on local day
    ``d - 1``, ``d`` or ``d + 1``: the starts of the local days ``d - 1 .. d + 2`` of each
    UTC day seen bound it (the default engine's :func:`~tracker.rollup.days.day_start`).

    >>> local_days(np.array([0, 23 * 3_600_000_000]), "Asia/Tokyo").tolist()
    [0, 1]
    """
    if not micros.size:
        return np.empty(0, np.int64)
    seen = np.unique(micros // _DAY_US)
    candidates = np.unique((seen[:, None] + np.arange(-1, 3)).ravel())
    starts = np.array([day_start(_EPOCH + timedelta(days=int(d)), zone) for d in candidates])
    return candidates[np.searchsorted(starts, micros, side="right") - 1]


def _reduced(rows: pa.Table) -> pa.Table:
    """A row per (``user``, ``_day``) of ``rows`` (``user, _day, n, last, served``): ``n``
    summed, ``last`` the latest, ``served`` the earliest."""
    if rows.num_rows < 2:
        return rows
    rows = rows.take(pc.sort_indices(rows, [(name, "ascending") for name in (
        "user", "_day", "served")]))
    users, days = rows["user"].combine_chunks(), rows["_day"].to_numpy()
    new = np.ones(rows.num_rows, bool)
    new[1:] = pc.not_equal(users.slice(1), users.slice(0, len(users) - 1)).to_numpy(
        zero_copy_only=False) | (days[1:] != days[:-1])
    at = np.flatnonzero(new)
    out = rows.take(pa.array(at))
    return out.set_column(out.schema.get_field_index("n"), "n", pa.array(
        np.add.reduceat(rows["n"].to_numpy(), at))).set_column(
        out.schema.get_field_index("last"), "last", pa.array(
            np.maximum.reduceat(rows["last"].to_numpy(), at)))


@dataclass(frozen=True)
class CensusJob:
    """What every task shares (pickled into them): the experiment, its buckets' files."""

    info: ExperimentInfo
    count: int
    files: Files

    def bucket(self, bucket: int) -> pa.Table:
        """The census rows (:data:`OUT`) of one bucket."""
        info = self.info
        mine = (ds.field("experiment") == info.key) \
            & ds.field("arm").isin(list(Cells.of(info).logged))
        found = pa.table({"user": pa.array([], pa.string()), "_day": pa.array([], pa.int64()),
                          "n": pa.array([], pa.int64()), "last": pa.array([], pa.int64()),
                          "served": pa.array([], pa.int64())})
        for path in self.files[bucket][0]:  # file by file: the (user, day) rows so far
            rows = read_rows((path,), "impressions", (bucket, 0, self.count, 1),
                             ("user_id", "served_at"), mine)
            served = rows["served_at"].cast(pa.int64())
            found = _reduced(pa.concat_tables([found, pa.table({
                "user": rows["user_id"].cast(pa.string()),
                "_day": pa.array(local_days(served.to_numpy(), info.timezone)),
                "n": pa.array(np.ones(rows.num_rows, np.int64)), "last": served,
                "served": served})]))
        return pa.table({
            "user": found["user"], "_day": found["_day"].cast(pa.int32()).cast(pa.date32()),
            "n": found["n"], "last": found["last"], "first": found["served"]})


def bucket_census(spark: SparkSession, info: ExperimentInfo, files: Files, count: int,
                  user_rows: int) -> Census:
    """The census of a bucketed lake's experiment impressions, a task per bucket holding
    impressions (module docstring)."""
    job = CensusJob(info, count, files)
    buckets = sorted(files)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from job.bucket(buckets[index]).to_batches()

    per_user = spark.range(len(buckets), numPartitions=max(1, len(buckets))) \
        .mapInArrow(run, OUT)
    return collected(lambda: census_of(per_user, user_rows))
