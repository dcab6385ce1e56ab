"""Which days a run of the Spark rollup recomputes: every day on a rebuild, else the days
the new lake files touch.

A **new file** is one the state's manifest does not list (path, size, mtime). A listed file
that is gone or changed, another experiment or other settings in the manifest, or a
database that holds no day of the experiment while the state does, mean a **rebuild**
(rows may have vanished: nothing short of one gives the tables of a from-scratch run).

The days a new row **touches** (the default engine's :mod:`tracker.rollup.plan` rules, taken
a little wider: recomputing a day nothing changed changes nothing):

- an impression: its day;
- an interaction naming an impression: that impression's day;
- any interaction: the days ``[day(t - window), day(t)]`` (impressions it may answer by
  time).

Every row under an id a new file holds counts, old rows included (a new row may win an id
from an old one, whose days then change). Only days holding impressions are computed; days
computed while provisional whose windows have closed since are recomputed too (an erasure,
``tracker users delete``, marks its days so: :func:`provisional_closed`; the rows it erases
from the lake change or remove files: a rebuild).

**Every** day holding impressions is recomputed when surprisal's item popularity changes
(:mod:`tracker.rollup.popularity`: one for all the experiment's days, over the reference
period before its first day): when the first day is not the earliest day the database holds
(:func:`popularity_changed`: impressions backfilled before it move the period), or when an
interaction under a new file's id occurred in the period (a backfill).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tracker.lake.layout import IDS, SCHEMAS
from tracker.rollup.popularity import Reference
from tracker.spark.frames import Frames, coded_impressions, coded_interactions, local_day
from tracker.spark.lake import checked_files, lake_files, spark_schema
from tracker.spark.state import Files


def listing(directory, kind: str) -> Files:
    """Every file of one log (``kind``) under ``directory`` (each checked against the
    layout), with its size and mtime (ns)."""
    fs, _ = lake_files(directory)
    paths = checked_files(directory, kind)
    infos = fs.get_file_info([p.split("://", 1)[-1] for p in paths])
    return {path: [int(info.size), int(info.mtime_ns or 0)]
            for path, info in zip(paths, infos, strict=True)}


@dataclass(frozen=True)
class Known:
    """What the previous runs left: the manifest's files and config, and the database's
    days of the experiment ``(day, closes_at, computed_at)`` (the earliest: the first day
    the previous run knew, :func:`popularity_changed`)."""

    manifest: dict | None
    days: list[tuple[date, int, int]]


def needs_rebuild(known: Known, experiment: str, config: dict, impressions: Files,
                  interactions: Files) -> str | None:
    """Why this run must rebuild (None: it may go incrementally)."""
    manifest = known.manifest
    if manifest is None:
        return "no state yet"
    if manifest["experiment"] != experiment or manifest["config"] != config:
        return "the experiment's settings changed"
    for kind, now in (("impressions", impressions), ("interactions", interactions)):
        for path, stamp in manifest[kind].items():
            if now.get(path) != stamp:
                return f"{path} changed or vanished"
    if not known.days and (manifest["impressions"] or manifest["interactions"]):
        return "the database holds none of the experiment's days"
    return None


def new_files(before: Files, now: Files) -> list[str]:
    return sorted(path for path in now if path not in before)


def rows_in(files: list[str]) -> int:
    """The rows of lake files, from their footers (every experiment's, repeats included)."""
    total = 0
    for path in files:
        fs, inner = pafs.FileSystem.from_uri(path) if "://" in path \
            else (pafs.LocalFileSystem(), path)
        total += pq.read_metadata(inner, filesystem=fs).num_rows
    return total


def _raw(spark: SparkSession, files: list[str], kind: str) -> DataFrame:
    return spark.read.schema(spark_schema(SCHEMAS[kind])).parquet(*files)


def _under_new_ids(spark: SparkSession, every: list[str], new: list[str],
                   kind: str) -> DataFrame | None:
    """Every row (old files too) under an id some new file holds."""
    if not new:
        return None
    key = IDS[kind]
    ids = _raw(spark, new, kind).select(key).distinct()
    return _raw(spark, every, kind).join(ids, key, "left_semi")


@dataclass(frozen=True)
class Touched:
    """What the new files' rows touch: ``days`` (any, not only those holding impressions),
    and ``occurred``, the days their interactions occurred on (in the experiment's time
    zone: what :func:`popularity_changed` compares with the reference period)."""

    days: set[date]
    occurred: set[date]


def touched_days(spark: SparkSession, f: Frames, files: tuple[list[str], list[str]],
                 new: tuple[list[str], list[str]]) -> Touched:
    """The days the new files' rows touch (module docstring)."""
    days: set[date] = set()
    occurred: set[date] = set()
    imps = _under_new_ids(spark, files[0], new[0], "impressions")
    if imps is not None:
        days |= _collect(coded_impressions(f.info, imps).select(F.col("_day").alias("d")))
    events = _under_new_ids(spark, files[1], new[1], "interactions")
    if events is not None:
        coded = coded_interactions(events)
        at = F.col("at")
        # one job: a row per (day touched, day occurred), a few per day
        pairs = coded.select(F.explode(F.sequence(local_day(at - f.window_us, f.zone),
                                                  local_day(at, f.zone))).alias("d"),
                             local_day(at, f.zone).alias("o")).distinct().collect()
        days |= {row["d"] for row in pairs}
        occurred = {row["o"] for row in pairs}
        named = f.impressions.select(F.col("impression_id").alias("named"), "_day")
        days |= _collect(coded.join(named, "named").select(F.col("_day").alias("d")))
    return Touched(days, occurred)


def _collect(frame: DataFrame) -> set[date]:
    return {row["d"] for row in frame.distinct().collect()}


def popularity_changed(known: Known, first_day: date | None, touched: Touched,
                       popularity_days: int) -> str | None:
    """Why the experiment's popularity changed since the previous run (None: it did not):
    its first day (the earliest day holding impressions) is not the earliest day the
    database holds, which the previous run computed (impressions backfilled before it move
    the reference period), or a new file's interaction occurred in the period."""
    before = min((day for day, _, _ in known.days), default=None)
    if first_day != before:
        return f"the first day moved from {before} to {first_day}"
    if first_day is None:
        return None
    period = Reference(first_day, popularity_days)
    if any(period.first <= day < first_day for day in touched.occurred):
        return "interactions dated in the reference period came"
    return None


def provisional_closed(known: Known, now_us: int) -> set[date]:
    """Days computed while provisional whose windows have closed since."""
    return {day for day, closes, computed in known.days if computed < closes <= now_us}
