"""The ``exposure_day`` view (:mod:`tracker.rollup.exposure_days`): per-user metrics by days
since each user's first exposure, against a direct pandas computation from the raw logs."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta

import pandas as pd
import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import T0
from tests.rollup import reference
from tests.rollup.scenario import CUTOFFS, RELEVANCE, WINDOW, create, dump, make_logs
from tracker.errors import ValidationError
from tracker.rollup.exposure_days import FirstSeen

NOW = datetime(2026, 11, 20, tzinfo=UTC)  # long after the logs: every day final
STATS = ["users", "sum", "sum_sq", "impressions", "ratio_sum"]


def direct_exposure_days(imps: list[dict], events: list[dict]) -> pd.DataFrame:
    """The view computed from the logs with pandas: each impression scored by the
    reference (the public ``tracker.metrics`` functions), a user's first day the first
    (UTC) day they were served in any arm, per (user, day) the mean of each metric over the
    day's impressions (crossover users of a day left out), then per (exposure day, arm)
    the users, Σx, Σx², Σm and Σy."""
    first_day = datetime.combine(min(i["served_at"] for i in imps).date(),
                                 datetime.min.time(), tzinfo=UTC)
    popularity = reference.popularity_before(events, first_day - timedelta(days=28),
                                             first_day)  # the reference period's
    records = []
    for imp in imps:
        day = imp["served_at"].date()
        truth = reference.ground_truth(imp, events, WINDOW, RELEVANCE)
        values = reference.impression_values(imp, truth, CUTOFFS, popularity)
        for (metric, k), value in values.items():
            records.append({"user": imp["user_id"], "arm": imp["arm"], "day": day,
                            "metric": metric, "k": k, "value": value})
    frame = pd.DataFrame(records)
    days = pd.DataFrame([(i["user_id"], i["served_at"].date(), i["arm"]) for i in imps],
                        columns=["user", "day", "arm"])
    first = days.groupby("user")["day"].min().rename("first")
    arms = days.groupby(["user", "day"])["arm"].nunique().rename("arms")
    frame = frame.join(first, on="user").join(arms, on=["user", "day"])
    frame = frame[frame["arms"] == 1]
    frame["exposure_day"] = [(d - f).days for d, f in zip(frame["day"], frame["first"],
                                                          strict=True)]
    units = frame.groupby(["user", "day", "exposure_day", "arm", "metric", "k"])["value"] \
        .agg(x="mean", m="count", y="sum").reset_index()
    units["x2"] = units["x"] ** 2
    out = units.groupby(["exposure_day", "arm", "metric", "k"]).agg(
        users=("x", "size"), sum=("x", "sum"), sum_sq=("x2", "sum"), impressions=("m", "sum"),
        ratio_sum=("y", "sum"))
    return out


def _assert_view_matches(tracker, imps, events) -> None:
    expected = direct_exposure_days(imps, events)
    table = tracker.metric_table("home", view="exposure_day")
    table = table[table["users"] > 0].copy()
    table["k"] = table["k"].fillna(0).astype(int)
    got = table.set_index(["exposure_day", "arm", "metric", "k"])[STATS].sort_index()
    assert list(got.index) == list(expected.index)
    for column in STATS:
        for key, a, b in zip(got.index, got[column], expected[column], strict=True):
            assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (column, key, a, b)


def test_the_exposure_day_view_equals_a_direct_computation_from_the_logs(tracker):
    create(tracker)
    imps, events = make_logs(seed=3, days=5, users=10, impressions=80)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    table = tracker.metric_table("home", view="exposure_day")
    assert table["exposure_day"].max() >= 3  # the logs span the days since exposure
    assert set(table["kind"]) == {"user"}
    assert (table["mean"] - table["sum"] / table["users"]).abs().max() < 1e-12
    _assert_view_matches(tracker, imps, events)


def test_a_late_impression_on_an_earlier_day_moves_its_users_first_day(tracker):
    """u1 is first served on day 2; an impression of day 0 arriving later makes day 0 their
    first: their day-2 unit moves from exposure day 0 to 2, and incremental equals --full."""
    create(tracker)
    imp = {"experiment": "home", "arm": "control", "user_id": "u1", "items": ["a", "b"]}
    first = [dict(imp, impression_id="late-2", served_at=T0 + timedelta(days=2, hours=1)),
             dict(imp, impression_id="other-0", user_id="u2", served_at=T0 + timedelta(hours=3))]
    events = [{"event_id": "e1", "user_id": "u1", "item_id": "a", "event": "click",
               "occurred_at": T0 + timedelta(days=2, hours=2)}]
    tracker.log_impressions(first, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    before = tracker.metric_table("home", view="exposure_day")
    hits = before[(before["metric"] == "hit_rate") & (before["k"] == 2)
                  & (before["arm"] == "control")]
    assert dict(zip(hits["exposure_day"], hits["users"], strict=True)) == {0: 2}
    early = [dict(imp, impression_id="early-0", served_at=T0 + timedelta(hours=5))]
    tracker.log_impressions(early, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    after = tracker.metric_table("home", view="exposure_day")
    hits = after[(after["metric"] == "hit_rate") & (after["k"] == 2)
                 & (after["arm"] == "control")]
    assert dict(zip(hits["exposure_day"], hits["users"], strict=True)) == {0: 2, 2: 1}
    assert hits.set_index("exposure_day").loc[2, "sum"] == 1.0  # u1's click on day 2
    _assert_view_matches(tracker, first + early, events)
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental


def test_days_rolled_up_before_the_view_existed_are_taken_in_by_the_next_run(tracker):
    """A database upgraded to the schema with the view holds daily units but no first-seen
    users: the next run rebuilds the view from the first day, not from the days it touched."""
    create(tracker)
    imps, events = make_logs(seed=11, days=4, users=8, impressions=50)
    imps.sort(key=lambda r: r["served_at"])
    last_day = imps[-1]["served_at"].date()
    old = [i for i in imps if i["served_at"].date() < last_day]
    tracker.log_impressions(old, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    with tracker.engine.begin() as conn:  # as after the upgrade: no exposure-day state
        for table in ("rollup_first_seen", "rollup_exposure_day"):
            conn.execute(sa.text(f"DELETE FROM {table}"))
    tracker.log_impressions([i for i in imps if i not in old], on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    _assert_view_matches(tracker, imps, events)


def test_an_unknown_view_is_refused_naming_the_views(tracker):
    create(tracker)
    with pytest.raises(ValidationError, match="daily, cumulative, exposure_day"):
        tracker.metric_table("home", view="weekly")


def test_an_experiment_not_rolled_up_has_an_empty_exposure_day_view(tracker):
    create(tracker)
    table = tracker.metric_table("home", view="exposure_day")
    assert table.empty and list(table.columns)[0] == "exposure_day"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 12), max_size=15), min_size=1, max_size=6))
def test_first_seen_gives_each_row_the_days_since_its_users_first_day(days):
    """:class:`FirstSeen` against a dict of first days: each unit row's offset, and the
    users new on a day in the order they first appear in its rows (repeats within a day,
    users returning after days away, days with no one)."""
    seen, first = FirstSeen(), {}
    for n, ids in enumerate(days):
        day = date(2026, 9, 1) + timedelta(days=2 * n)
        users = pa.array([f"u{i}" for i in ids], type=pa.string())
        offsets, new = seen.offsets(day, users)
        expected_new = list(dict.fromkeys(u for u in users.to_pylist() if u not in first))
        assert new.to_pylist() == expected_new
        for user in expected_new:
            first[user] = day
        assert offsets.tolist() == [(day - first[u]).days for u in users.to_pylist()]
        seen.add(day, new)
