"""One watermark rule and one job over experiments for both engines, Spark's side (issue 31,
item 5): Spark goes on from its manifest only while the results are its state directory's;
an experiment the default engine rolled up since is taken over with a rebuild (before, Spark
went on from its stale manifest over the default engine's results); a run over every
experiment leaves the default engine's alone, and goes on past one that fails; no run erases
results whose lists the lake does not hold. The default engine's side:
``tests/rollup/test_sources.py``. On both databases."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.rollup.scenario import assert_same_tables, create, dump, make_logs
from tests.spark.rollups import write_lake
from tests.spark.support import SKIP_REASON
from tests.spark.test_rollup import NOW, _log, _spark_rollup
from tracker.errors import EngineConflict, RollupIncomplete
from tracker.rollup import sources
from tracker.rollup.lock import rollup_lock
from tracker.store.summaries import read_summaries

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))


def _source(engine) -> str | None:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT source FROM rollup_state")).scalar_one()


def test_spark_takes_over_an_experiment_the_default_engine_rolled_up_since(spark, tracker,
                                                                          tmp_path):
    create(tracker)
    imps, events = make_logs(seed=6, days=2, users=8, impressions=40, history=2)
    write_lake(tmp_path / "lake", imps, events)
    # the database holds one more list than the lake: the engines' results differ
    extra = dict(imps[0], impression_id="db-only", user_id="someone-else",
                 served_at=imps[0]["served_at"] + timedelta(minutes=5))
    _log(tracker, imps + [extra], events)
    state = tmp_path / "state"
    (first,) = _spark_rollup(spark, tracker, tmp_path / "lake", state=state)
    assert first.taken_over is None and _source(tracker.engine) == sources.spark(
        state / "home")
    spark_tables = dump(tracker.engine)
    (default,) = tracker.rollup("home", now=NOW)
    assert default.taken_over is not None and "Spark" in default.taken_over
    assert dump(tracker.engine) != spark_tables and _source(tracker.engine) == "database"
    (back,) = _spark_rollup(spark, tracker, tmp_path / "lake", state=state)
    assert back.taken_over is not None and "default engine" in back.taken_over
    assert back.full and back.days_recomputed == first.days_recomputed
    assert_same_tables(dump(tracker.engine), spark_tables, rel=0)


def test_a_run_over_every_experiment_leaves_the_default_engines_and_none_erases(
        spark, tracker, tmp_path):
    create(tracker)
    imps, events = make_logs(seed=7, days=2, users=8, impressions=40, history=2)
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    before = dump(tracker.engine)
    write_lake(tmp_path / "lake", imps, events)
    from tracker.spark.rollup import rollup

    (skipped,) = rollup(spark, tmp_path / "lake" / "imp", tmp_path / "lake" / "int",
                        database_url=tracker.engine.url.render_as_string(hide_password=False),
                        state=tmp_path / "state", now=NOW, buckets=3)
    assert skipped.skipped is not None and "default engine" in skipped.skipped
    assert dump(tracker.engine) == before and _source(tracker.engine) == "database"
    # a lake holding none of the experiment's lists: a run naming it refuses to erase
    elsewhere = [dict(r, experiment="other") for r in imps]
    write_lake(tmp_path / "other", elsewhere, events)
    with pytest.raises(EngineConflict, match="lake holds none of its lists"):
        _spark_rollup(spark, tracker, tmp_path / "other", state=tmp_path / "state")
    assert dump(tracker.engine) == before and _source(tracker.engine) == "database"


def test_a_spark_run_over_every_experiment_rolls_up_the_others_when_one_fails(
        spark, tracker, tmp_path):
    """One job over experiments for both engines (tracker.rollup.job): an experiment busy in
    another rollup no longer stops Spark's run over every experiment (it raised ``Busy``
    before reaching the next one); the others are rolled up and their summaries published."""
    from tracker.spark.rollup import rollup

    imps, events = [], []
    for key, seed in (("away", 1), ("home", 2)):
        create(tracker, key)
        more, answers = make_logs(seed=seed, days=2, users=6, impressions=30, key=key)
        imps += more
        events += [dict(e, event_id=f"{key}-{e['event_id']}") for e in answers]
    write_lake(tmp_path / "lake", imps, events)
    url = tracker.engine.url.render_as_string(hide_password=False)
    home = tracker.experiment("home")
    with rollup_lock(tracker.engine, home.id, "home"), \
            pytest.raises(RollupIncomplete) as raised:
        rollup(spark, tmp_path / "lake" / "imp", tmp_path / "lake" / "int",
               database_url=url, state=tmp_path / "state", now=NOW, buckets=3)
    assert raised.value.only_busy and [k for k, _ in raised.value.failures] == ["home"]
    assert [s.experiment for s in raised.value.summaries] == ["away"]
    assert len(tracker.metric_table("away")) > 0 and len(tracker.metric_table("home")) == 0
    with tracker.engine.connect() as conn:
        assert read_summaries(conn, ["away", "home"]).keys() == {"away"}


def test_spark_runs_the_one_cumulative_pass_and_keeps_one_checkpoint(spark, tracker, tmp_path):
    """The cumulative pass is the default engine's, its state in the directory: one set of
    cumulative totals (the checkpoint, at the newest final day), not one per day; a later
    run from it equals a rebuild."""
    from tracker.rollup.cumulative import _checkpoint
    from tracker.spark.cumulative import DirectoryStore
    from tracker.spark.state import StateDir
    from tracker.store import results
    from tracker.store.experiments import get_experiment
    from tracker.store.types import to_micros

    create(tracker)
    imps, events = make_logs(seed=9, days=3, users=8, impressions=40, history=2)
    last = max(i["served_at"] for i in imps).date()
    write_lake(tmp_path / "lake", [i for i in imps if i["served_at"].date() < last], events)
    state = tmp_path / "state"
    _spark_rollup(spark, tracker, tmp_path / "lake", state=state)
    write_lake(tmp_path / "lake", [i for i in imps if i["served_at"].date() == last], [],
               name="later")
    (later,) = _spark_rollup(spark, tracker, tmp_path / "lake", state=state)
    assert not later.full and later.days_recomputed == [last]
    with tracker.engine.connect() as conn:
        final = _checkpoint(results.known_days(conn, tracker.experiment("home").id),
                            to_micros(NOW))
    assert final is not None
    with tracker.engine.connect() as conn:
        store = DirectoryStore(StateDir(state / "home"), get_experiment(conn, "home"))
    assert store.checkpoint().day == final and not (state / "home" / "units" / "cumulative"
                                                    ).exists()
    assert set(store.checkpoint_rows(None).users.to_pylist()) == \
        {i["user_id"] for i in imps if i["served_at"].date() <= final}
    incremental = dump(tracker.engine)
    _spark_rollup(spark, tracker, tmp_path / "lake", state=state, full=True)
    assert_same_tables(dump(tracker.engine), incremental, rel=0)


def test_runs_without_a_state_directory_are_one_source_and_each_rebuilds(spark, tracker,
                                                                         tmp_path):
    create(tracker)
    imps, events = make_logs(seed=8, days=2, users=8, impressions=40)
    write_lake(tmp_path / "lake", imps, events)
    (first,) = _spark_rollup(spark, tracker, tmp_path / "lake")
    tables = dump(tracker.engine)
    (second,) = _spark_rollup(spark, tracker, tmp_path / "lake")
    # before, each run's temporary folder was another source: every run "took it over"
    assert first.taken_over is None and second.taken_over is None
    assert second.full and second.days_recomputed == first.days_recomputed
    assert _source(tracker.engine) == sources.spark(None)
    assert_same_tables(dump(tracker.engine), tables, rel=0)
    (kept,) = _spark_rollup(spark, tracker, tmp_path / "lake", state=tmp_path / "state")
    assert kept.taken_over is not None and "without a state directory" in kept.taken_over
