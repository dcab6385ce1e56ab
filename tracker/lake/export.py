"""The database's logs written in the lake layout (:mod:`tracker.lake.layout`): the way from
one machine to Spark, and the data of the Spark tests.

- **Bounded memory**: rows are read ``batch_rows`` at a time through the store's Arrow reader
  (:class:`~tracker.store.arrow.ArrowReader`), in (time, id) order by keyset pagination, and
  each batch is appended to the open Parquet file of its day; one file is open at a time.
- **Layout**: ``DIR/day=YYYY-MM-DD/part-N.parquet``, the UTC day of ``served_at`` /
  ``occurred_at``; ``N`` is the experiment's place in the export (0 when one is exported) for
  impressions, 0 for interactions. With ``buckets``, bucketed by user
  (:mod:`tracker.lake.layout`): ``DIR/day=YYYY-MM-DD/bucket=B/part-N.parquet``, each file's
  footer naming its bucket; a day's buckets are written together, each bucket's rows
  buffered up to ``batch_rows`` (a row group) and at most :data:`BUFFERED` batches in all.
- **Exact**: every field as stored, the receipt time (``received_at``) included. Lists
  come as ``text[]`` / ``float8[]`` from PostgreSQL and as JSON text from SQLite (parsed
  in Arrow, scores written by ``repr``: exact). An interaction's ``value`` on SQLite is
  read through the driver (SQLite prints a double to text with 15 to 17 digits, which does
  not always read back as the same number).
- **Interactions belong to no experiment**: all of them are exported even when one experiment
  is, since the rollup reads every interaction (item popularity for novelty, attribution by
  user and time).
- **Only its own files are ever deleted.** Each directory gets a marker file,
  :data:`MARKER` (``_tracker_export.json``: skipped by lake readers, as names starting with
  ``_`` are), naming the log it holds. A directory that holds anything is left alone unless
  ``overwrite``; then it must hold the marker of the same log and nothing but the export's
  layout (``day=YYYY-MM-DD/[bucket=B/]part-N.parquet``), and only those files are removed.
  Anything else (a database, notes, a symbolic link) refuses the export, naming it, before
  a file is touched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import sqlalchemy as sa

from tracker.errors import TrackerError
from tracker.lake.layout import (
    IMPRESSIONS,
    INTERACTIONS,
    TIMESTAMP,
    bucket_metadata,
    user_bucket,
)
from tracker.store.arrow import LIST, ArrowReader
from tracker.store.db import transaction
from tracker.store.experiments import get_experiment, list_experiments

BATCH_ROWS = 50_000
"""Rows read and written at a time (a Parquet row group each)."""
BUFFERED = 16
"""A bucketed export holds at most this many batches' rows before writing them out."""

MARKER = "_tracker_export.json"
"""The file that says a directory is a lake ``tracker export`` wrote (and may empty)."""
MARKER_FORMAT = "tracker-export/1"

_DAY_US = 86_400_000_000
_DAY_FOLDER = re.compile(r"day=\d{4}-\d{2}-\d{2}")
_BUCKET_FOLDER = re.compile(r"bucket=\d+")
_PART_FILE = re.compile(r"part-\d+\.parquet")
_SCORES = pa.list_(pa.float64())


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_logs` wrote: rows and files of each log, and the experiments."""

    impressions: int
    interactions: int
    impression_files: int
    interaction_files: int
    experiments: tuple[str, ...]


def export_logs(engine: sa.Engine, impressions: str | Path, interactions: str | Path,
                experiment: str | None = None, *, overwrite: bool = False,
                batch_rows: int = BATCH_ROWS, buckets: int | None = None) -> ExportResult:
    """Write the impressions (of ``experiment``, or of every experiment) into
    ``impressions`` and every interaction into ``interactions``, in the lake layout;
    ``buckets``: bucketed by user into that many buckets (module docstring).

    Raises :class:`~tracker.errors.TrackerError` when a directory holds anything and
    ``overwrite`` is not set, or when the two directories overlap;
    :class:`~tracker.errors.NotFound` for an unknown experiment.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    if buckets is not None and buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    write = _write_days if buckets is None else _Buckets(buckets, batch_rows).write_days
    imp_dir, int_dir = _prepared(Path(impressions), Path(interactions), overwrite)
    with transaction(engine) as conn:
        chosen = ([get_experiment(conn, experiment)] if experiment is not None
                  else sorted(list_experiments(conn), key=lambda e: e.key))
    imp_rows = imp_files = 0
    with ArrowReader(engine) as reader:
        for part, info in enumerate(chosen):
            batches = _impression_batches(reader, info.id, info.key, batch_rows)
            rows, files = write(batches, imp_dir, "served_at", part)
            imp_rows, imp_files = imp_rows + rows, imp_files + files
        int_rows, int_files = write(_interaction_batches(reader, batch_rows), int_dir,
                                    "occurred_at", 0)
    return ExportResult(imp_rows, int_rows, imp_files, int_files,
                        tuple(info.key for info in chosen))


def _prepared(impressions: Path, interactions: Path, overwrite: bool) -> tuple[Path, Path]:
    """Both directories, existing, empty but for their marker; refuse overlapping ones,
    (unless ``overwrite``) one that holds anything, and (even with ``overwrite``) one that
    holds anything the export did not write. Both are checked before either is emptied."""
    a, b = impressions.resolve(), interactions.resolve()
    if a == b or a in b.parents or b in a.parents:
        raise TrackerError(f"the impressions ({impressions}) and interactions "
                           f"({interactions}) directories must be apart, neither inside the "
                           "other")
    owned: dict[Path, tuple[list[Path], list[Path]]] = {}
    for log, path in (("impressions", impressions), ("interactions", interactions)):
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise TrackerError(f"{path} is not a directory")
        if path.is_dir() and any(path.iterdir()):
            if not overwrite:
                raise TrackerError(f"{path} is not empty: choose an empty directory, or "
                                   "overwrite (--overwrite) an earlier export of the "
                                   f"{log} there")
            owned[path] = _export_files(path, log)
    for files, folders in owned.values():
        for file in files:
            file.unlink()
        for folder in folders:
            folder.rmdir()
    for log, path in (("impressions", impressions), ("interactions", interactions)):
        path.mkdir(parents=True, exist_ok=True)
        (path / MARKER).write_text(json.dumps({"format": MARKER_FORMAT, "log": log}) + "\n")
    return impressions, interactions


def _export_files(folder: Path, log: str) -> tuple[list[Path], list[Path]]:
    """The files of an earlier export of ``log`` in ``folder`` (its marker last) and its
    folders (innermost first), to delete in that order; a
    :class:`TrackerError` naming the first thing found there that the export did not write.
    Nothing is followed through a symbolic link."""
    marker = folder / MARKER
    try:
        written = json.loads(marker.read_text()) if marker.is_file() and \
            not marker.is_symlink() else None
    except (OSError, ValueError):
        written = None
    if not isinstance(written, dict) or written.get("format") != MARKER_FORMAT:
        raise TrackerError(f"{folder} holds no {MARKER} of tracker export: it was not "
                           "written by tracker export and is left alone (choose an empty or "
                           "new directory)")
    if written.get("log") != log:
        raise TrackerError(f"{folder} holds an export of the {written.get('log')}, not of the "
                           f"{log}: it is left alone")
    files: list[Path] = []
    folders: list[Path] = []

    def foreign(path: Path) -> TrackerError:
        return TrackerError(f"{folder} holds {path}, which tracker export did not write: "
                            "nothing was deleted (move it away, or choose an empty or new "
                            "directory)")

    for day in sorted(folder.iterdir()):
        if day.name == MARKER:
            continue
        if day.is_symlink() or not day.is_dir() or not _DAY_FOLDER.fullmatch(day.name):
            raise foreign(day)
        for entry in sorted(day.iterdir()):
            inside = [entry]
            if not entry.is_symlink() and entry.is_dir() and \
                    _BUCKET_FOLDER.fullmatch(entry.name):
                inside = sorted(entry.iterdir())
                folders.append(entry)
            for file in inside:
                if file.is_symlink() or not file.is_file() or \
                        not _PART_FILE.fullmatch(file.name):
                    raise foreign(file)
                files.append(file)
        folders.append(day)
    return files + [marker], folders


# ------------------------------------------------------------------ reading


def _keyset(table: str, time: str, where: str, after: tuple[int, int] | None,
            batch_rows: int) -> str:
    """The WHERE and ORDER BY of the next batch after ``after`` = (time, id): integers only
    (never user input), safe to inline."""
    clauses = [where] if where else []
    if after is not None:
        clauses.append(f"({table}.{time}, {table}.id) > ({int(after[0])}, {int(after[1])})")
    condition = f"WHERE {' AND '.join(clauses)} " if clauses else ""
    return f"{condition}ORDER BY {table}.{time}, {table}.id LIMIT {int(batch_rows)}"


def _pages(read: Callable[[tuple[int, int] | None], pa.Table], time: str,
           batch_rows: int) -> Iterator[pa.Table]:
    """The batches of ``read(after)``, each sorted by (time, id), until one comes short."""
    after = None
    while True:
        table = read(after)
        if table.num_rows == 0:
            return
        table = table.sort_by([(time, "ascending"), ("id", "ascending")])
        yield table
        if table.num_rows < batch_rows:
            return
        after = (table[time][-1].as_py(), table["id"][-1].as_py())


def _impression_batches(reader: ArrowReader, experiment_id: int, key: str,
                        batch_rows: int) -> Iterator[pa.Table]:
    postgresql = reader.engine.dialect.name == "postgresql"
    context = "imp.context::text" if postgresql else "imp.context"
    columns = pa.schema([
        pa.field("id", pa.int64(), False), pa.field("served_at", pa.int64(), False),
        pa.field("impression_id", pa.string(), False), pa.field("arm", pa.string(), False),
        pa.field("user_id", pa.string(), False), pa.field("items", LIST, False),
        pa.field("scores", _SCORES if postgresql else pa.string(), True),
        pa.field("baseline_items", LIST, True), pa.field("context", pa.string(), True),
        pa.field("received_at", pa.int64(), False)])
    select = ("SELECT imp.id, imp.served_at, imp.impression_key, a.key, imp.user_id, "
              f"imp.items, imp.scores, imp.baseline_items, {context}, imp.received_at "
              "FROM impression imp "
              "JOIN arm a ON a.id = imp.arm_id ")
    where = f"imp.experiment_id = {int(experiment_id)}"

    def read(after):
        return reader.read(select + _keyset("imp", "served_at", where, after, batch_rows),
                           columns)

    for table in _pages(read, "served_at", batch_rows):
        scores_column = table["scores"] if postgresql else _json_doubles(table["scores"])
        yield pa.table({
            "impression_id": table["impression_id"],
            "experiment": pa.array([key] * table.num_rows, pa.string()),
            "arm": table["arm"], "user_id": table["user_id"],
            "served_at": table["served_at"].cast(TIMESTAMP), "items": table["items"],
            "scores": scores_column, "baseline_items": table["baseline_items"],
            "context": _no_json_null(table["context"]),
            "received_at": table["received_at"].cast(TIMESTAMP),
        }, schema=IMPRESSIONS)


def _interaction_batches(reader: ArrowReader, batch_rows: int) -> Iterator[pa.Table]:
    postgresql = reader.engine.dialect.name == "postgresql"
    fields = [pa.field("id", pa.int64(), False), pa.field("occurred_at", pa.int64(), False),
              pa.field("event_id", pa.string(), False), pa.field("user_id", pa.string(), False),
              pa.field("item_id", pa.string(), False), pa.field("event", pa.string(), False),
              pa.field("impression_id", pa.string(), True),
              pa.field("received_at", pa.int64(), False)]
    select = ("SELECT it.id, it.occurred_at, it.event_key, it.user_id, it.item_id, "
              "it.event_type, it.impression_key, it.received_at")
    if postgresql:  # ADBC reads float8 as double, exactly
        fields.append(pa.field("value", pa.float64(), True))
        select += ", it.value"
    columns = pa.schema(fields)

    def read(after):
        return reader.read(f"{select} FROM interaction it "
                           + _keyset("it", "occurred_at", "", after, batch_rows), columns)

    for table in _pages(read, "occurred_at", batch_rows):
        value = table["value"] if postgresql else _sqlite_values(reader.engine, table)
        yield pa.table({
            "event_id": table["event_id"], "user_id": table["user_id"],
            "item_id": table["item_id"], "event": table["event"], "value": value,
            "occurred_at": table["occurred_at"].cast(TIMESTAMP),
            "impression_id": table["impression_id"],
            "received_at": table["received_at"].cast(TIMESTAMP),
        }, schema=INTERACTIONS)


def _sqlite_values(engine: sa.Engine, table: pa.Table) -> pa.Array:
    """The ``value`` of a batch's interactions (SQLite), read through the driver: the
    non-null values of the batch's time span, matched by id."""
    ids = table["id"].to_numpy()
    low, high = table["occurred_at"][0].as_py(), table["occurred_at"][-1].as_py()
    with transaction(engine) as conn:
        rows = conn.exec_driver_sql(
            "SELECT id, value FROM interaction WHERE value IS NOT NULL "
            f"AND occurred_at >= {int(low)} AND occurred_at <= {int(high)}").all()
    out = np.full(ids.size, np.nan)
    present = np.zeros(ids.size, dtype=bool)
    if rows:
        found = np.array([r[0] for r in rows], dtype=np.int64)
        values = np.array([r[1] for r in rows], dtype=np.float64)
        order = np.argsort(ids)
        at = np.searchsorted(ids, found, sorter=order).clip(0, ids.size - 1)
        hit = ids[order[at]] == found
        out[order[at[hit]]] = values[hit]
        present[order[at[hit]]] = True
    return pa.array(out, pa.float64(), mask=~present)


def _json_doubles(texts: pa.ChunkedArray) -> pa.Array:
    """JSON arrays of numbers (SQLite's stored scores, written by ``repr``) as
    ``list<double>``; null stays null.

    >>> _json_doubles(pa.chunked_array([['[0.5, 1e-05]', '[]', None, '[3]']])).to_pylist()
    [[0.5, 1e-05], [], None, [3.0]]
    """
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    if len(texts) == 0:
        return pa.array([], _SCORES)
    texts = pc.if_else(pc.equal(texts, "null"), pa.scalar(None, pa.string()), texts)
    inner = pc.utf8_trim_whitespace(pc.utf8_slice_codeunits(texts, 1, -1))
    empty = pc.equal(inner, "")
    parts = pc.if_else(empty, pa.scalar(None, pa.string()), inner)
    split = pc.split_pattern(parts, ",")
    values = pc.utf8_trim_whitespace(split.flatten()).cast(pa.float64())
    sizes = pc.if_else(empty, 0, pc.list_value_length(split)).fill_null(0)
    offsets = np.concatenate([[0], np.cumsum(sizes.to_numpy(zero_copy_only=False))])
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, type=_SCORES,
                                    mask=texts.is_null())


def _no_json_null(texts: pa.ChunkedArray) -> pa.ChunkedArray:
    """A context stored as JSON ``null`` is no context."""
    return pc.if_else(pc.equal(texts, "null"), pa.scalar(None, pa.string()), texts)


# ------------------------------------------------------------------ writing


def _day_runs(table: pa.Table, time: str) -> Iterator[tuple[int, pa.Table]]:
    """The runs of rows of one UTC day (``table`` in time order): (day number, rows)."""
    days = table[time].cast(pa.int64()).to_numpy() // _DAY_US
    starts = np.concatenate([[0], np.flatnonzero(np.diff(days)) + 1, [days.size]])
    for begin, end in zip(starts[:-1], starts[1:], strict=True):
        yield int(days[begin]), table.slice(begin, end - begin)


def _day_folder(folder: Path, day: int) -> Path:
    return folder / f"day={np.datetime64(day, 'D')}"


def _write_days(batches: Iterator[pa.Table], folder: Path, time: str,
                part: int) -> tuple[int, int]:
    """Append each batch (in time order) to the file of its UTC day, one file open at a
    time; the rows and files written."""
    rows = files = 0
    writer, open_day = None, None
    try:
        for table in batches:
            for day, run in _day_runs(table, time):
                if day != open_day:
                    if writer is not None:
                        writer.close()
                    path = _day_folder(folder, day) / f"part-{part}.parquet"
                    path.parent.mkdir(exist_ok=True)
                    writer, open_day = pq.ParquetWriter(path, table.schema), day
                    files += 1
                writer.write_table(run)
            rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    return rows, files


class _Buckets:
    """Writing a log bucketed by user: a file per (UTC day, bucket), the day's files open
    together, each bucket's rows buffered into row groups of up to ``batch_rows``."""

    def __init__(self, buckets: int, batch_rows: int) -> None:
        self.buckets, self.batch_rows = buckets, batch_rows

    def write_days(self, batches: Iterator[pa.Table], folder: Path, time: str,
                   part: int) -> tuple[int, int]:
        """Like :func:`_write_days`, each row into its user's bucket's file."""
        rows = files = 0
        self.writers: dict[int, pq.ParquetWriter] = {}
        self.pending: dict[int, list[pa.Table]] = {}
        open_day = None
        try:
            for table in batches:
                for day, run in _day_runs(table, time):
                    if day != open_day:
                        files += self._close()
                        open_day, self.folder = day, _day_folder(folder, day)
                        self.name, self.schema = f"part-{part}.parquet", table.schema
                    self._add(run)
                rows += table.num_rows
        finally:
            files += self._close()
        return rows, files

    def _add(self, run: pa.Table) -> None:
        bucket = user_bucket(run["user_id"], self.buckets)
        order = np.argsort(bucket, kind="stable")
        run, bucket = run.take(order), bucket[order]
        starts = np.concatenate([[0], np.flatnonzero(np.diff(bucket)) + 1, [bucket.size]])
        for begin, end in zip(starts[:-1], starts[1:], strict=True):
            mine = int(bucket[begin])
            self.pending.setdefault(mine, []).append(run.slice(begin, end - begin))
            if sum(t.num_rows for t in self.pending[mine]) >= self.batch_rows:
                self._flush(mine)
        if sum(t.num_rows for p in self.pending.values() for t in p) \
                > BUFFERED * self.batch_rows:
            for mine in list(self.pending):
                self._flush(mine)

    def _flush(self, bucket: int) -> None:
        parts = self.pending.pop(bucket, [])
        if not parts:
            return
        if bucket not in self.writers:
            path = self.folder / f"bucket={bucket}" / self.name
            path.parent.mkdir(parents=True, exist_ok=True)
            schema = self.schema.with_metadata(bucket_metadata(bucket, self.buckets))
            self.writers[bucket] = pq.ParquetWriter(path, schema)
        self.writers[bucket].write_table(pa.concat_tables(parts))

    def _close(self) -> int:
        """Write what is buffered, close the day's files; how many there were."""
        try:
            for bucket in list(self.pending):
                self._flush(bucket)
        finally:
            for writer in self.writers.values():
                writer.close()
        opened, self.writers, self.pending = len(self.writers), {}, {}
        return opened
