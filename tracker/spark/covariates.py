"""CUPED's pre-exposure covariates on Spark: :mod:`tracker.rollup.covariates` with the lake
as the history and the per-user covariates in the state directory.

**What is computed** is the default engine's, by its own code: per user, the interaction
count and graded sum of the ``cuped_days`` before their first exposure (the earliest served
of their impressions in the experiment, known arms), ``no_pre_period``, the pre-period value
of each metric column over the lists served to the user in that window in *any* experiment
of the lake, and ``no_pre_lists`` (:func:`tracker.rollup.covariates.covariates_of`, which
scores the lists with this experiment's cutoffs, grades and window through
:func:`tracker.rollup.pre_metrics.scored_lists` and the ``tracker.metrics`` kernels).

**Event time.** What occurred and was served in the window counts, whichever file brought
it and whenever: the users first seen in the run are computed, and so are the stored users
whom the rows of the run's new files change (:func:`changed`: an earlier impression moves a
first exposure, a row inside a window adds to it), after which every day's sums are written
again (:func:`tracker.rollup.covariates.resum`). The lake's ``received_at`` plays no part.

**On Spark**: one Spark job joins the new users' windows ``[first − cuped_days, first)`` to
the interactions and to every experiment's impressions (by user and time), groups
the matches by user bucket (:data:`USERS_PER_GROUP` users a group on average), and each group
runs :func:`group_covariates` (Arrow and numpy, no pyspark) in a Python worker; a row per
user with pre-period data comes back to the driver (a user without any gets the covariates of
no history, as the default engine gives it). A group's memory follows its users'
pre-period lists: a user with a huge history makes its group large (not sliced). On a lake
bucketed by user whose rows are its files' rows, the step runs bucket by bucket in the
Python workers instead, no join or shuffle (:mod:`tracker.spark.pre_period`), to the same
values.

**Stored**: every user's covariates so far in ``covariates.parquet`` of the state directory
(format ``covariates/3`` with its ``cuped_days``, as ``rollup_user_covariates``); the sums per
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
from tracker.lake.layout import SCHEMAS
from tracker.rollup import covariates as cuped
from tracker.rollup import state
from tracker.rollup.cells import Cells
from tracker.rollup.covariates import names_for
from tracker.rollup.pre_metrics import index_in
from tracker.rollup.published import DayResult
from tracker.rollup.user_covariates import USERS, UserCovariates
from tracker.spark.buckets import collected, lake_buckets
from tracker.spark.frames import bucket_of
from tracker.spark.lake import Lake, spark_schema
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
            daily: dict[date, DayResult], firsts: DataFrame | None = None,
            new: tuple[list[str], list[str]] = ([], [])) -> cuped.Refreshed:
    """The covariates of the experiment's users: the stored ones, those of the stored users
    whom the rows of the ``new`` files (impressions, interactions) change, and those of the
    users of the run's days (``daily``) that have none yet, computed on Spark (the caller
    stores them with :func:`save` after its commit). None when the experiment's
    ``cuped_days`` is 0. Stored covariates that cannot be read
    (another format) are recomputed for every user of the experiment. ``firsts``: the
    census's per-user first exposures (:attr:`tracker.spark.frames.Census.firsts`), else
    read from the lake."""
    if info.cuped_days == 0:
        return cuped.Refreshed(None)
    stored = load(store, info)
    if stored is None and (store.root / FILE).exists():
        users = None  # unreadable: every user again
        again = True
    else:
        again = False
        found = changed(spark, lake, info, stored, new) if stored is not None else None
        seen = [r.totals.users.cast(pa.string()) for r in daily.values()
                if r.totals is not None and r.totals.size]
        users = pc.unique(pa.concat_arrays(seen)) if seen else pa.array([], pa.string())
        if stored is not None:
            users = users.filter(pc.invert(pc.is_in(users, value_set=stored.users)))
            if found is not None and len(found):
                users = pc.unique(pa.concat_arrays([users, found]))
                again = True
        if not len(users):
            return cuped.Refreshed(stored or UserCovariates.empty(names_for(info.cutoffs)))
    computed = compute(spark, lake, info, users, firsts, store.root / SCRATCH)
    merged = computed if stored is None else stored.merged(computed)
    # stored by the caller once the database's sums are committed: a run killed before
    # finds the same changes again (the files it read are still new)
    if not again or stored is None:
        return cuped.Refreshed(merged, again)
    return cuped.Refreshed(merged, True,
                           cuped.changed_since(stored, computed.subset(found)))


def changed(spark: SparkSession, lake: Lake, info: ExperimentInfo, stored: UserCovariates,
            new: tuple[list[str], list[str]]) -> pa.Array:
    """The stored users whom the rows of the ``new`` lake files change: an impression of
    the experiment (known arms) served before the stored first exposure, or an interaction
    that occurred, or another experiment's list served, in the window before it."""
    if not (new[0] or new[1]) or not len(stored.users):
        return pa.array([], pa.string())
    windows = spark.createDataFrame(pa.table({"user": stored.users.cast(pa.string()),
                                              "first": pa.array(stored.first, pa.int64())}))
    if len(stored.users) <= BROADCAST_USERS:
        windows = F.broadcast(windows)
    span = info.cuped_days * _DAY_US
    hits = []
    if new[0]:
        rows = spark.read.schema(spark_schema(SCHEMAS["impressions"])).parquet(*new[0])
        own = (F.col("experiment") == info.key) & F.col("arm").isin(list(Cells.of(info).logged))
        at = F.unix_micros("served_at")
        hits.append(rows.select(F.col("user_id").alias("user"), at.alias("at"),
                                own.alias("own")))
    if new[1]:
        rows = spark.read.schema(spark_schema(SCHEMAS["interactions"])).parquet(*new[1])
        hits.append(rows.select(F.col("user_id").alias("user"),
                                F.unix_micros("occurred_at").alias("at"),
                                F.lit(False).alias("own")))
    found = hits[0] if len(hits) == 1 else hits[0].unionByName(hits[1])
    at, first = F.col("at"), F.col("first")
    moved = F.col("own") & (at < first)
    inside = ~F.col("own") & (at >= first - span) & (at < first)
    return collected(found.join(windows, "user").where(moved | inside)
                     .select("user").distinct().toArrow)["user"].combine_chunks().cast(
                         pa.string())


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
    out = UserCovariates(users, np.zeros((len(users), len(names))), names,
                         _first_exposures(spark, lake, info, users, firsts))
    out.x[:] = out.missing()
    if found is not None and found.num_rows:
        at = index_in(found["user"].combine_chunks().cast(pa.string()), users)
        flat = pc.list_flatten(found["x"].combine_chunks()).to_numpy(zero_copy_only=False)
        out.x[at] = flat.reshape(found.num_rows, len(names))
    return out


def _first_exposures(spark: SparkSession, lake: Lake, info: ExperimentInfo, users: pa.Array,
                     firsts: DataFrame | None) -> np.ndarray:
    """The first exposure (µs) of each of ``users`` (sorted ids), 0 for one the experiment
    never served."""
    found = collected(_windows(spark, lake, info, users, firsts).select("user", "hi").toArrow)
    out = np.zeros(len(users), dtype=np.int64)
    at = index_in(found["user"].combine_chunks().cast(pa.string()), users)
    out[at[at >= 0]] = found["hi"].to_numpy()[at >= 0]
    return out


def _matched(lake: Lake, info: ExperimentInfo, windows: DataFrame,
             users: int) -> pa.Table | None:
    """The rows (``user``, ``x``) of the users with any pre-period row, None when no row
    of the lake falls in a window.

    The logs are filtered to the windows' span first (a filter on the lake's own time
    columns: Parquet skips the row groups outside). The lists' items are read only for the
    impressions that fall in a window (found first from their user and time):
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
            F.unix_micros("occurred_at").alias("at"), F.col("impression_id").alias("key"))
            .join(windows, "user").where(_inside("at"))
            .select(bucket, "user", "item", "event", "at", "key")).persist()
        impressions = _spanned(lake.impressions.rows, "served_at", span)
        keys = (impressions.select(
            F.col("user_id").alias("user"), F.unix_micros("served_at").alias("served"),
            F.col("impression_id").alias("key"))
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
    """Per user of ``users`` (None: every user of the experiment): ``lo, hi`` (the window
    before the first exposure, µs). ``firsts``: ``user, served`` rows
    (:attr:`tracker.spark.frames.Census.firsts`), else the experiment's impressions."""
    if firsts is None:
        mine = lake.impressions.rows.where(
            (F.col("experiment") == info.key) & F.col("arm").isin(list(Cells.of(info).logged)))
        firsts = mine.select(F.col("user_id").alias("user"),
                             F.unix_micros("served_at").alias("served"))
    first = firsts
    if users is not None:
        wanted = spark.createDataFrame(pa.table({"user": users.cast(pa.string())}))
        if len(users) <= BROADCAST_USERS:
            wanted = F.broadcast(wanted)
        first = first.join(wanted, "user", "left_semi")
    first = first.groupBy("user").agg(F.min("served").alias("served"))
    return first.select("user", (F.col("served") - info.cuped_days * _DAY_US).alias("lo"),
                        F.col("served").alias("hi"))


def _inside(at: str):
    """In the user's window."""
    return (F.col(at) >= F.col("lo")) & (F.col(at) < F.col("hi"))
