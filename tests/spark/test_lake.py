"""Reading the lake on Spark local[2]: layout tolerance, clear errors, and the database's
semantics for repeated ids (duplicates count once, conflicts keep the first, reported)."""

from __future__ import annotations

import json
from datetime import timedelta

import pyarrow as pa
import pytest

from tests.conftest import BACKEND
from tests.lake.logs import IMPRESSIONS, INTERACTIONS, load
from tests.lake.test_export import received, without_received
from tests.spark.lakefiles import T, impression, interaction, write, write_interactions
from tests.spark.support import SKIP_REASON
from tracker.lake.export import export_logs
from tracker.lake.layout import IMPRESSIONS as IMPRESSION_SCHEMA
from tracker.lake.layout import TIMESTAMP
from tracker.store.models import Impression, Interaction

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
once = pytest.mark.skipif(BACKEND != "sqlite", reason="no database is read: once")


def collected(log, key: str) -> dict[str, dict]:
    """A log's rows by id, times as aware UTC datetimes (read as microseconds, whatever
    the Python process's time zone)."""
    from pyspark.sql import functions as F

    times = [c for c in log.rows.columns if c in ("served_at", "occurred_at", "received_at")]
    frame = log.rows.select(*[F.unix_micros(c).alias(c) if c in times else c
                              for c in log.rows.columns])
    out = {}
    for row in frame.collect():
        record = row.asDict(recursive=True)
        for column in times:
            if record[column] is not None:
                record[column] = T.__class__.fromtimestamp(0, T.tzinfo) + timedelta(
                    microseconds=record[column])
        out[record[key]] = record
    assert len(out) == len(log.rows.collect())
    return out


def test_an_export_reads_back_as_the_database_rows(spark, tracker, tmp_path):
    from tracker.spark import read_lake

    load(tracker)
    export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int", batch_rows=2)
    lake = read_lake(spark, tmp_path / "imp", tmp_path / "int")
    got = collected(lake.impressions, "impression_id")
    assert set(got) == {r["impression_id"] for r in IMPRESSIONS}
    assert without_received(got) == received(tracker.engine, Impression,
                                             Impression.impression_key)
    for record in IMPRESSIONS:
        row = dict(got[record["impression_id"]])
        context = row.pop("context")
        assert (json.loads(context) if context is not None else None) == record["context"]
        assert row == {k: v for k, v in record.items() if k != "context"}
    events = collected(lake.interactions, "event_id")
    assert without_received(events) == received(tracker.engine, Interaction,
                                                Interaction.event_key)
    assert events == {r["event_id"]: r for r in INTERACTIONS}
    for log in (lake.impressions, lake.interactions):
        assert (log.duplicates, log.conflicts, log.conflict_sample) == (0, 0, ())
    assert lake.impressions.rows_read == len(IMPRESSIONS)


@once
def test_repeats_count_once_and_conflicts_keep_the_earliest_then_smallest(spark, tmp_path):
    from tracker.spark import read_log

    later = T + timedelta(minutes=1)
    write(tmp_path / "day=2026-03-29" / "b.parquet", [
        impression("same"), impression("late", items=["z"], served_at=later),
        impression("tie", items=["b", "a"]), impression("only-b")])
    write(tmp_path / "day=2026-03-28" / "a.parquet", [
        impression("same"), impression("same"), impression("late", items=["y"]),
        impression("tie", items=["a", "b"]), impression("tie", items=["a", "b"])])
    log = read_log(spark, tmp_path, "impressions")
    rows = collected(log, "impression_id")
    assert set(rows) == {"same", "late", "tie", "only-b"}
    assert rows["late"]["items"] == ["y"]  # the earlier served_at, though in the later folder
    assert rows["tie"]["items"] == ["a", "b"]  # same time: the smaller payload
    assert (log.files, log.rows_read) == (2, 9)
    # "same" twice more, "tie" [a, b] once more: 3 repeats of the kept payload
    assert (log.duplicates, log.conflicts, log.conflict_sample) == (3, 2, ("late", "tie"))


@once
def test_a_receipt_time_is_no_payload_and_the_earliest_receipt_is_kept(spark, tmp_path):
    from tracker.spark import read_log

    hour = timedelta(hours=1)
    write(tmp_path / "a.parquet", [
        impression("resent", received_at=T + 2 * hour), impression("resent", received_at=T + hour),
        impression("unstamped"), impression("unstamped", received_at=T + hour),
        impression("moved", received_at=T), impression("moved", items=["z"], received_at=T)])
    log = read_log(spark, tmp_path, "impressions")
    rows = collected(log, "impression_id")
    assert rows["resent"]["received_at"] == T + hour  # the earliest receipt
    assert rows["unstamped"]["received_at"] is None  # absent: taken as served_at, earlier
    # two receipts of one payload: a duplicate each; another payload: a conflict
    assert (log.duplicates, log.conflicts, log.conflict_sample) == (2, 1, ("moved",))


@once
def test_the_kept_row_does_not_depend_on_file_names(spark, tmp_path):
    from tracker.spark import read_log

    kept = []
    for first, second in (("a", "b"), ("b", "a")):
        folder = tmp_path / first
        write(folder / f"{first}.parquet", [impression("x", arm="one", user_id="u1")])
        write(folder / f"{second}.parquet", [impression("x", arm="two", user_id="u0")])
        kept.append(collected(read_log(spark, folder, "impressions"), "impression_id")["x"])
    assert kept[0] == kept[1] and kept[0]["arm"] == "one"  # "one" < "two": arm comes first


@once
def test_extra_columns_absent_nullables_hidden_files_and_empty_lists(spark, tmp_path):
    from tracker.spark import read_log

    # no scores, baseline_items or context at all; an extra column; large strings
    schema = pa.schema([pa.field(f.name, pa.large_string() if f.type == pa.string() else f.type)
                        for f in IMPRESSION_SCHEMA if f.name not in
                        ("scores", "baseline_items", "context")] + [("extra", pa.int64())])
    row = {k: v for k, v in impression("bare").items()
           if k not in ("scores", "baseline_items", "context")}
    write(tmp_path / "day=2026-03-29" / "part-0.parquet", [{**row, "extra": 7}], schema)
    write(tmp_path / "day=2026-03-30" / "nested" / "part-0.parquet",
          [impression("full", items=[], scores=[], baseline_items=[], context="{}")])
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "day=2026-03-29" / ".hidden").write_text("not parquet")
    (tmp_path / "_temporary" / "0").mkdir(parents=True)
    (tmp_path / "_temporary" / "0" / "part-9.parquet").write_text("half written")
    log = read_log(spark, tmp_path, "impressions")
    rows = collected(log, "impression_id")
    assert log.files == 2 and "extra" not in log.rows.columns
    assert (rows["bare"]["scores"], rows["bare"]["baseline_items"], rows["bare"]["context"]) \
        == (None, None, None)
    assert (rows["full"]["items"], rows["full"]["scores"], rows["full"]["baseline_items"]) \
        == ([], [], [])


WRONG = [  # (column, its type in the bad file or None for absent, its value, the message)
    pytest.param("user_id", None, None, "required column 'user_id' is missing",
                 id="missing-required-column"),
    pytest.param("served_at", pa.string(), "2026-03-29T00:30:00Z",
                 "column 'served_at' is string, expected a timestamp", id="time-as-text"),
    pytest.param("served_at", pa.timestamp("us"), T.replace(tzinfo=None),
                 "column 'served_at' is timestamp[us], a timestamp without time zone",
                 id="naive-time"),
    pytest.param("scores", pa.list_(pa.string()), ["0.5"],
                 "column 'scores' is list<string>, expected list<double>",
                 id="scores-as-strings"),
]


@once
@pytest.mark.parametrize(("column", "kind", "value", "message"), WRONG)
def test_a_file_off_the_layout_is_named_with_its_column(spark, tmp_path, column, kind, value,
                                                         message):
    from tracker.spark import LakeError, read_log

    write(tmp_path / "ok.parquet", [impression("a")])
    fields = [f if f.name != column else pa.field(column, kind) for f in IMPRESSION_SCHEMA
              if f.name != column or kind is not None]
    row = {**impression("b"), column: value}
    bad = write(tmp_path / "day=2026-03-29" / "bad.parquet", [row], pa.schema(fields))
    with pytest.raises(LakeError) as raised:
        read_log(spark, tmp_path, "impressions")
    assert str(raised.value).startswith(f"{bad}: {message}")


@once
def test_a_file_that_is_not_parquet_and_a_missing_directory_are_named(spark, tmp_path):
    from tracker.spark import LakeError, read_log

    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(LakeError, match=r"notes\.txt: not a Parquet file"):
        read_log(spark, tmp_path, "interactions")
    with pytest.raises(LakeError, match="nowhere: no such directory"):
        read_log(spark, tmp_path / "nowhere", "interactions")


@once
def test_a_null_in_a_required_column_fails_naming_the_column_and_file(spark, tmp_path):
    from tracker.spark import read_log

    schema = pa.schema([pa.field(f.name, f.type, nullable=True) for f in IMPRESSION_SCHEMA])
    bad = write(tmp_path / "nulls.parquet", [impression("a", user_id=None)], schema)
    with pytest.raises(Exception, match="required column 'user_id' is null in") as raised:
        read_log(spark, tmp_path, "impressions")
    assert bad.name in str(raised.value)


@once
def test_an_empty_lake_reads_as_no_rows(spark, tmp_path):
    from tracker.spark import read_log

    log = read_log(spark, tmp_path, "interactions")
    assert (log.files, log.rows_read, log.rows.count()) == (0, 0, 0)
    assert log.rows.columns == ["event_id", "user_id", "item_id", "event", "value",
                                "occurred_at", "impression_id", "received_at"]
    write_interactions(tmp_path / "x.parquet", [interaction("e", value=0.5)])
    assert read_log(spark, tmp_path, "interactions").rows.first()["value"] == 0.5
    assert TIMESTAMP.tz == "UTC"


@once
def test_footers_prove_a_column_all_null_or_free_of_nulls_only_with_statistics(tmp_path):
    import pyarrow.parquet as pq

    from tracker.lake.layout import INTERACTIONS as INTERACTION_SCHEMA
    from tracker.spark.lake import checked_footers

    write_interactions(tmp_path / "a" / "1.parquet", [interaction("e1"), interaction("e2")])
    lacking = [f for f in INTERACTION_SCHEMA
               if f.name not in ("impression_id", "value", "received_at")]
    write(tmp_path / "a" / "2.parquet", [interaction("e3")], pa.schema(lacking))
    _, footers = checked_footers(tmp_path / "a", "interactions")
    # no row gives a receipt time (the optional column): null throughout, or absent
    assert footers.only_nulls == {"impression_id", "value", "received_at"}
    assert footers.no_nulls == {"event_id", "user_id", "item_id", "event", "occurred_at"}

    write_interactions(tmp_path / "a" / "3.parquet", [interaction("e4", impression_id="x")])
    assert checked_footers(tmp_path / "a", "interactions")[1].only_nulls == {"value",
                                                                             "received_at"}

    bare = pa.Table.from_pylist([interaction("e5")], schema=INTERACTION_SCHEMA)
    (tmp_path / "c").mkdir()
    pq.write_table(bare, tmp_path / "c" / "1.parquet", write_statistics=False)
    _, footers = checked_footers(tmp_path / "c", "interactions")
    assert (footers.no_nulls, footers.only_nulls) == (frozenset(), frozenset())


@once
def test_a_null_that_no_footer_counts_still_fails_the_job_that_reads_it(spark, tmp_path):
    import pyarrow.parquet as pq

    from tracker.spark import read_log

    schema = pa.schema([pa.field(f.name, f.type, nullable=True) for f in IMPRESSION_SCHEMA])
    table = pa.Table.from_pylist([impression("a"), impression("b", user_id=None)],
                                 schema=schema)
    pq.write_table(table, tmp_path / "bare.parquet", write_statistics=False)
    log = read_log(spark, tmp_path, "impressions")  # counts ids only: user_id not read
    assert log.rows_read == 2
    with pytest.raises(Exception, match="required column 'user_id' is null in") as raised:
        log.rows.select("user_id").collect()
    assert "bare.parquet" in str(raised.value)
