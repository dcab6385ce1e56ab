"""The adversarial corpus (tests/ingest/corpus.py) through every way in: a single call, a bulk
call, a DataFrame, each import format (through ``file_records``, what ``tracker import``
reads with) and the collector over HTTP. Each bad record is stored or reported with the
project's own error type, never another exception, and the valid records around it are
stored (the collector refuses a batch whole: all three or none)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from tests.collector.server import make_keys
from tests.conftest import fresh_database, migrated
from tests.helpers import impression, interaction, make_experiment
from tests.ingest.corpus import CASES, RECORD, STORED, Case
from tracker import Tracker
from tracker.config import Settings
from tracker.errors import ValidationError
from tracker.ingest.frames import file_records
from tracker.ingest.result import IngestResult
from tracker.store.models import Impression, Interaction

ID_FIELD = {"impressions": "impression_id", "interactions": "event_id"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Iterator[dict[str, Tracker]]:
    """One database per path (a stored id in one path must not be a duplicate in another),
    made on first use and kept for the module."""
    made: dict[str, Tracker] = {}
    closers = []

    def get(path: str) -> Tracker:
        if path not in made:
            context = fresh_database(tmp_path_factory.mktemp(path))
            url = migrated(context.__enter__())
            closers.append(context)
            tracker = Tracker(settings=Settings(database_url=url))
            make_experiment(tracker)
            made[path] = tracker
        return made[path]

    yield get
    for tracker in made.values():
        tracker.close()
    for context in closers:
        context.__exit__(None, None, None)


def records(case: Case, path: str) -> list[Any]:
    """A valid record, the case's record, a valid record (ids unique to the case and path)."""
    make = impression if case.kind == "impressions" else interaction
    id_field = ID_FIELD[case.kind]

    def good(n: int) -> dict:
        return make(n, **{id_field: f"{path}-{case.id}-{n}"})

    if case.whole_record:
        bad = case.value
    else:
        bad = good(1)
        if case.field in ("items", "baseline_items"):
            bad["scores"] = None  # so that the list is the record's only fault
        bad[case.field] = case.value
    return [good(0), bad, good(2)]


def stored_keys(tracker: Tracker, case: Case, keys: list[str]) -> set[str]:
    table = Impression.__table__ if case.kind == "impressions" else Interaction.__table__
    column = table.c.impression_key if case.kind == "impressions" else table.c.event_key
    with tracker.engine.connect() as conn:
        return set(conn.execute(sa.select(column).where(column.in_(keys))).scalars())


def check_bulk_outcome(tracker: Tracker, case: Case, batch: list, result: IngestResult,
                       expect: str | None) -> None:
    """Both neighbours stored; the case's record stored or rejected at index 1 (as ``expect``
    says, when given); every rejection bounded."""
    neighbours = [batch[0][ID_FIELD[case.kind]], batch[2][ID_FIELD[case.kind]]]
    assert stored_keys(tracker, case, neighbours) == set(neighbours)
    assert result.received == 3
    assert all(r.id is None or len(r.id) <= 65 for r in result.rejected)
    assert all(len(r.reason) < 500 for r in result.rejected)
    if result.rejected:
        (rejection,) = result.rejected
        assert rejection.index == 1 and result.stored == 2
        outcome = RECORD if rejection.field is None else rejection.field
    else:
        assert result.stored == 3
        outcome = STORED
    if expect is not None:
        assert outcome.startswith(expect), (outcome, expect)


def log(tracker: Tracker, case: Case, source) -> IngestResult:
    if case.kind == "impressions":
        return tracker.log_impressions(source)
    return tracker.log_interactions(source)


def cases(predicate=lambda case: True) -> list:
    return [pytest.param(case, id=case.id) for case in CASES if predicate(case)]


# ------------------------------------------------------------------------- single calls
def _single_ok(case: Case) -> bool:
    return not case.whole_record and case.field in (
        {"impression_id", "experiment", "arm", "user_id", "items", "scores", "served_at",
         "baseline_items", "context"} if case.kind == "impressions" else
        {"event_id", "user_id", "item_id", "event", "value", "occurred_at", "impression_id"})


@pytest.mark.parametrize("case", cases(_single_ok))
def test_single_call_stores_or_raises_validation_error_naming_the_field(stores, case):
    tracker = stores("single")
    record = records(case, "single")[1]
    call = tracker.log_impression if case.kind == "impressions" else tracker.log_interaction
    expect = case.expect
    if case.value is None and case.field == ID_FIELD[case.kind]:
        expect = STORED  # a single call without an id gets a random one
    if expect == STORED:
        assert call(**record).stored == 1
        return
    with pytest.raises(ValidationError) as raised:
        call(**record)
    assert raised.value.field is not None and raised.value.field.startswith(expect)
    assert len(str(raised.value)) < 500


# ------------------------------------------------------------------------- bulk calls
@pytest.mark.parametrize("case", cases())
def test_bulk_call_rejects_only_the_bad_record_and_stores_its_neighbours(stores, case):
    tracker = stores("bulk")
    batch = records(case, "bulk")
    check_bulk_outcome(tracker, case, batch, log(tracker, case, batch), case.expect)


@pytest.mark.parametrize("case", cases())
def test_all_or_nothing_stores_nothing_when_the_record_is_bad(stores, case):
    tracker = stores("all-or-nothing")
    batch = records(case, "all-or-nothing")
    call = tracker.log_impressions if case.kind == "impressions" else tracker.log_interactions
    result = call(batch, on_invalid="all_or_nothing")
    keys = [batch[0][ID_FIELD[case.kind]], batch[2][ID_FIELD[case.kind]]]
    if case.expect == STORED:
        assert (result.stored, result.rejected) == (3, [])
    else:
        assert [r.index for r in result.rejected] == [1] and result.stored == 0
        assert stored_keys(tracker, case, keys) == set()


# ------------------------------------------------------------------------- DataFrames
def _frame(case: Case) -> pd.DataFrame | None:
    """The three records as a DataFrame, when pandas can hold them (not a lone surrogate in
    a column name)."""
    if case.whole_record:
        return None
    batch = records(case, "frame")
    columns = {name: [record.get(name) for record in batch]
               for name in dict.fromkeys(k for r in batch for k in r)}
    for dtype in (None, object):  # pandas' Arrow strings cannot hold a lone surrogate
        try:
            return pd.DataFrame(columns, dtype=dtype)
        except UnicodeEncodeError:
            continue
    return None


@pytest.mark.parametrize("case", cases(lambda case: _frame(case) is not None))
def test_dataframe_rejects_only_the_bad_row_and_stores_its_neighbours(stores, case):
    tracker = stores("frame")
    check_bulk_outcome(tracker, case, records(case, "frame"), log(tracker, case, _frame(case)),
                       None)


# ------------------------------------------------------------------------- files
def _json_value(value: Any) -> Any:
    if isinstance(value, datetime) and value == value:
        return value.isoformat()
    raise TypeError(type(value).__name__)


def _jsonl_line(record: Any) -> str | None:
    try:
        return json.dumps(record, default=_json_value)
    except (TypeError, ValueError, RecursionError):
        return None


def _jsonl_exact(case: Case) -> bool:
    """Whether JSON carries the case's value unchanged (then the outcome must be the
    expected one)."""
    try:
        return json.loads(json.dumps(case.value)) == case.value
    except (TypeError, ValueError, RecursionError):
        return False


def _jsonl_ok(case: Case) -> bool:
    return _jsonl_line(records(case, "jsonl")[1]) is not None


@pytest.mark.parametrize("case", [
    *cases(_jsonl_ok),
    pytest.param(Case("impression-line-not-json", "impressions", None, "{not json", RECORD),
                 id="impression-line-not-json"),
    pytest.param(Case("interaction-line-truncated", "interactions", None, '{"event_id": "e',
                      RECORD), id="interaction-line-truncated"),
])
def test_jsonl_import_rejects_only_the_bad_line_and_stores_its_neighbours(stores, case,
                                                                           tmp_path):
    tracker = stores("jsonl")
    batch = records(case, "jsonl")
    lines = [_jsonl_line(r) for r in batch]
    if case.id.endswith(("not-json", "truncated")):
        lines[1] = case.value
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expect = case.expect if (case.whole_record or _jsonl_exact(case)) else None
    check_bulk_outcome(tracker, case, batch, log(tracker, case, file_records(path, "jsonl")),
                       expect)


def _csv_cell(value: Any) -> str | None:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat() if value == value else None
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        return _jsonl_line(value)
    return None


def _csv_rows(case: Case) -> list[dict[str, str]] | None:
    if case.whole_record:
        return None
    batch = records(case, "csv")
    rows = [{k: _csv_cell(v) for k, v in r.items()} for r in batch]
    if any(v is None for row in rows for v in row.values()):
        return None
    if not all(_encodes(v) for row in rows for v in row.values()):
        return None
    return rows


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text  # a NUL in a file is the file reader's business, not a record's


@pytest.mark.parametrize("case", cases(lambda case: _csv_rows(case) is not None))
def test_csv_import_rejects_only_the_bad_row_and_stores_its_neighbours(stores, case,
                                                                       tmp_path):
    tracker = stores("csv")
    batch = records(case, "csv")
    rows = _csv_rows(case)
    path = tmp_path / "records.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)
    check_bulk_outcome(tracker, case, batch, log(tracker, case, file_records(path, "csv")),
                       None)


def _depth(value: Any) -> int:
    depth = 0
    while isinstance(value, dict) and value:
        value = next(iter(value.values()))
        depth += 1
    return depth


def _parquet_table(case: Case) -> pa.Table | None:
    """The three records as a Parquet table, when Arrow can hold them (pyarrow itself
    crashes on a mapping nested 100,000 deep, so no Parquet file can carry one)."""
    if case.whole_record or _depth(case.value) > 100:
        return None
    batch = records(case, "parquet")
    try:
        table = pa.table({name: [record.get(name) for record in batch]
                          for name in dict.fromkeys(k for r in batch for k in r)})
        pq.write_table(table, pa.BufferOutputStream())  # Parquet can hold it, too
    except (pa.ArrowException, TypeError, ValueError, OverflowError, RecursionError):
        return None
    column = table.column(case.field)
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        return None  # the neighbours' ids would be bytes too: no valid neighbour left
    return table


@pytest.mark.parametrize("case", cases(lambda case: _parquet_table(case) is not None))
def test_parquet_import_rejects_only_the_bad_row_and_stores_its_neighbours(stores, case,
                                                                           tmp_path):
    tracker = stores("parquet")
    path = tmp_path / "records.parquet"
    pq.write_table(_parquet_table(case), path)
    check_bulk_outcome(tracker, case, records(case, "parquet"),
                       log(tracker, case, file_records(path, "parquet")), None)


# ------------------------------------------------------------------------- the collector
def _wire(case: Case) -> bytes | None:
    """The batch as a producer would send it (datetimes as ISO 8601), when JSON can carry it."""
    batch = records(case, "collector")
    try:
        return json.dumps(batch, default=_json_value).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError, RecursionError):
        return None


@pytest.fixture(scope="module")
def collector(stores):
    from tracker.collector import create_app

    tracker = stores("collector")
    keys = make_keys(tracker.settings.database_url)
    app = create_app(tracker.settings, tracker.engine)
    with TestClient(app) as client:
        yield tracker, client, {"Authorization": f"Bearer {keys.ingest}"}


@pytest.mark.parametrize("case", cases(lambda case: _wire(case) is not None))
def test_collector_answers_422_naming_the_record_or_stores_the_batch(collector, case):
    tracker, client, headers = collector
    body = _wire(case)
    answer = client.post(f"/v1/{case.kind}", content=body, headers=headers)
    batch = records(case, "collector")
    keys = [batch[0][ID_FIELD[case.kind]], batch[2][ID_FIELD[case.kind]]]
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:  # NaN, lone surrogates, ints over 64 bits: not JSON
        assert answer.status_code == 400 and answer.json()["error"] == "malformed_json"
        return
    if answer.status_code == 200:
        assert answer.json()["stored"] == 3
        assert stored_keys(tracker, case, keys) == set(keys)
        return
    assert answer.status_code == 422, answer.text
    rejected = answer.json()["rejected"]
    assert [r["index"] for r in rejected] == [1]
    assert len(answer.content) < 2000  # no value echoed whole
    assert stored_keys(tracker, case, keys) == set()
    if _jsonl_exact(case) or case.whole_record:
        field = rejected[0]["field"]
        assert (RECORD if field is None else field).startswith(case.expect)


def test_the_corpus_covers_every_field_with_rejections_and_acceptances():
    fields = {(c.kind, c.field) for c in CASES if not c.whole_record}
    assert len(CASES) >= 85
    for kind, field in fields:
        outcomes = {c.expect for c in CASES if (c.kind, c.field) == (kind, field)}
        assert outcomes - {STORED}, (kind, field)
    assert not any(isinstance(c.value, float) and math.isnan(c.value) and c.expect == STORED
                   and c.field not in ("value", "impression_id") for c in CASES)


# ------------------------------------------------------------------------- TrackerClient
@pytest.fixture(scope="module")
def live_client(stores):
    """A TrackerClient posting to a real collector (uvicorn on a local port) over the
    module's "client" database."""
    from tests.collector.server import in_thread
    from tracker.client import TrackerClient

    tracker = stores("client")
    keys = make_keys(tracker.settings.database_url)
    with in_thread(tracker.settings) as base:
        client = TrackerClient(base, keys.ingest, flush_interval=0.05, retry_base=0.01,
                               retry_max=0.5)
        yield tracker, client
        client.close(10)


@pytest.mark.parametrize("case", cases())
def test_client_refuses_at_the_call_or_delivers_and_never_costs_a_neighbour(live_client, case):
    """Through TrackerClient's bulk call and a live collector: the case's record is refused
    at the call (naming the field), rejected by the collector (counted, its batch-mates
    sent again), or stored; the valid neighbours are always stored; only ValidationError
    is ever raised, and only for records that are not records at all."""
    tracker, client = live_client
    batch = records(case, "client")
    log = client.log_impressions if case.kind == "impressions" else client.log_interactions
    before = client.counters()
    queued = log(batch)
    assert client.flush(30)
    after = client.counters()
    assert after.failed == before.failed and after.dropped == before.dropped
    neighbours = [batch[0][ID_FIELD[case.kind]], batch[2][ID_FIELD[case.kind]]]
    assert stored_keys(tracker, case, neighbours) == set(neighbours)
    assert [r.index for r in queued.rejected] in ([], [1])
    assert all(r.id is None or len(r.id) <= 65 for r in queued.rejected)
    refused_here = bool(queued.rejected)
    refused_there = after.rejected - before.rejected
    assert not (refused_here and refused_there) and refused_there <= 1
    if case.whole_record:
        assert refused_here
        return
    bad_id = queued.ids[1]  # as the client normalised it (an int id: its decimal text)
    stored = (bad_id is not None and not refused_here and not refused_there
              and stored_keys(tracker, case, [bad_id]) == {bad_id})
    expect = case.expect
    if case.field == ID_FIELD[case.kind] and case.value is None:
        expect = STORED  # the client makes the id of a record that has none (uuid4)
    if expect == STORED:
        # stored, unless the value cannot travel as JSON at all (an int beyond 64 bits in the
        # context): then it is refused at the call, never lost in a batch
        assert stored or (refused_here and "JSON" in queued.rejected[0].reason), (
            queued.rejected, refused_there)
    else:
        assert not stored
        if refused_here and queued.rejected[0].field is not None:
            assert queued.rejected[0].field.startswith(expect.split("[")[0])
