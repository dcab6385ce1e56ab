"""A rollup killed mid-run, then re-run, gives the tables of an uninterrupted run; and the
``tracker rollup`` command."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal

from click.testing import CliRunner

from tests.rollup.scenario import create, dump, make_logs
from tests.rollup.test_rollup import NOW
from tracker.cli import main


def _rollup_then_die(url: str, after_days: int) -> None:
    """Run the rollup and SIGKILL this process once ``after_days`` days are written."""
    from tracker import Tracker
    from tracker.rollup.engine import run_rollup

    def progress(stage, done, total, day):
        if stage == "day" and done == after_days:
            os.kill(os.getpid(), signal.SIGKILL)

    with Tracker(url) as t:
        run_rollup(t.engine, t.settings, "home", now=NOW, progress=progress)


def _killed_rollup(url: str, after_days: int) -> None:
    process = multiprocessing.get_context("spawn").Process(target=_rollup_then_die,
                                                           args=(url, after_days))
    process.start()
    process.join(120)
    assert process.exitcode == -signal.SIGKILL


def test_a_rollup_killed_mid_run_then_rerun_gives_the_same_tables(tracker, db_url):
    create(tracker)
    imps, events = make_logs(seed=21, days=3)
    tracker.log_impressions(imps[:30], on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)  # an earlier, complete run
    tracker.log_impressions(imps[30:], on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    before = dump(tracker.engine)
    _killed_rollup(db_url, after_days=2)  # two days replaced, the rest and the state not
    assert dump(tracker.engine) != before
    (rerun,) = tracker.rollup("home", now=NOW)
    assert len(rerun.days_recomputed) >= 3  # the watermark had not advanced
    after_rerun = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == after_rerun


def _run(url: str, *args: str):
    result = CliRunner().invoke(main, list(args), env={"TRACKER_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    return result


def test_rollup_command_reports_what_it_did_and_then_that_nothing_is_new(tracker, db_url):
    create(tracker)
    imps, events = make_logs(seed=5)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    first = _run(db_url, "rollup")
    assert "home:" in first.stdout and "day(s) recomputed" in first.stdout
    # not a terminal (cron, containers): one plain line per day and stage, no carriage return
    assert "\r" not in first.stderr
    dates = sorted({str(r["served_at"].date()) for r in imps})
    steps = [[stage, f"{i}/{len(dates)}", day] for stage in ("days", "cumulative")
             for i, day in enumerate(dates, 1)]
    assert [line.split() for line in first.stderr.splitlines()] == steps
    again = json.loads(_run(db_url, "rollup", "home", "--format", "json").stdout)
    assert again[0]["days_recomputed"] == [] and again[0]["new_impressions"] == 0
    full = json.loads(_run(db_url, "rollup", "--full", "--format", "json").stdout)
    assert full[0]["full"] and full[0]["impressions_read"] == len(imps)


def test_rollup_command_on_an_empty_database_explains(db_url):
    result = _run(db_url, "rollup")
    assert "no experiments yet" in result.stdout
