"""A rollup of every experiment: one experiment that cannot roll up does not stop the others.

The failure made here is a real one: the stored per-user state of one experiment is
unreadable (bytes of no known format), so its next incremental run raises
:class:`~tracker.errors.StaleState` while reading it.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tests.rollup.scenario import create, make_logs
from tests.rollup.test_rollup import NOW
from tracker.cli import main
from tracker.errors import Busy, RollupIncomplete, StaleState
from tracker.rollup.lock import rollup_lock
from tracker.store.rollup_tables import RollupCheckpoint, RollupUnits, RollupUserTotals


def _two_experiments(tracker) -> list[dict]:
    """``home`` and ``away`` rolled up over a first batch; returns a second batch of both
    (a later day) not yet logged."""
    later = []
    for key, seed in (("home", 1), ("away", 2)):
        create(tracker, key)
        imps, events = make_logs(seed=seed, days=2, key=key)
        tracker.log_impressions(imps, on_invalid="all_or_nothing")
        tracker.log_interactions(events, on_invalid="all_or_nothing")
        start = max(r["served_at"] for r in imps) + timedelta(days=1)
        more, _ = make_logs(seed=seed + 10, days=1, key=key, start=start)
        later.extend({**r, "impression_id": r["impression_id"] + "-later"} for r in more)
    tracker.rollup(now=NOW)
    return later


def _spoil_units(tracker, key: str) -> None:
    """Make every stored unit total of ``key`` unreadable: each day's blob, and the
    checkpoint's users (its sums dropped, so that the next run reads every user's)."""
    experiment_id = tracker.experiment(key).id
    with tracker.engine.begin() as conn:
        spoiled = conn.execute(sa.update(RollupUnits)
                               .where(RollupUnits.experiment_id == experiment_id)
                               .values(data=b"not an Arrow stream")).rowcount
        spoiled *= conn.execute(sa.update(RollupUserTotals)
                                .where(RollupUserTotals.experiment_id == experiment_id)
                                .values(data=b"not user totals")).rowcount
        conn.execute(sa.update(RollupCheckpoint)
                     .where(RollupCheckpoint.experiment_id == experiment_id)
                     .values(sums=None))
    assert spoiled > 0


def _days(tracker, key: str) -> set:
    return set(tracker.metric_table(key)["day"])


def test_one_failing_experiment_leaves_the_others_rolled_up(tracker):
    later = _two_experiments(tracker)
    _spoil_units(tracker, "home")
    home_before = tracker.metric_table("home")
    tracker.log_impressions(later, on_invalid="all_or_nothing")

    with pytest.raises(RollupIncomplete, match=r"1 of 2 experiment\(s\).*home.*rollup --full") \
            as raised:
        tracker.rollup(now=NOW)
    (failed_key, error), = raised.value.failures
    assert failed_key == "home" and isinstance(error, StaleState)
    assert not raised.value.only_busy
    (done,) = raised.value.summaries
    assert done.experiment == "away" and done.days_recomputed
    new_day = max(r["served_at"] for r in later if r["experiment"] == "away").date()
    assert new_day in _days(tracker, "away")
    # the failed experiment's results are where its previous run left them
    assert tracker.metric_table("home").equals(home_before)

    # its way out, as the message says, then the next run of all is whole again
    tracker.rollup("home", full=True, now=NOW)
    assert sorted(s.experiment for s in tracker.rollup(now=NOW)) == ["away", "home"]


def test_one_experiment_asked_for_still_raises_its_own_error(tracker):
    later = _two_experiments(tracker)
    _spoil_units(tracker, "home")
    tracker.log_impressions(later, on_invalid="all_or_nothing")
    with pytest.raises(StaleState, match="rollup --full"):
        tracker.rollup("home", now=NOW)


def test_the_command_rolls_up_the_others_then_exits_1_naming_the_failed_one(tracker, db_url):
    later = _two_experiments(tracker)
    _spoil_units(tracker, "home")
    tracker.log_impressions(later, on_invalid="all_or_nothing")
    result = CliRunner().invoke(main, ["rollup"], env={"TRACKER_DATABASE_URL": db_url})
    assert result.exit_code == 1, result.output
    assert "away" in result.stdout  # its summary
    assert "Error: 1 of 2 experiment(s) not rolled up (home:" in result.output
    assert "tracker rollup --full" in result.output
    assert "the other 1 were rolled up" in result.output
    new_day = max(r["served_at"] for r in later if r["experiment"] == "away").date()
    assert new_day in _days(tracker, "away")


def test_an_experiment_busy_elsewhere_is_skipped_and_the_command_exits_0(tracker, db_url):
    later = _two_experiments(tracker)
    tracker.log_impressions(later, on_invalid="all_or_nothing")
    home = tracker.experiment("home")
    with rollup_lock(tracker.engine, home.id, "home"):
        with pytest.raises(RollupIncomplete) as raised:
            tracker.rollup(now=NOW)
        assert raised.value.only_busy
        assert isinstance(raised.value.failures[0][1], Busy)
        assert [s.experiment for s in raised.value.summaries] == ["away"]
        result = CliRunner().invoke(main, ["rollup"], env={"TRACKER_DATABASE_URL": db_url})
    assert result.exit_code == 0, result.output
    assert "skipped home" in result.output
    home_day = max(r["served_at"] for r in later if r["experiment"] == "home").date()
    assert home_day not in _days(tracker, "home")  # skipped: left for its next run
    (summary,) = tracker.rollup("home", now=NOW)
    assert home_day in summary.days_recomputed


def test_in_json_a_failed_experiment_is_an_object_of_the_list(tracker, db_url):
    later = _two_experiments(tracker)
    _spoil_units(tracker, "home")
    tracker.log_impressions(later, on_invalid="all_or_nothing")
    result = CliRunner().invoke(main, ["rollup", "--format", "json"],
                                env={"TRACKER_DATABASE_URL": db_url})
    assert result.exit_code == 1
    entries = json.loads(result.stdout)
    by_key = {e["experiment"]: e for e in entries}
    assert set(by_key) == {"home", "away"}
    assert by_key["home"]["busy"] is False and "rollup --full" in by_key["home"]["error"]
    assert by_key["away"]["days_recomputed"]  # a summary


def test_a_bug_in_one_experiment_is_logged_with_its_traceback_and_the_others_run(
        tracker, monkeypatch, caplog):
    """An error that is not tracker's own (a bug) is isolated too, and logged whole."""
    from tracker.rollup import engine

    later = _two_experiments(tracker)
    tracker.log_impressions(later, on_invalid="all_or_nothing")
    real = engine._Run.run

    def run(job):
        if job.info.key == "home":
            raise ZeroDivisionError("a bug")
        return real(job)

    monkeypatch.setattr(engine._Run, "run", run)
    with pytest.raises(RollupIncomplete, match="home: ZeroDivisionError: a bug"):
        tracker.rollup(now=NOW)
    (record,) = [r for r in caplog.records if "rollup of home failed" in r.getMessage()]
    assert record.exc_info is not None
    new_day = max(r["served_at"] for r in later if r["experiment"] == "away").date()
    assert new_day in _days(tracker, "away")
