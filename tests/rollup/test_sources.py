"""One watermark rule for both engines (issue 31, item 5): an experiment's results come from
one source of logs (``rollup_state.source``); a run of the default engine goes on from its
own watermarks only, takes another source's experiment over with a rebuild when a run names
it, leaves it alone in a run over every experiment, and never erases results whose lists the
database does not hold. Spark's side: ``tests/spark/test_sources.py``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.helpers import T0
from tests.rollup.scenario import create, dump, make_logs
from tracker.errors import EngineConflict, ExpiredLogs
from tracker.rollup import sources

NOW = datetime(2026, 11, 20, tzinfo=UTC)  # long after the logs: every day final
SPARK = "spark:/lake/state/home"


def _logged(tracker, key: str = "home", seed: int = 2) -> None:
    create(tracker, key)
    imps, events = make_logs(seed, days=3, users=10, impressions=50, history=3)
    for record in imps:
        record["experiment"] = key
        record["impression_id"] = f"{key}-{record['impression_id']}"
    for record in events:
        record["event_id"] = f"{key}-{record['event_id']}"
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")


def _state(engine, key: str = "home") -> tuple:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT s.source, s.impressions_seen, s.interactions_seen FROM rollup_state s "
            "JOIN experiment e ON e.id = s.experiment_id WHERE e.key = :k"), {"k": key}).one()


def _as_if_spark(engine, key: str = "home") -> None:
    """The experiment as a Spark run leaves it: its results claimed for a state directory,
    and (unlike a real run, which sets them NULL) the database's watermarks kept, so that
    only the source tells this run the results are not its own; and one of its results
    changed, as results from other logs may differ."""
    with engine.begin() as conn:
        conn.execute(sa.text(
            "UPDATE rollup_state SET source = :s WHERE experiment_id = "
            "(SELECT id FROM experiment WHERE key = :k)"), {"s": SPARK, "k": key})
        conn.execute(sa.text(
            "UPDATE rollup_metric SET sum = sum + 1000 WHERE experiment_id = "
            "(SELECT id FROM experiment WHERE key = :k)"), {"k": key})


def test_a_run_claims_its_results_for_the_database(tracker):
    _logged(tracker)
    tracker.rollup("home", now=NOW)
    source, impressions, interactions = _state(tracker.engine)
    assert source == sources.DATABASE and impressions and interactions


def test_a_run_naming_another_sources_experiment_takes_it_over_with_a_rebuild(tracker):
    _logged(tracker)
    (first,) = tracker.rollup("home", now=NOW)
    rebuilt = dump(tracker.engine)
    _as_if_spark(tracker.engine)
    assert dump(tracker.engine)["rollup_metric"] != rebuilt["rollup_metric"]
    (summary,) = tracker.rollup("home", now=NOW)
    assert summary.taken_over is not None and "/lake/state/home" in summary.taken_over
    assert "taken over" in summary.describe() and summary.skipped is None
    assert summary.days_recomputed == first.days_recomputed  # every day
    assert dump(tracker.engine) == rebuilt  # every day from the database's logs again
    assert _state(tracker.engine)[0] == sources.DATABASE
    (again,) = tracker.rollup("home", now=NOW)  # its own now: incremental, nothing new
    assert again.taken_over is None and again.days_recomputed == []


def test_a_run_over_every_experiment_leaves_sparks_experiments_to_spark(tracker):
    _logged(tracker, "home", seed=2)
    _logged(tracker, "other", seed=3)
    tracker.rollup(now=NOW)
    _as_if_spark(tracker.engine, "home")
    sparks = dump(tracker.engine)
    late = {"event_id": "late", "user_id": "u1", "item_id": "i1", "event": "click",
            "occurred_at": T0 + timedelta(days=1, hours=1)}
    tracker.log_interactions([late], on_invalid="all_or_nothing")
    summaries = {s.experiment: s for s in tracker.rollup(now=NOW)}
    assert summaries["home"].skipped is not None and "Spark" in summaries["home"].skipped
    assert summaries["home"].describe().startswith("home: not rolled up: left to Spark")
    assert summaries["home"].to_dict()["skipped"] == summaries["home"].skipped
    assert summaries["other"].skipped is None
    after = dump(tracker.engine)
    home = _experiment_id(tracker.engine, "home")
    for table in ("rollup_metric", "rollup_day", "rollup_health"):
        assert [r for r in after[table] if ("experiment_id", home) in r] == \
            [r for r in sparks[table] if ("experiment_id", home) in r], table
    assert _state(tracker.engine, "home")[0] == SPARK


def _experiment_id(engine, key: str) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT id FROM experiment WHERE key = :k"),
                            {"k": key}).scalar_one()


def test_no_run_erases_results_whose_lists_the_database_does_not_hold(tracker):
    """Spark's experiment whose lists only the lake holds: a run naming it refuses (even
    with ``--full``), and every table stays as it was."""
    _logged(tracker)
    tracker.rollup("home", now=NOW)
    _as_if_spark(tracker.engine)
    with tracker.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM impression"))
    before = dump(tracker.engine)
    for full in (False, True):
        with pytest.raises(EngineConflict, match="database holds none of its lists"):
            tracker.rollup("home", full=full, now=NOW)
    assert dump(tracker.engine) == before


def test_taking_over_after_the_logs_expired_is_refused_with_the_reason(tracker):
    _logged(tracker)
    tracker.rollup("home", now=NOW)
    tracker.expire_logs(NOW - (T0 + timedelta(days=1)), now=NOW)
    _as_if_spark(tracker.engine)
    before = dump(tracker.engine)
    with pytest.raises(ExpiredLogs, match="came from Spark"):
        tracker.rollup("home", now=NOW)
    assert dump(tracker.engine) == before
    assert _state(tracker.engine)[0] == SPARK


@pytest.mark.parametrize("stored, mine, other", [
    (None, sources.DATABASE, False), (sources.DATABASE, sources.DATABASE, False),
    (SPARK, sources.DATABASE, True), (sources.DATABASE, SPARK, True),
    ("spark:/elsewhere", SPARK, False), (None, SPARK, False)])
def test_which_source_is_the_other_engines(stored, mine, other):
    assert sources.other_engine(stored, mine) is other
    assert (sources.taken_over(stored, mine) is None) is (stored in (None, mine))


def test_an_experiment_rolled_up_from_a_lake_holds_back_neither_log_expiry_nor_archiving(
        tracker):
    """Its database rows are not what its rollup takes into account: ``tracker logs
    expire`` and archiving no longer ask for a `tracker rollup` that would leave it to
    Spark; a run over every experiment no longer lists it once archived."""
    _logged(tracker)
    tracker.rollup("home", now=NOW)
    with tracker.engine.begin() as conn:  # as a Spark run leaves it: its watermarks NULL
        conn.execute(sa.text("UPDATE rollup_state SET source = :s, impressions_seen = NULL, "
                             "interactions_seen = NULL"), {"s": SPARK})
    tracker.stop_experiment("home")
    assert tracker.archive_experiment("home").status == "archived"
    expired = tracker.expire_logs(NOW - (T0 + timedelta(days=1)), now=NOW)
    assert expired.impressions > 0
    assert tracker.rollup(now=NOW) == []  # archived, rolled up elsewhere: not taken


def test_a_run_never_erases_what_an_unknown_source_left(tracker):
    """An experiment a release before sources rolled up on Spark (source unknown, watermarks
    NULL) whose lists the database does not hold: a run naming it refuses, a run over every
    experiment leaves it, and its results stay."""
    _logged(tracker)
    tracker.rollup("home", now=NOW)
    with tracker.engine.begin() as conn:
        conn.execute(sa.text("UPDATE rollup_state SET source = NULL, impressions_seen = NULL, "
                             "interactions_seen = NULL"))
        conn.execute(sa.text("DELETE FROM impression"))
    before = dump(tracker.engine)
    with pytest.raises(EngineConflict, match="an unknown source"):
        tracker.rollup("home", now=NOW)
    (left,) = tracker.rollup(now=NOW)
    assert left.skipped is not None and "would erase" in left.skipped
    assert dump(tracker.engine) == before
