"""CUPED's pre-exposure covariates on Spark: :mod:`tracker.rollup.covariates` with the lake
as the history and the per-user covariates in the state directory.

**What is computed** is the default engine's, by its own code: per user first seen in the run
(a user of the run's days without stored covariates), fixed at first exposure, the
interaction count and graded sum of the ``cuped_days`` before it, ``no_pre_period``, the
pre-period value of each metric column over the lists served to the user in that window in
*any* experiment of the lake, and ``no_pre_lists``
(:func:`tracker.rollup.covariates.covariates_of`, which scores the lists with this
experiment's cutoffs, grades and window through
:func:`tracker.rollup.pre_metrics.scored_lists` and the ``tracker.metrics`` kernels).

**History as known at first exposure.** The lake's optional ``received_at`` column
(:mod:`tracker.lake.layout`; absent or null: ``served_at`` / ``occurred_at``) plays the
database's receipt time: a user's first exposure is the earliest served of their
first-received impressions in the experiment (known arms), and only rows received by then
count, so a run that sees a late-received row later does not change a user's values, and
``--full`` gives the same ones.

**On Spark**: one Spark job joins the new users' windows ``[first − cuped_days, first)`` to
the interactions and to every experiment's impressions (by user, time and receipt), groups
the matches by user bucket (:data:`USERS_PER_GROUP` users a group on average), and each group
runs :func:`group_covariates` (Arrow and numpy, no pyspark) in a Python worker; a row per
user with pre-period data comes back to the driver (a user without any gets the covariates of
no history, as the default engine gives it). A group's memory follows its users'
pre-period lists: a user with a huge history makes its group large (not sliced). On a lake
bucketed by user whose rows are its files' rows, the step runs bucket by bucket in the
Python workers instead, no join or shuffle (:mod:`tracker.spark.pre_period`), to the same
values.

**Stored**: every user's covariates so far in ``covariates.parquet`` of the state directory
(format ``covariates/2`` with its ``cuped_days``, as ``rollup_user_covariates``); the sums per
arm, metric and view go to ``rollup_covariate_sums`` through the default engine's
:func:`~tracker.rollup.covariates.publish_daily` and
:func:`~tracker.rollup.covariates.write_sums` (:mod:`tracker.spark.cumulative`).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tracker.errors import StaleState
from tracker.rollup import state
from tracker.rollup.covariates import USERS, UserCovariates, names_for
from tracker.rollup.pre_metrics import index_in
from tracker.rollup.published import DayResult
from tracker.spark.buckets import lake_buckets
from tracker.spark.frames import bucket_of
from tracker.spark.lake import Lake
from tracker.spark.pre_period import OUT, bucket_matched, group_covariates
from tracker.spark.state import StateDir
from tracker.store.experiments import ExperimentInfo

FILE = "covariates.parquet"
"""The state directory's file of per-user covariates."""
SCRATCH = "covariate-users.arrow"
"""The state directory's file of the new users for the bucket path (removed after)."""
USERS_PER_GROUP = 20_000
"""New users a group of the covariate job holds on average."""
BROADCAST_USERS = 1_000_000
"""Up to this many new users, their windows are broadcast to the joins (~50 MB at most):
the logs are then filtered where they lie, not shuffled by user."""
_DAY_US = 86_400_000_000


def refresh(spark: SparkSession, lake: Lake, info: ExperimentInfo, store: StateDir,
            daily: dict[date, DayResult],
            firsts: DataFrame | None = None) -> UserCovariates | None:
    """The covariates of the experiment's users: the stored ones, and those of the users of
    the run's days (``daily``) that have none yet, computed on Spark and stored. None when
    the experiment's ``cuped_days`` is 0. Stored covariates that cannot be read (another
    format) are recomputed for every user of the experiment. ``firsts``: the census's
    per-user first receipts (:attr:`tracker.spark.frames.Census.firsts`), else read from
    the lake."""
    if info.cuped_days == 0:
        return None
    stored = load(store, info)
    if stored is None and (store.root / FILE).exists():
        users = None  # unreadable: every user again
    else:
        seen = [r.totals.users.cast(pa.string()) for r in daily.values()
                if r.totals is not None and r.totals.size]
        users = pc.unique(pa.concat_arrays(seen)) if seen else pa.array([], pa.string())
        if stored is not None:
            users = users.filter(pc.invert(pc.is_in(users, value_set=stored.users)))
        if not len(users):
            return stored or UserCovariates.empty(names_for(info.cutoffs))
    computed = compute(spark, lake, info, users, firsts, store.root / SCRATCH)
    merged = computed if stored is None else stored.merged(computed)
    save(store, info, merged)
    return merged


def load(store: StateDir, info: ExperimentInfo) -> UserCovariates | None:
    """The stored covariates, None when there are none or they cannot serve (another
    format, window or cutoffs)."""
    path = store.root / FILE
    if not path.exists():
        return None
    table = pq.read_table(path)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    try:
        return UserCovariates.decode(sink.getvalue(), info.cuped_days,
                                     names_for(info.cutoffs))
    except StaleState:
        return None


def save(store: StateDir, info: ExperimentInfo, covariates: UserCovariates) -> None:
    store.root.mkdir(parents=True, exist_ok=True)
    table = state.read(covariates.encode(info.cuped_days), USERS)
    temporary = store.root / (FILE + ".tmp")
    pq.write_table(table, temporary)
    temporary.replace(store.root / FILE)


def compute(spark: SparkSession, lake: Lake, info: ExperimentInfo, users: pa.Array | None,
            firsts: DataFrame | None = None, scratch: Path | None = None) -> UserCovariates:
    """The covariates of ``users`` (None: every user of the experiment) from the lake
    (``firsts``: as :func:`refresh` says): bucket by bucket on a lake bucketed by user
    (:mod:`tracker.spark.pre_period`, ``scratch``: a file path it may use), else by joins
    on Spark."""
    files = lake_buckets(lake) if users is not None and scratch is not None else None
    if files is not None:
        found = bucket_matched(spark, info, files, lake.impressions.bucketing.count,
                               users.cast(pa.string()), scratch, USERS_PER_GROUP)
    else:
        windows = _windows(spark, lake, info, users, firsts)
        if users is None:
            users = pa.array(sorted(windows.select("user").toArrow()["user"].to_pylist()),
                             pa.string())
        found = _matched(lake, info, windows, len(users))
    names = names_for(info.cutoffs)
    users = users.take(pc.array_sort_indices(users))
    out = UserCovariates(users, np.zeros((len(users), len(names))), names)
    out.x[:] = out.missing()
    if found is not None and found.num_rows:
        at = index_in(found["user"].combine_chunks().cast(pa.string()), users)
        flat = pc.list_flatten(found["x"].combine_chunks()).to_numpy(zero_copy_only=False)
        out.x[at] = flat.reshape(found.num_rows, len(names))
    return out


def _matched(lake: Lake, info: ExperimentInfo, windows: DataFrame,
             users: int) -> pa.Table | None:
    """The rows (``user``, ``x``) of the users with any pre-period row, None when no row
    of the lake falls in a window.

    The logs are filtered to the windows' span first (a filter on the lake's own time
    columns: Parquet skips the row groups outside). The lists' items are read only for the
    impressions that fall in a window (found first from their user, time and receipt):
    a scan of the impressions with their lists is the largest read of this step, and many
    users (new to the service) have no list before first exposure."""
    cached = windows.persist()
    try:
        span = cached.agg(F.min("lo").alias("lo"), F.max("hi").alias("hi")).first()
        if span["lo"] is None:
            return None
        windows = F.broadcast(cached) if users <= BROADCAST_USERS else cached
        bucket = bucket_of(F.col("user"), max(1, -(-users // USERS_PER_GROUP))).alias(
            "_bucket")
        events = (_spanned(lake.interactions.rows, "occurred_at", span).select(
            F.col("user_id").alias("user"), F.col("item_id").alias("item"), "event",
            F.unix_micros("occurred_at").alias("at"), F.col("impression_id").alias("key"),
            _received("occurred_at"))
            .join(windows, "user").where(_inside("at"))
            .select(bucket, "user", "item", "event", "at", "key")).persist()
        impressions = _spanned(lake.impressions.rows, "served_at", span)
        keys = (impressions.select(
            F.col("user_id").alias("user"), F.unix_micros("served_at").alias("served"),
            F.col("impression_id").alias("key"), _received("served_at"))
            .join(windows, "user").where(_inside("served"))
            .select(bucket, "user", "served", "key")).persist()
        try:
            return _scored(lake, info, events, keys, impressions)
        finally:
            events.unpersist()
            keys.unpersist()
    finally:
        cached.unpersist()


def _scored(lake: Lake, info: ExperimentInfo, events: DataFrame, keys: DataFrame,
            impressions: DataFrame) -> pa.Table | None:
    """:func:`group_covariates` per user bucket of the matched ``events`` and lists
    (``keys``: their items joined from ``impressions``)."""
    listed = keys.count()
    if not listed and events.isEmpty():
        return None
    items = impressions.select(F.col("impression_id").alias("key"), "items")
    if listed <= BROADCAST_USERS:
        lists = items.join(F.broadcast(keys), "key")
    else:
        lists = items.join(keys, "key")
    lists = lists.select("_bucket", "user", "served", "items", "key")

    def group(_key, left: pa.Table, right: pa.Table) -> pa.Table:
        return group_covariates(info, left, right)

    return (events.groupBy("_bucket").cogroup(lists.groupBy("_bucket"))
            .applyInArrow(group, OUT).toArrow())


def _spanned(rows: DataFrame, time: str, span) -> DataFrame:
    """The rows whose ``time`` falls in ``[span.lo, span.hi)`` (µs)."""
    column = F.col(time)
    return rows.where((column >= F.timestamp_micros(F.lit(int(span["lo"]))))
                      & (column < F.timestamp_micros(F.lit(int(span["hi"])))))


def _windows(spark: SparkSession, lake: Lake, info: ExperimentInfo,
             users: pa.Array | None, firsts: DataFrame | None = None) -> DataFrame:
    """Per user of ``users`` (None: every user of the experiment): ``lo, hi`` (the window,
    µs) and ``got`` (the receipt of the first exposure, µs). ``firsts``: ``user, f`` rows
    (:attr:`tracker.spark.frames.Census.firsts`), else the experiment's impressions."""
    if firsts is None:
        mine = lake.impressions.rows.where(
            (F.col("experiment") == info.key) & F.col("arm").isin([a.key for a in info.arms]))
        firsts = mine.select(F.col("user_id").alias("user"), F.struct(
            F.unix_micros(F.coalesce("received_at", "served_at")).alias("got"),
            F.unix_micros("served_at").alias("served")).alias("f"))
    first = firsts
    if users is not None:
        wanted = spark.createDataFrame(pa.table({"user": users.cast(pa.string())}))
        if len(users) <= BROADCAST_USERS:
            wanted = F.broadcast(wanted)
        first = first.join(wanted, "user", "left_semi")
    first = first.groupBy("user").agg(F.min("f").alias("f"))  # received first, then served
    return first.select("user", (F.col("f.served") - info.cuped_days * _DAY_US).alias("lo"),
                        F.col("f.served").alias("hi"), F.col("f.got").alias("got"))


def _received(time: str):
    return F.unix_micros(F.coalesce("received_at", time)).alias("_received")


def _inside(at: str):
    """In the user's window, and received by their first exposure's receipt."""
    return ((F.col(at) >= F.col("lo")) & (F.col(at) < F.col("hi"))
            & (F.col("_received") <= F.col("got")))
