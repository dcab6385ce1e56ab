"""CUPED's pre-period metric covariates (``pre:<column>``, ``no_pre_lists``) on a hand-built
case, without any pre-period list, and across migration 0013; both databases."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from tests.helpers import T0
from tests.rollup import reference
from tests.rollup.scenario import CUTOFFS, RELEVANCE, WINDOW, create, make_logs
from tests.rollup.test_covariates import NAMES, _expected_covariates, _history
from tests.rollup.test_rollup import NOW
from tracker import stats
from tracker.report import report
from tracker.rollup.covariates import names_for
from tracker.rollup.pre_metrics import any_lists
from tracker.rollup.stored_covariates import Stored
from tracker.store import computed, schema
from tracker.store.db import create_engine
from tracker.store.experiments import get_experiment

DAY = timedelta(days=1)


def _stored_covariates(engine) -> dict[str, dict[str, float]]:
    with engine.connect() as conn:
        stored = Stored.open(conn, get_experiment(conn, "home"), names_for(CUTOFFS)).subset(None)
    return {user: dict(zip(stored.names, row, strict=True))
            for user, row in zip(stored.users.to_pylist(), stored.x.tolist(), strict=True)}


def _click(event_id: str, user: str, item: str, at, **extra) -> dict:
    return {"event_id": event_id, "user_id": user, "item_id": item, "event": "click",
            "occurred_at": at, **extra}


def _list(key: str, user: str, items: list[str], at, experiment: str = "other") -> dict:
    return {"impression_id": key, "experiment": experiment, "arm": "control", "user_id": user,
            "items": items, "served_at": at}


def test_the_pre_period_metric_is_the_users_mean_over_lists_served_before_first_exposure(
        tracker):
    create(tracker, cuped_days=2)
    create(tracker, "other")
    first_a = T0 + timedelta(hours=1)
    tracker.log_impressions([
        _list("o-1", "a", ["x", "y", "z"], T0 - DAY),  # in a's window: scored
        _list("o-old", "a", ["y"], T0 - 3 * DAY),  # before the window
    ], on_invalid="all_or_nothing")
    tracker.log_interactions([
        _click("c-y", "a", "y", T0 - DAY + timedelta(minutes=1)),  # answers o-1 at rank 2
        _click("c-old", "a", "y", T0 - 3 * DAY + timedelta(minutes=1)),
        # names o-1, but occurs after a's first exposure: the treatment could have moved it
        _click("c-z", "a", "z", first_a + timedelta(minutes=5), impression_id="o-1"),
        _click("c-b", "b", "y", T0 - DAY),  # b has history but no list
    ], on_invalid="all_or_nothing")
    tracker.log_impressions([
        {**_list("h-a", "a", ["x"], first_a, "home"), "arm": "control"},
        {**_list("h-b", "b", ["x"], T0 + timedelta(hours=2), "home"), "arm": "treatment"},
    ], on_invalid="all_or_nothing")
    # logged after a's first exposure, but they occurred before it: both count (event time)
    tracker.log_interactions([_click("c-x", "a", "x", T0 - DAY + timedelta(minutes=2))],
                             on_invalid="all_or_nothing")
    tracker.log_impressions([_list("o-late", "a", ["q"], T0)], on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    stored = _stored_covariates(tracker.engine)
    a, b = stored["a"], stored["b"]
    # o-1 = [x, y, z] with ground truth {x: 1, y: 1}: hit@2 1, precision@3 2/3, mrr 1,
    # r-precision 1, ndcg@2 1; o-late = [q] with none (every metric 0): a's means halve them
    assert (a["no_pre_lists"], a["pre:hit_rate@2"], a["pre:precision@3"], a["pre:mrr@5"],
            a["pre:r_precision"]) == pytest.approx((0.0, 0.5, 1 / 3, 0.5, 0.5), abs=1e-12)
    assert a["pre:ndcg@2"] == pytest.approx(0.5, abs=1e-12)
    assert a["pre_interactions"] == 2.0  # c-y and c-x; c-old before, c-z after the window
    assert b["no_pre_lists"] == 1.0 and b["no_pre_period"] == 0.0
    assert not any(v for name, v in b.items() if name.startswith("pre:"))
    assert not any(name.startswith(("pre:surprisal", "pre:unexpectedness")) for name in a)
    # the sums carry a's own value of each metric in pre_metric
    sums = computed.covariate_table(tracker.engine, "home", cumulative=True)
    row = sums[(sums["arm"] == "control") & (sums["metric"] == "precision") & (sums["k"] == 3)]
    assert row["x:pre_metric"].item() == pytest.approx(1 / 3)
    assert row["xx:pre_metric*no_pre_lists"].item() == 0.0


def test_without_pre_period_lists_the_adjustment_is_the_one_before_them(tracker):
    imps, events = make_logs(3, days=3, users=12, impressions=60)
    imps.sort(key=lambda r: r["served_at"])
    history = _history(3)
    create(tracker, cuped_days=2)
    tracker.log_interactions(history, on_invalid="all_or_nothing")
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    card = report(tracker.engine, "home", now=NOW)
    per_user: dict = {}
    reference.rollup(imps, history + events, window=WINDOW, relevance=RELEVANCE,
                     cutoffs=CUTOFFS, per_user_out=per_user)
    x = _expected_covariates(imps, history)
    assert set(x["no_pre_lists"]) == {1.0}
    arms = {}
    for arm in ("control", "treatment"):  # the three covariates of the interaction log only
        values = per_user[(True, card.as_of, arm, "ndcg", 2)]
        users = sorted(values)
        arms[arm] = stats.CovariateMeanStats.from_values(
            [values[u][0] / values[u][1] for u in users], x.loc[users, list(NAMES[:3])])
    (row,) = [r for r in card.metrics if (r["metric"], r["k"], r["arm"])
              == ("ndcg", 2, "treatment")]
    # a secondary: its interval is drawn at its Benjamini-Hochberg level (issue 30)
    expected = stats.compare_adjusted(arms["treatment"], arms["control"],
                                      adjustment=stats.fit_adjustment(list(arms.values())),
                                      level=row["interval_level"])
    d = expected.comparison.difference
    assert expected.variance_reduction > 0
    np.testing.assert_allclose([row["lift"], row["lift_ci_low"], row["lift_ci_high"],
                                row["p_value"], row["variance_reduction"]],
                               [d.estimate, d.ci_low, d.ci_high, expected.comparison.p_value,
                                expected.variance_reduction], rtol=1e-9)


def _index_names(engine) -> set[str]:
    with engine.connect() as conn:
        return {i["name"] for i in sa.inspect(conn).get_indexes("impression")}


def _covariate_state(engine) -> tuple[int, int, set]:
    with engine.connect() as conn:
        return (conn.execute(sa.text("SELECT count(*) FROM rollup_user_covariates")).scalar(),
                conn.execute(sa.text("SELECT count(*) FROM rollup_covariate_sums")).scalar(),
                set(conn.execute(sa.text("SELECT impressions_seen FROM rollup_state")).scalars()))


def test_migration_0013_adds_the_index_and_has_the_covariates_recomputed(tracker, db_url):
    imps, events = make_logs(4, days=2, users=10, impressions=30)
    create(tracker, cuped_days=2)
    tracker.log_interactions(_history(4, users=10), on_invalid="all_or_nothing")
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    before = computed.covariate_table(tracker.engine, "home")
    engine = create_engine(db_url)
    assert "ix_impression_user_id_served_at" in _index_names(engine)
    schema.downgrade(engine, "0012")
    assert "ix_impression_user_id_served_at" not in _index_names(engine)
    assert _covariate_state(engine) == (0, 0, {None})  # the older version recomputes its own
    with engine.begin() as conn:  # as 0.12 would have left them
        conn.execute(sa.text("INSERT INTO rollup_user_covariates (experiment_id, data) "
                             "SELECT id, :data FROM experiment"), {"data": b"covariates/1"})
        conn.execute(sa.text("UPDATE rollup_state SET impressions_seen = 1"))
    schema.upgrade(engine)
    assert "ix_impression_user_id_served_at" in _index_names(engine)
    assert _covariate_state(engine) == (0, 0, {None})
    (summary,) = tracker.rollup("home", now=NOW)
    assert summary.days_recomputed
    after = computed.covariate_table(tracker.engine, "home")
    # to the last bits: a day's surprisal scored again after the round trip through 0012
    # differs there (so did it before; the float sums compared then happened to round
    # alike), and the cumulative sums are exact sums of it
    pd.testing.assert_frame_equal(after, before, check_exact=False, rtol=1e-12, atol=1e-12)
    engine.dispose()


def _impressions(engine) -> dict[str, dict]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT impression_key, id, experiment_id, served_at, received_at FROM impression"))
        return {key: {"id": i, "experiment": e, "served": s, "received": r}
                for key, i, e, s, r in rows}


@pytest.mark.parametrize("case", [
    pytest.param("only-the-experiments-own", id="the-experiments-own-impressions-are-no-list"),
    pytest.param("own-earlier", id="an-earlier-one-of-the-experiment-moves-the-window-not-a-list"),
    pytest.param("other-in-window", id="another-experiments-impression-in-a-window-can-be"),
    pytest.param("other-before", id="another-experiments-impression-before-the-windows-is-not"),
    pytest.param("other-logged-later", id="one-logged-after-every-first-exposure-can-be"),
])
def test_lists_are_looked_for_only_where_one_can_be(tracker, case):
    """:func:`any_lists` against the rule it stands for: an impression of another
    experiment served in some window (the experiment's own are all at or after a user's
    first exposure, the earliest of them), whenever it was logged."""
    create(tracker, cuped_days=2)
    create(tracker, "other")
    own = [_list("h-1", "a", ["x"], T0 + timedelta(hours=1), "home"),
           _list("h-2", "b", ["y"], T0 + timedelta(hours=2), "home"),
           _list("h-3", "b", ["z"], T0 + timedelta(hours=3), "home")]
    if case == "own-earlier":
        own.append(_list("h-0", "a", ["x"], T0 - DAY, "home"))
    if case == "other-in-window":
        tracker.log_impressions([_list("o-1", "c", ["x"], T0 - DAY)])
    elif case == "other-before":
        tracker.log_impressions([_list("o-1", "c", ["x"], T0 - 3 * DAY)])
    tracker.log_impressions(own, on_invalid="all_or_nothing")
    if case == "other-logged-later":  # served in a window, logged after the exposures
        tracker.log_impressions([_list("o-1", "c", ["x"], T0 - DAY)])
    rows = _impressions(tracker.engine)
    home = rows["h-1"]["experiment"]
    firsts = [min((r for k, r in rows.items() if k.startswith("h-") and k in user_keys),
                  key=lambda r: r["served"])
              for user_keys in ({"h-0", "h-1"}, {"h-2", "h-3"})]  # a's and b's earliest
    served = np.array([r["served"] for r in firsts], dtype=np.int64)
    with tracker.engine.connect() as conn:
        found = any_lists(conn, home, served - 2 * 86_400_000_000, served)
    assert found == (case in {"other-in-window", "other-logged-later"})
