"""One day, recomputed from the raw logs (step 2 of :mod:`tracker.rollup.engine`): read,
score, write.

- **Read** the day's extent, then its impressions in chunks of ids bounded by
  ``TRACKER_ROLLUP_CHUNK_CELLS``, each with the interactions that name one of them and those
  that may answer them by time (the whole day's at once when they fit the bound, else each
  chunk's users'), scored against the experiment's item popularity
  (:mod:`tracker.rollup.popularity`: one for every day, resolved by the run).
- **Score** each chunk (:func:`tracker.rollup.columnar.score_chunk`) while the next is read
  (:class:`tracker.rollup.pipeline.ChunkPipeline`), folding the chunks' per-user totals,
  exposure and catalog as they come, in the day's codes.
- **Write** the day's state (daily units, exposure) in one transaction, and hand back the
  rows the report reads, which the run publishes at its end.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.config import Settings
from tracker.rollup import cells, levels, queries, user_queries
from tracker.rollup.aggregate import CodedSums, UnitTotals, health, totals_of_coded
from tracker.rollup.cells import Cells
from tracker.rollup.codes import Vocabulary, distinct
from tracker.rollup.columnar import ChunkResult, Interactions, score_chunk
from tracker.rollup.days import day_bounds, in_range
from tracker.rollup.exposure import Exposure, catalog_size
from tracker.rollup.first_exposures import FirstExposures
from tracker.rollup.outcomes import Layout
from tracker.rollup.pipeline import IN_FLIGHT, ChunkPipeline
from tracker.rollup.popularity import Popularity
from tracker.rollup.published import DayResult, View, stats_rows
from tracker.rollup.summary import RollupSummary
from tracker.store import results
from tracker.store.arrow import ArrowReader
from tracker.store.db import transaction
from tracker.store.experiments import ExperimentInfo
from tracker.store.types import to_micros


@dataclass(frozen=True)
class RunContext:
    """What every day of one run shares."""

    engine: sa.Engine
    reader: ArrowReader
    settings: Settings
    info: ExperimentInfo
    clock: datetime
    declared: pa.Array | None  # the declared catalog (distinct ids), None without one
    popularity: Popularity  # the experiment's, for every day (surprisal)
    firsts: FirstExposures | None = None  # the first exposures whole days read, gathered

    @property
    def cutoffs(self) -> list[int]:
        return list(self.info.cutoffs)

    @property
    def layout(self) -> Layout:
        return Layout.for_cutoffs(self.cutoffs)

    @cached_property
    def cells(self) -> Cells:
        return Cells.of(self.info)

    @cached_property
    def slices(self) -> tuple[levels.Values, levels.Values]:
        """The SQL of the values of the list dimensions and of the user dimensions
        (:func:`levels.value_sql`)."""
        return levels.value_sql(self.info, self.engine.dialect.name)

    @property
    def window_us(self) -> int:
        """The attribution window, in microseconds."""
        return int(self.info.attribution_window.total_seconds() * 1_000_000)

    @property
    def pair_limit(self) -> int:
        """(impression, interaction) pairs attribution makes at once: the memory bound
        split between the chunks in flight, as their lists are (:meth:`DayScorer._rows`),
        at least :data:`MIN_PAIR_LIMIT`."""
        return max(MIN_PAIR_LIMIT, self.settings.rollup_chunk_cells // IN_FLIGHT)


MIN_PAIR_LIMIT = 10_000
"""The fewest pairs attribution makes at once, however small the memory bound (chunks hold
at least 1,000 lists, likewise): a thousand lists answered ten times each."""


@dataclass(frozen=True)
class ChunkTables:
    """One chunk's reads: its served lists, the interactions naming one of them, and
    (None when the day's were read at once) those of its users that may answer them."""

    lists: pa.Table
    keyed: pa.Table
    timed: pa.Table | None


@dataclass(frozen=True)
class DayScores:
    """A day's per-user totals, exposure per cell and catalog items."""

    totals: UnitTotals
    exposures: dict[int, Exposure]
    catalog: pa.Array  # item ids (served, or in a ground truth)


def recompute_day(run: RunContext, day: date, summary: RollupSummary) -> DayResult:
    """Recompute one day from the raw logs and replace its daily units and exposure (what
    the cumulative pass reads); returns them with the rows the report reads."""
    start, end = day_bounds(day, run.info.timezone)
    with transaction(run.engine) as conn:
        queries.tune(conn)
        # its longest list once the day's reads are under way (it reads every list)
        extent = queries.day_extent(conn, run.info.id, start, end, longest=False)
        # the day's interactions are read once when they fit the memory bound, else with
        # each chunk (only the chunk's users')
        day_wide = bool(extent.impressions) and queries.count_window_interactions(
            conn, start, end, run.window_us) <= run.settings.rollup_chunk_cells
    if not extent.impressions:
        with transaction(run.engine, write=True) as conn:
            results.delete_day_state(conn, run.info.id, day)
        return DayResult.empty()
    scores = DayScorer(run, day, extent, day_wide).score(summary)
    return store_day(run, day, extent, scores)


def store_day(run: RunContext, day: date, extent: queries.DayExtent,
              scores: DayScores) -> DayResult:
    """The day's state written (:func:`write_state`, one transaction) while its units are
    encoded and the rows the report reads computed in a thread (numpy and Arrow, while
    the exposure is written first: mostly the database's work); those rows."""
    def aside_of_the_write() -> DayResult:
        scores.totals.encode(run.layout)  # once: write_state takes these parts
        return day_result(run, day, extent, scores.totals, scores.exposures, scores.catalog)

    with ThreadPoolExecutor(max_workers=1) as aside:
        result = aside.submit(aside_of_the_write)
        with transaction(run.engine, write=True) as conn:
            queries.tune(conn)
            write_state(conn, run, day, scores)
        return result.result()


def write_state(conn: sa.Connection, run: RunContext, day: date, scores: DayScores) -> None:
    """Replace the day's units and exposure."""
    info, cutoffs = run.info, run.cutoffs
    results.delete_day_state(conn, info.id, day)
    catalog = Exposure.of(scores.catalog, np.zeros((len(scores.catalog), 0)))
    results.insert_exposure(conn, info.id, day, False, run.cells.keyed(
        {cell: e.encode(cutoffs) for cell, e in scores.exposures.items()}
        | {cells.WHOLE: catalog.encode([])}))
    results.insert_units(conn, info.id, day, False, scores.totals.encode(run.layout))


def finalize_day(run: RunContext, day: date) -> DayResult | None:
    """A day final since it was computed, that nothing new touches (``Plan.final``): its
    rows the report reads, final now, from its stored units and exposure, without reading
    a log (every row that could answer it was taken into account when it was computed:
    :mod:`tracker.rollup.plan`). When its windows close is computed again from the day's
    last list (one step down an index) with the settings of now: a grace raised since keeps
    the day provisional. None when its rows are not stored, or its lists are not those it
    was computed from (it is then recomputed from the logs)."""
    info = run.info
    with transaction(run.engine) as conn:
        stored = results.units(conn, info.id, day, False)
        exposed = run.cells.coded(results.exposure(conn, info.id, day, False))
        computed = results.day_impressions(conn, info.id, day)
        extent = queries.day_extent(conn, info.id, *day_bounds(day, info.timezone),
                                    longest=False)
        if stored is None or cells.WHOLE not in exposed or extent.impressions != computed:
            return None
    return day_result(run, day, extent, *stored_day(run, stored, exposed))


def stored_day(run: RunContext, stored: list[bytes], exposed: dict[int, bytes]
               ) -> tuple[UnitTotals, dict[int, Exposure], pa.Array]:
    """A day's stored units, its cells' exposure and its catalog's items, decoded."""
    return (UnitTotals.decode(stored, run.layout),
            {cell: Exposure.decode(data, run.cutoffs) for cell, data in exposed.items()
             if cell != cells.WHOLE},
            Exposure.decode(exposed[cells.WHOLE], []).items)


def day_result(run: RunContext, day: date, extent: queries.DayExtent, totals: UnitTotals,
               exposures: dict[int, Exposure], catalog: pa.Array) -> DayResult:
    """The day's rows the report reads and its status, computed now."""
    now_us = to_micros(run.clock)
    closing = closes_at(run, extent)
    view = View(run.info, day, False, now_us < closing)
    stats = stats_rows(view, totals, run.layout, exposures,
                       catalog_size(catalog, run.declared))
    status = dict(experiment_id=run.info.id, day=day, impressions=extent.impressions,
                  users=int(health(totals).users), closes_at=closing, computed_at=now_us)
    return DayResult(totals, stats, status)


def closes_at(run: RunContext, extent: queries.DayExtent) -> int:
    """When the day's last attribution window closes (plus the grace), UTC microseconds."""
    grace = int(run.settings.rollup_grace_seconds * 1_000_000)
    return in_range(int(extent.last_served) + run.window_us + grace)  # stops at 9998


class DayScorer:
    """Reads and scores one day's chunks (:meth:`read_chunk`, :meth:`score_chunk`, run by a
    :class:`ChunkPipeline`); user and item codes are the day's, shared by its chunks."""

    def __init__(self, run: RunContext, day: date, extent: queries.DayExtent,
                 day_wide: bool, users: str | None = None) -> None:
        self.run, self.day, self.extent, self.day_wide = run, day, extent, day_wide
        self.only = users  # an SQL condition on the users to read (None: every user)
        self.start, self.end = day_bounds(day, run.info.timezone)
        self.users, self.items = Vocabulary(), Vocabulary()
        self._whole_day = None
        self.firsts = run.firsts.day() if run.firsts is not None and users is None else None

    def _read(self, query, *args, **options):
        return query(self.run.reader, self.run.info.id, self.start, self.end, *args,
                     **options)

    def read_chunk(self, chunk: tuple[int, int]) -> ChunkTables:
        return ChunkTables(
            self.run.cells.place(self._lists(chunk)),
            self._read(queries.keyed_interactions, *chunk, self.only),
            None if self.day_wide else self._read(queries.window_interactions,
                                                  self.run.window_us, chunk, self.only))

    def _lists(self, chunk: tuple[int, int]) -> pa.Table:
        """The chunk's served lists, with their values of every dimension."""
        per_list, per_user = self.run.slices
        lists = self._read(queries.served_lists, *chunk, max(self.run.cutoffs), self.only,
                           slices=per_list)
        if not per_user:
            return lists
        users = self._read(user_queries.user_slices, *chunk, self.only, per_user)
        at = pc.index_in(lists["user"], value_set=users["user"])
        for name, _ in per_user:
            column = queries.slice_column(name)
            lists = lists.append_column(column, pc.take(users[column], at))
        return lists

    def _whole_day_interactions(self) -> Interactions:
        return self._interactions(self._read(queries.window_interactions, self.run.window_us,
                                             None, self.only))

    def _interactions(self, table: pa.Table) -> Interactions:
        """Those of ``table`` (:func:`~tracker.rollup.queries.window_interactions`) that
        may answer by time."""
        timed = table.filter(pc.equal(table["keyed"], 0)).drop_columns(["keyed"])
        return Interactions.of(timed, self.run.info.relevance, self.users)

    def score_chunk(self, tables: ChunkTables) -> ChunkResult | None:
        """The chunk scored (None when it holds no impression: a chunk of the users a
        day is recomputed for may hold none)."""
        if tables.lists.num_rows == 0:
            return None
        run = self.run
        interactions = self._whole_day.result() if tables.timed is None else \
            self._interactions(tables.timed)
        result = score_chunk(tables.lists, interactions, tables.keyed,
                             run.popularity, run.info.relevance,
                             run.window_us, run.cutoffs, run.layout, self.items, self.users,
                             pair_limit=run.pair_limit)
        if self.firsts is not None:  # the users' codes
            lists = tables.lists
            self.firsts.add(lists["id"].to_numpy(), result.users, lists["served"].to_numpy())
        return result

    def _rows(self) -> int:
        """Impressions per chunk: the memory bound split between the chunks in flight."""
        longest = self.extent.longest
        if longest is None:  # read now, while the day's interactions are
            with transaction(self.run.engine) as conn:
                longest = queries.longest_list(conn, self.run.info.id, self.start, self.end,
                                               self.extent)
        return max(1_000, self.run.settings.rollup_chunk_cells // IN_FLIGHT
                   // max(longest, 1))

    def _bounds(self) -> list[tuple[int, int]]:
        extent, rows = self.extent, self._rows()
        if extent.impressions <= rows:
            return [(extent.first_id, extent.last_id)]
        if extent.last_id - extent.first_id + 1 == extent.impressions:
            # the day's ids are every id of their range (ids are unique): the same bounds
            # without reading them (1M ids: ~0.7 s before the first chunk could be read)
            ids = np.arange(extent.first_id, extent.last_id + 1, dtype=np.int64)
        else:
            ids = self._read(queries.day_ids)
        return queries.chunk_bounds(ids, rows)

    def score(self, summary: RollupSummary) -> DayScores:
        """Every chunk of the day read and scored, folded in chunk order."""
        fold = DayFold()
        with ChunkPipeline(self.read_chunk, self.score_chunk) as pipeline:
            if self.day_wide:
                self._whole_day = pipeline.side(self._whole_day_interactions)
            for result in pipeline.run(self._bounds()):
                if result is not None:
                    fold.add(result)
            if self.firsts is not None:  # for the covariates' thread, as soon as known
                self.run.firsts.add(self.firsts, self.users.ids)
            totals = fold.totals(self.users.ids, len(self.run.layout))
            exposures = fold.exposures(self.items.ids, len(self.run.cutoffs))
            catalog = fold.catalog(self.items.ids)
        summary.impressions_read += fold.impressions
        summary.truth_pairs_read += fold.truth_pairs
        return DayScores(totals, exposures, catalog)


class DayFold:
    """The chunks' results added up as they come (memory follows the day's users, not its
    chunks)."""

    def __init__(self) -> None:
        self.sums: CodedSums | None = None
        self.exposed: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        self.catalogs: list[np.ndarray] = []
        self.impressions = self.truth_pairs = 0

    def add(self, result: ChunkResult) -> None:
        if self.sums is None:
            self.sums = CodedSums(result.totals.sums.shape[1])
        self.sums.add(result.totals)
        self.catalogs.append(result.catalog)
        for cell, counts in result.exposures.items():
            self.exposed.setdefault(cell, []).append(counts)
        self.impressions += result.impressions
        self.truth_pairs += result.truth_pairs

    def totals(self, user_ids: pa.Array, columns: int) -> UnitTotals:
        if self.sums is None or not self.sums.size:
            return UnitTotals.empty(columns)
        return totals_of_coded(self.sums.totals(), user_ids)

    def exposures(self, item_ids: pa.Array, cutoffs: int) -> dict[int, Exposure]:
        return {cell: _exposure(pieces, item_ids, cutoffs)
                for cell, pieces in self.exposed.items()}

    def catalog(self, item_ids: pa.Array) -> pa.Array:
        codes = np.concatenate(self.catalogs) if self.catalogs else np.empty(0, np.int64)
        return item_ids.take(pa.array(distinct(codes)))


def _exposure(pieces: list[tuple[np.ndarray, np.ndarray]], ids: pa.Array,
              cutoffs: int) -> Exposure:
    """One cell's exposure from its chunks' (item codes, counts)."""
    codes = np.concatenate([c for c, _ in pieces])
    counts = np.concatenate([n for _, n in pieces]).reshape(codes.size, cutoffs)
    present, index = np.unique(codes, return_inverse=True)
    summed = np.zeros((present.size, cutoffs), dtype=np.int64)
    for j in range(cutoffs):
        summed[:, j] = np.bincount(index, weights=counts[:, j], minlength=present.size)
    return Exposure.of(ids.take(pa.array(present)), summed)
