"""Operations: a killed run leaves consistent views, a catalog declared during a run is never
lost, and ``tracker rollup --every`` outlives a broken database connection."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import PG_URL
from tests.rollup.scenario import create, dump, make_logs
from tests.rollup.test_crash_and_cli import _killed_rollup
from tests.rollup.test_rollup import NOW, _check_against_reference
from tracker.config import sqlite_path
from tracker.errors import StoreUnavailable
from tracker.rollup.engine import run_rollup
from tracker.rollup.lock import rollup_lock
from tracker.store import results

ROOT = Path(__file__).resolve().parents[2]


def _views(tracker) -> dict[str, list[tuple]]:
    """What the report reads: metrics and health, daily and cumulative."""
    out = {}
    for cumulative in (False, True):
        for name, table in (("metric", tracker.metric_table), ("health", tracker.health_table)):
            frame = table("home", cumulative=cumulative)
            out[f"{name}-{cumulative}"] = sorted(tuple(map(str, row))
                                                 for row in frame.itertuples(index=False))
    return out


def _impressions_agree(tracker) -> None:
    """The cumulative impressions of the last day are the sum of the daily ones."""
    daily = tracker.health_table("home")
    cumulative = tracker.health_table("home", cumulative=True)
    whole = daily[daily["arm"].isna()]
    last = cumulative[cumulative["arm"].isna()].sort_values("day").iloc[-1]
    assert whole["impressions"].sum() == last["impressions"]


def test_a_rollup_killed_mid_run_leaves_the_previous_daily_and_cumulative_views(tracker,
                                                                                db_url):
    create(tracker)
    imps, events = make_logs(seed=21, days=3)
    tracker.log_impressions(imps[:30], on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    previous = _views(tracker)
    tracker.log_impressions(imps[30:], on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    _killed_rollup(db_url, after_days=2)  # two of three days computed, then SIGKILL
    assert _views(tracker) == previous
    _impressions_agree(tracker)
    tracker.rollup("home", now=NOW)
    _impressions_agree(tracker)
    assert _views(tracker) != previous


@pytest.mark.parametrize("earlier_run", [
    pytest.param(False, id="declared-while-the-first-run-computes"),
    pytest.param(True, id="declared-while-an-incremental-run-computes"),
])
def test_a_catalog_declared_during_a_rollup_is_in_effect_after_the_next_one(tracker,
                                                                            earlier_run):
    create(tracker)
    imps, events = make_logs(seed=8, days=3)
    catalog = frozenset(f"i{n}" for n in range(40))  # the 25 items served and 15 never
    if earlier_run:
        tracker.log_impressions(imps[:20], on_invalid="all_or_nothing")
        tracker.rollup("home", now=NOW)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")

    def declare_after_the_first_day(stage, done, total, day):
        if stage == "day" and done == 1:
            tracker.declare_catalog("home", sorted(catalog))

    (racing,) = run_rollup(tracker.engine, tracker.settings, "home", now=NOW,
                           progress=declare_after_the_first_day)
    (after,) = tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, imps, events, declared=catalog)
    rolled = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == rolled
    assert after.days_recomputed == racing.days_recomputed  # every day, again
    assert racing.superseded and "a catalog was declared meanwhile" in racing.describe()
    assert not after.superseded


def _wait_for(predicate, what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)


class _Breaker:
    """Breaks the database under a running rollup and mends it: on PostgreSQL it
    terminates the rollup's backends (found by their application name); on SQLite it holds
    the write lock longer than the rollup's busy timeout."""

    def __init__(self, db_url: str) -> None:
        self.name = f"rollup-every-{uuid.uuid4().hex[:8]}"
        self.url = db_url + (f"&application_name={self.name}" if PG_URL else "")
        self.writer: sqlite3.Connection | None = None

    def break_(self, engine: sa.Engine) -> None:
        if PG_URL:
            with engine.connect() as conn:
                ended = conn.execute(sa.text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = :name"), {"name": self.name}).scalar_one()
                conn.commit()
            assert ended >= 1  # at least the connection holding the rollup lock
            return
        self.writer = sqlite3.connect(sqlite_path(self.url), isolation_level=None)
        self.writer.execute("BEGIN IMMEDIATE")

    def mend(self) -> None:
        if self.writer is not None:
            self.writer.execute("ROLLBACK")
            self.writer.close()


def test_rollup_every_reports_a_broken_run_retries_and_stops_on_sigterm(tracker, db_url,
                                                                        tmp_path):
    create(tracker)
    imps, events = make_logs(seed=4, days=3)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    breaker = _Breaker(db_url)
    paused, resume = tmp_path / "paused", tmp_path / "resume"
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    env = dict(os.environ, TRACKER_DATABASE_URL=breaker.url, PYTHONPATH=str(ROOT),
               TRACKER_SQLITE_BUSY_TIMEOUT_MS="300", TRACKER_TEST_PAUSED=str(paused),
               TRACKER_TEST_RESUME=str(resume))
    with open(out, "w") as stdout, open(err, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "tests/rollup/paused_cli.py"), "rollup", "--every",
             "1s"], env=env, stdout=stdout, stderr=stderr)
    try:
        _wait_for(paused.exists, "the first run's first day")
        breaker.break_(tracker.engine)
        resume.touch()
        _wait_for(lambda: "rollup failed:" in err.read_text(), "the failure report")
        breaker.mend()
        _wait_for(lambda: "day(s) recomputed" in out.read_text(), "a later run that works")
        assert process.poll() is None  # still looping
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, err.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    report = err.read_text()
    assert "next try in 1 s" in report and "stopped by SIGTERM" in report
    assert "Traceback" not in report
    with tracker.engine.connect() as conn:
        state = results.load_state(conn, tracker.experiment("home").id)
        assert state.watermarks == results.latest_ids(conn)


@pytest.mark.skipif(not PG_URL, reason="a SQLite file lock cannot be lost while its process lives")
def test_a_lost_lock_connection_neither_hides_the_runs_error_nor_lets_it_commit(tracker):
    create(tracker)
    info = tracker.experiment("home")
    with pytest.raises(ZeroDivisionError, match="the run's own error"), \
            rollup_lock(tracker.engine, info.id, "home") as lock:
        pid = lock.connection.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        lock.connection.commit()
        with tracker.engine.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            conn.commit()
        with pytest.raises(StoreUnavailable, match="lost the connection holding"):
            lock.confirm()
        raise ZeroDivisionError("the run's own error")
    with rollup_lock(tracker.engine, info.id, "home") as again:  # the server dropped it
        again.confirm()
