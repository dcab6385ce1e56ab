"""The cumulative view's crossover cells (intent-to-treat), on both databases: each arm's
crossover users are those first exposed in it, with every list of theirs; they follow late
lists that move a first exposure, users who cross over later, and an older release's
checkpoint, always equal to a rebuild and to an independent computation from the logs."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pandas as pd
import sqlalchemy as sa

from tests.helpers import T0
from tests.rollup import reference
from tests.rollup.scenario import CUTOFFS, RELEVANCE, WINDOW, create, crossed_logs, dump
from tracker.store.rollup_tables import CROSSOVER

NOW = datetime(2026, 11, 20, tzinfo=UTC)


def _expected(imps: list[dict], events: list[dict]) -> dict:
    out: dict = {}
    reference.rollup(imps, events, window=WINDOW, relevance=RELEVANCE, cutoffs=CUTOFFS,
                     crossover_out=out)
    return out


def _check(tracker, imps: list[dict], events: list[dict]) -> None:
    expected = _expected(imps, events)
    assert expected, "the logs hold crossover users"
    table = tracker.metric_table("home", cumulative=True, segment=CROSSOVER)
    found = {}
    for row in table.itertuples():
        assert row.slice == "(first arm)"
        k = 0 if pd.isna(row.k) else int(row.k)
        if row.users:  # a metric none of the cell's users has (no baseline list) is 0
            found[(row.day, row.arm, row.metric, k)] = (row.users, row.sum, row.sum_sq)
    assert found.keys() == expected.keys()
    for key, (n, total, total_sq) in expected.items():
        got = found[key]
        assert got[0] == n, key
        assert math.isclose(got[1], total, rel_tol=1e-9, abs_tol=1e-9), key
        assert math.isclose(got[2], total_sq, rel_tol=1e-9, abs_tol=1e-9), key
    # the daily view has none: a day's own crossover users are that day's health only
    assert tracker.metric_table("home", segment=CROSSOVER).empty


def test_each_arms_crossover_cell_holds_the_users_first_exposed_in_it(tracker):
    create(tracker)
    imps, events = crossed_logs(5)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    _check(tracker, imps, events)
    # an arm's own users plus its crossover cell are every user, each in one arm once
    table = tracker.metric_table("home", cumulative=True)
    last = table["day"].max()
    own = table[(table["day"] == last) & (table["metric"] == "ndcg") & (table["k"] == 2)]
    crossed = tracker.metric_table("home", cumulative=True, segment=CROSSOVER)
    crossed = crossed[(crossed["day"] == last) & (crossed["metric"] == "ndcg")
                      & (crossed["k"] == 2)]
    assert own["users"].sum() + crossed["users"].sum() == len({r["user_id"] for r in imps})


def _list(n: str, arm: str, user: str, at: datetime) -> dict:
    return {"impression_id": n, "experiment": "home", "arm": arm, "user_id": user,
            "items": ["a", "b"], "served_at": at}


def test_a_late_earlier_list_moves_a_crossover_user_to_the_arm_it_was_served_in(tracker):
    create(tracker)
    day = timedelta(days=1)
    imps = [_list("p1", "control", "u1", T0 + day), _list("p2", "treatment", "u1", T0 + 2 * day),
            _list("q1", "control", "u2", T0 + day), _list("r1", "treatment", "u3", T0 + day)]
    events = [{"event_id": "e1", "user_id": "u1", "item_id": "a", "event": "click",
               "occurred_at": T0 + 2 * day + timedelta(minutes=5)}]
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    _check(tracker, imps, events)
    first = tracker.metric_table("home", cumulative=True, segment=CROSSOVER)
    assert set(first["arm"]) == {"control"}  # u1, first served control
    # a list of treatment served to u1 before the others, logged late: u1 was first exposed
    # to treatment; u2, seen in control only, crosses over on a new day
    late = [_list("p0", "treatment", "u1", T0), _list("q2", "treatment", "u2", T0 + 3 * day)]
    tracker.log_impressions(late, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    _check(tracker, imps + late, events)
    moved = tracker.metric_table("home", cumulative=True, segment=CROSSOVER)
    last = moved[moved["day"] == moved["day"].max()]
    assert set(last["arm"]) == {"treatment", "control"}  # u1 in treatment, u2 in control
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental


def test_a_checkpoint_of_the_release_before_rewrites_every_cumulative_day_once(tracker):
    """A database rolled up by the release before holds no crossover rows and a checkpoint
    whose sums lack the crossover cells (``view-sums/1``): the next rollup writes them for
    every day, as a rebuild does."""
    create(tracker)
    imps, events = crossed_logs(11)
    early = [r for r in imps if r["served_at"] < T0 + timedelta(days=3)]
    tracker.log_impressions(early, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    with tracker.engine.begin() as conn:
        (sums,) = conn.execute(sa.text("SELECT sums FROM rollup_checkpoint")).one()
        older = json.loads(bytes(sums))
        assert older["format"] == "view-sums/2"
        older["format"] = "view-sums/1"
        conn.execute(sa.text("UPDATE rollup_checkpoint SET sums = :sums"),
                     {"sums": json.dumps(older).encode()})
        for table in ("rollup_metric", "rollup_covariate_sums"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE segment = :crossover"),
                         {"crossover": CROSSOVER})
    tracker.log_impressions([r for r in imps if r not in early], on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    _check(tracker, imps, events)
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental


def test_after_expired_logs_a_crossover_user_keeps_the_first_arm_stored(tracker):
    """Retention took u1's first exposure (control): their earliest list left is
    treatment's, yet they stay in control's crossover cell when a new list moves them."""
    create(tracker)
    day = timedelta(days=1)
    imps = [_list("p1", "control", "u1", T0), _list("p2", "treatment", "u1", T0 + 2 * day),
            _list("r1", "treatment", "u3", T0)]
    imps += [_list(f"q{d}", "control", "u2", T0 + d * day) for d in range(6)]
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    now = T0 + 8 * day
    tracker.rollup("home", now=now)
    tracker.expire_logs(now - (T0 + day), now=now)  # the first day's lists are gone
    later = T0 + 7 * day + timedelta(hours=1)
    tracker.log_impressions([_list("p3", "treatment", "u1", later)],
                            on_invalid="all_or_nothing")
    tracker.rollup("home", now=later + timedelta(hours=1))
    table = tracker.metric_table("home", cumulative=True, segment=CROSSOVER)
    table = table[(table["metric"] == "ndcg") & (table["k"] == 2)]
    assert set(table["arm"]) == {"control"}
    assert table["day"].max() == later.date()  # the new day's row moved u1's totals
