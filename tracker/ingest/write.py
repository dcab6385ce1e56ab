"""The logging write path shared by the SDK, the file importer and the HTTP collector.

validate every record → drop in-batch repeats → insert the new ids in one transaction per
batch → classify the ids that were already stored as duplicates (same payload) or conflicts
(different payload; the stored version is kept).

Speed (figures in benchmarks/README.md, "Bulk ingest"): impression batches are validated a
column at a time (:mod:`tracker.ingest.columnar`; rows that are not plainly clean fall back to
the per-record rules, so the outcome is the same); a batch is written on a background thread
while the next one is validated; on PostgreSQL a batch of fresh ids is COPYed straight into
the table (:func:`tracker.store.bulk.copy_new`), with the staged ``ON CONFLICT`` insert only
when some ids are stored already. Each batch is one unit of work, run again after a transient
failure (:func:`tracker.store.db.retried`); storing by id makes that safe.

A call never stops on a record: every record that breaks a rule of
:mod:`tracker.ingest.validate` (a ``None`` or non-mapping record and an unreadable file line
included) becomes one :class:`~tracker.ingest.result.Rejection` (index, id cut to a bounded
prefix, field, reason), and the records around it are judged on their own.

``on_invalid``: ``"skip"`` stores the valid records and reports the rejected ones;
``"all_or_nothing"`` stores nothing when any record is invalid (the collector answers 422 and
a single SDK call raises).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from tracker.config import Settings
from tracker.errors import ValidationError
from tracker.ingest.columnar import ColumnChunk, impression_rows
from tracker.ingest.frames import FrameRecords
from tracker.ingest.result import IngestResult, Rejection
from tracker.ingest.validate import (
    IMPRESSION_COLUMNS,
    IMPRESSION_FIELDS,
    INTERACTION_COLUMNS,
    ImpressionNormalizer,
    InteractionNormalizer,
    Limits,
    Reject,
    Unreadable,
    is_clean_text,
    shown_id,
)
from tracker.store import bulk
from tracker.store.db import in_transaction, retried, transaction
from tracker.store.experiments import find_impression_experiments, list_experiments
from tracker.store.models import Impression, Interaction

ON_INVALID = ("skip", "all_or_nothing")


def now_micros() -> int:
    return time.time_ns() // 1000


class _Kind:
    def __init__(self, name: str, table: sa.Table, columns: tuple[str, ...], id_field: str):
        self.name = name
        self.table = table
        self.columns = columns
        self.key = columns[0]
        self.id_field = id_field
        self.received_at = columns.index("received_at")
        self.payload = [i for i in range(1, len(columns)) if i != self.received_at]
        self.payload_columns = [columns[i] for i in self.payload]


IMPRESSIONS = _Kind("impressions", Impression.__table__, IMPRESSION_COLUMNS, "impression_id")
INTERACTIONS = _Kind("interactions", Interaction.__table__, INTERACTION_COLUMNS, "event_id")


def log_impressions(engine: sa.Engine, settings: Settings, records: Iterable[Mapping[str, Any]],
                    *, on_invalid: str = "skip", require_id: bool = True,
                    micros_ok: bool = False,
                    progress: Callable[[int], None] | None = None) -> IngestResult:
    """Validate and store impression records (see :mod:`tracker.ingest.validate`)."""
    now = now_micros()
    experiments = in_transaction(engine, list_experiments)
    normalize = ImpressionNormalizer(experiments, Limits.from_settings(settings), now, require_id)
    return _log(engine, settings, IMPRESSIONS, records, normalize, on_invalid, micros_ok,
                progress)


def log_interactions(engine: sa.Engine, settings: Settings, records: Iterable[Mapping[str, Any]],
                     *, on_invalid: str = "skip", require_id: bool = True,
                     micros_ok: bool = False,
                     progress: Callable[[int], None] | None = None) -> IngestResult:
    """Validate and store interaction records (see :mod:`tracker.ingest.validate`)."""
    now = now_micros()
    experiments = in_transaction(engine, list_experiments)
    limits = Limits.from_settings(settings)

    def make_normalizer(chunk: list[Mapping[str, Any]]) -> InteractionNormalizer:
        named = [r.get("impression_id") for r in chunk if isinstance(r, Mapping)]
        named = [k for k in named if isinstance(k, str) and is_clean_text(k)]
        found: dict[str, int] = {}
        if named and any(e.relevance is not None for e in experiments):
            found = in_transaction(engine, lambda conn: find_impression_experiments(conn, named))
        return InteractionNormalizer(experiments, limits, now, require_id, found)

    return _log(engine, settings, INTERACTIONS, records, make_normalizer, on_invalid, micros_ok,
                progress, per_chunk=True)


def _chunks(records: Iterable[Mapping[str, Any]], size: int) -> Iterator[list]:
    chunk: list = []
    for record in records:
        chunk.append(record)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Automatic garbage collection off for the duration of a call.

    A batch allocates hundreds of thousands of tuples and lists, none of them in a reference
    cycle; each allocation burst triggers collections that walk every live object (the
    caller's records included): measured ~25% of the CPU time of a bulk call. Collection
    resumes afterwards (unless the caller had it off), so nothing is leaked.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _with_last(items: Iterable) -> Iterator[tuple[Any, bool]]:
    """Each item with whether it is the last one."""
    iterator = iter(items)
    try:
        current = next(iterator)
    except StopIteration:
        return
    for following in iterator:
        yield current, False
        current = following
    yield current, True


def _batches(kind: _Kind, records, size: int) -> Iterator[list | ColumnChunk]:
    """Batches of ``size`` records; impressions as columns (see :mod:`.columnar`)."""
    if kind is not IMPRESSIONS:
        yield from _chunks(records, size)
    elif isinstance(records, FrameRecords):
        yield from records.column_chunks(size, IMPRESSION_FIELDS)
    else:
        for chunk in _chunks(records, size):
            yield ColumnChunk.from_records(chunk, IMPRESSION_FIELDS)


def _log(engine, settings, kind: _Kind, records, normalize, on_invalid, micros_ok, progress,
         per_chunk: bool = False) -> IngestResult:
    if on_invalid not in ON_INVALID:
        raise ValidationError(f"must be one of {', '.join(ON_INVALID)}, got {on_invalid!r}",
                              field="on_invalid")
    result = IngestResult(kind.name)
    pending: list[tuple[int, list[tuple], IngestResult]] = []
    offset = 0
    with _gc_paused(), _Writer(engine, kind) as writer:
        for chunk, last in _with_last(_batches(kind, records, settings.batch_size)):
            normalizer = normalize(chunk) if per_chunk else normalize
            rows, part = _normalize_chunk(kind, chunk, normalizer, micros_ok)
            if on_invalid == "all_or_nothing":
                pending.append((offset, rows, part))
            else:
                writer.submit(rows, part, offset, len(chunk), result, progress, last)
            offset += len(chunk)
        if on_invalid == "all_or_nothing":
            if any(part.rejected for _, _, part in pending):
                for chunk_offset, _, part in pending:
                    result.rejected.extend(
                        Rejection(r.index + chunk_offset, r.id, r.field, r.reason)
                        for r in part.rejected)
                return result
            for n, (chunk_offset, rows, part) in enumerate(pending, 1):
                writer.submit(rows, part, chunk_offset, 0, result, None, n == len(pending))
    return result


class _Writer:
    """Writes batches on a background thread while the caller validates the next one.

    The database's share of a batch (COPY, the insert, the round trips) runs while Python
    validates the following batch; at most one batch is in flight, batches are written in
    order, and the first error stops the run and is raised to the caller (earlier batches
    stay stored, as with one transaction per batch anyway).
    """

    def __init__(self, engine, kind: _Kind):
        self.engine = engine
        self.kind = kind
        self.pool: ThreadPoolExecutor | None = None  # started with the first batch of several
        self.flight: Future | None = None

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self._land()
            elif self.flight is not None:
                self.flight.cancel()
                wait([self.flight])
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True)

    def submit(self, rows, part, offset, size, result, progress, last: bool) -> None:
        """Write a batch; the last one (often the only one: a single call) on this thread,
        since nothing is left to validate meanwhile."""
        # encoding is Python work: done here, while the previous batch is in the database
        prepared = bulk.prepare(self.engine.dialect.name, self.kind.table, self.kind.columns,
                                rows, self.kind.key) if rows else None
        self._land()
        self.landing = (part, offset, size, result, progress)
        if last:
            _write(self.engine, self.kind, rows, part, prepared)
            self._merge()
            return
        if self.pool is None:
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracker-writer")
        self.flight = self.pool.submit(_write, self.engine, self.kind, rows, part, prepared)

    def _land(self) -> None:
        if self.flight is None:
            return
        flight, self.flight = self.flight, None
        flight.result()  # re-raises the writer's error here
        self._merge()

    def _merge(self) -> None:
        part, offset, size, result, progress = self.landing
        result.merge(part, offset)
        if progress and size:
            progress(size)


def _normalize_chunk(kind: _Kind, chunk, normalize, micros_ok) -> tuple[list[tuple], IngestResult]:
    part = IngestResult(kind.name)
    if isinstance(chunk, ColumnChunk):  # the clean rows are normalised a column at a time
        candidates = impression_rows(chunk, normalize, micros_ok)
        record_at = chunk.record
        if None not in candidates and len({row[0] for row in candidates}) == len(candidates):
            return candidates, part
    else:
        candidates = [None] * len(chunk)
        record_at = chunk.__getitem__
    rows: dict[str, tuple] = {}
    payload = kind.payload
    for index, row in enumerate(candidates):
        if row is None:  # the per-record rules judge it
            record = record_at(index)
            try:
                if isinstance(record, Unreadable):
                    raise Reject(None, record.reason)
                row = normalize(record, micros_ok)
            except Reject as reject:
                raw_id = record.get(kind.id_field) if isinstance(record, Mapping) else None
                part.rejected.append(Rejection(index, shown_id(raw_id), reject.field,
                                               reject.reason))
                continue
        first = rows.get(row[0])
        if first is None:
            rows[row[0]] = row
        elif all(first[i] == row[i] for i in payload):
            part.duplicates += 1
        else:
            part.conflict_ids.append(row[0])
    return list(rows.values()), part


@dataclass(frozen=True)
class _Written:
    """What storing one batch found: the rows whose key was stored already (not inserted),
    and the payloads stored under those keys."""

    missing: list[tuple]
    stored: dict[str, tuple]


def _write(engine, kind: _Kind, rows: list[tuple], part: IngestResult,
           prepared: bulk.Prepared | None = None) -> None:
    """Store a batch and count it into ``part``. The batch is one unit of work, run again after
    a transient failure (a deadlock, a lost connection: :func:`tracker.store.db.retried`):
    inserting by key is idempotent, and the counts come from the attempt that committed."""
    if not rows:
        return
    prepared = prepared or bulk.prepare(engine.dialect.name, kind.table, kind.columns, rows,
                                        kind.key)
    written = retried(engine, lambda: _write_once(engine, kind, rows, prepared))
    part.stored += len(rows) - len(written.missing)
    for row in written.missing:
        existing = written.stored.get(row[0])
        if existing is not None and existing == tuple(row[i] for i in kind.payload):
            part.duplicates += 1
        else:
            part.conflict_ids.append(row[0])


def _write_once(engine, kind: _Kind, rows: list[tuple], prepared: bulk.Prepared) -> _Written:
    if engine.dialect.name == "postgresql":  # fresh ids (the common case): straight in
        try:
            with transaction(engine, write=True) as conn:
                bulk.copy_new(conn, kind.table, kind.columns, prepared)
        except bulk.KeysTaken:
            pass  # rolled back: some ids are stored already; sort them out below
        else:
            return _Written([], {})
    with transaction(engine, write=True) as conn:
        inserted = bulk.insert_new(conn, kind.table, kind.columns, kind.key, rows, prepared)
        if len(inserted) == len(rows):
            return _Written([], {})
        inserted_set = set(inserted)
        missing = [row for row in rows if row[0] not in inserted_set]
        stored = bulk.fetch_by_keys(conn, kind.table, kind.payload_columns, kind.key,
                                    [row[0] for row in missing])
    return _Written(missing, stored)
