"""``tracker report --cuped/--no-cuped``: regression-adjusted comparisons from the rollup's
covariate sums, checked against the adjustment of the users' own values (computed from the
logs), and what they change on the demo's data."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest
from click.testing import CliRunner

from tests.rollup import reference
from tests.rollup.scenario import CUTOFFS, RELEVANCE, WINDOW, create, make_logs
from tests.rollup.test_covariates import _expected_covariates, _log_scenario, covariates_of
from tests.rollup.test_rollup import NOW
from tracker import stats
from tracker.cli import main
from tracker.demo import DemoConfig, load
from tracker.report import report

DEMO = DemoConfig(days=3, users=400, items=500, start=datetime(2026, 11, 1, tzinfo=UTC))
LATER = datetime(2026, 11, 20, tzinfo=UTC)


def _row(card, metric: str, k: int | None, arm: str) -> dict:
    (row,) = [r for r in card.metrics if (r["metric"], r["k"], r["arm"]) == (metric, k, arm)]
    return row


def test_a_row_is_the_adjusted_comparison_of_its_users_values(tracker):
    imps, interactions, history, previous = _log_scenario(tracker, 3)
    tracker.rollup("home", now=NOW)
    card = report(tracker.engine, "home", now=NOW)
    assert card.cuped and card.to_dict()["cuped"] is True
    per_user: dict = {}
    reference.rollup(imps, interactions, window=WINDOW, relevance=RELEVANCE, cutoffs=CUTOFFS,
                     per_user_out=per_user)
    x = _expected_covariates(imps, history, previous)
    arms = {}
    for arm in ("control", "treatment"):  # ndcg@2 is secondary: drawn at its BH level
        values = per_user[(True, card.as_of, arm, "ndcg", 2)]
        users = sorted(values)
        arms[arm] = stats.CovariateMeanStats.from_values(
            [values[u][0] / values[u][1] for u in users], covariates_of(x, users, "ndcg", 2))
    fit = stats.fit_adjustment(list(arms.values()))
    assert fit.active
    row = _row(card, "ndcg", 2, "treatment")
    # secondaries are corrected by Benjamini-Hochberg (issue 30), so the row's interval is
    # drawn at the level where it agrees with the corrected verdict (the nominal one when
    # the correction leaves p as it is)
    expected = stats.compare_adjusted(arms["treatment"], arms["control"], adjustment=fit,
                                      level=row["interval_level"])
    d = expected.comparison.difference
    np.testing.assert_allclose([row["lift"], row["lift_ci_low"], row["lift_ci_high"],
                                row["p_value"], row["variance_reduction"]],
                               [d.estimate, d.ci_low, d.ci_high, expected.comparison.p_value,
                                expected.variance_reduction], rtol=1e-9)
    unadjusted = report(tracker.engine, "home", now=NOW, cuped=False)
    plain = _row(unadjusted, "ndcg", 2, "treatment")
    assert plain["lift"] == pytest.approx(expected.unadjusted.difference.estimate, rel=1e-9)
    assert plain["variance_reduction"] == 0.0 and not unadjusted.cuped


def test_without_pre_period_data_adjusted_equals_unadjusted_exactly(tracker):
    imps, events = make_logs(9, days=3)
    create(tracker)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")  # none before exposure
    tracker.rollup("home", now=NOW)
    on = report(tracker.engine, "home", now=NOW, guardrails={"song_clicks": 0.05})
    off = report(tracker.engine, "home", now=NOW, cuped=False, guardrails={"song_clicks": 0.05})
    assert on.cuped and not off.cuped
    assert on.metrics == off.metrics and on.decisions == off.decisions
    assert {r["variance_reduction"] for r in on.metrics} == {0.0}


@pytest.fixture
def demo_url(tracker, db_url) -> str:
    load(tracker, DEMO)
    tracker.rollup(DEMO.key, now=LATER)
    return db_url


def _json(url: str, *flags: str) -> dict:
    result = CliRunner().invoke(main, ["report", DEMO.key, "--format", "json", *flags],
                                env={"TRACKER_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _width(row: dict) -> float:
    return row["lift_ci_high"] - row["lift_ci_low"]


@pytest.mark.parametrize("flags", [pytest.param([], id="fixed-horizon"),
                                   pytest.param(["--sequential"], id="always-valid")])
def test_on_the_demo_cuped_narrows_the_primaries_intervals(demo_url, flags):
    on, off = _json(demo_url, *flags), _json(demo_url, "--no-cuped", *flags)
    assert on["cuped"] is True and off["cuped"] is False
    assert all("variance_reduction" in r for r in on["metrics"] + off["metrics"])
    assert {r["variance_reduction"] for r in off["metrics"]} == {0.0}
    plain = {(r["metric"], r["k"], r["arm"]): r for r in off["metrics"]}
    primaries = [r for r in on["metrics"] if not r["control"] and r.get("primary")]
    assert len(primaries) == 4  # ndcg@10 and hit_rate@10 of two treatment arms
    for row in primaries:
        before = plain[(row["metric"], row["k"], row["arm"])]
        assert row["variance_reduction"] > 0.05, row
        assert _width(row) < _width(before), (row, before)
        # the width shrinks as the variance removed says (same level when uncorrected)
        if row["interval_level"] == before["interval_level"]:
            assert _width(row) / _width(before) == pytest.approx(
                (1 - row["variance_reduction"]) ** 0.5, rel=0.05)


def test_the_text_says_whether_cuped_is_on_and_what_it_removed(demo_url):
    env = {"TRACKER_DATABASE_URL": demo_url}
    on = CliRunner().invoke(main, ["report", DEMO.key], env=env).stdout
    off = CliRunner().invoke(main, ["report", DEMO.key, "--no-cuped"], env=env).stdout
    assert "CUPED on" in on and "variance removed" in on and "var −" in on
    assert "CUPED off" in off
