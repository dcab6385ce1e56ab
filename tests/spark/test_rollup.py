"""The rollup on Spark (local[2]) against the default engine: the same logs, rolled up by
both, give the same rows the report reads (daily and cumulative, every metric and cutoff,
health, day status) to a relative 1e-9; and an incremental run gives the tables of a
from-scratch run. On both databases."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from tests.rollup.scenario import create, make_logs
from tests.spark.rollups import (
    assert_same_rows,
    report_rows,
    with_duplicates_and_conflicts,
    write_lake,
)
from tests.spark.support import SKIP_REASON
from tracker.lake.export import export_logs

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

NOW = datetime(2026, 11, 20, tzinfo=UTC)  # long after the logs: every day final
DST = datetime(2026, 3, 28, 6, tzinfo=UTC)  # Paris moves its clocks on the 29th


def _log(tracker, imps, events) -> None:
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")


def _spark_rollup(spark, tracker, lake, **options):
    from tracker.spark.rollup import rollup

    return rollup(spark, lake / "imp", lake / "int", experiment="home",
                  database_url=str(tracker.engine.url.render_as_string(hide_password=False)),
                  now=NOW, buckets=3, **options)


SCENARIOS = {
    # window edges (359 and 361 minutes in a 6-hour window), explicit impression ids,
    # grade-0 views and graded events, repeated items, crossover users, baselines
    "window-edges-keys-grades-crossover-baselines": dict(seed=3, days=3, users=14,
                                                         impressions=90),
    # a 23-hour day in the experiment's time zone, and a declared catalog
    "dst-day-in-paris-with-a-catalog": dict(seed=5, days=3, users=10, impressions=70,
                                            start=DST, zone="Europe/Paris", catalog=True),
    # every user's day cut into slices of one impression (what a bot's day gets), each
    # scored apart with the interactions of its span: the sums add up to the same rows
    "users-split-into-slices-of-one-impression": dict(seed=3, days=3, users=14,
                                                      impressions=90, user_rows=1),
    # no interaction names its impression: the groups get no keyed join at all
    "no-interaction-names-an-impression": dict(seed=7, days=2, users=10, impressions=60,
                                               unnamed=True),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=list(SCENARIOS))
def test_both_engines_give_the_same_rows(spark, tracker, tmp_path, scenario, caplog):
    options = dict(SCENARIOS[scenario])
    zone, catalog = options.pop("zone", "UTC"), options.pop("catalog", False)
    user_rows = options.pop("user_rows", 50_000)
    create(tracker, timezone=zone)
    unnamed = options.pop("unnamed", False)
    imps, events = make_logs(**options)
    if unnamed:
        events = [{k: v for k, v in e.items() if k != "impression_id"} for e in events]
    if catalog:
        tracker.declare_catalog("home", [f"i{n}" for n in range(0, 40, 3)])
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    expected = report_rows(tracker.engine)
    # the lake written by the generator, with duplicates and conflicts the database never
    # took (it keeps the first logged, which is the one the lake's rule keeps)
    write_lake(tmp_path, *with_duplicates_and_conflicts(imps, events), files=3)
    with caplog.at_level(logging.WARNING, logger="tracker.spark"):
        [summary] = _spark_rollup(spark, tracker, tmp_path, full=True, user_rows=user_rows)
    assert summary.full and summary.days_recomputed
    assert "impression id(s) came with different payloads (the first kept)" in caplog.text
    assert "interaction id(s) came with different payloads" in caplog.text
    assert_same_rows(report_rows(tracker.engine), expected)


def test_the_lake_that_tracker_export_writes_rolls_up_to_the_same_rows(spark, tracker,
                                                                      tmp_path):
    create(tracker)
    imps, events = make_logs(seed=11, days=2, users=8, impressions=40)
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    expected = report_rows(tracker.engine)
    export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int")
    _spark_rollup(spark, tracker, tmp_path, full=True)
    assert_same_rows(report_rows(tracker.engine), expected)


def _batches(imps, events, cut):
    """The logs split at ``cut``: impressions served before it and interactions occurred
    before it, then the rest (late interactions into earlier windows among them)."""
    return ([i for i in imps if i["served_at"] < cut], [e for e in events if
                                                         e["occurred_at"] < cut],
            [i for i in imps if i["served_at"] >= cut], [e for e in events if
                                                          e["occurred_at"] >= cut])


def test_an_incremental_run_gives_the_tables_of_a_from_scratch_run(spark, tracker, tmp_path):
    from tests.helpers import T0

    create(tracker)
    imps, events = make_logs(seed=7, days=4, users=10, impressions=70)
    first_imps, first_events, late_imps, late_events = _batches(
        imps, events, T0 + timedelta(days=2, hours=3))
    lake, state = tmp_path / "lake", tmp_path / "state"
    write_lake(lake, first_imps, first_events, name="first")
    [first] = _spark_rollup(spark, tracker, lake, state=state)
    assert first.full
    write_lake(lake, late_imps, late_events, name="late")
    [second] = _spark_rollup(spark, tracker, lake, state=state)
    assert not second.full
    assert (first.new_impressions, first.new_interactions) == (len(first_imps),
                                                                len(first_events))
    assert (second.new_impressions, second.new_interactions) == (len(late_imps),
                                                                 len(late_events))
    # the late files touch the days from the cut's window on, not the first day
    assert second.days_recomputed and min(second.days_recomputed) > min(first.days_recomputed)
    incremental = report_rows(tracker.engine)
    [again] = _spark_rollup(spark, tracker, lake, state=state)
    assert again.days_recomputed == [] and report_rows(tracker.engine) == incremental
    _spark_rollup(spark, tracker, lake, state=tmp_path / "scratch", full=True)
    assert_same_rows(incremental, report_rows(tracker.engine))
    # and both equal the default engine on the same logs
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW, full=True)
    assert_same_rows(incremental, report_rows(tracker.engine))


def test_tracker_rollup_engine_spark_on_the_command_line(spark, tracker, tmp_path,
                                                         monkeypatch):
    from tracker.cli import main

    create(tracker)
    imps, events = make_logs(seed=2, days=2, users=6, impressions=30)
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    expected = report_rows(tracker.engine)
    export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int")
    monkeypatch.setenv("TRACKER_DATABASE_URL",
                       tracker.engine.url.render_as_string(hide_password=False))
    args = ["rollup", "--engine", "spark", "--impressions", str(tmp_path / "imp"),
            "--interactions", str(tmp_path / "int"), "--state", str(tmp_path / "state"),
            "home", "--full"]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    assert "home: 3 day(s) recomputed (2026-11-01 .. 2026-11-03)" in done.output
    # provisional flags follow the clock: the logs are long past, so every day is final
    assert_same_rows(report_rows(tracker.engine), expected)
    wrong = CliRunner().invoke(main, ["rollup", "--engine", "spark", "home"])
    assert wrong.exit_code == 2 and "--impressions and --interactions" in wrong.output
    wrong = CliRunner().invoke(main, ["rollup", "--state", "x", "home"])
    assert wrong.exit_code == 2 and "only with --engine spark" in wrong.output


def test_the_databases_expired_logs_leave_a_spark_experiments_cumulative_pass_alone(
        spark, tracker, tmp_path):
    # the state directory keeps every day's units whatever the database's logs: a late
    # list on a day the checkpoint counted, after the database's logs expired, still
    # reaches the cumulative view as a run from scratch gives it
    from tests.helpers import T0

    create(tracker)
    imps, events = make_logs(seed=7, days=4, users=10, impressions=70)
    late = [i for i in imps if i["served_at"].date() == (T0 + timedelta(days=2)).date()][:3]
    lake, state = tmp_path / "lake", tmp_path / "state"
    write_lake(lake, [i for i in imps if i not in late], events, name="first")
    _spark_rollup(spark, tracker, lake, state=state)
    tracker.expire_logs(NOW - (T0 + timedelta(days=1)), now=NOW)
    write_lake(lake, late, [], name="late")
    [second] = _spark_rollup(spark, tracker, lake, state=state)
    assert second.days_recomputed == [(T0 + timedelta(days=2)).date()]
    incremental = report_rows(tracker.engine)
    _spark_rollup(spark, tracker, lake, state=tmp_path / "scratch", full=True)
    assert_same_rows(incremental, report_rows(tracker.engine))


def test_a_change_of_the_dimensions_rebuilds_the_spark_state_and_a_reorder_does_not(
        spark, tracker, tmp_path):
    create(tracker, segments=["device"])
    imps, events = make_logs(seed=7, days=3, users=10, impressions=60)
    lake, state = tmp_path / "lake", tmp_path / "state"
    write_lake(lake, imps, events, name="first")
    [first] = _spark_rollup(spark, tracker, lake, state=state)
    assert first.full and first.days_recomputed
    [same] = _spark_rollup(spark, tracker, lake, state=state)
    assert not same.full and same.days_recomputed == []
    tracker.update_experiment("home", segments=["device", "surface:list"])
    [changed] = _spark_rollup(spark, tracker, lake, state=state)
    assert changed.full and changed.days_recomputed == first.days_recomputed
    tracker.update_experiment("home", segments=["surface:list", "device"])  # the order only
    [reordered] = _spark_rollup(spark, tracker, lake, state=state)
    assert not reordered.full and reordered.days_recomputed == []
