"""No stored time can stop the rollup, and its cost follows the days that hold data.

Rows written before ingest validated times may hold any BIGINT of microseconds: they are
put there straight with SQL here, as such a database would hold them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
import sqlalchemy as sa

from tests.helpers import T0
from tests.rollup.scenario import create, make_logs
from tests.rollup.test_rollup import NOW
from tracker.rollup.engine import run_rollup
from tracker.store.types import to_micros

YEAR_1 = to_micros(datetime(1, 1, 1, tzinfo=UTC))
YEAR_9999 = to_micros(datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC))
OUTSIDE = {"year-1": YEAR_1, "year-9999": YEAR_9999, "plus-2-62": 2**62, "minus-2-62": -2**62}
"""Times the rollup cannot put on a calendar day: left out and counted."""


def _move(tracker, table: str, column: str, key_column: str, times: dict[str, int]) -> None:
    """Set the time of the rows whose key is in ``times`` straight in the table."""
    with tracker.engine.begin() as conn:
        for key, micros in times.items():
            conn.execute(sa.text(f"UPDATE {table} SET {column} = :t WHERE {key_column} = :k"),
                         {"t": micros, "k": key})


def _log_moved(tracker, times: dict[str, int], user: str = "u1") -> None:
    """One impression and one interaction of ``user`` per entry, moved to that time."""
    tracker.log_impressions([
        {"impression_id": f"imp-{name}", "experiment": "home", "arm": "control",
         "user_id": user, "items": ["i1", "i2"], "served_at": T0} for name in times
    ], on_invalid="all_or_nothing")
    tracker.log_interactions([
        {"event_id": f"evt-{name}", "user_id": user, "item_id": "i1", "event": "click",
         "occurred_at": T0} for name in times
    ], on_invalid="all_or_nothing")
    _move(tracker, "impression", "served_at", "impression_key",
          {f"imp-{name}": t for name, t in times.items()})
    _move(tracker, "interaction", "occurred_at", "event_key",
          {f"evt-{name}": t for name, t in times.items()})


def _daily(tracker, days: set[date]) -> list[tuple]:
    table = tracker.metric_table("home")
    rows = table[table["day"].isin(days)].drop(columns="provisional")
    return sorted(map(tuple, rows.astype(str).itertuples(index=False)))


@pytest.mark.parametrize("zone", [
    pytest.param("UTC", id="utc"),
    pytest.param("Pacific/Kiritimati", id="fourteen-hours-east"),
    pytest.param("Etc/GMT+12", id="twelve-hours-west"),
])
def test_rows_dated_where_no_calendar_reaches_are_left_out_and_counted(tracker, zone):
    create(tracker, timezone=zone)
    imps, events = make_logs(seed=3, days=3)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    (clean,) = tracker.rollup("home", now=NOW)
    normal_days = set(clean.days_recomputed)
    before = _daily(tracker, normal_days)

    # in range: the epoch itself and the microsecond before it (hours floor below zero)
    _log_moved(tracker, {**OUTSIDE, "epoch": 0, "before-epoch": -1})
    (incremental,) = tracker.rollup("home", now=NOW)
    (full,) = tracker.rollup("home", full=True, now=NOW)

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    epoch_days = {(epoch - timedelta(microseconds=us)).astimezone(ZoneInfo(zone)).date()
                  for us in (0, 1)}
    for summary in (incremental, full):
        assert (summary.ignored_impressions, summary.ignored_interactions) == (4, 4)
        assert "left out 4 impressions and 4 interactions" in summary.describe()
    assert set(incremental.days_recomputed) >= epoch_days
    assert full.days_recomputed == sorted(normal_days | epoch_days)
    assert _daily(tracker, normal_days) == before


def test_the_oldest_and_newest_times_ingest_accepts_roll_up(tracker):
    create(tracker)
    # the newest: as far in the future as the clock skew allowed (a margin for the seconds
    # this test takes)
    newest = datetime.now(UTC) + timedelta(seconds=tracker.settings.max_future_seconds - 30)
    times = {"oldest": datetime(2000, 1, 1, tzinfo=UTC), "newest": newest}
    impressions = tracker.log_impressions([
        {"impression_id": name, "experiment": "home", "arm": "treatment", "user_id": "u1",
         "items": ["i1"], "served_at": at} for name, at in times.items()
    ], on_invalid="all_or_nothing")
    interactions = tracker.log_interactions([
        {"event_id": name, "user_id": "u1", "item_id": "i1", "event": "click",
         "occurred_at": at} for name, at in times.items()
    ], on_invalid="all_or_nothing")
    assert (impressions.stored, interactions.stored) == (2, 2)
    (summary,) = tracker.rollup("home")
    assert summary.days_recomputed == sorted(at.date() for at in times.values())
    assert (summary.ignored_impressions, summary.ignored_interactions) == (0, 0)
    cumulative = tracker.health_table("home", cumulative=True)
    assert cumulative[cumulative["arm"].isna()]["impressions"].tolist() == [1, 2]


def test_a_full_rollup_visits_the_days_with_data_not_the_calendar_between(tracker):
    create(tracker)
    tracker.log_impressions([
        {"impression_id": name, "experiment": "home", "arm": "control", "user_id": "u1",
         "items": ["i1"], "served_at": T0} for name in ("old", "new")
    ], on_invalid="all_or_nothing")
    _move(tracker, "impression", "served_at", "impression_key",
          {"old": to_micros(datetime(1970, 1, 1, 12, tzinfo=UTC))})
    visited: list[tuple[str, date]] = []

    def progress(stage, done, total, day):
        visited.append((stage, day))

    (summary,) = run_rollup(tracker.engine, tracker.settings, "home", full=True, now=NOW,
                            progress=progress)
    days = [date(1970, 1, 1), T0.date()]
    assert summary.days_recomputed == days
    assert visited == [("day", d) for d in days] + [("cumulative", d) for d in days]

    # a late click in 2026 touches the days its window reaches that hold data: not 1970
    tracker.log_interactions([{"event_id": "late", "user_id": "u1", "item_id": "i1",
                               "event": "click", "occurred_at": T0 + timedelta(minutes=1)}])
    visited.clear()
    (late,) = run_rollup(tracker.engine, tracker.settings, "home", now=NOW, progress=progress)
    assert late.days_recomputed == [T0.date()]
    assert visited == [("day", T0.date()), ("cumulative", T0.date())]


def test_a_stored_empty_list_leaves_every_statistic_finite(tracker):
    # ingest refuses an empty list; a row stored before it checked may hold one
    create(tracker)
    imps, events = make_logs(seed=1, days=2)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    last = max(imps, key=lambda r: r["served_at"])  # a day with a popularity window before it
    empty = "{}" if tracker.engine.dialect.name == "postgresql" else "[]"
    with tracker.engine.begin() as conn:
        conn.execute(sa.text("UPDATE impression SET items = :empty WHERE impression_key = :k"),
                     {"empty": empty, "k": last["impression_id"]})
    tracker.rollup("home", now=NOW)
    for cumulative in (False, True):
        table = tracker.metric_table("home", cumulative=cumulative)
        sums = table[["sum", "sum_sq", "ratio_sum", "ratio_sum_sq", "ratio_cross"]]
        assert np.isfinite(sums.to_numpy()).all(), table[~np.isfinite(sums).all(axis=1)]
