"""New interactions on a day already computed recompute only the users they concern, over
the stored state of the others, and end in the tables of one full rollup."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import fresh_database, migrated
from tests.rollup.scenario import assert_same_tables, create, dump, make_logs
from tests.rollup.test_rollup import NOW, _check_against_reference
from tracker import Tracker
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.partial import replaced


def test_a_late_click_recomputes_its_users_impressions_only(tracker):
    create(tracker)
    imps, events = make_logs(seed=31, days=3, users=8, impressions=60)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    last_day = max(r["served_at"] for r in imps).date()
    on_last = [r for r in imps if r["served_at"].date() == last_day]
    # served late enough that the click's window (6 hours) lies within the day
    imp = min((r for r in on_last if r["served_at"].hour >= 7), key=lambda r: r["served_at"])
    late = {"event_id": "late", "user_id": imp["user_id"], "item_id": imp["items"][0],
            "event": "purchase", "occurred_at": imp["served_at"] + timedelta(minutes=1)}
    tracker.log_interactions([late])
    (summary,) = tracker.rollup("home", now=NOW)
    assert summary.days_recomputed == [last_day]
    assert (summary.days_in_part, summary.users_recomputed) == (1, 1)
    assert summary.impressions_read == sum(r["user_id"] == imp["user_id"] for r in on_last)
    assert summary.impressions_read < len(on_last)
    assert "for 1 user(s) only" in summary.describe()
    _check_against_reference(tracker, imps, events + [late])
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental


def test_most_of_a_days_users_touched_recompute_the_whole_day(tracker):
    create(tracker)
    imps, events = make_logs(seed=32, days=1, users=6, impressions=30)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    tracker.log_interactions(events, on_invalid="all_or_nothing")  # nearly every user
    (summary,) = tracker.rollup("home", now=NOW)
    assert summary.days_in_part == 0
    assert summary.impressions_read == len(imps)
    _check_against_reference(tracker, imps, events)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), held=st.lists(st.integers(0, 200), min_size=1, max_size=8),
       batches=st.integers(1, 3))
def test_late_interactions_of_a_few_users_end_in_the_tables_of_one_full_rollup(
        tmp_path, seed, held, batches):
    imps, events = make_logs(seed, days=3, users=8, impressions=40)
    late = sorted({i % len(events) for i in held}) if events else []
    early = [e for i, e in enumerate(events) if i not in late]
    with fresh_database(tmp_path) as url, Tracker(migrated(url)) as tracker:
        create(tracker)
        tracker.log_impressions(imps, on_invalid="all_or_nothing")
        tracker.log_interactions(early, on_invalid="all_or_nothing")
        tracker.rollup("home", now=NOW)
        for part in range(batches):  # a few users' interactions, days after their days
            tracker.log_interactions([events[i] for i in late[part::batches]],
                                     on_invalid="all_or_nothing")
            tracker.rollup("home", now=NOW)
        incremental = dump(tracker.engine)
        tracker.rollup("home", full=True, now=NOW)
        assert_same_tables(dump(tracker.engine), incremental)


def _totals(rows: list[tuple[str, int]], seed: int) -> UnitTotals:
    """Unit totals of (user, arm) rows, one each, random sums (two columns)."""
    rng = np.random.default_rng(seed)
    sums = np.asfortranarray(rng.random((len(rows), 2)))
    impressions = rng.integers(1, 5, len(rows))
    counts = np.asfortranarray(np.repeat(impressions[:, None].astype(float), 2, axis=1))
    return UnitTotals(pa.array([u for u, _ in rows], pa.string()),
                      np.array([a for _, a in rows], dtype=np.int64), impressions, sums,
                      counts)


@settings(max_examples=100, deadline=None)
@given(stored=st.sets(st.tuples(st.sampled_from("abcdefg"), st.integers(1, 3)), min_size=1),
       changed=st.sets(st.tuples(st.sampled_from("abcdefgh"), st.integers(1, 3))),
       seed=st.integers(0, 1000), shuffled=st.booleans())
def test_changed_users_rows_replace_the_stored_ones_as_a_full_replacement_does(
        stored, changed, seed, shuffled):
    """Overwritten in place when the changed users have the same rows as stored (a day
    scored again), else every other case (new rows, fewer rows, unsorted stored rows)
    through replacing_users: the same totals, bit for bit."""
    before = _totals(sorted(stored, reverse=shuffled), seed)
    new = _totals(sorted(changed), seed + 1)
    expected, got = before.replacing_users(new), replaced(before, new)
    assert got.users.to_pylist() == expected.users.to_pylist()
    np.testing.assert_array_equal(got.cells, expected.cells)
    np.testing.assert_array_equal(got.impressions, expected.impressions)
    assert got.sums.tobytes() == expected.sums.tobytes()
    assert got.counts.tobytes() == expected.counts.tobytes()


@pytest.mark.parametrize("owned", [False, True])
def test_a_day_scored_again_overwrites_its_changed_users_rows_in_place(owned):
    before = _totals([("a", 1), ("b", 1), ("b", 2), ("c", 2)], 1)
    kept = before.sums.copy()
    new = _totals([("b", 1), ("b", 2)], 2)
    got = replaced(before, new, owned=owned)
    assert got.users is before.users  # kept, not sorted again
    np.testing.assert_array_equal(got.sums[1:3], new.sums)
    np.testing.assert_array_equal(got.sums[[0, 3]], kept[[0, 3]])
    # the caller's totals: overwritten only when it gave them up (no copy of the matrices)
    assert (got.sums is before.sums) == owned
    np.testing.assert_array_equal(before.sums, got.sums if owned else kept)
