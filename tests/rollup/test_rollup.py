"""The rollup against an independent reference, incrementally and in full, on both databases."""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta
from itertools import zip_longest

import pandas as pd
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import fresh_database, migrated
from tests.helpers import T0
from tests.rollup import reference
from tests.rollup.scenario import CUTOFFS, RELEVANCE, WINDOW, create, dump, make_logs
from tracker import Tracker
from tracker.config import Settings
from tracker.errors import Busy, NotFound, ValidationError
from tracker.rollup import aggregate
from tracker.rollup.lock import rollup_lock

NOW = datetime(2026, 11, 20, tzinfo=UTC)  # long after the logs: every day final


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _check_against_reference(tracker: Tracker, imps, events, zone="UTC",
                             declared: frozenset[str] = frozenset()):
    users, sets, health = reference.rollup(imps, events, window=WINDOW, relevance=RELEVANCE,
                                           zone=zone, cutoffs=CUTOFFS, declared=declared)
    seen_user, seen_set = set(), set()
    for cumulative in (False, True):
        table = tracker.metric_table("home", cumulative=cumulative)
        assert not table.empty
        for row in table.itertuples():
            k = 0 if pd.isna(row.k) else int(row.k)
            key = (cumulative, row.day, row.arm, row.metric, k)
            if row.kind == "set":
                assert _close(row.sum, sets[key]), (key, row.sum, sets[key])
                seen_set.add(key)
            elif row.users == 0:
                assert key not in users, key
            else:
                n, total, total_sq = users[key]
                assert row.users == n, key
                assert _close(row.sum, total), (key, row.sum, total)
                assert _close(row.sum_sq, total_sq), key
                assert _close(row.mean, total / n), key
                seen_user.add(key)
        frame = tracker.health_table("home", cumulative=cumulative)
        for row in frame.itertuples():
            arm = None if not isinstance(row.arm, str) else row.arm
            expected = health.get((cumulative, row.day, arm), (0, 0, 0))  # arm unseen: zeros
            assert (row.users, row.impressions, row.crossover_users) == expected, (row, expected)
    assert seen_user == set(users)
    assert seen_set == set(sets)


@pytest.mark.parametrize("block", [None, 2])
def test_every_metric_equals_the_independent_reference(tracker, block, monkeypatch):
    if block:  # an arm's users summed in blocks of two (many blocks, some of one user)
        monkeypatch.setattr(aggregate, "BLOCK_USERS", block)
    create(tracker)
    imps, events = make_logs(seed=3, days=3, users=14, impressions=90, history=20)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, imps, events)


def test_a_declared_catalog_joins_the_items_seen_in_coverage_and_gini(tracker):
    create(tracker)
    imps, events = make_logs(seed=3, days=3, users=14, impressions=90, history=20)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    seen = sorted({item for imp in imps for item in imp["items"]})
    # half of the items served, and 40 the logs never mention
    declared = frozenset(seen[::2]) | {f"never-{i}" for i in range(40)}
    assert tracker.declare_catalog("home", list(declared) + seen[:3]) == len(declared | set(
        seen[:3]))
    assert tracker.catalog("home") == sorted(declared | set(seen[:3]))
    tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, imps, events, declared=declared | set(seen[:3]))
    coverage = tracker.metric_table("home").query("metric == 'coverage'")["mean"]
    assert 0 < coverage.max() < 1


def test_declaring_a_catalog_after_a_rollup_recomputes_every_day(tracker):
    create(tracker)
    imps, events = make_logs(seed=5, days=3, history=20)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, imps, events)
    declared = frozenset(f"catalog-{i}" for i in range(25))
    tracker.declare_catalog("home", sorted(declared))
    (summary,) = tracker.rollup("home", now=NOW)
    days = sorted({imp["served_at"].date() for imp in imps})
    assert summary.days_recomputed == days
    _check_against_reference(tracker, imps, events, declared=declared)
    with_catalog = dump(tracker.engine)
    tracker.rollup("home", now=NOW, full=True)
    assert dump(tracker.engine) == with_catalog
    tracker.declare_catalog("home", sorted(declared, reverse=True))  # the same items
    assert tracker.rollup("home", now=NOW)[0].days_recomputed == []
    tracker.declare_catalog("home", None)  # removed: back to the items seen
    tracker.rollup("home", now=NOW)
    assert tracker.catalog("home") == []
    _check_against_reference(tracker, imps, events)


@pytest.mark.parametrize(("items", "message"), [
    pytest.param(["a", ""], "catalog item #1 ('') must not be empty", id="empty-id"),
    pytest.param(["a", "x" * 300], "#1", id="too-long"),
    pytest.param(["a", None], "#1 (None) is required", id="none"),
    pytest.param([], "the catalog is empty", id="no-items"),
    pytest.param("abc", "not a single string", id="a-string"),
])
def test_a_bad_catalog_is_refused_and_keeps_the_declared_one(tracker, items, message):
    create(tracker)
    tracker.declare_catalog("home", ["keep-1", "keep-2"])
    with pytest.raises(ValidationError, match=re.escape(message)):
        tracker.declare_catalog("home", items)
    assert tracker.catalog("home") == ["keep-1", "keep-2"]
    with pytest.raises(NotFound, match="unknown experiment 'nope'"):
        tracker.declare_catalog("nope", ["a"])


def test_days_follow_the_reporting_time_zone_across_a_dst_change(tracker):
    # 2026-10-25: Paris leaves summer time, the day lasts 25 hours (22:00 UTC the day before
    # to 23:00 UTC that day).
    create(tracker, timezone="Europe/Paris")
    start = datetime(2026, 10, 24, 21, 0, tzinfo=UTC)
    imps, events = make_logs(seed=5, days=2, users=8, impressions=60, start=start, history=20)
    edge = [
        datetime(2026, 10, 24, 21, 59, 59, tzinfo=UTC),  # 23:59:59 on the 24th in Paris
        datetime(2026, 10, 24, 22, 0, tzinfo=UTC),  # 00:00 on the 25th
        datetime(2026, 10, 25, 22, 59, 59, tzinfo=UTC),  # 23:59:59 on the 25th (UTC+1)
        datetime(2026, 10, 25, 23, 0, tzinfo=UTC),  # 00:00 on the 26th
    ]
    for imp, moment in zip(imps, edge, strict=False):
        imp["served_at"] = moment
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    days = set(tracker.health_table("home")["day"])
    assert days == {date(2026, 10, 24), date(2026, 10, 25), date(2026, 10, 26)}
    _check_against_reference(tracker, imps, events, zone="Europe/Paris")


def _two_arm_day(tracker, events):
    create(tracker)
    imps = [
        {"impression_id": "a", "experiment": "home", "arm": "control", "user_id": "u1",
         "items": ["x", "y", "z"], "served_at": T0},
        {"impression_id": "b", "experiment": "home", "arm": "control", "user_id": "u1",
         "items": ["y", "x"], "served_at": T0 + timedelta(hours=1)},
        {"impression_id": "c", "experiment": "home", "arm": "treatment", "user_id": "u2",
         "items": ["z", "x"], "served_at": T0},
    ]
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    table = tracker.metric_table("home")
    return table.set_index(["arm", "metric", "k"])


def _value(table, arm, metric, k):
    return table.loc[(arm, metric, k), "mean"]


@pytest.mark.parametrize(("offset", "counts"), [
    pytest.param(WINDOW, True, id="click-at-the-window-end-counts"),
    pytest.param(WINDOW + timedelta(microseconds=1), False, id="click-after-the-window-not"),
    pytest.param(timedelta(0), True, id="click-at-serving-time-counts"),
    pytest.param(-timedelta(microseconds=1), False, id="click-before-serving-not"),
])
def test_attribution_window_bounds(tracker, offset, counts):
    events = [{"event_id": "e1", "user_id": "u2", "item_id": "x", "event": "click",
               "occurred_at": T0 + offset}]
    table = _two_arm_day(tracker, events)
    assert _value(table, "treatment", "hit_rate", 2) == (1.0 if counts else 0.0)


def test_explicit_impression_key_answers_that_impression_only(tracker):
    # u1 clicks "y" naming impression "a", long after its window: only "a" gets it, not "b"
    # (whose window contains the click).
    events = [{"event_id": "e1", "user_id": "u1", "item_id": "y", "event": "click",
               "occurred_at": T0 + timedelta(hours=2), "impression_id": "a"}]
    table = _two_arm_day(tracker, events)
    # a: y at rank 2 -> mrr 1/2; b: nothing -> 0; the user's mean over two impressions
    assert _value(table, "control", "mrr", 2) == pytest.approx(0.25)


def test_same_item_twice_keeps_the_highest_grade_and_grade_zero_is_not_relevant(tracker):
    events = [
        {"event_id": "e1", "user_id": "u2", "item_id": "x", "event": "click",
         "occurred_at": T0 + timedelta(minutes=1)},
        {"event_id": "e2", "user_id": "u2", "item_id": "x", "event": "save",
         "occurred_at": T0 + timedelta(minutes=2)},
        {"event_id": "e3", "user_id": "u2", "item_id": "z", "event": "view",
         "occurred_at": T0 + timedelta(minutes=3)},
    ]
    table = _two_arm_day(tracker, events)
    # list [z, x], G = {x: 2} (z only viewed: grade 0). DCG = 2/log2(3); IDCG = 2.
    assert _value(table, "treatment", "ndcg", 2) == pytest.approx(1 / math.log2(3))
    assert _value(table, "treatment", "precision", 2) == pytest.approx(0.5)
    assert _value(table, "treatment", "recall", 2) == pytest.approx(1.0)


def test_a_user_in_two_arms_is_counted_and_excluded(tracker):
    create(tracker)
    imps = [
        {"impression_id": "a", "experiment": "home", "arm": "control", "user_id": "u1",
         "items": ["x"], "served_at": T0},
        {"impression_id": "b", "experiment": "home", "arm": "treatment", "user_id": "u1",
         "items": ["x"], "served_at": T0},
        {"impression_id": "c", "experiment": "home", "arm": "treatment", "user_id": "u2",
         "items": ["x"], "served_at": T0},
    ]
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    health = tracker.health_table("home").set_index("arm", drop=False)
    whole = health[health["arm"].isna()].iloc[0]
    assert (whole.users, whole.crossover_users) == (2, 1)
    table = tracker.metric_table("home").set_index(["arm", "metric", "k"])
    assert table.loc[("treatment", "hit_rate", 2), "users"] == 1
    assert table.loc[("control", "hit_rate", 2), "users"] == 0


def test_users_without_interactions_count_with_zero(tracker):
    events = [{"event_id": "e1", "user_id": "u2", "item_id": "z", "event": "click",
               "occurred_at": T0 + timedelta(minutes=1)}]
    table = _two_arm_day(tracker, events)
    assert table.loc[("control", "hit_rate", 2), "users"] == 1
    assert _value(table, "control", "hit_rate", 2) == 0.0
    assert _value(table, "treatment", "hit_rate", 2) == 1.0


def _batches(records: list[dict], cuts: list[int]) -> list[list[dict]]:
    points = [0] + sorted({min(c, len(records)) for c in cuts}) + [len(records)]
    return [records[a:b] for a, b in zip(points, points[1:], strict=False)]


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), imp_cuts=st.lists(st.integers(0, 40), max_size=3),
       evt_cuts=st.lists(st.integers(0, 60), max_size=3))
def test_any_split_into_batches_ends_in_the_tables_of_one_full_rollup(tmp_path, seed,
                                                                      imp_cuts, evt_cuts):
    imps, events = make_logs(seed, days=3, users=8, impressions=40, history=20)
    imps.sort(key=lambda r: r["served_at"])
    events.sort(key=lambda r: r["occurred_at"])
    with fresh_database(tmp_path) as url, Tracker(migrated(url)) as tracker:
        create(tracker)
        # interactions may arrive after their impressions' days were rolled up
        for imp_batch, evt_batch in zip_longest(_batches(imps, imp_cuts),
                                                _batches(events, evt_cuts), fillvalue=[]):
            tracker.log_impressions(imp_batch, on_invalid="all_or_nothing")
            tracker.log_interactions(evt_batch, on_invalid="all_or_nothing")
            tracker.rollup("home", now=NOW)
        tracker.log_impressions(imps, on_invalid="all_or_nothing")  # retries: all duplicates
        tracker.log_interactions(events, on_invalid="all_or_nothing")
        tracker.rollup("home", now=NOW)
        incremental = dump(tracker.engine)
        tracker.rollup("home", full=True, now=NOW)
        assert dump(tracker.engine) == incremental


def test_a_late_click_recomputes_its_impressions_day_only(tracker):
    create(tracker)
    imps, events = make_logs(seed=11, days=3, users=8, impressions=40)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    # an impression served late enough in its day that the window before the click (the
    # impressions the click may answer) lies within that same day; the days after keep
    # their daily rows (the click is not in the popularity's reference period)
    imp = next(r for r in imps if 8 <= r["served_at"].hour < 23)
    late = {"event_id": "late", "user_id": imp["user_id"], "item_id": imp["items"][0],
            "event": "purchase", "occurred_at": imp["served_at"] + timedelta(minutes=5)}
    tracker.log_interactions([late])
    (summary,) = tracker.rollup("home", now=NOW)
    served_day = imp["served_at"].date()
    assert summary.days_recomputed == [served_day]
    assert summary.cumulative_from == served_day
    _check_against_reference(tracker, imps, [late])


def _surprisal(tracker: Tracker) -> pd.DataFrame:
    table = tracker.metric_table("home")
    return table[table["metric"] == "surprisal"].reset_index(drop=True)


def test_the_popularity_is_the_reference_periods_and_a_backfill_into_it_recomputes_every_day(
        tracker):
    create(tracker)
    imps, events = make_logs(seed=12, days=3, users=8, impressions=40, history=30)
    first_day = min(r["served_at"] for r in imps).date()
    start = datetime.combine(first_day, datetime.min.time(), tzinfo=UTC)
    history = [e for e in events if e["occurred_at"] < start]
    during = [e for e in events if e["occurred_at"] >= start]
    assert len(history) == 30 and during
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(during, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    # nobody interacted before the first day: surprisal is defined for no user
    assert (_surprisal(tracker)["users"] == 0).all()
    _check_against_reference(tracker, imps, during)
    # older than the reference period (28 days before the first day): nothing changes
    old = dict(history[0], event_id="old", occurred_at=start - timedelta(days=28, seconds=1))
    tracker.log_interactions([old])
    (summary,) = tracker.rollup("home", now=NOW)
    assert summary.days_recomputed == []
    tracker.log_interactions(history, on_invalid="all_or_nothing")  # a backfill
    (summary,) = tracker.rollup("home", now=NOW)
    assert summary.days_recomputed == sorted({r["served_at"].date() for r in imps})
    assert (_surprisal(tracker)["users"] > 0).all()
    _check_against_reference(tracker, imps, events + [old])
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental


def test_a_row_in_the_reference_period_that_leaves_its_counts_recomputes_no_day(tracker):
    create(tracker, cuped_days=0)  # CUPED would count the row in a user's pre-period
    imps, events = make_logs(seed=14, days=3, users=8, impressions=40, history=20)
    first_day = min(r["served_at"] for r in imps).date()
    start = datetime.combine(first_day, datetime.min.time(), tzinfo=UTC)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    before = dump(tracker.engine)
    # the same user and item again, an hour later: distinct users per item stay the same
    again = next(e for e in events if e["occurred_at"] < start - timedelta(hours=2))
    tracker.log_interactions([dict(again, event_id="again",
                                   occurred_at=again["occurred_at"] + timedelta(hours=1))])
    (summary,) = tracker.rollup("home", now=NOW)
    assert summary.days_recomputed == [] and summary.new_interactions == 1
    assert dump(tracker.engine) == before


def test_lists_backfilled_before_the_first_day_move_the_reference_period(tracker):
    create(tracker)
    imps, events = make_logs(seed=13, days=4, users=8, impressions=50, history=30)
    first_day = min(r["served_at"] for r in imps).date()
    later = [r for r in imps if r["served_at"].date() > first_day]
    tracker.log_impressions(later, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, later, events)  # its period ends with first_day
    assert _popularity_day(tracker) == first_day + timedelta(days=1)
    # the lists of the first day arrive last: the period moves a day back, every day
    # is recomputed with the popularity of the days before the true first day
    tracker.log_impressions([r for r in imps if r["served_at"].date() == first_day],
                            on_invalid="all_or_nothing")
    (summary,) = tracker.rollup("home", now=NOW)
    assert summary.days_recomputed == sorted({r["served_at"].date() for r in imps})
    _check_against_reference(tracker, imps, events)
    assert _popularity_day(tracker) == first_day


def _popularity_day(tracker: Tracker) -> date:
    """The first day of the stored popularity's experiment (the end of its period)."""
    with tracker.engine.connect() as conn:
        (day,) = conn.execute(sa.text("SELECT day FROM rollup_popularity")).scalars().all()
    return day if isinstance(day, date) else date.fromisoformat(day)


def test_a_run_with_nothing_new_changes_nothing(tracker):
    create(tracker)
    imps, events = make_logs(seed=2)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    before = dump(tracker.engine)
    (summary,) = tracker.rollup("home", now=NOW)
    assert summary.days_recomputed == []
    assert dump(tracker.engine) == before


def test_provisional_until_the_last_window_closes_plus_grace(tracker):
    create(tracker)
    imps, _ = make_logs(seed=4, days=1, impressions=10)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    last = max(r["served_at"] for r in imps)
    grace = timedelta(seconds=Settings().rollup_grace_seconds)
    closes = last + WINDOW + grace
    tracker.rollup("home", now=closes - timedelta(seconds=1))
    table = tracker.metric_table("home")
    assert table[table["day"] == last.date()]["provisional"].all()
    (summary,) = tracker.rollup("home", now=closes)  # nothing new, but the day became final
    assert summary.days_recomputed == [last.date()]
    assert not tracker.metric_table("home")["provisional"].any()
    assert not tracker.metric_table("home", cumulative=True)["provisional"].any()


def test_a_second_rollup_of_the_same_experiment_says_busy(tracker):
    create(tracker)
    tracker.log_impressions(make_logs(seed=1)[0], on_invalid="all_or_nothing")
    info = tracker.experiment("home")
    with rollup_lock(tracker.engine, info.id, "home"), pytest.raises(Busy, match="already"):
        tracker.rollup("home", now=NOW)
    tracker.rollup("home", now=NOW)  # released afterwards


def test_a_rollup_lock_held_by_another_process_makes_this_one_busy(tracker, tmp_path):
    """The lock is the operating system's (filelock; PostgreSQL: an advisory lock), so a
    rollup in another process blocks this one, and its end (here: the process dies
    without releasing) frees the lock."""
    import subprocess
    import sys

    if tracker.engine.dialect.name != "sqlite":
        pytest.skip("the advisory lock's sessions are covered by test_operations")
    create(tracker)
    info = tracker.experiment("home")
    holder = ("import sys, sqlalchemy as sa\n"
              "from tracker.rollup.lock import rollup_lock\n"
              f"engine = sa.create_engine({tracker.engine.url.render_as_string(False)!r})\n"
              f"with rollup_lock(engine, {info.id}, 'home'):\n"
              "    print('held', flush=True)\n"
              "    sys.stdin.readline()\n"
              "    import os; os._exit(0)\n")
    with subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout.readline().strip() == "held"
        with pytest.raises(Busy, match="already running"):
            tracker.rollup("home", now=NOW)
        process.stdin.write("\n")
        process.stdin.flush()
    assert process.returncode == 0
    tracker.rollup("home", now=NOW)  # the dead process's lock is gone


def test_full_equals_incremental_and_until_leaves_the_state(tracker):
    create(tracker)
    imps, events = make_logs(seed=8, days=3)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    first_day = min(r["served_at"] for r in imps).date()
    (partial,) = tracker.rollup("home", until=first_day, now=NOW)
    assert partial.days_recomputed == [first_day]
    (rest,) = tracker.rollup("home", now=NOW)  # the state did not advance: all days now
    assert len(rest.days_recomputed) >= 3
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental
