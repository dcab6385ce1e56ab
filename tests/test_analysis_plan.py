"""The analysis plan pinned on the experiment: stored at creation, changed by `experiments
update` with each change dated, and followed by the report (a view that departs from it is
labelled exploratory and shows the plan's decision). Both databases."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from tests.rollup.scenario import create
from tests.rollup.test_rollup import NOW
from tests.test_report_decisions import CLEAR_WIN, _log
from tracker.cli import main
from tracker.errors import ValidationError
from tracker.report import report
from tracker.stats.decision import DEFAULT_TARGET_EFFECT
from tracker.store.experiments import AnalysisPlan


def test_the_default_plan_is_the_reports_old_default():
    assert AnalysisPlan() == AnalysisPlan("fixed_horizon", True, "holm", DEFAULT_TARGET_EFFECT)


def test_the_plan_is_stored_at_creation_and_each_change_is_dated(tracker):
    create(tracker, intervals="sequential", correction="bh", target_effect=0.02)
    info = tracker.experiment("home")
    assert info.plan == AnalysisPlan("sequential", True, "bh", 0.02)
    (first,) = tracker.plan_history("home")
    assert first.plan == info.plan and first.planned_end is None
    assert first.changed_at == info.created_at

    end = datetime(2027, 1, 1, tzinfo=UTC)
    tracker.update_experiment("home", cuped=False, ends_at=end)
    tracker.update_experiment("home", name="renamed")  # not a plan change: not recorded
    tracker.update_experiment("home", cuped=False)  # the same plan again: not recorded
    history = tracker.plan_history("home")
    assert [h.plan.cuped for h in history] == [True, False]
    assert history[1].planned_end == end and tracker.experiment("home").planned_end == end
    assert history[1].changed_at >= history[0].changed_at


@pytest.mark.parametrize(("change", "field"), [
    pytest.param({"intervals": "bayesian"}, "intervals", id="unknown-interval-mode"),
    pytest.param({"correction": "bonferroni"}, "correction", id="unknown-correction"),
    pytest.param({"target_effect": 0.0}, "target_effect", id="zero-target-effect"),
    pytest.param({"cuped": "yes"}, "cuped", id="cuped-not-a-bool"),
])
def test_a_bad_plan_is_refused_naming_the_field(tracker, change, field):
    create(tracker)
    with pytest.raises(ValidationError) as caught:
        tracker.update_experiment("home", **change)
    assert caught.value.field == field
    assert len(tracker.plan_history("home")) == 1


def test_the_report_follows_the_plan_and_labels_a_departure_exploratory(tracker, db_url):
    create(tracker, intervals="sequential", correction="bh", target_effect=0.1)
    _log(tracker, CLEAR_WIN)
    tracker.rollup("home", now=NOW)
    planned = report(tracker.engine, "home")
    assert (planned.intervals, planned.correction, planned.target_effect) == (
        "sequential", "bh", 0.1)
    assert planned.exploratory == () and planned.plan["intervals"] == "sequential"

    other = report(tracker.engine, "home", intervals="fixed_horizon", cuped=False)
    assert other.intervals == "fixed_horizon" and not other.cuped
    assert other.exploratory == ("fixed-horizon intervals (plan: always-valid)",
                                 "CUPED off (plan: on)")

    env = {"TRACKER_DATABASE_URL": db_url}
    text = CliRunner().invoke(main, ["report", "home"], env=env).stdout
    assert "Analysis plan: always-valid intervals" in text and "EXPLORATORY" not in text
    result = CliRunner().invoke(main, ["report", "home", "--fixed-horizon"], env=env)
    assert result.exit_code == 0, result.output
    decision = planned.decisions[0]
    outcome = decision["outcome"].replace("_", " ")
    assert ("EXPLORATORY VIEW (fixed-horizon intervals (plan: always-valid)) — the plan's "
            f"decision is {decision['arm']}: {outcome}") in result.stdout


def test_the_cli_sets_updates_and_shows_the_plan(db_url):
    env = {"TRACKER_DATABASE_URL": db_url}
    run = CliRunner().invoke
    created = run(main, ["experiments", "create", "home", "--arm", "control", "--arm", "new",
                         "--intervals", "sequential", "--no-cuped", "--target-effect", "0.03",
                         "--ends-at", "2027-01-01T00:00:00Z"], env=env)
    assert created.exit_code == 0, created.output
    updated = run(main, ["experiments", "update", "home", "--correction", "bh"], env=env)
    assert updated.exit_code == 0, updated.output
    assert "Benjamini-Hochberg correction" in updated.stdout
    shown = json.loads(run(main, ["experiments", "show", "home", "--format", "json"],
                           env=env).stdout)
    assert shown["plan"] == {"intervals": "sequential", "cuped": False, "correction": "bh",
                             "target_effect": 0.03}
    assert [h["correction"] for h in shown["plan_history"]] == ["holm", "bh"]
    assert shown["plan_history"][0]["planned_end"] == "2027-01-01T00:00:00+00:00"
    bad = run(main, ["experiments", "update", "home", "--target-effect", "2"], env=env)
    assert bad.exit_code == 2 and "--target-effect" in bad.output


def test_the_text_report_shows_set_level_changes_absolute_and_unexpectedness_descriptive(
        tracker, db_url):
    create(tracker)
    _log(tracker, CLEAR_WIN)
    tracker.rollup("home", now=NOW)
    text = CliRunner().invoke(main, ["report", "home", "--k", "2"],
                              env={"TRACKER_DATABASE_URL": db_url}).stdout
    coverage = next(line for line in text.splitlines()
                    if line.startswith("coverage@2") and "treatment" in line)
    assert " abs." in coverage and "%" not in coverage
    unexpected = next(line for line in text.splitlines()
                      if line.startswith("unexpectedness@2") and "treatment" in line)
    assert unexpected.rstrip().endswith("descriptive (0 for control by definition)")
    assert "better" not in unexpected and "worse" not in unexpected
