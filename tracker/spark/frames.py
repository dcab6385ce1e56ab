"""The Spark side of the rollup: the lake's rows of one experiment, grouped for scoring, and
the inputs that span users (item popularity, each day's extent).

- **Days** are calendar days in the experiment's time zone (the session time zone is UTC
  during a run: :func:`local_day` renders an instant there with the IANA rules, so a
  daylight-saving day has its true 23 or 25 hours, as :mod:`tracker.rollup.days` says).
- **Groups** are (user bucket, day): ``pmod(xxhash64(user_id), buckets)``. An interaction
  that answers by time joins the group of its user on every day whose impressions it may
  answer (``[day(t - window), day(t)]``); one that names an impression joins that
  impression's group (whatever its user and time), as the database joins it.
- **Popularity** (surprisal's input, :mod:`tracker.rollup.popularity`): one per experiment,
  the distinct users per item of every interaction (any user, any event) that occurred in
  the reference period, the ``popularity_days`` days before its first day; counted in
  Spark over a constant ``occurred_at`` range (Parquet skips the row groups outside), only
  the per-item counts reach the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tracker.rollup.cells import Cells
from tracker.rollup.popularity import Popularity, Reference
from tracker.store.experiments import ExperimentInfo

GROUP_ROWS = 200_000
"""Impressions a group holds on average: the user buckets of a run are the largest day's
impressions over this (a group is one Arrow table in a Python worker: ~1 KB an impression
of 10 items with the scorer's temporaries, so ~200 MB)."""
USER_ROWS = 50_000
"""A user's day of more impressions than this is split into slices (:func:`_slices`)."""


def local_day(micros: Column, zone: str) -> Column:
    """The calendar day in ``zone`` of an instant given as UTC microseconds."""
    return F.to_date(F.from_utc_timestamp(F.timestamp_micros(micros), zone))


def bucket_of(user: Column, buckets: int) -> Column:
    return F.pmod(F.xxhash64(user), F.lit(buckets)).cast("int")


@dataclass(frozen=True)
class Frames:
    """One experiment's rows: ``impressions`` (every day, coded: ``impression_id, arm,
    user, served, items, baseline, got, _day``) and the lake's ``interactions`` (``event_id,
    user, item, event, at, named, occurred_at``); ``unnamed``: the lake's footers prove
    that no interaction names an impression."""

    info: ExperimentInfo
    impressions: DataFrame
    interactions: DataFrame
    outside: DataFrame  # the experiment's impressions in none of its cells (an undeclared arm)
    unnamed: bool = False

    def first_cells(self) -> Callable[[list[str]], dict[str, int]]:
        """:meth:`tracker.rollup.stores.Store.first_cells` over the lake: the cell (arm) of
        each asked user's first exposure (the earliest served of their lists, the smaller
        impression id in a tie), found by one scan of the impressions, on the first call, for
        every user served more than one cell (the only users asked: crossover users)."""
        found: dict[str, int] | None = None

        def lookup(users: list[str]) -> dict[str, int]:
            nonlocal found
            if found is None and users:
                first = F.min(F.struct("served", "impression_id", "cell")).alias("_first")
                rows = (self.impressions.select("user", "served", "impression_id", "cell")
                        .groupBy("user").agg(F.countDistinct("cell").alias("_cells"), first)
                        .where(F.col("_cells") > 1).select("user", "_first.cell").collect())
                found = {row["user"]: int(row["cell"]) for row in rows}
            return {u: found[u] for u in users if u in found} if found else {}

        return lookup

    @property
    def window_us(self) -> int:
        return int(self.info.attribution_window.total_seconds() * 1_000_000)

    @property
    def zone(self) -> str:
        return self.info.timezone


def coded_impressions(info: ExperimentInfo, impressions: DataFrame) -> DataFrame:
    """The experiment's impressions (lake rows) with their cells (``cell``; null: in no
    cell, an arm the experiment does not declare), µs times (``served``), the baseline's
    first ``max(cutoffs)`` items, their day, and with declared dimensions their
    ``context``."""
    logged = F.create_map(*[F.lit(x) for pair in Cells.of(info).logged.items() for x in pair])
    coded = impressions.where(F.col("experiment") == info.key).select(
        "impression_id", F.element_at(logged, F.col("arm")).cast("long").alias("cell"),
        F.col("user_id").alias("user"), F.unix_micros("served_at").alias("served"), "items",
        F.slice("baseline_items", 1, max(info.cutoffs)).alias("baseline"),
        *(["context"] if info.segments else []))  # the dimensions' values: spark.slices
    return coded.withColumn("_day", local_day(F.col("served"), info.timezone))


def coded_interactions(interactions: DataFrame) -> DataFrame:
    """Interactions (lake rows) with µs times (``at``; the lake's ``occurred_at`` kept
    beside it: a filter on it reaches the files' statistics)."""
    return interactions.select(
        "event_id", F.col("user_id").alias("user"), F.col("item_id").alias("item"), "event",
        F.unix_micros("occurred_at").alias("at"), F.col("impression_id").alias("named"),
        "occurred_at")


def frames(info: ExperimentInfo, impressions: DataFrame, interactions: DataFrame,
           unnamed: bool = False) -> Frames:
    """The experiment's impressions (deduplicated lake rows, :func:`coded_impressions`)
    and every interaction (:func:`coded_interactions`); ``unnamed``: no interaction names
    an impression (the footers prove the lake's ``impression_id`` column all null)."""
    coded = coded_impressions(info, impressions)
    return Frames(info, coded.where(F.col("cell").isNotNull()),
                  coded_interactions(interactions), coded.where(F.col("cell").isNull()),
                  unnamed)


def _days_filter(days: list[date] | None) -> Column:
    return F.lit(True) if days is None else F.col("_day").isin(days)


def grouped(f: Frames, days: list[date] | None, buckets: int, heavy: list[tuple[str, date]],
            user_rows: int = USER_ROWS) -> tuple[DataFrame, DataFrame]:
    """The impressions of ``days`` (None: every day) and the interactions that may answer
    them, each with its group (``_bucket, _day, _slice``); the ``heavy`` (user, day) pairs,
    of more than ``user_rows`` impressions (:func:`census`), are split into slices
    (:func:`_slices`)."""
    impressions = f.impressions.drop("got").where(_days_filter(days)).withColumn(
        "_bucket", bucket_of(F.col("user"), buckets))
    columns = ["_bucket", "_day", "_slice", "user", "item", "event", "at", "named"]
    by_time = f.interactions.where(F.col("named").isNull()).withColumn(
        "_day", F.explode(F.sequence(local_day(F.col("at") - f.window_us, f.zone),
                                     local_day(F.col("at"), f.zone))))
    by_time = by_time.where(_days_filter(days)).withColumn(
        "_bucket", bucket_of(F.col("user"), buckets))
    chosen = set(days or ())
    heavy = [(user, day) for user, day in heavy if days is None or day in chosen]
    impressions, by_time = _slices(impressions, by_time, f.window_us, heavy, user_rows)
    by_time = by_time.select(*columns)
    keyed = f.interactions.where(F.col("named").isNotNull())
    # no join, and no impression ids shuffled to the groups (else a job reads one column)
    if f.unnamed or keyed.select("named").isEmpty():
        return impressions.drop("impression_id"), by_time
    named = impressions.select(F.col("impression_id").alias("named"), "_day", "_bucket",
                               "_slice")
    return impressions, by_time.unionByName(keyed.join(named, "named").select(*columns))


def _slices(impressions: DataFrame, by_time: DataFrame, window_us: int,
            heavy: list[tuple[str, date]], user_rows: int) -> tuple[DataFrame, DataFrame]:
    """``_slice``: 0, except for a user's day of more than ``user_rows`` impressions (a
    bot, a crawler), cut in serving order into slices of ``user_rows``, each one group with
    the user's interactions of its span ``[first served, last served + window]`` (the
    slices' per-user sums add up on the driver). So no group holds more than its bucket's
    share of ordinary users plus one slice, whatever one user logs."""
    if not heavy:
        return impressions.withColumn("_slice", F.lit(0)), by_time.withColumn("_slice",
                                                                             F.lit(0))
    spark = impressions.sparkSession
    heavy_frame = F.broadcast(spark.createDataFrame(heavy, "user string, _day date"))
    ordered = Window.partitionBy("user", "_day").orderBy("served", "impression_id")
    sliced = (impressions.join(heavy_frame, ["user", "_day"], "left_semi")
              .withColumn("_slice", F.floor((F.row_number().over(ordered) - 1) / user_rows)
                          .cast("int") + 1))
    spans = F.broadcast(sliced.groupBy("user", "_day", "_slice").agg(
        F.min("served").alias("_first"), F.max("served").alias("_last")))
    light = impressions.join(heavy_frame, ["user", "_day"], "left_anti") \
        .withColumn("_slice", F.lit(0))
    heavy_events = (by_time.join(heavy_frame, ["user", "_day"], "left_semi")
                    .join(spans, ["user", "_day"])
                    .where((F.col("at") >= F.col("_first"))
                           & (F.col("at") <= F.col("_last") + window_us)))
    light_events = by_time.join(heavy_frame, ["user", "_day"], "left_anti") \
        .withColumn("_slice", F.lit(0))
    return (light.unionByName(sliced),
            light_events.unionByName(heavy_events.drop("_first", "_last")))


def popularity(f: Frames, reference: Reference) -> Popularity:
    """The item popularity of the ``reference`` period (module docstring)."""
    start, end = reference.bounds(f.zone)
    # on the lake's column (a constant bound): Parquet skips the row groups outside
    occurred = F.col("occurred_at")
    pairs = f.interactions.where((occurred >= F.timestamp_micros(F.lit(start)))
                                 & (occurred < F.timestamp_micros(F.lit(end))))
    pairs = pairs.select("item", "user").distinct().persist()
    try:
        # (item, user) distinct: an item's users are its rows
        table = pairs.groupBy("item").agg(F.count(F.lit(1)).alias("users")).toArrow()
        n_users = pairs.select(F.count_distinct("user").alias("n")).first()["n"]
    finally:
        pairs.unpersist()
    return Popularity.of(pa.table({"item": table["item"].cast(pa.string()),
                                   "users": table["users"].cast(pa.int64())}), int(n_users))


@dataclass(frozen=True)
class Extent:
    """A day's impressions and last serving time (what its ``rollup_day`` row needs)."""

    impressions: int
    last_served: int


@dataclass(frozen=True)
class Census:
    """What one scan of the experiment's impressions tells: each day's :class:`Extent`,
    the (user, day) pairs of more than ``user_rows`` impressions, and ``per_user``: a row
    per (``user``, ``_day``) pair with ``first``, the user's earliest served impression that
    day (µs), cached (one row per user and day: a tenth of the impressions here,
    no item lists) until :meth:`release`, for CUPED's first exposures (:attr:`firsts`)."""

    days: dict[date, Extent]
    heavy: list[tuple[str, date]]
    per_user: DataFrame | None = None

    @property
    def firsts(self) -> DataFrame | None:
        """``user, served``: the earliest served per (user, day): the input of CUPED's
        first exposures."""
        return None if self.per_user is None else self.per_user.select(
            "user", F.col("first").alias("served"))

    def release(self) -> None:
        if self.per_user is not None:
            self.per_user.unpersist()


def census(f: Frames, user_rows: int) -> Census:
    """The :class:`Census` of the experiment's impressions (one scan)."""
    return census_of(f.impressions.groupBy("user", "_day").agg(
        F.count(F.lit(1)).alias("n"), F.max("served").alias("last"),
        F.min("served").alias("first")), user_rows)


def census_of(per_user: DataFrame, user_rows: int) -> Census:
    """The :class:`Census` of its ``per_user`` rows (``user, _day, n, last, first``), which
    it caches."""
    per_user = per_user.persist()
    try:
        days = per_user.groupBy("_day").agg(F.sum("n").alias("n"),
                                            F.max("last").alias("last")).collect()
        heavy = per_user.where(F.col("n") > user_rows).select("user", "_day").collect()
    except BaseException:
        per_user.unpersist()
        raise
    return Census({row["_day"]: Extent(int(row["n"]), int(row["last"])) for row in days},
                  [(row["user"], row["_day"]) for row in heavy], per_user)
