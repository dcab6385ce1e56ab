"""A lake bucketed by user (``tracker export --buckets``): the Spark rollup reads each bucket's
groups from its own files, without a shuffle, and gives the default engine's rows; where that
would not give the same rows (an interaction naming an impression, a user's day cut into
slices, a repeated id) it shuffles as on any lake; a file in the wrong bucket fails the run.
On both databases."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.rollup.scenario import create, make_logs
from tests.spark.rollups import assert_same_rows, report_rows
from tests.spark.support import SKIP_REASON
from tests.spark.test_rollup import DST, NOW, _log, _spark_rollup
from tracker.lake import layout
from tracker.lake.export import export_logs

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

BUCKET_PATH = "read bucket by bucket"


def _unnamed(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "impression_id"} for e in events]


def _expected(tracker, imps, events, zone="UTC", catalog=False):
    create(tracker, timezone=zone)
    if catalog:
        tracker.declare_catalog("home", [f"i{n}" for n in range(0, 40, 3)])
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    return report_rows(tracker.engine)


def _rollup(spark, tracker, lake, caplog, **options) -> str:
    """The Spark rollup of ``lake`` (from scratch); what it logged."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tracker.spark"):
        _spark_rollup(spark, tracker, lake, full=True, **options)
    return caplog.text


SCENARIOS = {
    "window-edges-grades-crossover-baselines": dict(seed=3, days=3, users=14, impressions=90),
    "dst-day-in-paris-with-a-catalog": dict(seed=5, days=3, users=10, impressions=70,
                                            start=DST, zone="Europe/Paris", catalog=True),
    # explicit impression ids (some named after the window has closed), each interaction's
    # user the named impression's: the named ones are read by every group of the bucket
    "interactions-naming-their-impressions": dict(seed=3, days=3, users=14, impressions=90,
                                                  named=True),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=list(SCENARIOS))
def test_a_bucketed_lake_is_scored_bucket_by_bucket_to_the_same_rows(spark, tracker, tmp_path,
                                                                     caplog, scenario):
    options = dict(SCENARIOS[scenario])
    zone, catalog = options.pop("zone", "UTC"), options.pop("catalog", False)
    named = options.pop("named", False)
    imps, events = make_logs(**options)
    if named:
        assert any("impression_id" in e for e in events)
    expected = _expected(tracker, imps, events if named else _unnamed(events), zone, catalog)
    export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int", buckets=4)
    logged = _rollup(spark, tracker, tmp_path, caplog)
    assert f"{BUCKET_PATH} (the lake's 4 buckets, 1 part(s) each)" in logged
    assert_same_rows(report_rows(tracker.engine), expected)


def test_a_run_wanting_more_groups_than_buckets_cuts_each_bucket_into_parts(spark, tracker,
                                                                            tmp_path, caplog):
    from tracker.spark.rollup import rollup

    imps, events = make_logs(seed=3, days=3, users=14, impressions=90)
    expected = _expected(tracker, imps, _unnamed(events))
    export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int", buckets=2)
    with caplog.at_level(logging.INFO, logger="tracker.spark"):
        rollup(spark, tmp_path / "imp", tmp_path / "int", experiment="home",
               database_url=tracker.engine.url.render_as_string(hide_password=False),
               now=NOW, buckets=5, full=True)
    assert f"{BUCKET_PATH} (the lake's 2 buckets, 3 part(s) each)" in caplog.text
    assert_same_rows(report_rows(tracker.engine), expected)


WHY_SHUFFLED = {
    "an-interaction-names-another-users-impression":
        "an interaction names an impression served to another user",
    "users-split-into-slices": "a heavy user's day is among the days to score",
    "repeated-ids": "or an id is seen twice",
}


@pytest.mark.parametrize("case", list(WHY_SHUFFLED))
def test_where_buckets_would_differ_the_run_shuffles_to_the_same_rows(spark, tracker, tmp_path,
                                                                      caplog, case):
    imps, events = make_logs(seed=3, days=3, users=14, impressions=90)
    if case == "an-interaction-names-another-users-impression":
        named = next(e for e in events if "impression_id" in e)
        others = sorted({i["user_id"] for i in imps} - {named["user_id"]})
        # of a user in another bucket: so it lies in other files than its impression
        mine = layout.user_bucket(pa.array([named["user_id"]]), 4)[0]
        named["user_id"] = next(u for u in others
                                if layout.user_bucket(pa.array([u]), 4)[0] != mine)
    else:
        events = _unnamed(events)
    expected = _expected(tracker, imps, events)
    export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int", buckets=4)
    options = {"user_rows": 1} if case == "users-split-into-slices" else {}
    if case == "repeated-ids":  # every file again, bucket and all, under another name
        for path in list(tmp_path.rglob("*.parquet")):
            table = pq.read_table(path)
            pq.write_table(table, path.with_name("again.parquet"))
        first = next((tmp_path / "imp").rglob("again.parquet"))
        assert pq.read_metadata(first).metadata[layout.BUCKETS] == b"4"
    logged = _rollup(spark, tracker, tmp_path, caplog, **options)
    assert BUCKET_PATH not in logged
    assert "the groups are made by Spark's shuffle: " in logged  # and why
    assert WHY_SHUFFLED[case] in logged
    assert_same_rows(report_rows(tracker.engine), expected)


def test_a_file_holding_a_user_of_another_bucket_fails_the_run(spark, tracker, tmp_path):
    imps, events = make_logs(seed=3, days=2, users=8, impressions=40)
    _expected(tracker, imps, _unnamed(events))
    export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int", buckets=2)
    path = sorted((tmp_path / "imp").rglob("*.parquet"))[0]
    table = pq.read_table(path)
    bucket = int(pq.read_metadata(path).metadata[layout.BUCKET])
    # the same rows, labelled the other bucket
    pq.write_table(table.replace_schema_metadata(layout.bucket_metadata(1 - bucket, 2)), path)
    from tracker.spark.lake import LakeError  # a task's error, raised as itself on the driver

    with pytest.raises(LakeError, match="holds user .* of another bucket"):
        _spark_rollup(spark, tracker, tmp_path, full=True)


def test_an_interaction_in_a_bucket_without_impressions_is_checked_too(spark, tracker,
                                                                       tmp_path):
    # no task reads such a bucket's files: one user's interactions moved there would be
    # silently left out of the results
    imps, events = make_logs(seed=3, days=2, users=6, impressions=40)
    _expected(tracker, imps, _unnamed(events))
    export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int", buckets=16)
    served = {int(pq.read_metadata(p).metadata[layout.BUCKET])
              for p in (tmp_path / "imp").rglob("*.parquet")}
    empty = next(b for b in range(16) if b not in served)
    path = sorted((tmp_path / "int").rglob("*.parquet"))[0]
    table, metadata = pq.read_table(path), pq.read_metadata(path).metadata
    user = table["user_id"][0].as_py()
    mine = pc.equal(table["user_id"], user)
    pq.write_table(table.filter(pc.invert(mine)).replace_schema_metadata(metadata), path)
    moved = path.parent.parent / f"bucket={empty}" / "part-0.parquet"
    moved.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.filter(mine).replace_schema_metadata(
        layout.bucket_metadata(empty, 16)), moved)
    from tracker.spark.lake import LakeError

    with pytest.raises(LakeError, match=f"bucket={empty}.* holds user '{user}' of another"):
        _spark_rollup(spark, tracker, tmp_path, full=True)



def test_a_lake_is_bucketed_only_when_every_file_names_a_bucket_of_one_count(tmp_path):
    from tracker.spark.lake import Bucketing, checked_footers

    table = pa.Table.from_pylist([], schema=layout.IMPRESSIONS)

    def write(name: str, metadata: dict | None) -> None:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.replace_schema_metadata(metadata), path)

    write("day=1/bucket=0/part-0.parquet", layout.bucket_metadata(0, 2))
    write("day=1/bucket=1/part-0.parquet", layout.bucket_metadata(1, 2))
    write("day=2/bucket=1/part-0.parquet", layout.bucket_metadata(1, 2))
    files, footers = checked_footers(tmp_path, "impressions")
    assert footers.bucketing == Bucketing(2, {0: (files[0],), 1: (files[1], files[2])})
    write("day=3/bucket=0/part-0.parquet", layout.bucket_metadata(0, 3))  # another count
    assert checked_footers(tmp_path, "impressions")[1].bucketing is None
    (tmp_path / "day=3/bucket=0/part-0.parquet").unlink()
    write("day=3/part-0.parquet", None)  # a file that names no bucket
    assert checked_footers(tmp_path, "impressions")[1].bucketing is None


@pytest.mark.parametrize("user_rows", [None, 1], ids=["scored-by-bucket", "scored-by-shuffle"])
def test_a_bucketed_lake_of_millisecond_paris_times_gives_the_same_rows(spark, tracker, tmp_path,
                                                                       caplog, user_rows):
    """The lake accepts timestamps in another unit and time zone: a bucketed lake whose
    times served and occurred are rewritten as milliseconds in Europe/Paris is read bucket
    by bucket (the census, the covariates and, unless a user's day is sliced, the scoring)
    to the default engine's rows."""
    imps, events = make_logs(seed=3, days=3, users=14, impressions=90)
    for row in imps + events:  # times a millisecond file can hold
        for key, value in list(row.items()):
            if hasattr(value, "microsecond"):
                row[key] = value.replace(microsecond=value.microsecond // 1000 * 1000)
    expected = _expected(tracker, imps, _unnamed(events))
    export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int", buckets=4)
    paris = pa.timestamp("ms", tz="Europe/Paris")
    for path in sorted(tmp_path.rglob("*.parquet")):
        table = pq.read_table(path)
        for i, field in enumerate(table.schema):
            if pa.types.is_timestamp(field.type) and field.name != "received_at":
                table = table.set_column(i, field.with_type(paris), table[i].cast(paris))
        pq.write_table(table, path)
    options = {} if user_rows is None else {"user_rows": user_rows}
    logged = _rollup(spark, tracker, tmp_path, caplog, **options)
    assert ("read bucket by bucket" in logged) == (user_rows is None)
    assert_same_rows(report_rows(tracker.engine), expected)
