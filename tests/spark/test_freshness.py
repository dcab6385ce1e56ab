"""A rollup on Spark stores the experiment's summary with its freshness ("data through"),
found in the lake's logs by the definition the default engine reads in the database: the
same instants on the same logs (both databases)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.rollup.scenario import WINDOW, create, make_logs
from tests.spark.rollups import write_lake
from tests.spark.support import SKIP_REASON
from tests.spark.test_rollup import NOW, _log, _spark_rollup
from tracker.report import report
from tracker.report.summary import ExperimentSummary
from tracker.store.summaries import read_summaries

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))


def _stored(engine) -> ExperimentSummary:
    with engine.connect() as conn:
        return ExperimentSummary.from_dict(read_summaries(conn, ["home"])["home"][1])


def test_a_spark_rollup_stores_data_through_as_the_default_engine_does(spark, tracker,
                                                                     tmp_path):
    create(tracker)
    imps, events = make_logs(seed=4, days=2, users=8, impressions=40)  # late events too
    last = max(i["served_at"] for i in imps)
    user = next(i["user_id"] for i in imps if i["served_at"] == last)
    answer, stranger, too_late = (last + timedelta(hours=2), last + timedelta(hours=3),
                                  last + WINDOW + timedelta(hours=1))
    events = events + [
        {"event_id": "answer", "user_id": user, "item_id": "i1", "event": "click",
         "occurred_at": answer},
        {"event_id": "stranger", "user_id": "nobody", "item_id": "i1", "event": "click",
         "occurred_at": stranger},  # a user the experiment never served
        {"event_id": "too-late", "user_id": user, "item_id": "i1", "event": "click",
         "occurred_at": too_late}]  # after every list's window
    # the definition in plain Python: the newest interaction after the newest list that
    # answers a list of its user (served at most the window before it)
    answering = [e["occurred_at"] for e in events if e["occurred_at"] > last and any(
        i["user_id"] == e["user_id"]
        and i["served_at"] <= e["occurred_at"] <= i["served_at"] + WINDOW for i in imps)]
    assert answer <= max(answering) < last + WINDOW
    write_lake(tmp_path, imps, events)
    _spark_rollup(spark, tracker, tmp_path, full=True)
    on_spark = _stored(tracker.engine)
    assert (on_spark.newest_served_at, on_spark.newest_interaction_at) == (last,
                                                                          max(answering))
    assert on_spark.users > 0
    # the report's freshness check reads it
    assert report(tracker.engine, "home", now=NOW).health["data_through"] == \
        on_spark.newest_event.isoformat()
    # the default engine, the same logs in the database, from no summary: the same instants
    with tracker.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM experiment_summary"))
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    in_database = _stored(tracker.engine)
    assert (in_database.newest_served_at, in_database.newest_interaction_at) == \
        (on_spark.newest_served_at, on_spark.newest_interaction_at)
    assert in_database.users == on_spark.users
