"""The report's ``trends`` (:mod:`tracker.report.trends`): the slope of each treatment's lift
over days since exposure, flagged fading or growing when significant after the correction."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from click.testing import CliRunner

from tracker.cli import main
from tracker.report.trends import lift_by_exposure_day, trend_notes, trends
from tracker.store.experiments import ArmInfo, ExperimentInfo

INFO = ExperimentInfo(1, "home", "home", "", "running", None, None, "control",
                      (ArmInfo("control", 0.5, 1), ArmInfo("treatment", 0.5, 2)),
                      timedelta(hours=6), None, "reject", "UTC", (10,),
                      datetime(2026, 1, 1, tzinfo=UTC))


def _table(treatment_means: list[float], control_mean: float = 0.30, users: int = 2000,
           sd: float = 0.4) -> pd.DataFrame:
    """An exposure_day table of hit_rate@10: each day ``users`` per arm with the given means
    and standard deviation (Σx = n·mean, Σx² = n·(sd² + mean²))."""
    rows = []
    for day, mean in enumerate(treatment_means):
        for arm, m in (("control", control_mean), ("treatment", mean)):
            rows.append({"exposure_day": day, "arm": arm, "metric": "hit_rate", "k": 10,
                         "kind": "user", "users": users, "sum": users * m,
                         "sum_sq": users * (sd * sd + m * m), "provisional": False})
    return pd.DataFrame(rows)


def _wiggle(day: int) -> float:
    return 0.004 * (-1) ** day * (1 + day % 3)  # deterministic noise around the line


def test_a_flat_lift_is_not_flagged():
    table = _table([0.33 + _wiggle(d) for d in range(14)])  # +10% every day
    (entry,) = trends(INFO, table, ("hit_rate@10",))
    assert entry["trend"] == "flat" and entry["days"] == 14
    assert entry["slope_ci_low"] < 0 < entry["slope_ci_high"]
    assert entry["p_value_adjusted"] >= 0.05
    assert trend_notes([entry]) == []


def test_a_lift_falling_day_after_day_is_flagged_fading_with_its_slope():
    # the treatment's mean falls by 0.006 a day from 0.39 (+30%) to 0.312 (+4%): a relative
    # lift falling by 0.006 / 0.30 = 2% a day
    table = _table([0.39 - 0.006 * d + _wiggle(d) for d in range(14)])
    (entry,) = trends(INFO, table, ("hit_rate@10",))
    assert entry["trend"] == "fading"
    assert entry["slope_ci_low"] < -0.02 < entry["slope_ci_high"] < 0
    assert entry["first_lift"] == pytest.approx(0.30, abs=0.02)
    assert entry["last_lift"] == pytest.approx(0.04, abs=0.02)
    (note,) = trend_notes([entry])
    assert note.startswith("Trend: treatment — hit_rate@10 lift fading (novelty?): -2.")


def test_a_lift_rising_day_after_day_is_flagged_growing():
    table = _table([0.27 + 0.006 * d + _wiggle(d) for d in range(14)])  # -10% to +16%
    (entry,) = trends(INFO, table, ("hit_rate@10",))
    assert entry["trend"] == "growing" and entry["slope"] > 0


def test_two_days_are_too_few_for_a_trend():
    (entry,) = trends(INFO, _table([0.4, 0.3]), ("hit_rate@10",))
    assert entry["trend"] == "none" and entry["reason"] == "too_few_days"


def test_the_daily_lift_is_the_report_comparison_of_that_days_users():
    lifts = lift_by_exposure_day(INFO, _table([0.36, 0.33, 0.30]), "hit_rate", 10)
    assert list(lifts["relative_lift"].round(12)) == [0.2, 0.1, 0.0]
    # delta method: v_T / C² + T² v_C / C⁴ with v = sd² (n / (n - 1)) / n
    v = 0.4 ** 2 / 1999
    assert lifts["variance"].iloc[0] == pytest.approx(v / 0.09 + 0.36 ** 2 * v / 0.3 ** 4,
                                                      rel=1e-9)
    assert (lifts["ci_low"] < lifts["relative_lift"]).all()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """``tracker demo`` (14 days, 3,000 users, rolled up after each day): its database and
    what it printed."""
    url = f"sqlite:///{tmp_path_factory.mktemp('demo')}/tracker.db"
    result = CliRunner().invoke(main, ["demo"], env={"TRACKER_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    return url, result.stdout


def test_the_demo_report_flags_the_diverse_arms_novelty_as_fading(demo):
    url, printed = demo
    env = {"TRACKER_DATABASE_URL": url}
    result = CliRunner().invoke(main, ["report", "demo-home-recs", "--format", "json"], env=env)
    assert result.exit_code == 0, result.output
    found = {(t["arm"], t["metric"]): t for t in json.loads(result.stdout)["trends"]}
    assert set(found) == {(arm, metric) for arm in ("personalised", "diverse")
                          for metric in ("ndcg@10", "hit_rate@10")}
    for metric in ("ndcg@10", "hit_rate@10"):
        diverse = found["diverse", metric]
        assert diverse["trend"] == "fading" and diverse["p_value_adjusted"] < 0.01
        assert diverse["first_lift"] > diverse["last_lift"]
        # no novelty there; its lift may grow: the users who come back on later days since
        # exposure are more often those it knows (the others get the control's list)
        assert found["personalised", metric]["trend"] in ("flat", "growing")
    for text in (printed, CliRunner().invoke(main, ["report", "demo-home-recs"], env=env).stdout):
        notes = [line for line in text.splitlines() if line.startswith("Trend:")]
        assert [n.split(" lift ")[0] for n in notes if "diverse" in n] == [
            "Trend: diverse — ndcg@10", "Trend: diverse — hit_rate@10"]
        assert all("fading" not in n for n in notes if "personalised" in n)
