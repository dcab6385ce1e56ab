"""Intent-to-treat in the report (issue 30): crossover users, left out of each arm's own rows,
are analysed in the arm of their first exposure beside them, and when the two estimates
disagree the decision reads intent-to-treat. Known answers on constructed logs, both
databases."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

from tests.helpers import T0
from tests.rollup.scenario import create
from tests.rollup.test_rollup import NOW
from tests.test_report_decisions import _log
from tracker import stats
from tracker.cli import main
from tracker.report import render_crossover, report


def _crossing(tracker, users: int, first: str, then: str) -> None:
    """``users`` users served a list of ``first`` and an hour later one of ``then``, neither
    answered."""
    imps = []
    for u in range(users):
        for n, (arm, at) in enumerate(((first, T0), (then, T0 + timedelta(hours=1)))):
            imps.append({"impression_id": f"x{u}-{n}", "experiment": "home", "arm": arm,
                         "user_id": f"x{u}", "items": ["a", "b", "c"], "served_at": at})
    tracker.log_impressions(imps, on_invalid="all_or_nothing")


def _row(card: dict, metric: str, k: int) -> dict:
    (found,) = [r for r in card["intent_to_treat"] if (r["metric"], r["k"]) == (metric, k)]
    return found


def test_crossover_users_flip_a_significant_lift_and_the_decision_reads_intent_to_treat(
        tracker, db_url):
    create(tracker, primary=["hit_rate@2"])
    # per-protocol: 60% against 50% hit rate over 200 users each (p ≈ 0.04)
    _log(tracker, {"control": [1] * 100 + [0] * 100, "treatment": [1] * 120 + [0] * 80})
    # 30 users first served treatment, then control, who never click: 7% of the users
    _crossing(tracker, 30, "treatment", "control")
    tracker.rollup("home", now=NOW)
    card = report(tracker.engine, "home").to_dict()
    row = _row(card, "hit_rate", 2)
    pp, itt = row["per_protocol"], row["intent_to_treat"]
    assert (pp["users"], itt["users"], row["crossover_users"]) == (200, 230, 30)
    # independently: treatment's intent-to-treat users are its 200 and the 30, at 0
    expected = stats.compare(stats.MeanStats(230, 120.0, 120.0),
                             stats.MeanStats(200, 100.0, 100.0))
    assert itt["relative_lift"] == pytest.approx(expected.relative_lift.estimate, rel=1e-12)
    assert itt["relative_lift"] == pytest.approx(120 / 230 / 0.5 - 1, rel=1e-12)
    assert itt["p_value"] == pytest.approx(expected.p_value, rel=1e-9)
    assert pp["p_value_adjusted"] < 0.05 <= itt["p_value_adjusted"]
    assert row["disagree"] and row["decides"] == "intent_to_treat"
    assert "significance" in row["why"]
    (decision,) = card["decisions"]
    assert decision["population"] == "intent_to_treat"
    assert decision["outcome"] != "ship"
    # per-protocol alone ships it
    (alone,) = report(tracker.engine, "home", crossover=None).to_dict()["decisions"]
    assert (alone["outcome"], alone["population"]) == ("ship", "per_protocol")
    assert not any(r.startswith("hit_rate@2 +20.0%") for r in decision["reasons"])
    assert card["health"]["crossover_status"] == "warn"
    # the text report says so beside the decision
    result = CliRunner().invoke(main, ["report", "home"], env={"TRACKER_DATABASE_URL": db_url})
    assert result.exit_code == 0, result.output
    assert "read on intent-to-treat" in result.output
    assert "Crossover: per-protocol" in result.output
    data = json.loads(CliRunner().invoke(main, ["report", "home", "--format", "json"],
                                         env={"TRACKER_DATABASE_URL": db_url}).stdout)
    assert data["intent_to_treat"] == card["intent_to_treat"]


def test_when_the_two_agree_per_protocol_decides_and_without_crossover_there_is_none(tracker):
    create(tracker, primary=["hit_rate@2"])
    _log(tracker, {"control": [1] * 45 + [0] * 105, "treatment": [1] * 105 + [0] * 45})
    tracker.rollup("home", now=NOW)
    alone = report(tracker.engine, "home").to_dict()
    assert alone["intent_to_treat"] == []
    assert alone["decisions"][0]["population"] == "per_protocol"
    _crossing(tracker, 3, "control", "treatment")  # 3 of 303 users: a clear win either way
    tracker.rollup("home", now=NOW)
    card = report(tracker.engine, "home").to_dict()
    row = _row(card, "hit_rate", 2)
    assert row["arm"] == "treatment" and not row["disagree"]
    assert row["decides"] == "per_protocol"
    assert row["intent_to_treat"]["users"] == 150  # the crossover users are control's
    assert card["decisions"][0]["population"] == "per_protocol"
    assert card["decisions"][0]["outcome"] == alone["decisions"][0]["outcome"]
    (line,) = render_crossover(report(tracker.engine, "home"))  # agreeing: said once
    assert "the 3 crossover users" in line and "agrees with per-protocol" in line


def test_the_crossover_cells_are_no_dimension_to_report_by(tracker):
    from tracker.errors import ValidationError
    from tracker.report import segment_report

    create(tracker, primary=["hit_rate@2"])
    _log(tracker, {"control": [1, 0], "treatment": [0, 1]})
    _crossing(tracker, 1, "control", "treatment")
    tracker.rollup("home", now=NOW)
    with pytest.raises(ValidationError, match="declares no dimension"):
        segment_report(tracker.engine, "home", "(crossover)")


def test_intent_to_treat_is_not_adjusted_with_the_arms_sums_alone():
    """CUPED on, the crossover users' covariate sums missing: no adjusted intent-to-treat
    (the arms' sums alone would adjust with the wrong users)."""
    import pandas as pd

    from tracker.report.crossover import intent_to_treat_covariates

    own = pd.DataFrame({"day": [1], "arm": ["a"], "metric": ["ndcg"], "k": [2], "x:c": [1.0]})
    assert intent_to_treat_covariates(own, None) is None
    assert intent_to_treat_covariates(own, own.iloc[:0]) is None
    both = intent_to_treat_covariates(own, own)
    assert both["x:c"].tolist() == [2.0]
