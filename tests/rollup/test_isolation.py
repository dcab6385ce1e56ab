"""One experiment's results never change because data concerning none of its users arrived:
another experiment's impressions and interactions (other users, the same days and items)
neither make a run recompute this experiment's days nor move its surprisal. (Interactions
dated before its first day are the product's history, which its item popularity counts
whoever logged them: tests/rollup/test_rollup.py.)"""

from __future__ import annotations

import sqlalchemy as sa

from tests.rollup.scenario import ROLLUP_TABLES, create, make_logs
from tests.rollup.test_rollup import NOW, _check_against_reference
from tracker import Tracker


def _experiment_rows(tracker: Tracker, key: str) -> dict[str, list[tuple]]:
    """Every rollup row of one experiment (computation times included: byte-identical
    means not rewritten either)."""
    experiment = tracker.experiment(key).id
    with tracker.engine.connect() as conn:
        return {table: [tuple(row) for row in conn.execute(sa.text(
            f"SELECT * FROM {table} WHERE experiment_id = :e ORDER BY {order}"),
            {"e": experiment})]
            for table, order in ROLLUP_TABLES.items()}


def _other_team(seed: int) -> tuple[list[dict], list[dict]]:
    """Logs of experiment "other": the days and catalog of "home", users of their own."""
    imps, events = make_logs(seed, days=3, users=10, impressions=50, key="other")
    for record in imps + events:
        record["user_id"] = "other-" + record["user_id"]
    return imps, events


def _home(tracker: Tracker) -> tuple[list[dict], list[dict]]:
    create(tracker)
    create(tracker, key="other")
    imps, events = make_logs(seed=21, days=3, users=8, impressions=40, history=20)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup(now=NOW)
    return imps, events


def test_another_experiments_logs_recompute_nothing_here(tracker):
    _home(tracker)
    before = _experiment_rows(tracker, "home")
    assert before["rollup_day"]
    imps, events = _other_team(seed=22)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    summaries = {s.experiment: s for s in tracker.rollup(now=NOW)}
    assert summaries["home"].days_recomputed == []
    assert summaries["home"].new_interactions == len(events)  # seen, and found unrelated
    assert summaries["other"].days_recomputed  # the other experiment is rolled up
    assert _experiment_rows(tracker, "home") == before


def test_another_experiments_interactions_leave_surprisal_unchanged_even_in_full(tracker):
    home_imps, home_events = _home(tracker)
    surprisal = tracker.metric_table("home").query("metric == 'surprisal'")
    assert surprisal["users"].sum() > 0  # defined on some days: the test can see a change
    imps, events = _other_team(seed=23)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup(now=NOW)
    incremental = _experiment_rows(tracker, "home")
    tracker.rollup("home", full=True, now=NOW)
    after = tracker.metric_table("home").query("metric == 'surprisal'")
    assert after[["day", "arm", "k", "sum", "sum_sq"]].equals(
        surprisal[["day", "arm", "k", "sum", "sum_sq"]])
    rebuilt = _experiment_rows(tracker, "home")
    for table in ("rollup_metric", "rollup_health", "rollup_units", "rollup_exposure"):
        assert rebuilt[table] == incremental[table], table
    _check_against_reference(tracker, home_imps, home_events)  # this team's logs only


def test_a_shared_users_interaction_does_touch_the_day_it_answers(tracker):
    imps, events = _home(tracker)
    imp = max(imps, key=lambda r: r["served_at"])  # the last day: no days after it
    late = {"event_id": "shared", "user_id": imp["user_id"], "item_id": imp["items"][-1],
            "event": "purchase", "occurred_at": imp["served_at"]}
    tracker.log_interactions([late])
    summaries = {s.experiment: s for s in tracker.rollup(now=NOW)}
    assert summaries["home"].days_recomputed == [imp["served_at"].date()]
    assert summaries["other"].days_recomputed == []  # "other" never served that user
    _check_against_reference(tracker, imps, events + [late])
