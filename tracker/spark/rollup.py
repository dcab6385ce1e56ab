"""The rollup on Spark: :func:`rollup`, for ``tracker rollup --engine spark``, spark-submit,
a Databricks job or any existing ``SparkSession``.

One run, per experiment (its arms, window, cutoffs, grades, time zone and catalog read from
the tracker database):

1. **Plan** (:mod:`tracker.spark.plan`): every day on a rebuild, else the days the new lake
   files touch (every day holding impressions when they change the item popularity).
2. **Slices** (with declared dimensions, :mod:`tracker.spark.slices`): the levels of the
   dimensions from the lake (other levels than the state's: a rebuild), each user's slice of
   the user dimensions (a user whose slice moved: their days recomputed), joined to the
   lists.
3. **Score on Spark**: the lake read with the database's duplicate rules
   (:mod:`tracker.spark.lake`); the experiment's item popularity (one, over the reference
   period before its first day) and each day's extent in Spark
   (:mod:`tracker.spark.frames`); then the groups (user bucket, day) in
   ``cogroup(...).applyInArrow`` (on a lake bucketed by user, read bucket by bucket
   without a shuffle: :mod:`tracker.spark.buckets`), each scored by the default engine's
   chunk scorer (:mod:`tracker.spark.groups`: attribution and the ``tracker.metrics`` kernels in
   numpy, per-user sums, exposure). Each group's output is written as an Arrow IPC file
   into the state directory by its Python worker (:func:`tracker.spark.groups.write_group`);
   exposure and catalog are summed on the driver.
4. **On the driver**, per day: the per-user sums (:class:`UnitTotals`) into the state
   directory, and the rows the report reads from the default engine's own code
   (:func:`tracker.rollup.day.day_result`).
   CUPED's per-user covariates of the users first seen in the run and of those whose
   pre-period the new files change, on Spark (:mod:`tracker.spark.covariates`; bucket by
   bucket on a bucketed lake, :mod:`tracker.spark.pre_period`), into the state directory.
5. **One transaction**: the daily rows (:func:`tracker.rollup.published.publish_daily`),
   CUPED's covariate sums (:func:`tracker.rollup.covariates.publish_daily`), the
   exposure-day rows (the default engine's pass,
   :func:`tracker.rollup.exposure_days.publish_exposure_days`),
   the cumulative rows from the first recomputed day on (the default engine's pass,
   :func:`tracker.rollup.cumulative.recompute_cumulative`, its per-user state in the state
   directory: :mod:`tracker.spark.cumulative`),
   and the experiment claimed for the state directory (``rollup_state.source``,
   :mod:`tracker.rollup.sources`): a run of another source takes it over with a rebuild,
   as this run does an experiment whose results came from elsewhere; a run over every
   experiment leaves the default engine's alone. The manifest is saved after it: a run
   killed before leaves its files to be taken again, and every step replaces what it
   writes.
6. **Last**, as the default engine's run ends (the same job over experiments,
   :mod:`tracker.rollup.job`: one failing experiment does not stop the others): each
   experiment's stored summary and the alerts it raises, its freshness ("data through")
   found in the lake's logs (:mod:`tracker.spark.freshness`).
"""

from __future__ import annotations

import logging
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import SparkSession

from tracker.config import Settings
from tracker.rollup import covariates as cuped
from tracker.rollup import job, sources
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.cells import WHOLE, Cells
from tracker.rollup.cumulative import recompute_cumulative
from tracker.rollup.day import RunContext, day_result
from tracker.rollup.exposure import Exposure, strings
from tracker.rollup.exposure_days import publish_exposure_days
from tracker.rollup.outcomes import Layout
from tracker.rollup.popularity import Reference
from tracker.rollup.published import DayResult, publish_daily
from tracker.rollup.queries import DayExtent
from tracker.rollup.stores import DatabaseStore
from tracker.rollup.summary import RollupSummary
from tracker.spark import covariates, plan
from tracker.spark.bucket_census import bucket_census
from tracker.spark.buckets import BucketJob, lake_buckets, score_buckets, usable
from tracker.spark.cumulative import DirectoryStore
from tracker.spark.frames import (
    GROUP_ROWS,
    USER_ROWS,
    Frames,
    census,
    frames,
    grouped,
    popularity,
)
from tracker.spark.freshness import newest_in_lake
from tracker.spark.groups import (
    CATALOG,
    EXPOSURE,
    OUTPUT,
    UNIT,
    WRITTEN_DDL,
    GroupConfig,
    score_group,
    write_group,
)
from tracker.spark.lake import Lake, read_lake
from tracker.spark.slices import FILE as SLICES
from tracker.spark.slices import Slices
from tracker.spark.state import StateDir
from tracker.store import results
from tracker.store.db import create_engine, transaction
from tracker.store.experiments import ExperimentInfo
from tracker.store.experiments import catalog as declared_items
from tracker.store.types import to_micros

LOG = logging.getLogger("tracker.spark")


def rollup(spark: SparkSession, impressions: str | Path, interactions: str | Path, *,
           experiment: str | None = None, state: str | Path | None = None,
           database_url: str | None = None, full: bool = False, buckets: int | None = None,
           user_rows: int = USER_ROWS, now: datetime | None = None) -> list[RollupSummary]:
    """Roll up one experiment (by key) or every experiment from the lake's Parquet logs
    into the tracker database (``database_url``, default ``TRACKER_DATABASE_URL``).

    ``state``: the state directory (one folder per experiment inside); None keeps it in a
    temporary directory, so every run rebuilds. ``full``: rebuild even with state.
    ``buckets``: user buckets per day (default: the largest day's impressions over
    :data:`~tracker.spark.frames.GROUP_ROWS`; a lake bucketed by user brings its own,
    :mod:`tracker.spark.buckets`); ``user_rows``: a user's day of more
    impressions is scored in slices of that many (:func:`tracker.spark.frames.grouped`).
    Raises :class:`~tracker.errors.Busy` when another rollup of the experiment is running.
    """
    settings = Settings.from_env()
    if database_url is not None:
        settings = replace(settings, database_url=database_url)
    for name, value in (("buckets", buckets), ("user_rows", user_rows)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    engine = create_engine(settings.database_url, settings)
    try:
        experiments = job.targets(engine, experiment)
        with _utc_session(spark), _state_root(state) as root:
            with _phase("lake"):
                lake = read_lake(spark, impressions, interactions)
            _report_conflicts(lake)
            files = (plan.listing(impressions, "impressions"),
                     plan.listing(interactions, "interactions"))

            def run_one(info: ExperimentInfo, lock) -> job.Done:
                run = _Run(spark, engine, settings, info, lake, files,
                           StateDir(root / info.key), (buckets, user_rows),
                           now or datetime.now(UTC), named=experiment is not None,
                           kept=state is not None)
                summary = run.run(full, lock)  # "data through": from the lake's logs
                return job.Done(summary, find=None if summary.skipped is not None
                                else partial(newest_in_lake, run.frames))

            return job.run_each(engine, settings, experiments, named=experiment is not None,
                                now=now, run_one=run_one)
    finally:
        engine.dispose()


def _report_conflicts(lake: Lake) -> None:
    """Ids that came with different payloads (one kept, :mod:`tracker.spark.lake`), on
    the ``tracker.spark`` logger (a warning: shown on standard error by default)."""
    for name, log in (("impression", lake.impressions), ("interaction", lake.interactions)):
        if log.conflicts:
            LOG.warning("lake: %d %s id(s) came with different payloads (the first kept), "
                        "e.g. %s", log.conflicts, name, ", ".join(log.conflict_sample))


@contextmanager
def _utc_session(spark: SparkSession):
    """Spark's session time zone set to UTC for the run (day arithmetic relies on it)."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


@contextmanager
def _state_root(state: str | Path | None):
    if state is not None:
        Path(state).mkdir(parents=True, exist_ok=True)
        yield Path(state)
        return
    with tempfile.TemporaryDirectory(prefix="tracker-spark-") as folder:
        yield Path(folder)


@contextmanager
def _phase(name: str):
    """Log how long a step of a run took (logger ``tracker.spark``, level INFO)."""
    started = time.perf_counter()
    yield
    LOG.info("%s: %.2f s", name, time.perf_counter() - started)


class _Run:
    """One run of one experiment."""

    def __init__(self, spark, engine, settings: Settings, info: ExperimentInfo, lake: Lake,
                 files: tuple[dict, dict], store: StateDir, groups: tuple[int | None, int],
                 clock: datetime, named: bool = True, kept: bool = True) -> None:
        self.spark, self.engine, self.settings, self.info = spark, engine, settings, info
        self.lake, self.files, self.store = lake, files, store
        # without a state directory (``kept`` False) the state lives in a temporary folder
        self.source, self.named = sources.spark(store.root if kept else None), named
        self.owner: str | None = None  # the source of the stored results (_ours)
        self.rolled_up = False  # the database holds days of the experiment (_days)
        self.buckets, self.user_rows = groups
        self.clock = clock
        self.layout = Layout.for_cutoffs(list(info.cutoffs))

    @property
    def config(self) -> dict:
        """What the state depends on besides the logs (a change: a rebuild)."""
        info = self.info
        return {"cells": dict(Cells.of(info).logged), "cutoffs": list(info.cutoffs),
                "window_us": int(info.attribution_window.total_seconds() * 1_000_000),
                "relevance": info.relevance, "timezone": info.timezone,
                "popularity_days": self.settings.rollup_popularity_days,
                "cuped_days": info.cuped_days,
                "catalog": sorted(self._declared_list()),
                # only when declared (the manifests written before segments stay valid), in
                # name order (a reorder changes no result)
                **({"segments": sorted((s.to_dict() for s in info.segments),
                                       key=lambda d: d["name"]),
                    "levels": {name: list(values) for name, values in info.levels}}
                   if info.segments else {})}

    def _declared_list(self) -> list[str]:
        with transaction(self.engine) as conn:
            return declared_items(conn, self.info.id)

    def run(self, full: bool, lock) -> RollupSummary:
        started = time.perf_counter()
        summary = RollupSummary(self.info.key, full)
        if not self._ours(summary):
            return summary
        # not cached: every use reads only its columns, and deduplication is a broadcast
        # join of the few repeated ids (caching lists of strings costs more than a scan)
        f = frames(self.info, self.lake.impressions.rows, self.lake.interactions.rows,
                   "impression_id" in self.lake.interactions.null_columns)
        with _phase("slices"):  # the levels are part of the config: before the plan
            self.slices = Slices.of(f)
            self.info = self.slices.info
        try:
            self._run(f, full, lock, summary)
        finally:
            self.slices.release()
        summary.seconds = time.perf_counter() - started
        return summary

    def _run(self, f: Frames, full: bool, lock, summary: RollupSummary) -> None:
        self.census = None
        try:
            with _phase("plan"):
                days, rebuild = self._days(f, full or summary.taken_over is not None)
            f = self.frames = self.slices.placed(f)
            if self._erases(summary):
                return
            summary.full = rebuild
            summary.new_impressions, summary.new_interactions = (plan.rows_in(files)
                                                                  for files in self.new)
            declared_list = self._declared_list()
            declared = pa.array(sorted(set(declared_list)), pa.string()) if declared_list \
                else None
            daily = self._compute(f, days, declared, summary) if days else {}
            with _phase("covariates"):  # also without a day: late pre-period rows
                refreshed = covariates.refresh(
                    self.spark, self.lake, self.info, self.store, daily,
                    self.census.firsts, ([], []) if rebuild else self.new)
                users = refreshed.covariates
            self.slices.collect()  # kept after the commit
        finally:
            if self.census is not None:
                self.census.release()
        self._commit(summary, daily, refreshed, declared, rebuild, lock)
        if users is not None:  # after the commit: see tracker.spark.covariates.refresh
            covariates.save(self.store, self.info, users)
        self.slices.save(self.store.root / SLICES)
        self.store.save_manifest(self.info.key, self.config, *self.files)
        summary.days_recomputed = sorted(daily)

    def _commit(self, summary: RollupSummary, daily: dict[date, DayResult], refreshed,
                declared: pa.Array | None, rebuild: bool, lock) -> None:
        """Every table the run writes, in one transaction (module docstring, step 5)."""
        users = refreshed.covariates
        with _phase("commit"), transaction(self.engine, write=True) as conn:
            publish_daily(conn, self.info, daily, everything=rebuild)
            cuped.publish_daily(conn, self.info, daily, users,
                                everything=rebuild or self.info.cuped_days == 0)
            if rebuild:  # the default engine's state, if it kept any: not this source's
                results.clear_state(conn, self.info.id)
                results.delete_popularity(conn, self.info.id)
                DatabaseStore(conn, self.info).delete_first_seen(None)
            recent = {d: r.totals for d, r in daily.items() if r.totals is not None}
            # the shared passes, state here (a crossover user's first arm from the lake)
            kept = DirectoryStore(self.store, self.info, self.frames.first_cells())
            publish_exposure_days(conn, self.info, min(daily) if daily else None, recent,
                                  rebuild=rebuild, store=kept)
            summary.cumulative_from = recompute_cumulative(
                conn, self.info, daily, to_micros(self.clock), recent=recent,
                declared=declared, refreshed=refreshed, store=kept)
            cuped.resum_changed(conn, self.info, refreshed, daily,
                                kept.units)
            # the experiment's results are this state directory's from now on: the
            # database's watermarks no longer describe them (tracker.rollup.sources)
            results.reset_state(conn, self.info.id, declaration=False, source=self.source)
            lock.confirm()

    def _erases(self, summary: RollupSummary) -> bool:
        """Whether rolling the experiment up would erase results whose lists the lake lacks
        (:func:`tracker.rollup.sources.guard_erasure`: refused when the run names it, else
        left, ``summary.skipped``)."""
        summary.skipped = sources.guard_erasure(
            self.info.key, self.owner, self.source, logged=self.first_day is not None,
            rolled_up=self.rolled_up, named=self.named,
            way_out="roll it up with `tracker rollup`, or export its logs to the lake first")
        return summary.skipped is not None

    def _ours(self, summary: RollupSummary) -> bool:
        """Whether this run rolls the experiment up, given the source of its results: the
        default engine's experiment is taken over (``summary.taken_over``) only by a run
        that names it (:mod:`tracker.rollup.sources`)."""
        with transaction(self.engine) as conn:
            stored = results.load_state(conn, self.info.id)
        source = self.owner = None if stored is None else stored.source
        summary.skipped = sources.left_alone(source, self.source, named=self.named)
        if summary.skipped is not None:
            self.store.clear()  # describes no result now: a take-over rebuilds anyway
            return False
        summary.taken_over = sources.taken_over(source, self.source)
        return True

    def _days(self, f: Frames, full: bool) -> tuple[list[date], bool]:
        """The days to compute, and whether this run rebuilds."""
        with transaction(self.engine) as conn:
            known = plan.Known(self.store.manifest(), results.known_days(conn, self.info.id))
        self.rolled_up = bool(known.days)
        # one scan: the days holding impressions, their extents, the heavy users (on a
        # lake bucketed by user, bucket by bucket in the Python workers)
        files = lake_buckets(self.lake)
        if files is None:
            self.census = census(f, self.user_rows)
        else:
            LOG.info("census: bucket by bucket (the lake's %d buckets)", len(files))
            self.census = bucket_census(self.spark, self.info, files,
                                        self.lake.impressions.bucketing.count, self.user_rows)
        holding = set(self.census.days)
        self.first_day = min(holding, default=None)
        reason = "asked" if full else plan.needs_rebuild(known, self.info.key, self.config,
                                                          *self.files)
        if reason is not None:
            self.store.clear()
            self.new = (sorted(self.files[0]), sorted(self.files[1]))
            return sorted(holding), True
        before = known.manifest
        new = self.new = (plan.new_files(before["impressions"], self.files[0]),
                          plan.new_files(before["interactions"], self.files[1]))
        touched = plan.touched_days(self.spark, f, (sorted(self.files[0]),
                                                    sorted(self.files[1])), new)
        changed = plan.popularity_changed(known, self.first_day, touched,
                                          self.settings.rollup_popularity_days)
        if changed is not None:
            LOG.info("popularity: %s: every day recomputed", changed)
            return sorted(holding), False
        days = touched.days | plan.provisional_closed(known, to_micros(self.clock))
        moved = self.slices.moved_days(f, self.store.root / SLICES)
        if moved:
            LOG.info("slices: users moved to another slice: %d day(s) recomputed",
                     len(moved - days))
        return sorted((days | moved) & holding), False

    def _compute(self, f: Frames, days: list[date], declared: pa.Array | None,
                 summary: RollupSummary) -> dict[date, DayResult]:
        """The days scored on Spark, their state written, their rows built."""
        info = self.info
        with _phase("popularity"):
            config = GroupConfig(info.relevance, f.window_us, tuple(info.cutoffs),
                                 popularity(f, Reference(
                                     self.first_day, self.settings.rollup_popularity_days)),
                                 Cells.of(info))
        extent_of = {day: self.census.days[day] for day in days}
        with _phase("score"):
            self._score(f, days, config, extent_of)
        with _phase("exposure"):
            exposures, catalogs = self._exposures(days)
        context = RunContext(self.engine, None, self.settings, info, self.clock, declared,
                             None)
        daily = {}
        for day, extent in sorted(extent_of.items()):
            totals = self._units(day)
            exposed = exposures.get(day, {})
            catalog = catalogs.get(day, pa.array([], pa.string()))
            self.store.write_units(day, False, totals, self.layout)
            self.store.write_exposure(day, False, {**exposed, WHOLE: Exposure.of(
                catalog, np.zeros((len(catalog), 0)))}, list(info.cutoffs))
            daily[day] = day_result(context, day, DayExtent(
                extent.impressions, None, None, extent.last_served, 0), totals, exposed, catalog)
            summary.impressions_read += extent.impressions
        return daily

    def _score(self, f: Frames, days: list[date], config: GroupConfig,
               extent_of: dict) -> None:
        """Every group of ``days`` scored, its output written into the state directory:
        read bucket by bucket from a lake bucketed by user when it may be
        (:mod:`tracker.spark.buckets`), else grouped by a shuffle (a ``cogroup``)."""
        target = self.store.fresh_scored()
        largest = max((e.impressions for e in extent_of.values()), default=0)
        count = self.buckets or max(1, -(-largest // GROUP_ROWS))
        files = usable(f, self.lake, self.census.heavy, days)
        if files is not None:
            lake_buckets = self.lake.impressions.bucketing.count
            buckets_job = BucketJob(self.info, config, lake_buckets, files, str(target),
                                  parts=-(-count // lake_buckets), keyed=not f.unnamed)
            LOG.info("groups: read bucket by bucket (the lake's %d buckets, %d part(s) "
                     "each), no shuffle", buckets_job.count, buckets_job.parts)
            score_buckets(self.spark, buckets_job, days)
            return
        impressions, interactions = grouped(f, days, count, self.census.heavy,
                                            self.user_rows)

        def score(key, left: pa.Table, right: pa.Table) -> pa.Table:
            return write_group(target, key, score_group(config, key[1].as_py(), left,
                                                        right))

        scored = (impressions.groupBy("_bucket", "_day", "_slice")
                  .cogroup(interactions.groupBy("_bucket", "_day", "_slice"))
                  .applyInArrow(score, WRITTEN_DDL))
        scored.collect()  # a row per group: the files are the output

    def _scored(self) -> ds.Dataset:
        """The groups' output files (:data:`tracker.spark.groups.OUTPUT`)."""
        return ds.dataset(str(self.store.scored), schema=OUTPUT, format="ipc")

    def _units(self, day: date) -> UnitTotals:
        """One day's per-user totals from the groups' output (a user split between groups
        adds up)."""
        table = self._scored().to_table(
            filter=(ds.field("kind") == UNIT) & (ds.field("day") == pa.scalar(day)))
        n, width = table.num_rows, len(self.layout)
        if n == 0:
            return UnitTotals.empty(width)

        def matrix(name: str) -> np.ndarray:
            flat = pc.list_flatten(table[name].combine_chunks()).to_numpy()
            return np.asfortranarray(flat.reshape(n, width))

        return UnitTotals(table["key"].combine_chunks(), table["cell"].to_numpy(),
                          table["impressions"].to_numpy(), matrix("sums"),
                          matrix("counts")).reduce()

    def _exposures(self, days: list[date]
                   ) -> tuple[dict[date, dict[int, Exposure]], dict[date, pa.Array]]:
        """Exposure per day and cell, and each day's catalog, summed over the groups (Arrow's
        hash aggregation on the driver: a row per group, cell and item)."""
        cutoffs = len(self.info.cutoffs)
        scored = self._scored()
        exposed = scored.to_table(columns=["day", "cell", "key", "sums"],
                                  filter=ds.field("kind") == EXPOSURE)
        sums = pc.list_flatten(exposed["sums"].combine_chunks()).to_numpy()
        columns = {f"c{j}": pa.array(sums[j::cutoffs].astype(np.int64))
                   for j in range(cutoffs)}
        exposed = pa.table({"day": exposed["day"], "cell": exposed["cell"],
                            "key": exposed["key"], **columns}).group_by(
            ["day", "cell", "key"]).aggregate([(f"c{j}", "sum") for j in range(cutoffs)])
        out: dict[date, dict[int, Exposure]] = {}
        for day in days:
            mine = exposed.filter(pc.equal(exposed["day"], pa.scalar(day)))
            for cell in sorted(set(mine["cell"].to_pylist())):
                rows = mine.filter(pc.equal(mine["cell"], cell))
                counts = np.stack([rows[f"c{j}_sum"].to_numpy() for j in range(cutoffs)],
                                  axis=1)
                out.setdefault(day, {})[int(cell)] = Exposure.of(rows["key"], counts)
        catalog = scored.to_table(columns=["day", "key"],
                                  filter=ds.field("kind") == CATALOG).group_by(
            ["day", "key"]).aggregate([])
        catalogs = {}
        for day in days:
            keys = catalog.filter(pc.equal(catalog["day"], pa.scalar(day)))["key"]
            catalogs[day] = strings(keys)
        return out, catalogs
