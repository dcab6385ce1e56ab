"""The column-at-a-time lane accepts exactly what the per-record rules accept, with the same
stored values, and leaves everything else to them (so rejections keep their reasons).

Both lanes run here without a database: the batch is normalised once through
:class:`~tracker.ingest.columnar.ColumnChunk` (lists of dicts and DataFrames) and once record
by record, and the rows, duplicates, conflicts and rejections must be identical — types
included (``repr``), since a stored ``1`` and ``1.0`` differ on SQLite.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import T0, impression
from tests.ingest.corpus import IMPRESSION_CASES, STORED, Case
from tests.ingest.test_validation import BAD_IMPRESSIONS
from tracker.config import Settings
from tracker.ingest.columnar import ColumnChunk
from tracker.ingest.frames import frame_records
from tracker.ingest.validate import IMPRESSION_FIELDS, ImpressionNormalizer, Limits, Unreadable
from tracker.ingest.write import IMPRESSIONS, _normalize_chunk
from tracker.store.experiments import ArmInfo, ExperimentInfo

NOW_US = int((datetime.now(UTC) - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1))
HOME = ExperimentInfo(
    id=1, key="home", name="home", description="", status="running", starts_at=None,
    ends_at=None, control="control",
    arms=(ArmInfo("control", 0.5, 1), ArmInfo("treatment", 0.5, 2)),
    attribution_window=timedelta(hours=24), relevance=None, unknown_events="reject",
    timezone="UTC", cutoffs=(5, 10, 20), created_at=T0)


def normalizer(require_id: bool = True, **limits) -> ImpressionNormalizer:
    return ImpressionNormalizer([HOME], Limits.from_settings(Settings(**limits)), NOW_US,
                                require_id)


def outcome(rows, part) -> tuple[str, str]:
    return repr(rows), repr((part.duplicates, part.conflict_ids, part.rejected))


def both_lanes(records: list, norm: ImpressionNormalizer | None = None, micros_ok=False):
    norm = norm or normalizer()
    per_record = outcome(*_normalize_chunk(IMPRESSIONS, records, norm, micros_ok))
    columnar = outcome(*_normalize_chunk(
        IMPRESSIONS, ColumnChunk.from_records(records, IMPRESSION_FIELDS), norm, micros_ok))
    return columnar, per_record


# Shapes the per-record rules accept but the column lane leaves to them, and clean variants.
ODD_BUT_VALID = [
    pytest.param({"user_id": 42}, id="integer-user-id"),
    pytest.param({"impression_id": np.int64(7)}, id="numpy-integer-id"),
    pytest.param({"items": ("a", "b"), "scores": None}, id="items-a-tuple"),
    pytest.param({"items": np.array(["a", "b"]), "scores": None}, id="items-a-numpy-array"),
    pytest.param({"items": ["a", 2, "c"], "scores": None}, id="an-integer-item"),
    pytest.param({"items": ["a", np.str_("b")], "scores": None}, id="a-numpy-string-item"),
    pytest.param({"scores": [1, 0.5, 0, 0, 0]}, id="integer-scores"),
    pytest.param({"scores": np.linspace(1, 0, 5)}, id="scores-a-numpy-array"),
    pytest.param({"scores": [np.float64(0.5)] * 5}, id="numpy-float-scores"),
    pytest.param({"scores": ["1.5", 1, 2, 3, 4]}, id="a-score-as-text"),
    pytest.param({"scores": [1e308, 1e308, 0, 0, 0]}, id="finite-scores-whose-sum-overflows"),
    pytest.param({"scores": None}, id="no-scores"),
    pytest.param({"served_at": "2026-11-01T12:00:00Z"}, id="iso-time"),
    pytest.param({"served_at": datetime(2026, 11, 1, 12)}, id="naive-time"),
    pytest.param({"served_at": datetime(2026, 11, 1, 13, tzinfo=timezone(timedelta(hours=1)))},
                 id="time-in-another-zone"),
    pytest.param({"served_at": pd.Timestamp("2026-11-01 12:00", tz="UTC")},
                 id="pandas-timestamp"),
    pytest.param({"served_at": datetime.now(UTC) + timedelta(seconds=60)}, id="small-skew"),
    pytest.param({"baseline_items": ["x", "y"]}, id="with-baseline"),
    pytest.param({"baseline_items": np.array(["x", "y"], dtype=object)},
                 id="baseline-a-numpy-array"),
    pytest.param({"context": {"surface": "home", "n": 1.5}}, id="with-context"),
    pytest.param({"context": {"tags": ("a", "b")}}, id="context-made-canonical"),
]


@pytest.mark.parametrize("change", ODD_BUT_VALID)
def test_odd_but_valid_records_are_normalised_the_same(change):
    records = [impression(0), impression(1, **change), impression(2)]
    columnar, per_record = both_lanes(records)
    assert columnar == per_record
    assert "Rejection" not in per_record[1]


@pytest.mark.parametrize("scores", [pytest.param(True, id="with-scores"),
                                    pytest.param(False, id="without-scores")])
@pytest.mark.parametrize(("change", "field", "message"), BAD_IMPRESSIONS)
def test_every_bad_record_is_rejected_the_same(change, field, message, scores):
    if not scores:  # so that a bad list is the row's only fault
        change = {"scores": None, **change}
    records = [impression(0), impression(1, **change), impression(2)]
    columnar, per_record = both_lanes(records)
    assert columnar == per_record
    assert message.replace("'", "") in per_record[1].replace("\\'", "").replace("'", "")


@pytest.mark.parametrize("records", [
    pytest.param([impression(0), {**impression(1), "item": ["x"]}], id="unknown-field"),
    pytest.param([impression(0), Unreadable("line is not valid JSON")], id="unreadable"),
    pytest.param([impression(0), ["not", "a", "mapping"]], id="not-a-mapping"),
    pytest.param([impression(0), impression(0)], id="repeated-in-batch"),
    pytest.param([impression(0), impression(0, user_id="other"), impression(0)],
                 id="conflicting-repeat-in-batch"),
    pytest.param([impression(0, items=[]), impression(0)], id="rejected-then-valid-same-id"),
    pytest.param([impression(i, arm="ghost" if i % 2 else "control") for i in range(6)],
                 id="every-other-arm-unknown"),
    pytest.param([impression(0, experiment=["home"])], id="unhashable-experiment"),
])
def test_batch_level_cases_match(records):
    columnar, per_record = both_lanes(records)
    assert columnar == per_record


@pytest.mark.parametrize("items", [
    pytest.param(["a", "z" * 257], id="over-long-item"),
    pytest.param(["a", ""], id="empty-item"),
    pytest.param(["a", "b", "a"], id="repeated-item"),
    pytest.param([f"i{n}" for n in range(1001)], id="too-many-items"),
])
def test_a_list_that_is_the_only_fault_in_a_clean_batch_is_caught(items):
    records = [impression(0), impression(1, items=items, scores=None), impression(2)]
    columnar, per_record = both_lanes(records)
    assert columnar == per_record
    assert per_record[1].count("Rejection(") == 1


def test_missing_impression_id_is_made_up_only_for_single_calls():
    record = impression(0)
    del record["impression_id"]
    norm = normalizer(require_id=False)
    rows, part = _normalize_chunk(IMPRESSIONS, ColumnChunk.from_records([record],
                                                                        IMPRESSION_FIELDS),
                                  norm, False)
    assert len(rows) == 1 and len(rows[0][0]) == 32 and not part.rejected
    assert both_lanes([record])[0] == both_lanes([record])[1]  # required: rejected alike


def test_limits_apply_in_the_column_lane():
    norm = normalizer(max_items=3, max_id_length=5)
    records = [impression(0, items=["a", "b", "c", "d"], scores=None),
               impression(1, impression_id="abcdef", items=["a"], scores=None),
               impression(2, impression_id="ok", items=["abcdef"], scores=None),
               impression(3, impression_id="fine", items=["a", "b"], scores=None)]
    columnar, per_record = both_lanes(records, norm)
    assert columnar == per_record
    assert per_record[1].count("Rejection(") == 3


def test_dataframe_lane_matches_the_per_record_rules_on_the_same_rows():
    records = [impression(i) for i in range(6)]
    records[1] = impression(1, items=["a", "a"])
    records[2] = impression(2, scores=None)
    records[3] = impression(3, user_id=None)
    records[4] = impression(4, served_at=datetime.now(UTC) + timedelta(days=3))
    frame = pd.DataFrame(records)
    frame.loc[5, "scores"] = math.nan  # a missing value, as pandas writes it
    source, micros = frame_records(frame)
    assert micros
    norm = normalizer()
    per_record = outcome(*_normalize_chunk(IMPRESSIONS, list(source), norm, micros))
    chunks = list(source.column_chunks(100, IMPRESSION_FIELDS))
    assert len(chunks) == 1
    assert outcome(*_normalize_chunk(IMPRESSIONS, chunks[0], norm, micros)) == per_record
    assert per_record[1].count("Rejection(") == 3


def test_dataframe_with_an_unknown_column_rejects_only_rows_that_use_it():
    frame = pd.DataFrame([impression(0), {**impression(1), "note": "x"}, impression(2)])
    source, micros = frame_records(frame)
    norm = normalizer()
    per_record = outcome(*_normalize_chunk(IMPRESSIONS, list(source), norm, micros))
    chunk = next(source.column_chunks(100, IMPRESSION_FIELDS))
    assert outcome(*_normalize_chunk(IMPRESSIONS, chunk, norm, micros)) == per_record
    assert "unknown field(s) note" in per_record[1]
    assert per_record[1].count("Rejection(") == 1


def test_dataframe_with_array_lists_as_parquet_gives_them_is_judged_alike():
    records = [impression(i, items=np.array([f"a{i}", "b"], dtype=object), scores=None,
                          baseline_items=np.array(["x", "y"], dtype=object)) for i in range(3)]
    frame = pd.DataFrame(records)
    frame["extra"] = [None, np.array(["z"], dtype=object), None]
    source, micros = frame_records(frame)
    norm = normalizer()
    per_record = outcome(*_normalize_chunk(IMPRESSIONS, list(source), norm, micros))
    chunk = next(source.column_chunks(100, IMPRESSION_FIELDS))
    assert outcome(*_normalize_chunk(IMPRESSIONS, chunk, norm, micros)) == per_record
    assert per_record[1].count("Rejection(") == 1  # the row with the unknown field


def test_dataframe_is_read_in_slices_of_the_batch_size():
    frame = pd.DataFrame([impression(i) for i in range(25)])
    source, _ = frame_records(frame)
    sizes = [len(chunk) for chunk in source.column_chunks(10, IMPRESSION_FIELDS)]
    assert sizes == [10, 10, 5]
    assert [r["impression_id"] for r in source] == [f"imp-{i}" for i in range(25)]


# A pool of good and bad values per field; Hypothesis mixes them into batches.
VALUES = {
    "impression_id": ["imp-a", "imp-b", "imp-a", "", "x" * 300, None, 5, 1.5, np.int64(3)],
    "experiment": ["home", "home", "nope", None, 3],
    "arm": ["control", "treatment", "ghost", None],
    "user_id": ["u1", "u2", "", None, 7, ["u"], "y" * 257],
    "items": [["a", "b"], ["b", "a"], [], ["a", "a"], ["a", ""], ["a", None], "ab", ("a",),
              ["a", 1], None, [f"i{n}" for n in range(1001)], ["z" * 257]],
    "scores": [None, [0.5, 0.25], [1.0], [0.5, math.nan], [1, 2], ["x", 1.0], [0.1, math.inf],
               "0.5"],
    "served_at": [T0, T0 + timedelta(microseconds=1), datetime(2026, 11, 1, 12),
                  "2026-11-01T12:00:00+01:00", "yesterday", None, 1_700_000_000,
                  datetime.now(UTC) + timedelta(days=2)],
    "baseline_items": [None, ["p", "q"], ["p", "p"], []],
    "context": [None, {"s": "home"}, ["home"], {"o": float("nan")}],
}
changes = st.fixed_dictionaries(
    {}, optional={name: st.sampled_from(values) for name, values in VALUES.items()})
# mostly valid records (a clean one with a few fields swapped), sometimes bare ones
record_strategy = st.one_of(
    st.builds(lambda i, change: {**impression(i, items=["a", "b"], scores=[0.5, 0.25]),
                                 **change},
              st.integers(0, 3), changes),
    changes)


@settings(max_examples=300, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=12))
def test_mixed_batches_are_judged_alike(records):
    columnar, per_record = both_lanes(records)
    assert columnar == per_record


def test_dataframe_in_several_batches_reports_rejections_at_their_rows(settings):
    from tests.helpers import make_experiment, stored_impressions
    from tracker import Tracker

    records = [impression(i) for i in range(8)]
    records[1] = impression(1, items=[])
    records[6] = impression(6, arm="ghost")
    records[7] = impression(2)  # a repeat of row 2, across batches
    with Tracker(settings=settings.replace(batch_size=3)) as t:
        make_experiment(t)
        result = t.log_impressions(pd.DataFrame(records))
        again = t.log_impressions(pd.DataFrame(records))
        stored = stored_impressions(t.engine)
    assert [(r.index, r.field) for r in result.rejected] == [(1, "items"), (6, "arm")]
    assert (result.stored, result.duplicates, again.stored, again.duplicates) == (5, 1, 0, 6)
    assert stored["imp-3"]["items"] == records[3]["items"]
    assert stored["imp-3"]["served_at"] == records[3]["served_at"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.none(),
    st.lists(st.text(min_size=1), min_size=1, max_size=5),
    st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=5),
    st.lists(st.sampled_from(["plain", 'quo"te', "back\\slash", "tab\t", "ユ"]), min_size=1),
), min_size=1, max_size=6))
def test_sqlite_json_columns_decode_to_the_values(values):
    import json

    from tracker.store.bulk import _json_column

    encoded = _json_column(values)
    assert [None if e is None else json.loads(e) for e in encoded] == values


def _corpus_batch(case: Case) -> list:
    if case.whole_record:
        return [impression(0), case.value, impression(2)]
    bad = impression(1, **({"scores": None} if case.field in ("items", "baseline_items")
                           else {}))
    bad[case.field] = case.value
    return [impression(0), bad, impression(2)]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in IMPRESSION_CASES])
def test_the_column_lane_agrees_with_the_rules_on_the_adversarial_corpus(case):
    columnar, per_record = both_lanes(_corpus_batch(case))
    assert columnar == per_record
    assert ("Rejection(" not in per_record[1]) == (case.expect == STORED)


def _column_name_ok(name: object) -> bool:
    """Whether pandas can name a column so (a lone surrogate it cannot)."""
    return not isinstance(name, str) or name.encode("utf-8", "surrogatepass") == name.encode(
        "utf-8", "replace")


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in IMPRESSION_CASES
                                  if not c.whole_record and _column_name_ok(c.field)])
def test_the_dataframe_lane_agrees_with_the_rules_on_the_adversarial_corpus(case):
    batch = _corpus_batch(case)
    columns = {name: [r.get(name) for r in batch]
               for name in dict.fromkeys(k for r in batch for k in r)}
    try:
        frame = pd.DataFrame(columns)
    except UnicodeEncodeError:  # pandas' Arrow strings cannot hold a lone surrogate
        frame = pd.DataFrame(columns, dtype=object)
    source, micros = frame_records(frame)
    norm = normalizer()
    per_record = outcome(*_normalize_chunk(IMPRESSIONS, list(source), norm, micros))
    (chunk,) = source.column_chunks(100, IMPRESSION_FIELDS)
    assert outcome(*_normalize_chunk(IMPRESSIONS, chunk, norm, micros)) == per_record
