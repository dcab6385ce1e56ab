"""The crossover cells (intent-to-treat) on Spark: the same rows as the default engine, and
an incremental run whose late files move a user's first exposure to another arm equals a
run from scratch. On both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers import T0
from tests.rollup.scenario import create, crossed_logs
from tests.spark.rollups import assert_same_rows, report_rows, write_lake
from tests.spark.support import SKIP_REASON
from tracker.store.rollup_tables import CROSSOVER

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

NOW = datetime(2026, 11, 20, tzinfo=UTC)


def _spark_rollup(spark, tracker, lake, state, **options):
    from tracker.spark.rollup import rollup

    return rollup(spark, lake / "imp", lake / "int", experiment="home",
                  database_url=str(tracker.engine.url.render_as_string(hide_password=False)),
                  now=NOW, buckets=3, state=state, **options)


def _crossover_rows(rows: dict) -> list[dict]:
    return [r for r in rows["rollup_metric"] if r["segment"] == CROSSOVER]


def test_spark_writes_the_crossover_cells_of_the_default_engine(spark, tracker, tmp_path):
    create(tracker)
    imps, events = crossed_logs(5)
    # a list served to a crossover user a second before any other of theirs, in the files
    # of the second run: their first exposure moves to its arm
    user = next(r["user_id"] for r in imps if int(r["user_id"][1:]) % 3 == 0)
    arms = {r["arm"] for r in imps if r["user_id"] == user}
    assert arms == {"control", "treatment"}
    first = min((r for r in imps if r["user_id"] == user), key=lambda r: r["served_at"])
    earlier = {**first, "impression_id": "earliest",
               "arm": "treatment" if first["arm"] == "control" else "control",
               "served_at": first["served_at"] - timedelta(seconds=1)}
    cut = T0 + timedelta(days=2)
    lake, state = tmp_path / "lake", tmp_path / "state"
    write_lake(lake, [r for r in imps if r["served_at"] < cut],
               [e for e in events if e["occurred_at"] < cut], name="first")
    _spark_rollup(spark, tracker, lake, state)
    write_lake(lake, [r for r in imps if r["served_at"] >= cut] + [earlier],
               [e for e in events if e["occurred_at"] >= cut], name="late")
    [second] = _spark_rollup(spark, tracker, lake, state)
    assert not second.full
    incremental = report_rows(tracker.engine)
    assert _crossover_rows(incremental)
    _spark_rollup(spark, tracker, lake, tmp_path / "scratch", full=True)
    assert_same_rows(incremental, report_rows(tracker.engine))
    tracker.log_impressions([*imps, earlier], on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW, full=True)
    assert_same_rows(incremental, report_rows(tracker.engine))
