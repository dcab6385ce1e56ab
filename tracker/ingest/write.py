"""The logging write path shared by the SDK, the file importer and the HTTP collector.

validate every record → drop in-batch repeats → insert the new ids in one transaction per
batch → classify the ids that were already stored as duplicates (same payload) or conflicts
(different payload; the stored version is kept).

``on_invalid``: ``"skip"`` stores the valid records and reports the rejected ones;
``"all_or_nothing"`` stores nothing when any record is invalid (the collector answers 422 and
a single SDK call raises).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import sqlalchemy as sa

from tracker.config import Settings
from tracker.ingest.result import IngestResult, Rejection
from tracker.ingest.validate import (
    IMPRESSION_COLUMNS,
    INTERACTION_COLUMNS,
    ImpressionNormalizer,
    InteractionNormalizer,
    Limits,
    Reject,
    Unreadable,
)
from tracker.store import bulk
from tracker.store.db import transaction
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
    with transaction(engine) as conn:
        experiments = list_experiments(conn)
    normalize = ImpressionNormalizer(experiments, Limits.from_settings(settings), now, require_id)
    return _log(engine, settings, IMPRESSIONS, records, normalize, on_invalid, micros_ok,
                progress)


def log_interactions(engine: sa.Engine, settings: Settings, records: Iterable[Mapping[str, Any]],
                     *, on_invalid: str = "skip", require_id: bool = True,
                     micros_ok: bool = False,
                     progress: Callable[[int], None] | None = None) -> IngestResult:
    """Validate and store interaction records (see :mod:`tracker.ingest.validate`)."""
    now = now_micros()
    with transaction(engine) as conn:
        experiments = list_experiments(conn)
    limits = Limits.from_settings(settings)

    def make_normalizer(chunk: list[Mapping[str, Any]]) -> InteractionNormalizer:
        named = [r.get("impression_id") for r in chunk]
        named = [k for k in named if isinstance(k, str)]
        found: dict[str, int] = {}
        if named and any(e.relevance is not None for e in experiments):
            with transaction(engine) as conn:
                found = find_impression_experiments(conn, named)
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


def _log(engine, settings, kind: _Kind, records, normalize, on_invalid, micros_ok, progress,
         per_chunk: bool = False) -> IngestResult:
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be one of {ON_INVALID}, got {on_invalid!r}")
    result = IngestResult(kind.name)
    pending: list[tuple[int, list[tuple], IngestResult]] = []
    offset = 0
    with _Writer(engine, kind) as writer:
        for chunk in _chunks(records, settings.batch_size):
            normalizer = normalize(chunk) if per_chunk else normalize
            rows, part = _normalize_chunk(kind, chunk, normalizer, micros_ok)
            if on_invalid == "all_or_nothing":
                pending.append((offset, rows, part))
            else:
                writer.submit(rows, part, offset, len(chunk), result, progress)
            offset += len(chunk)
        if on_invalid == "all_or_nothing":
            if any(part.rejected for _, _, part in pending):
                for chunk_offset, _, part in pending:
                    result.rejected.extend(
                        Rejection(r.index + chunk_offset, r.id, r.field, r.reason)
                        for r in part.rejected)
                return result
            for chunk_offset, rows, part in pending:
                writer.submit(rows, part, chunk_offset, 0, result, None)
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
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracker-writer")
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
            self.pool.shutdown(wait=True)

    def submit(self, rows, part, offset, size, result, progress) -> None:
        # encoding is Python work: done here, while the previous batch is in the database
        prepared = bulk.prepare(self.engine.dialect.name, self.kind.table, self.kind.columns,
                                rows) if rows else None
        self._land()

        def job() -> None:
            _write(self.engine, self.kind, rows, part, prepared)

        self.flight = self.pool.submit(job)
        self.landing = (part, offset, size, result, progress)

    def _land(self) -> None:
        if self.flight is None:
            return
        flight, self.flight = self.flight, None
        flight.result()  # re-raises the writer's error here
        part, offset, size, result, progress = self.landing
        result.merge(part, offset)
        if progress and size:
            progress(size)


def _normalize_chunk(kind: _Kind, chunk, normalize, micros_ok) -> tuple[list[tuple], IngestResult]:
    part = IngestResult(kind.name)
    rows: dict[str, tuple] = {}
    payload = kind.payload
    for index, record in enumerate(chunk):
        try:
            if isinstance(record, Unreadable):
                raise Reject(None, record.reason)
            if not isinstance(record, Mapping):
                raise Reject(None, f"a record must be a mapping, got {type(record).__name__}")
            row = normalize(record, micros_ok)
        except Reject as reject:
            raw_id = record.get(kind.id_field) if isinstance(record, Mapping) else None
            part.rejected.append(Rejection(index, raw_id if isinstance(raw_id, str) else None,
                                           reject.field, reject.reason))
            continue
        first = rows.get(row[0])
        if first is None:
            rows[row[0]] = row
        elif all(first[i] == row[i] for i in payload):
            part.duplicates += 1
        else:
            part.conflict_ids.append(row[0])
    return list(rows.values()), part


def _write(engine, kind: _Kind, rows: list[tuple], part: IngestResult,
           prepared: bulk.Prepared | None = None) -> None:
    if not rows:
        return
    with transaction(engine, write=True) as conn:
        inserted = bulk.insert_new(conn, kind.table, kind.columns, kind.key, rows, prepared)
        part.stored += len(inserted)
        if len(inserted) == len(rows):
            return
        inserted_set = set(inserted)
        missing = [row for row in rows if row[0] not in inserted_set]
        stored = bulk.fetch_by_keys(conn, kind.table, kind.payload_columns, kind.key,
                                    [row[0] for row in missing])
    for row in missing:
        existing = stored.get(row[0])
        if existing is not None and existing == tuple(row[i] for i in kind.payload):
            part.duplicates += 1
        else:
            part.conflict_ids.append(row[0])
