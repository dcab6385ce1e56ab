"""CUPED's pre-period covariates per user bucket, in the Python workers: the group scorer
(:func:`group_covariates`, any lake) and, on a lake bucketed by user
(:mod:`tracker.lake.layout`), the whole step read bucket by bucket (:func:`bucket_matched`).

**Bucket by bucket.** A user's covariates depend on the user's own rows only (their first
exposure in the experiment, the interactions and every experiment's lists inside their
window), and on a bucketed lake all of a user's rows
lie in the files of the user's bucket. So each task here reads one bucket's files with
pyarrow (no scan, join or shuffle in the JVM):

1. the experiment's impressions (arms it declares), every day: each user's first exposure,
   the earliest served (as the census gives it, :attr:`tracker.spark.frames.Census.firsts`);
   a user's window is ``[first − cuped_days, first)``;
2. the interactions and every experiment's impressions served in the span of the task's
   windows (the row groups outside skipped by their statistics), each row kept when it
   falls in its user's window: found from their ids, users and times, the other columns
   (the lists' items) read only for the rows kept;
3. :func:`group_covariates` on what was kept.

The new users reach the tasks through one Arrow IPC file the driver writes into the state
directory (a record batch per task), not through the tasks' closure. Every row a task reads
is checked to be of its bucket (a :class:`~tracker.spark.lake.LakeError` naming the file).
Taken only when the lake's rows are the files' rows (:func:`tracker.spark.buckets.lake_buckets`:
both logs bucketed alike, no repeated id), else the covariates are computed by the joins of
:mod:`tracker.spark.covariates`, to the same values.

**Memory per task**: its users (the new users of the bucket: a bucket is cut into parts of
about :data:`~tracker.spark.covariates.USERS_PER_GROUP` users when it holds more), one
file's rows at a time, and the kept pre-period rows of its users (as a group of the joins'
path holds them): not the bucket's whole history.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import SparkSession

from tracker.lake.layout import IDS, TIMES, TIMESTAMP, user_hash
from tracker.rollup.cells import WHOLE, Cells
from tracker.rollup.codes import sorted_codes
from tracker.rollup.covariates import covariates_of
from tracker.rollup.first_exposures import first_rows
from tracker.spark.buckets import Files, collected, read_rows
from tracker.store.arrow import LIST
from tracker.store.experiments import ExperimentInfo

LOG = logging.getLogger("tracker.spark")
DAY_US = 86_400_000_000
OUT = "user string, x array<double>"
"""A row per user with pre-period data: the covariates in the order of
:func:`tracker.rollup.covariates.names_for`."""


def group_covariates(info: ExperimentInfo, events: pa.Table, lists: pa.Table) -> pa.Table:
    """One group's covariates (``user``, ``x``: the values in the order of
    :func:`tracker.rollup.covariates.names_for`), for the users of its pre-period
    ``events`` (``user, item, event, at, key``) and ``lists`` (``user, served, items,
    key``), through the default engine's :func:`~tracker.rollup.covariates.covariates_of`.
    """
    events = pa.table({name: _column(events, name, kind) for name, kind in (
        ("user", pa.string()), ("item", pa.string()), ("event", pa.string()),
        ("at", pa.int64()), ("key", pa.string()))})
    n = lists.num_rows
    lists = pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "cell": pa.array(np.full(n, WHOLE, np.int64)),
        "user": _column(lists, "user", pa.string()),
        "served": _column(lists, "served", pa.int64()),
        "items": _column(lists, "items", LIST), "baseline": pa.nulls(n, LIST),
        "key": _column(lists, "key", pa.string())})
    users = pc.unique(pa.concat_arrays([events["user"].combine_chunks(),
                                        lists["user"].combine_chunks()]))
    found = covariates_of(info, users, events, lists)
    width = len(found.names)
    offsets = pa.array(np.arange(len(users) + 1, dtype=np.int32) * width)
    return pa.table({"user": found.users,
                     "x": pa.ListArray.from_arrays(offsets, pa.array(found.x.ravel()))})


def _column(table: pa.Table, name: str, kind: pa.DataType) -> pa.Array:
    if name not in table.column_names:
        return pa.array([], kind)
    return table[name].combine_chunks().cast(kind)


@dataclass(frozen=True)
class CovariateJob:
    """What every task of the bucket path shares (pickled into them): ``tasks`` are the
    (bucket, part) of each record batch of the ``users`` file."""

    info: ExperimentInfo
    count: int
    parts: int
    files: Files
    users: str
    tasks: tuple[tuple[int, int], ...]

    def covariates(self, index: int) -> pa.Table:
        """The rows (``user``, ``x``) of task ``index``'s users with pre-period data."""
        bucket, part = self.tasks[index]
        group = (bucket, part, self.count, self.parts)
        with pa.memory_map(self.users) as source:
            mine = pa.ipc.open_file(source).get_batch(index).column(0)
        imp_files, event_files = self.files.get(bucket, ((), ()))
        windows = self._windows(imp_files, group, mine)
        if not windows.num_rows:
            return pa.table({"user": pa.array([], pa.string()),
                             "x": pa.array([], pa.list_(pa.float64()))})
        span = (pc.min(windows["lo"]).as_py(), pc.max(windows["hi"]).as_py())
        events = _kept(event_files, "interactions", group, windows, span,
                       ("user_id", "item_id", "event", "occurred_at", "impression_id"))
        lists = _kept(imp_files, "impressions", group, windows, span,
                      ("user_id", "served_at", "impression_id", "items"))
        return group_covariates(self.info, pa.table({
            "user": events["user_id"], "item": events["item_id"], "event": events["event"],
            "at": events["occurred_at"].cast(pa.int64()), "key": events["impression_id"]}),
            pa.table({"user": lists["user_id"], "served": lists["served_at"].cast(pa.int64()),
                      "items": lists["items"], "key": lists["impression_id"]}))

    def _windows(self, files: tuple[str, ...], group: tuple[int, int, int, int],
                 users: pa.Array) -> pa.Table:
        """``user, lo, hi`` (µs) of each of ``users`` the experiment served: the window
        before the first exposure."""
        info = self.info
        mine = (ds.field("experiment") == info.key) \
            & ds.field("arm").isin(list(Cells.of(info).logged))
        firsts = pa.table({"user": pa.array([], pa.string()),
                           "served": pa.array([], pa.int64())})
        for path in files:  # file by file: a user's earliest so far, not every impression
            rows = read_rows((path,), "impressions", group, ("user_id", "served_at"), mine)
            rows = rows.filter(pc.is_in(rows["user_id"], value_set=users))
            firsts = _earliest(pa.concat_tables([firsts, pa.table({
                "user": rows["user_id"].cast(pa.string()),
                "served": rows["served_at"].cast(pa.int64())})]))
        hi = firsts["served"]
        return pa.table({"user": firsts["user"], "lo": pc.subtract(hi, info.cuped_days * DAY_US),
                         "hi": hi})


def _earliest(rows: pa.Table) -> pa.Table:
    """A row per user: the earliest ``served``, the default engine's first exposure
    (:func:`tracker.rollup.first_exposures.first_rows`)."""
    if rows.num_rows < 2:
        return rows
    _, codes = sorted_codes(rows["user"].combine_chunks())
    return rows.take(pa.array(first_rows(codes, rows["served"].to_numpy())))


def _kept(files: tuple[str, ...], kind: str, group: tuple[int, int, int, int],
          windows: pa.Table, span: tuple[int, int], columns: tuple[str, ...]) -> pa.Table:
    """The rows (``columns``) of ``files`` inside their user's window. Found from the id,
    user and time first: the other columns (an impression's items) are read only for the
    rows kept, by id."""
    key, time = IDS[kind], TIMES[kind]
    at = ds.field(time)
    where = (at >= _instant(span[0])) & (at < _instant(span[1]))
    found = [read_rows((), kind, group, columns, where)]
    for path in files:
        rows = read_rows((path,), kind, group, (key, "user_id", time), where)
        user = pc.index_in(rows["user_id"], value_set=windows["user"].combine_chunks())
        rows = rows.filter(pc.is_valid(user))
        user = pc.drop_null(user).combine_chunks()
        t = rows[time].cast(pa.int64())
        keep = pc.and_(pc.greater_equal(t, pc.take(windows["lo"], user)),
                       pc.less(t, pc.take(windows["hi"], user)))
        ids = rows.filter(keep)[key].combine_chunks()
        if len(ids):  # an id comes once in the lake (the bucket path's condition)
            found.append(read_rows((path,), kind, group, columns,
                                   where & ds.field(key).isin(ids)))
    return pa.concat_tables(found)


def _instant(micros: int) -> pa.Scalar:
    return pa.scalar(micros, pa.int64()).cast(TIMESTAMP)


def bucket_matched(spark: SparkSession, info: ExperimentInfo, files: Files, count: int,
                   users: pa.Array, scratch: Path, users_per_group: int) -> pa.Table:
    """The rows (``user``, ``x``) of ``users`` with pre-period data, one task per bucket
    holding some (cut into parts of about ``users_per_group`` users), from a lake bucketed
    into ``count`` buckets (``files``: each bucket's, :func:`lake_buckets`). ``scratch``: a
    file path for the users, removed after."""
    if not len(users):
        return pa.table({"user": pa.array([], pa.string()),
                         "x": pa.array([], pa.list_(pa.float64()))})
    parts = max(1, -(-len(users) // (users_per_group * count)))
    hashes = user_hash(users)
    task = (hashes % np.uint64(count)).astype(np.int64) * parts \
        + (hashes // np.uint64(count) % np.uint64(parts)).astype(np.int64)
    order = np.argsort(task, kind="stable")
    cut = np.flatnonzero(np.diff(task[order])) + 1
    batches = np.split(order, cut)
    tasks = tuple((int(task[b[0]] // parts), int(task[b[0]] % parts)) for b in batches)
    schema = pa.schema([("user", pa.string())])
    LOG.info("covariates: bucket by bucket (%d task(s), %d part(s) a bucket), no join",
             len(tasks), parts)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    try:
        with pa.OSFile(str(scratch), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for b in batches:
                writer.write_batch(pa.record_batch([users.take(pa.array(b))], schema=schema))
        job = CovariateJob(info, count, parts, files, str(scratch), tasks)

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for index in batch.column(0).to_pylist():
                    yield from job.covariates(index).to_batches()

        return collected(spark.range(len(tasks), numPartitions=len(tasks))
                         .mapInArrow(run, OUT).toArrow)
    finally:
        scratch.unlink(missing_ok=True)
