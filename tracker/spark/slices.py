"""Segments on Spark: each served list's values of the experiment's declared dimensions,
and the levels they fold into (:mod:`tracker.rollup.levels`, with the lake as the logs).

- A **list** dimension's value is the list's own ``context`` value at its key
  (:func:`context_value`: a string as itself, an integer or a boolean as JSON writes it, a
  fraction as a double's text (``1.0``, ``2.5``: the embedded SQLite store's text), no value
  for a missing key, a null, an object or a list).
- A **user** dimension's value is the user's at their **first exposure**, the earliest
  served of their lists of the experiment (the smaller impression id in a tie, as the
  database reads it): a ``context`` key of that list, or the built-in ``cohort``
  (``returning`` with an interaction in the ``cuped_days`` before it, else ``new``) or
  ``activity`` (the slice of their count of interactions in that window, from the levels).
- The **levels** come from the counts the default engine keeps per day
  (:func:`tracker.rollup.levels.day_counts`: per day, a list dimension's lists and a user
  dimension's users first exposed that day per value, the ``KEPT_PER_DAY × max_levels``
  most frequent kept and the rest counted as ``(other)``; ``activity``'s users per count of
  pre-period interactions), summed over every day by
  :func:`~tracker.rollup.levels.levels_of`. They are part of the run's configuration
  (:attr:`tracker.spark.rollup.SparkRun.config`): other levels rebuild the state.
- The users' slices of the user dimensions are kept in the state directory
  (:data:`FILE`); a run that finds a user in another slice (a late list moved their first
  exposure, a late interaction entered the window before it) recomputes each day of the
  user's lists (:meth:`Slices.moved_days`).

The lists reach the groups with a ``slice:<dimension>`` column per dimension (folded:
null for ``(none)``, ``(other)`` beyond the levels), which the groups turn into cells
(:meth:`tracker.rollup.cells.Cells.place`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tracker.rollup.levels import (
    ACTIVITY,
    ACTIVITY_CAP,
    COHORT,
    KEPT_PER_DAY,
    LONGEST,
    NONE,
    OTHER,
    Levels,
    floor_of,
    levels_of,
    pre_period_us,
    sliced,
)
from tracker.rollup.queries import slice_column
from tracker.rollup.user_queries import COHORTS
from tracker.spark.frames import Frames, local_day
from tracker.store.experiments import ExperimentInfo, Segment

FILE = "slices.parquet"
"""The state directory's file of the users' slices of the user dimensions."""

_PRE = "_pre"  # a user's interactions in the window before their first exposure

LOG = logging.getLogger("tracker.spark")


def context_value(key: str, context: Column | None = None) -> Column:
    """The text of the ``context`` JSON's value at ``key`` (module docstring)."""
    found = F.try_variant_get(F.try_parse_json(context if context is not None
                                               else F.col("context")), f"$['{key}']",
                              "variant")
    kind = F.schema_of_variant(found)
    # a fraction as the database's REAL writes it (1.0 is "1.0", not the decimal's "1")
    fraction = kind.startswith("DECIMAL") | kind.isin("DOUBLE", "FLOAT")
    return (F.when(fraction, F.try_variant_get(found, "$", "double").cast("string"))
            .when(~(kind.startswith("OBJECT") | kind.startswith("ARRAY")),
                  F.try_variant_get(found, "$", "string")))


def unreadable_contexts(impressions: DataFrame) -> tuple[int, str | None]:
    """The lists whose ``context`` is not a JSON object (every dimension puts them in
    ``(none)``): how many, and the smallest of their impression ids."""
    parsed = F.try_parse_json(F.col("context"))
    bad = impressions.where(F.col("context").isNotNull() & (
        parsed.isNull() | ~F.schema_of_variant(parsed).startswith("OBJECT")))
    row = bad.agg(F.count(F.lit(1)).alias("n"), F.min("impression_id").alias("id")).first()
    return int(row["n"]), row["id"]


def _is_context_key(dimension: Segment) -> bool:
    return dimension.kind == "user" and dimension.name not in (COHORT, ACTIVITY)


def _reads_window(dimensions: list[Segment]) -> bool:
    return any(d.kind == "user" and d.name in (COHORT, ACTIVITY) for d in dimensions)


@dataclass
class Slices:
    """The experiment's dimensions on this run's lake: its ``info`` with the levels found,
    and ``users`` (``user``, then per user dimension its ``slice:<dimension>``, folded),
    read from ``cached`` rows until :meth:`release`; ``found``: the same collected on the
    driver."""

    info: ExperimentInfo
    users: DataFrame | None = None
    found: pa.Table | None = None
    cached: DataFrame | None = None

    @classmethod
    def of(cls, f: Frames) -> Slices:
        """The levels of the experiment's dimensions from the lake (module docstring)."""
        dimensions = sliced(f.info)
        if not dimensions:
            return cls(f.info)
        if any(d.kind == "list" or _is_context_key(d) for d in dimensions):
            unreadable, example = unreadable_contexts(f.impressions)
            if unreadable:
                LOG.warning("lake: %d list(s) hold a context that is not a JSON object, "
                            "in (none) of every dimension, e.g. impression %s",
                            unreadable, example)
        users = _first_exposures(f, dimensions) \
            if any(d.kind == "user" for d in dimensions) else None
        if users is not None:
            users = users.persist()
        try:
            counts = _counts(f, dimensions, users)
        except BaseException:
            if users is not None:
                users.unpersist()
            raise
        levels = levels_of(counts, dimensions)
        info = replace(f.info, levels=tuple(sorted(levels.items())))
        if users is None:
            return cls(info)
        folded = users.select("user", *(_folded(d, levels).alias(slice_column(d.name))
                                        for d in dimensions if d.kind == "user"))
        return cls(info, folded, cached=users)  # a projection of the cached rows

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()

    def placed(self, f: Frames) -> Frames:
        """The frames with each list's ``slice:<dimension>`` columns (without its
        ``context``)."""
        if not self.info.segments:
            return replace(f, info=self.info)
        imps = f.impressions.select(
            "*", *(context_value(d.name).alias(slice_column(d.name))
                   for d in sliced(self.info) if d.kind == "list")).drop("context")
        if self.users is not None:
            imps = imps.join(self.users, "user", "left")
        return replace(f, info=self.info, impressions=imps)

    def moved_days(self, f: Frames, stored: Path) -> set[date]:
        """The days holding lists of a user whose slice of a user dimension differs from
        the one kept in ``stored`` (:data:`FILE`; none kept: every user's)."""
        if self.users is None:
            return set()
        self.found = self.users.toArrow()
        before = pq.read_table(stored) if stored.exists() else None
        if before is not None and before.schema.equals(self.found.schema):
            moved = _differ(self.found, before)
        else:
            moved = self.found["user"]
        if len(moved) == 0:
            return set()
        users = f.impressions.sparkSession.createDataFrame(
            pa.table({"user": pa.array(moved, pa.string())}))
        return {row["_day"] for row in f.impressions.join(F.broadcast(users), "user")
                .select("_day").distinct().collect()}

    def collect(self) -> None:
        """The users' slices on the driver (:meth:`save` writes them after the commit)."""
        if self.found is None and self.users is not None:
            self.found = self.users.toArrow()

    def save(self, stored: Path) -> None:
        """Keep the users' slices (after the run's commit)."""
        if self.found is None:
            stored.unlink(missing_ok=True)
            return
        stored.parent.mkdir(parents=True, exist_ok=True)
        temporary = stored.with_name(stored.name + ".tmp")
        pq.write_table(self.found, temporary)
        temporary.replace(stored)


def _differ(now: pa.Table, before: pa.Table) -> pa.Array:
    """The users of ``now`` whose row ``before`` lacks or holds other values (a null
    equal to a null)."""
    both = now.join(before.append_column("_kept", pa.repeat(True, before.num_rows)),
                    "user", join_type="left outer", right_suffix=":before")
    same = pc.fill_null(both["_kept"], False)
    for column in now.column_names[1:]:
        x, y = both[column], both[column + ":before"]
        same = pc.and_(same, pc.or_(pc.fill_null(pc.equal(x, y), False),
                                    pc.and_(x.is_null(), y.is_null())))
    return both.filter(pc.invert(same))["user"].combine_chunks()


def _first_exposures(f: Frames, dimensions: list[Segment]) -> DataFrame:
    """Per user of the experiment: ``_first`` (µs) and ``_first_day`` of their first
    exposure, its ``context`` value of each context-key user dimension (under the
    dimension's slice column), and with ``cohort`` or ``activity``, :data:`_PRE`."""
    first = f.impressions.groupBy("user").agg(
        F.min(F.struct("served", "impression_id", "context")).alias("_f"))
    users = first.select(
        "user", F.col("_f.served").alias("_first"),
        local_day(F.col("_f.served"), f.zone).alias("_first_day"),
        *(context_value(d.name, F.col("_f.context")).alias(slice_column(d.name))
          for d in dimensions if _is_context_key(d)))
    if not _reads_window(dimensions):
        return users
    window = pre_period_us(f.info)
    pre = (f.interactions.select("user", "at")
           .join(users.select("user", "_first"), "user")
           .where((F.col("at") < F.col("_first")) & (F.col("at") >= F.col("_first") - window))
           .groupBy("user").agg(F.count(F.lit(1)).alias(_PRE)))
    return users.join(pre, "user", "left").fillna(0, [_PRE])


def _counts(f: Frames, dimensions: list[Segment], users: DataFrame | None
            ) -> list[tuple[str, str, int]]:
    """``(dimension, value, count)`` over every day, as the default engine keeps them
    (module docstring)."""
    parts = []
    for d in dimensions:
        if d.kind == "list":
            column, day, rows = context_value(d.name), F.col("_day"), f.impressions
        elif _is_context_key(d):
            column, day, rows = F.col(slice_column(d.name)), F.col("_first_day"), users
        elif d.name == ACTIVITY:
            column = F.least(F.col(_PRE), F.lit(ACTIVITY_CAP)).cast("string")
            day, rows = F.col("_first_day"), users
        else:
            continue  # cohort: fixed levels
        value = F.when(F.length(column) > LONGEST, F.lit(OTHER)).otherwise(column)
        parts.append(rows.select(F.lit(d.name).alias("segment"), day.alias("day"),
                                 F.coalesce(value, F.lit(NONE)).alias("value"))
                     .groupBy("segment", "day", "value").agg(F.count(F.lit(1)).alias("n")))
    if not parts:
        return []
    counts = parts[0]
    for part in parts[1:]:
        counts = counts.unionByName(part)
    order = F.row_number().over(
        Window.partitionBy("segment", "day").orderBy(F.desc("n"), "value"))
    kept = F.col("value")  # activity: every count kept
    for d in dimensions:
        if d.kind == "list" or _is_context_key(d):
            kept = F.when((F.col("segment") == d.name)
                          & (order > KEPT_PER_DAY * d.max_levels), F.lit(OTHER)).otherwise(kept)
    summed = counts.select("segment", kept.alias("value"), "n").groupBy(
        "segment", "value").agg(F.sum("n").alias("n")).collect()
    return [(row["segment"], row["value"], int(row["n"])) for row in summed]


def _folded(dimension: Segment, levels: Levels) -> Column:
    """A user's slice of a user dimension as :meth:`~tracker.rollup.cells.Cells.place`
    reads it: the value when a level, :data:`OTHER` beyond, null for :data:`NONE`."""
    values = levels[dimension.name]
    if dimension.name == COHORT:
        return F.when(F.col(_PRE) > 0, F.lit(COHORTS[1])).otherwise(F.lit(COHORTS[0]))
    if dimension.name == ACTIVITY:
        chosen = F.lit(values[0])
        for value in sorted(values, key=floor_of)[1:]:
            chosen = F.when(F.col(_PRE) >= floor_of(value), F.lit(value)).otherwise(chosen)
        return chosen
    column = F.col(slice_column(dimension.name))
    return F.when(column.isNull(), F.lit(None).cast("string")).when(
        column.isin(list(values)), column).otherwise(F.lit(OTHER))
