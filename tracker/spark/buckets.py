"""The groups of a lake bucketed by user (:mod:`tracker.lake.layout`, ``tracker export
--buckets N``), scored without shuffling the logs.

On any lake the groups (user bucket, day) are made by Spark: both logs scanned, shuffled by
group and sorted, each group handed to a Python worker as Arrow
(:func:`tracker.spark.frames.grouped`, a ``cogroup``). That shuffle and sort of the item
lists was most of a run's CPU (benchmarks/README.md, "Spark"). When the lake is already
bucketed by user, a group's rows are in its bucket's files: each task here reads one
bucket's files with pyarrow (only the experiment's impressions of its day and the
interactions that may answer them, the row groups outside skipped by their statistics),
checks that every user read belongs in the bucket, and scores the group with the same
:func:`tracker.spark.groups.score_group`. Spark only schedules the tasks.

The groups are the lake's buckets, each cut into ``parts`` by the user's hash when the
run wants more groups than the lake has buckets (``buckets`` of the run, by default the
largest day's impressions over :data:`~tracker.spark.frames.GROUP_ROWS`): a part reads its
bucket's files and keeps its users, so a group stays near ``GROUP_ROWS`` impressions
whatever N the lake was written with (at the cost of reading a bucket ``parts`` times).

Taken only when the result is the same as the shuffle's (:func:`usable`): both logs
bucketed alike; no id seen twice in either (so the lake's rows are the files' rows); no
interaction naming an
impression served to another user (it joins the group of the impression it names, which is
then in another bucket: :func:`named_elsewhere`, one join of the named ids, run only when
the footers do not prove that no interaction names one); and no (user, day) of more than
``user_rows`` impressions among the days (those are cut into slices by the shuffle path).
Otherwise the run shuffles, as on any lake. A row in the wrong bucket fails the run with a
:class:`~tracker.spark.lake.LakeError` naming its file: checked by the task that reads it,
and on the driver for the interaction files of a bucket holding no impression (no task
reads those). An interaction naming an impression is read
by every group of its bucket, whatever its time, and counts in the one holding that
impression (as the shuffle joins it).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.errors import PythonException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tracker.lake.layout import SCHEMAS, TIMESTAMP, user_hash
from tracker.rollup.cells import Cells
from tracker.rollup.days import day_start
from tracker.spark.frames import Frames
from tracker.spark.groups import WRITTEN_DDL, GroupConfig, score_group, write_group
from tracker.spark.lake import Lake, LakeError
from tracker.store.experiments import ExperimentInfo

log = logging.getLogger(__name__)

T = TypeVar("T")


Files = dict[int, tuple[tuple[str, ...], tuple[str, ...]]]
"""Each bucket's (impression files, interaction files)."""


def usable(f: Frames, lake: Lake, heavy: list[tuple[str, date]],
           days: list[date]) -> Files | None:
    """Each bucket's (impression files, interaction files) when the groups may be read
    bucket by bucket (module docstring), else None."""
    if f.info.levels:
        return _shuffled("dimensions are declared (their values are joined to the lists: "
                         "tracker.spark.slices)")
    files = lake_buckets(lake)
    if files is None:
        return _shuffled("the lake is not bucketed by user alike in both logs, "
                         "or an id is seen twice")
    chosen = set(days)
    if any(day in chosen for _, day in heavy):
        return _shuffled("a heavy user's day is among the days to score")
    if not f.unnamed and named_elsewhere(f):
        return _shuffled("an interaction names an impression served to another user")
    return files


def _shuffled(why: str) -> None:
    """None, after saying why the groups are made by Spark's shuffle instead."""
    log.info("the groups are made by Spark's shuffle: %s", why)


def lake_buckets(lake: Lake) -> Files | None:
    """Each bucket's (impression files, interaction files) when the lake's rows are its
    files' rows in buckets of users: both logs bucketed alike and no id seen twice in
    either; else None. The interaction files of a bucket holding no impression are
    checked here (a row in the wrong bucket: a :class:`LakeError`): no task reads them."""
    imps, events = lake.impressions, lake.interactions
    if imps.bucketing is None or events.bucketing is None \
            or imps.bucketing.count != events.bucketing.count:
        return None
    if any(log.duplicates or log.conflicts for log in (imps, events)):
        return None
    count = events.bucketing.count
    for bucket, files in sorted(events.bucketing.files.items()):
        if bucket not in imps.bucketing.files:  # no task reads them: checked here
            for path in files:
                _check_bucket(path, ds.dataset(path, format="parquet").to_table(
                    columns=["user_id"])["user_id"], bucket, count)
    return {bucket: (files, events.bucketing.files.get(bucket, ()))
            for bucket, files in sorted(imps.bucketing.files.items())}


def named_elsewhere(f: Frames) -> bool:
    """Whether an interaction names an impression of the experiment served to another
    user (so in another bucket's files than the interaction): a join of the named ids."""
    keyed = f.interactions.where(F.col("named").isNotNull()).select(
        "named", F.col("user").alias("_by"))
    served = f.impressions.select(F.col("impression_id").alias("named"), "user")
    return not keyed.join(served, "named").where(F.col("_by") != F.col("user")).isEmpty()


@dataclass(frozen=True)
class BucketJob:
    """What every task of a run shares (pickled into them)."""

    info: ExperimentInfo
    config: GroupConfig
    count: int
    files: Files
    target: str
    parts: int = 1
    keyed: bool = False

    def tasks(self, days: list[date]) -> list[tuple[int, int, date]]:
        return [(bucket, part, day) for day in days for bucket in self.files
                for part in range(self.parts)]

    def score(self, bucket: int, part: int, day: date) -> pa.Table:
        """Read, check and score one group (``part`` of ``bucket`` on ``day``); its row
        count (:func:`write_group`)."""
        info = self.info
        start = day_start(day, info.timezone)
        end = day_start(day + timedelta(days=1), info.timezone)
        imp_files, event_files = self.files[bucket]
        served, occurred = ds.field("served_at"), ds.field("occurred_at")
        group = (bucket, part, self.count, self.parts)
        ids = ("impression_id",) if self.keyed else ()
        imps = read_rows(imp_files, "impressions", group,
                     (*ids, "arm", "user_id", "served_at", "items", "baseline_items"),
                     (ds.field("experiment") == info.key) & (served >= _instant(start))
                     & (served < _instant(end)))
        timed = (occurred >= _instant(start)) \
            & (occurred < _instant(end + self.config.window_us))
        # an interaction naming an impression joins that impression's group, whenever
        events = read_rows(event_files, "interactions", group,
                       ("user_id", "item_id", "event", "occurred_at", *ids),
                       timed, keyed=self.keyed)
        return write_group(self.target, (bucket, day, part),
                           score_group(self.config, day, self._lists(imps),
                                       _events(events)))

    def _lists(self, imps: pa.Table) -> pa.Table:
        """The group's impressions as :func:`score_group` takes them (with their ids when
        some interaction names one) in their cells, those in no cell of the experiment (an
        arm it does not declare) left out."""
        cell = Cells.of(self.info).of_keys(imps["arm"])
        known = pc.is_valid(cell)
        ids = {"impression_id": imps["impression_id"]} if self.keyed else {}
        return pa.table({
            **ids, "cell": cell, "user": imps["user_id"],
            "served": imps["served_at"].cast(pa.int64()), "items": imps["items"],
            "baseline": pc.list_slice(imps["baseline_items"], 0, max(self.info.cutoffs)),
        }).filter(known)


def _instant(micros: int) -> pa.Scalar:
    return pa.scalar(micros, pa.int64()).cast(TIMESTAMP)


def _events(events: pa.Table) -> pa.Table:
    named = events["impression_id"] if "impression_id" in events.column_names \
        else pa.nulls(events.num_rows, pa.string())
    return pa.table({"user": events["user_id"], "item": events["item_id"],
                     "event": events["event"], "at": events["occurred_at"].cast(pa.int64()),
                     "named": named})


def read_rows(files: tuple[str, ...], kind: str, group: tuple[int, int, int, int],
          columns: tuple[str, ...], where: ds.Expression, keyed: bool = False) -> pa.Table:
    """The rows of ``files`` that ``where`` keeps (``keyed``: and those naming an
    impression), of the users of the ``group`` (bucket, part, buckets, parts), ``columns``
    in the layout's types (an absent nullable column as nulls); a null in a required
    column, or a user outside the bucket, is a :class:`LakeError` naming the file."""
    bucket, part, count, parts = group
    layout = SCHEMAS[kind]
    found = [pa.table({name: pa.array([], layout.field(name).type) for name in columns})]
    for path in files:
        dataset = ds.dataset(path, format="parquet")
        present = [name for name in columns if name in dataset.schema.names]
        keep = where | ds.field("impression_id").is_valid() \
            if keyed and "impression_id" in present else where
        table = _filtered(dataset, present, keep)
        out = {}
        for name in columns:
            field = layout.field(name)
            column = table[name].cast(field.type) if name in present \
                else pa.nulls(table.num_rows, field.type)
            if not field.nullable and column.null_count:
                raise LakeError(f"lake: required column {name!r} is null in {path}")
            out[name] = column
        hashes = _check_bucket(path, out["user_id"], bucket, count)
        table = pa.table(out)
        if parts > 1:
            table = table.filter(pa.array(hashes // np.uint64(count) % np.uint64(parts)
                                          == part))
        found.append(table)
    return pa.concat_tables(found)


def _filtered(dataset: ds.Dataset, columns: list[str], keep: ds.Expression) -> pa.Table:
    """``columns`` of the rows of ``dataset`` (one file) that ``keep`` keeps. Its bounds on
    times are in the layout's type (microseconds, UTC); a file whose times are in another
    unit or time zone (which the lake accepts) cannot be filtered by them as it is scanned:
    it is read whole, its times converted, then filtered."""
    if all(field.type == TIMESTAMP for field in dataset.schema
           if pa.types.is_timestamp(field.type)):
        return dataset.to_table(columns=columns, filter=keep)
    table = dataset.to_table()
    table = pa.table({name: table[name].cast(TIMESTAMP) if pa.types.is_timestamp(
        table.schema.field(name).type) else table[name] for name in table.column_names})
    return table.filter(keep).select(columns)


def _check_bucket(path: str, users: pa.ChunkedArray | pa.Array, bucket: int,
                  count: int) -> np.ndarray:
    """The hashes of ``users`` read from ``path``; a :class:`LakeError` naming the file
    when one of them is not of ``bucket`` (of ``count``)."""
    hashes = user_hash(users)
    wrong = hashes % np.uint64(count) != bucket
    if wrong.any():
        user = users[int(np.flatnonzero(wrong)[0])].as_py()
        raise LakeError(f"lake: {path} is of bucket {bucket} of {count} but holds user "
                        f"{user!r} of another bucket")
    return hashes


def score_buckets(spark: SparkSession, job: BucketJob, days: list[date]) -> int:
    """Score every (bucket, day) of ``days``, one Spark task each; the rows written."""
    tasks = job.tasks(days)
    if not tasks:
        return 0

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from job.score(*tasks[index]).to_batches()

    done = spark.range(len(tasks), numPartitions=len(tasks)).mapInArrow(run, WRITTEN_DDL)
    return sum(row["rows"] for row in collected(done.collect))


def collected(action: Callable[[], T]) -> T:
    """``action()`` (a Spark action running bucket tasks), a task's :class:`LakeError`
    raised on the driver as itself (not as a Python worker's traceback)."""
    try:
        return action()
    except PythonException as error:
        found = re.search(r"LakeError: (lake: [^\n]*)", str(error))
        if found is None:
            raise
        raise LakeError(found.group(1)) from None
