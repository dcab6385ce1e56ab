"""One group of the Spark rollup, in the Python worker: the impressions of some users on one
day, with the interactions that may answer them, scored by the default engine's chunk
scorer (:func:`tracker.rollup.columnar.score_chunk`: attribution, the ``tracker.metrics``
kernels per impression, per-user sums, item exposure). Pure Arrow and numpy: no pyspark
here, so it runs (and is tested) without Spark.

A group's input (one Arrow table each side of a ``cogroup``):

- impressions: ``impression_id, cell`` (int64, :mod:`tracker.rollup.cells`), ``user,
  served`` (int64 µs), ``items``, ``baseline`` (its first ``max(cutoffs)`` items, null
  without one); without ``impression_id`` when no interaction names an impression;
  with the experiment's dimensions, a ``slice:<dimension>`` column each
  (:mod:`tracker.spark.slices`), which :attr:`GroupConfig.cells` turns into the lists'
  slice cells;
- interactions: ``user, item, event, at`` (int64 µs) and ``named`` (the impression id it
  names, null when it answers by time). Those that answer by time may hold other days' and
  users' rows: the scorer keeps those of the group's users, and attribution their times.

Its output (:data:`OUTPUT`), one row per

- ``kind`` 0: (user, cell) of the day: ``impressions``, ``sums`` and ``counts`` in the
  order of :class:`tracker.rollup.outcomes.Layout`;
- ``kind`` 1: (cell, item) served: ``sums`` holds, per cutoff, the lists with the item in
  their top k;
- ``kind`` 2: an item of the day's catalog (served, or in a ground truth).

:func:`write_group` writes it as one Arrow IPC file per group from the Python worker and
hands Spark back only its row count: sent back through Spark (Arrow to rows, then Spark's
Parquet writer) the output, one row per cell and item served, cost ~5 CPU-s a 1M
impressions, a fifth of the scoring step; written as Parquet by pyarrow it cost the
workers about as much (benchmarks/README.md, "Spark"). The files live for one run: no
encoding needed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.rollup.cells import WHOLE, Cells
from tracker.rollup.codes import Vocabulary
from tracker.rollup.columnar import ChunkResult, Interactions, score_chunk
from tracker.rollup.outcomes import Layout
from tracker.rollup.popularity import Popularity

UNIT, EXPOSURE, CATALOG = 0, 1, 2

OUTPUT = pa.schema([
    pa.field("kind", pa.int8(), False), pa.field("day", pa.date32(), False),
    pa.field("key", pa.string(), False), pa.field("cell", pa.int64(), False),
    pa.field("impressions", pa.int64(), False), pa.field("sums", pa.list_(pa.float64())),
    pa.field("counts", pa.list_(pa.float64())),
])
"""The rows a group hands back (module docstring)."""

WRITTEN_DDL = "rows long"
"""What a group hands Spark back: the rows it wrote (:func:`write_group`)."""

IMPRESSION_COLUMNS = ("impression_id", "cell", "user", "served", "items", "baseline")
INTERACTION_COLUMNS = ("user", "item", "event", "at", "named")


@dataclass(frozen=True)
class GroupConfig:
    """What every group of a run shares (pickled into the tasks): the experiment's grades,
    attribution window and cutoffs, and its item popularity (every day's)."""

    relevance: Mapping[str, float] | None
    window_us: int
    cutoffs: tuple[int, ...]
    popularity: Popularity = field(default_factory=Popularity.empty)
    cells: Cells | None = None
    """The experiment's cells, when its lists come with ``slice:<dimension>`` columns."""

    @property
    def layout(self) -> Layout:
        return Layout.for_cutoffs(list(self.cutoffs))


def score_group(config: GroupConfig, day: date, impressions: pa.Table,
                interactions: pa.Table) -> pa.Table:
    """The :data:`OUTPUT` rows of one group (empty when it holds no impression)."""
    if impressions.num_rows == 0:
        return OUTPUT.empty_table()
    users, items = Vocabulary(), Vocabulary()
    ids = impressions["impression_id"].combine_chunks() \
        if "impression_id" in impressions.column_names else pa.array([], pa.string())
    sliced = [n for n in impressions.column_names if n.startswith("slice:")]
    lists = pa.table({"id": pa.array(np.arange(impressions.num_rows, dtype=np.int64)),
                      "cell": impressions["cell"], "user": impressions["user"],
                      "served": impressions["served"], "items": impressions["items"],
                      "baseline": impressions["baseline"],
                      **{n: impressions[n] for n in sliced}})
    if config.cells is not None and config.cells.levels:  # its slices' cells beside
        lists = config.cells.place(lists)
    named = interactions["named"]
    by_time = interactions.filter(named.is_null())
    keyed = interactions.filter(named.is_valid())
    rows = pc.index_in(keyed["named"], value_set=ids)
    keyed = pa.table({"impression": rows, "item": keyed["item"], "event": keyed["event"]}) \
        .filter(rows.is_valid())
    timed = Interactions.of(by_time.select(["user", "item", "event", "at"]),
                            config.relevance, users)
    result = score_chunk(lists, timed, keyed, config.popularity,
                         config.relevance, config.window_us, list(config.cutoffs),
                         config.layout, items, users)
    return output_rows(result, day, users.ids, items.ids)


def write_group(directory: str | Path, key: tuple, table: pa.Table) -> pa.Table:
    """Write one group's :data:`OUTPUT` rows into ``directory`` as ``group-KEY.arrow``
    (Arrow IPC file format)
    (``key``: the group's key values, e.g. bucket, day, slice) and return its row count
    as a one-row table (:data:`WRITTEN_DDL`). Written under a temporary name then renamed:
    a retried or speculative task replaces the file whole, never half of it. Nothing is
    written for an empty group."""
    if table.num_rows:
        name = "-".join(str(part.as_py() if isinstance(part, pa.Scalar) else part)
                        for part in key)
        final = Path(directory) / f"group-{name}.arrow"
        temporary = Path(directory) / f".{final.name}.{uuid.uuid4().hex}"
        with pa.OSFile(str(temporary), "wb") as sink, \
                pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        os.replace(temporary, final)
    return pa.table({"rows": pa.array([table.num_rows], pa.int64())})


def output_rows(result: ChunkResult, day: date, user_ids: pa.Array,
                item_ids: pa.Array) -> pa.Table:
    """A chunk's result as :data:`OUTPUT` rows, codes turned back into ids."""
    totals = result.totals
    parts = [_rows(UNIT, day, user_ids.take(pa.array(totals.users)), totals.cells,
                   totals.impressions, totals.sums, totals.counts)]
    for cell, (codes, counts) in sorted(result.exposures.items()):
        parts.append(_rows(EXPOSURE, day, item_ids.take(pa.array(codes)),
                           np.full(codes.size, cell), np.zeros(codes.size, np.int64),
                           counts.astype(np.float64), None))
    catalog = item_ids.take(pa.array(result.catalog))
    parts.append(_rows(CATALOG, day, catalog, np.full(len(catalog), WHOLE, np.int64),
                       np.zeros(len(catalog), np.int64), None, None))
    return pa.concat_tables(parts)


def _matrix(values: np.ndarray | None, rows: int) -> pa.Array:
    """A (rows, width) matrix as a list<double> column (null without one)."""
    if values is None:
        return pa.nulls(rows, pa.list_(pa.float64()))
    width = values.shape[1] if values.ndim == 2 else 0
    flat = pa.array(np.ascontiguousarray(values, dtype=np.float64).ravel())
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * width)
    return pa.ListArray.from_arrays(offsets, flat)


def _rows(kind: int, day: date, keys: pa.Array, cells: np.ndarray, impressions: np.ndarray,
          sums: np.ndarray | None, counts: np.ndarray | None) -> pa.Table:
    n = len(keys)
    return pa.table({
        "kind": pa.array(np.full(n, kind, np.int8)), "day": pa.array([day] * n, pa.date32()),
        "key": keys.cast(pa.string()), "cell": pa.array(np.asarray(cells, np.int64)),
        "impressions": pa.array(np.asarray(impressions, np.int64)),
        "sums": _matrix(sums, n), "counts": _matrix(counts, n)}, schema=OUTPUT)
