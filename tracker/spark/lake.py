"""Reading the lake (:mod:`tracker.lake.layout`) into Spark, with the database's semantics.

**Files.** Every file under the directory, partition folders (``day=.../``) allowed; names
starting with ``_`` or ``.`` (``_SUCCESS``, ``.part.crc``, ``_temporary/``) are skipped, as
Spark and Hadoop skip them. Each file's footer is checked in the driver before anything runs
(pyarrow: local paths and the URIs ``pyarrow.fs`` knows): extra columns are ignored, an
absent nullable column reads as null, and a missing required column, a column of another
type, or a file that is not Parquet is a :class:`LakeError` naming the file and the column.
A null in a required column fails the Spark job that meets it, naming the column and file;
a column whose every footer gives a null count of 0 is read as it is (no check per row, and
Spark can push a filter on it down to the files' statistics).

**Duplicates and conflicts** (as the database treats a client id, ``impression_id`` /
``event_id``): rows with the same id and the same payload (every other column) count once;
when an id comes with different payloads, one is kept and the id is reported as a conflict.
The database keeps the payload stored first; a lake has no arrival order, so *first* here is
a deterministic order that does not depend on file names, partitioning or the number of
tasks: the earliest ``served_at`` / ``occurred_at``, then the smallest payload in Spark's
ordering of the columns in layout order (strings by code point, lists element by element,
nulls first). ``received_at`` is no payload: of rows with equal payloads the earliest
receipt is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tracker.errors import TrackerError
from tracker.lake.layout import BUCKET, BUCKETS, IDS, RECEIVED, SCHEMAS, TIMES

SAMPLE = 10
"""How many conflicting ids a read reports by name."""


class LakeError(TrackerError):
    """A lake file that does not fit the layout: which file, which column, what is wrong."""


@dataclass(frozen=True)
class LakeLog:
    """One log read from the lake: ``rows`` (a DataFrame with the layout's columns, one row
    per id), how many rows the files held, how many repeated an id with the same payload
    (dropped), and the ids that came with different payloads (``conflicts`` of them; the
    first ``sample`` in id order); ``null_columns``: the nullable columns that every
    file's footer proves hold only nulls (or that no file has); ``bucketing``: the files
    of each user bucket when every file's footer names its bucket, of one count
    (:mod:`tracker.lake.layout`), else None."""

    rows: DataFrame
    files: int
    rows_read: int
    duplicates: int
    conflicts: int
    conflict_sample: tuple[str, ...]
    null_columns: frozenset[str] = frozenset()
    bucketing: Bucketing | None = None


@dataclass(frozen=True)
class Bucketing:
    """A log bucketed by user: ``count`` buckets, ``files`` of each (absent: none)."""

    count: int
    files: dict[int, tuple[str, ...]]


@dataclass(frozen=True)
class Lake:
    """Both logs of a lake."""

    impressions: LakeLog
    interactions: LakeLog


def read_lake(spark: SparkSession, impressions: str | Path, interactions: str | Path, *,
              sample: int = SAMPLE) -> Lake:
    """The impressions and interactions under these directories, deduplicated (module
    docstring). Counting duplicates and conflicts reads each log once."""
    return Lake(read_log(spark, impressions, "impressions", sample=sample),
                read_log(spark, interactions, "interactions", sample=sample))


def read_log(spark: SparkSession, directory: str | Path, kind: str, *,
             sample: int = SAMPLE) -> LakeLog:
    """One log (``kind``: ``"impressions"`` or ``"interactions"``) under ``directory``."""
    if kind not in SCHEMAS:
        raise ValueError(f"kind must be one of {', '.join(SCHEMAS)}, got {kind!r}")
    files, footers = checked_footers(directory, kind)
    schema = spark_schema(SCHEMAS[kind])
    if files:
        raw = spark.read.schema(schema).parquet(*files)
        raw = raw.select(*_required(SCHEMAS[kind], footers.no_nulls))
    else:
        raw = spark.createDataFrame([], schema)
    log = _deduplicated(raw, kind, len(files), sample)
    return replace(log, null_columns=footers.only_nulls, bucketing=footers.bucketing)


def lake_files(directory: str | Path) -> tuple[pafs.FileSystem, list[str]]:
    """The file system of ``directory`` and every file under it (hidden ones skipped),
    sorted; a :class:`LakeError` when it is no directory."""
    text = str(directory)
    if "://" in text:
        fs, root = pafs.FileSystem.from_uri(text)
    else:
        fs, root = pafs.LocalFileSystem(), str(Path(text).resolve())
    if fs.get_file_info(root).type != pafs.FileType.Directory:
        raise LakeError(f"{directory}: no such directory")
    found = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    files = [info.path for info in found if info.type == pafs.FileType.File
             and not _hidden(info.path[len(root):])]
    return fs, sorted(files)


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/") if part)


@dataclass(frozen=True)
class Footers:
    """What the footers of every file of a log prove: the required columns free of nulls
    (each row group's null count is 0) and the nullable columns holding only nulls (each
    row group's null count is its row count, or the file lacks the column). A column a
    footer says nothing about (no statistics) is in neither."""

    no_nulls: frozenset[str]
    only_nulls: frozenset[str]
    bucketing: Bucketing | None = None


def checked_files(directory: str | Path, kind: str) -> list[str]:
    """The files of one log, each checked against the layout (module docstring); their
    paths as Spark reads them."""
    return checked_footers(directory, kind)[0]


def checked_footers(directory: str | Path, kind: str) -> tuple[list[str], Footers]:
    """:func:`checked_files`, and what their footers prove (:class:`Footers`)."""
    fs, files = lake_files(directory)
    flat = [f.name for f in SCHEMAS[kind] if not pa.types.is_list(f.type)]
    no_nulls = {name for name in flat if not SCHEMAS[kind].field(name).nullable}
    only_nulls = set(flat) - no_nulls
    buckets: dict[str, tuple[int, int] | None] = {}
    for path in files:
        try:
            meta = pq.read_metadata(path, filesystem=fs)
            found = meta.schema.to_arrow_schema()
        except (pa.ArrowInvalid, OSError) as error:
            raise LakeError(f"{path}: not a Parquet file ({error})") from None
        _check_columns(path, found, kind)
        _check_nulls(path, meta, kind)
        nulls = _null_counts(meta)
        no_nulls &= {name for name, (count, rows) in nulls.items() if count == 0}
        only_nulls &= {name for name, (count, rows) in nulls.items() if count == rows} \
            | (set(flat) - set(found.names))
        buckets[path] = _bucket(meta)
    if not isinstance(fs, pafs.LocalFileSystem):
        files = [f"{fs.type_name}://{path}" for path in files]
        buckets = {f"{fs.type_name}://{path}": b for path, b in buckets.items()}
    return files, Footers(frozenset(no_nulls), frozenset(only_nulls), _bucketing(buckets))


def _bucket(meta: pq.FileMetaData) -> tuple[int, int] | None:
    """(bucket, count) a file's footer names, or None (not bucketed, or not sensibly)."""
    found = meta.metadata or {}
    try:
        bucket, count = int(found[BUCKET]), int(found[BUCKETS])
    except (KeyError, ValueError):
        return None
    return (bucket, count) if 0 <= bucket < count else None


def _bucketing(buckets: dict[str, tuple[int, int] | None]) -> Bucketing | None:
    """The log's :class:`Bucketing` when every file names a bucket of one count."""
    counts = {b[1] if b else None for b in buckets.values()}
    if len(counts) != 1 or None in counts:
        return None
    files: dict[int, tuple[str, ...]] = {}
    for path, (bucket, _) in sorted(buckets.items()):
        files[bucket] = (*files.get(bucket, ()), path)
    return Bucketing(counts.pop(), files)


def _null_counts(meta: pq.FileMetaData) -> dict[str, tuple[int, int]]:
    """Per top-level column of a file: (nulls, rows) summed over its row groups, for the
    columns whose every row group's statistics give a null count."""
    out = {}
    for index in range(meta.num_columns):
        path = meta.schema.column(index).path
        nulls = 0
        for group in range(meta.num_row_groups):
            stats = meta.row_group(group).column(index).statistics
            if stats is None or not stats.has_null_count:
                break
            nulls += stats.null_count
        else:
            out[path] = (nulls, meta.num_rows)
    return out


def _check_columns(path: str, found: pa.Schema, kind: str) -> None:
    layout = SCHEMAS[kind]
    for field in layout:
        if field.name not in found.names:
            if field.nullable:
                continue
            required = ", ".join(f.name for f in layout if not f.nullable)
            raise LakeError(f"{path}: required column {field.name!r} is missing ({kind} "
                            f"need {required})")
        problem = _type_problem(found.field(field.name).type, field.type)
        if problem:
            raise LakeError(f"{path}: column {field.name!r} {problem}")


def _check_nulls(path: str, meta: pq.FileMetaData, kind: str) -> None:
    """A required (non-list) column that the footer's statistics say holds a null: a
    :class:`LakeError` before any job runs. (Without statistics, or in a list column,
    the job that reads the null fails instead, naming the column and file.)"""
    required = {f.name for f in SCHEMAS[kind] if not f.nullable
                and not pa.types.is_list(f.type)}
    for index in range(meta.num_columns):
        column = meta.schema.column(index)
        if column.path not in required:
            continue
        for group in range(meta.num_row_groups):
            stats = meta.row_group(group).column(index).statistics
            if stats is not None and stats.has_null_count and stats.null_count:
                raise LakeError(f"lake: required column {column.path!r} is null in {path} "
                                f"({stats.null_count} row(s) of row group {group})")


def _type_problem(found: pa.DataType, wanted: pa.DataType) -> str | None:
    """Why a file's column type does not read as the layout's, or None when it does
    (string or large string; list or large list; a timestamp in µs or ms with a time zone,
    i.e. a UTC instant)."""
    if pa.types.is_dictionary(found):
        found = found.value_type
    if pa.types.is_timestamp(wanted):
        if not pa.types.is_timestamp(found) or found.unit not in ("ms", "us"):
            return f"is {_named(found)}, expected a timestamp in microseconds, UTC ({wanted})"
        if found.tz is None:
            return (f"is {found}, a timestamp without time zone; expected a UTC instant "
                    f"({wanted}, Parquet isAdjustedToUTC)")
        return None
    if pa.types.is_list(wanted):
        if ((pa.types.is_list(found) or pa.types.is_large_list(found))
                and _type_problem(found.value_type, wanted.value_type) is None):
            return None
        return f"is {_named(found)}, expected {_named(wanted)}"
    if pa.types.is_string(wanted) and (pa.types.is_string(found)
                                       or pa.types.is_large_string(found)):
        return None
    return None if found == wanted else f"is {_named(found)}, expected {_named(wanted)}"


def _named(kind: pa.DataType) -> str:
    """A type as the layout names it: ``list<string>`` whatever its element's field name.

    >>> _named(pa.list_(pa.field("element", pa.float64())))
    'list<double>'
    """
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return f"list<{_named(kind.value_type)}>"
    return str(kind)


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark schema of a layout schema (every field nullable: Spark reads a file's
    absent column as null; the required ones are checked as they are read)."""
    return T.StructType([T.StructField(f.name, _spark_type(f.type), True) for f in schema])


def _spark_type(kind: pa.DataType) -> T.DataType:
    if pa.types.is_list(kind):
        return T.ArrayType(_spark_type(kind.value_type), True)
    if pa.types.is_timestamp(kind):
        return T.TimestampType()
    if pa.types.is_floating(kind):
        return T.DoubleType()
    if pa.types.is_string(kind):
        return T.StringType()
    raise TypeError(f"no Spark type for {kind}")


def _required(schema: pa.Schema, no_nulls: frozenset[str] = frozenset()) -> list:
    """The columns in layout order, a required one failing the job at its first null with
    the column and the file named (lazily: no extra pass over the data), unless the
    footers prove it free of nulls (``no_nulls``)."""
    columns = []
    for field in schema:
        column = F.col(field.name)
        if not field.nullable and field.name not in no_nulls:
            message = F.concat(F.lit(f"lake: required column {field.name!r} is null in "),
                               F.input_file_name())
            column = F.coalesce(column, F.raise_error(message))
        columns.append(column.alias(field.name))
    return columns


def _deduplicated(raw: DataFrame, kind: str, files: int, sample: int) -> LakeLog:
    """One row per id (the first, module docstring) and the counts.

    Most ids come once: only the rows of ids seen more than once are ranked by a window;
    the others pass through without a sort. Repeated ids are found from a shuffle of the
    ids' 64-bit hashes (a long is cheaper to hash, shuffle and count than a string): an id
    whose hash comes once comes once, so only the rows under a repeated hash (every
    repeated id, and the rare ids that share a hash with another) are counted by id."""
    key, time = IDS[kind], TIMES[kind]
    payload = [name for name in SCHEMAS[kind].names if name not in (key, RECEIVED)]
    per_hash = raw.select(F.xxhash64(key).alias("_hash")).groupBy("_hash").agg(
        F.count(F.lit(1)).alias("_n"))
    found = per_hash.agg(F.sum("_n").alias("rows"),
                         F.count(F.when(F.col("_n") > 1, 1)).alias("repeated")).first()
    total = found["rows"] or 0
    if not found["repeated"]:  # a sound log: every row is its id's only one
        return LakeLog(raw, files, int(total), 0, 0, ())
    suspects = F.broadcast(per_hash.where(F.col("_n") > 1).select("_hash"))
    per_id = (raw.withColumn("_hash", F.xxhash64(key)).join(suspects, "_hash", "left_semi")
              .groupBy(key).agg(F.count(F.lit(1)).alias("_n")))
    # few in a sound log: kept for the run, and broadcast to the joins below
    repeated = F.broadcast(per_id.where(F.col("_n") > 1).select(key).persist())
    order = [F.col(time).asc_nulls_first(), *(F.col(c).asc_nulls_first() for c in payload)]
    ordered = Window.partitionBy(key).orderBy(*order)
    # the receipt time is no payload: of equal payloads the earliest receipt is kept
    received = F.coalesce(F.col(RECEIVED), F.col(time)).asc()
    ranked = (raw.join(repeated, key, "left_semi")
              .withColumn("_row", F.row_number().over(
                  Window.partitionBy(key).orderBy(*order, received)))
              .withColumn("_payload", F.dense_rank().over(ordered)))
    counts = ranked.agg(
        F.sum(F.when((F.col("_row") > 1) & (F.col("_payload") == 1), 1).otherwise(0))
        .alias("duplicates"),
        F.count_distinct(F.when(F.col("_payload") > 1, F.col(key))).alias("conflicts"),
    ).first()
    conflicts = int(counts["conflicts"])
    names: tuple[str, ...] = ()
    if conflicts and sample > 0:
        found = (ranked.where(F.col("_payload") == 2).select(key).distinct()
                 .orderBy(key).limit(sample).collect())
        names = tuple(row[key] for row in found)
    rows = raw.join(repeated, key, "left_anti").unionByName(
        ranked.where(F.col("_row") == 1).drop("_row", "_payload"))
    return LakeLog(rows, files, int(total), int(counts["duplicates"] or 0), conflicts, names)
