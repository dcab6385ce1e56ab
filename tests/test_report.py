"""``tracker report``: the scorecard's numbers from the rollup's sums, recomputed by hand from
the reference users' values (scipy's Welch test as the independent check)."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from scipy import stats as sps

from tests.helpers import T0
from tests.rollup.scenario import create
from tests.rollup.test_rollup import NOW
from tracker.cli import main
from tracker.demo import DemoConfig, load
from tracker.metrics.catalog import CATALOG
from tracker.report import LOWER_IS_BETTER
from tracker.stats import benjamini_hochberg


def _log_hits(tracker, hits: dict[str, list[int]]) -> None:
    """One impression of items a, b, c per user; a hit is a click on b (rank 2)."""
    create(tracker)
    imps, events = [], []
    for arm, values in hits.items():
        for u, hit in enumerate(values):
            user = f"{arm}-{u}"
            imps.append({"impression_id": f"{user}-i", "experiment": "home", "arm": arm,
                         "user_id": user, "items": ["a", "b", "c"], "served_at": T0})
            if hit:
                events.append({"event_id": f"{user}-e", "user_id": user, "item_id": "b",
                               "event": "click", "occurred_at": T0 + timedelta(minutes=1)})
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)


def _log_known_users(tracker):
    """Control: 4 users with hit_rate@2 values 1, 1, 0, 0; treatment: 4 users 1, 1, 1, 0."""
    _log_hits(tracker, {"control": [1, 1, 0, 0], "treatment": [1, 1, 1, 0]})


def _json(url: str, *args: str) -> dict:
    result = CliRunner().invoke(main, ["report", "home", "--format", "json", *args],
                                env={"TRACKER_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_report_json_matches_a_hand_computed_welch_test(tracker, db_url):
    _log_known_users(tracker)
    card = _json(db_url)
    assert card["experiment"] == "home" and card["as_of"] == T0.date().isoformat()
    rows = {(r["metric"], r["k"], r["arm"]): r for r in card["metrics"]}
    control, treatment = [1, 1, 0, 0], [1, 1, 1, 0]
    welch = sps.ttest_ind(treatment, control, equal_var=False)
    t = rows[("hit_rate", 2, "treatment")]
    assert t["users"] == 4 and t["mean"] == pytest.approx(0.75)
    assert t["lift"] == pytest.approx(0.25)
    assert t["relative_lift"] == pytest.approx(0.5)
    assert t["p_value"] == pytest.approx(welch.pvalue, rel=1e-9)
    v_t, v_c = sps.tvar(treatment) / 4, sps.tvar(control) / 4
    q = sps.t.ppf(0.975, welch.df)
    half = q * math.sqrt(v_t + v_c)
    assert (t["lift_ci_low"], t["lift_ci_high"]) == pytest.approx((0.25 - half, 0.25 + half))
    # the control mean 0.5 is not distinguishable from 0 on 4 users at df ~5.8 (0.25 < q^2 v_c),
    # so the lift has no bounded (Fieller) interval and the difference's stands beside the verdict
    assert q * q * v_c > 0.5**2
    assert t["relative_lift_ci_low"] is None and t["decided_on"] == "difference"
    assert t["interval_level"] == 0.95
    c = rows[("hit_rate", 2, "control")]
    half_c = sps.t.ppf(0.975, 3) * math.sqrt(sps.tvar(control) / 4)
    assert (c["ci_low"], c["ci_high"]) == pytest.approx((0.5 - half_c, 0.5 + half_c))
    assert card["health"]["users"] == {"control": 4, "treatment": 4}
    assert card["health"]["srm_p_value"] == pytest.approx(1.0)
    assert card["health"]["crossover_share"] == 0.0


def test_primaries_are_corrected_by_holm_and_secondaries_by_bh_as_exploratory(tracker, db_url):
    _log_known_users(tracker)
    card = _json(db_url, "--primary", "hit_rate@2", "--primary", "precision@2")
    tests = [r for r in card["metrics"] if not r["control"] and r["kind"] == "user"]
    primary = [r for r in tests if r["primary"]]
    assert {(r["metric"], r["k"]) for r in primary} == {("hit_rate", 2), ("precision", 2)}
    ps = sorted(r["p_value"] for r in primary)
    holm = sorted(r["p_value_adjusted"] for r in primary)
    assert holm[0] == pytest.approx(min(1.0, 2 * ps[0]))
    # the secondaries are their own family, Benjamini-Hochberg, and exploratory (issue 30;
    # before, their verdicts were uncorrected: ~1.5 spurious verdicts per A/A report)
    secondary = [r for r in tests if not r["primary"] and r["p_value"] is not None]
    expected = benjamini_hochberg([r["p_value"] for r in secondary])
    assert [r["p_value_adjusted"] for r in secondary] == pytest.approx(list(expected))
    assert all(r["exploratory"] for r in secondary)
    assert not any(r["exploratory"] for r in primary)


def test_zero_variance_gives_a_reason_not_nan(tracker, db_url):
    create(tracker)
    imps = [{"impression_id": f"i{n}", "experiment": "home", "arm": arm, "user_id": f"u{n}",
             "items": ["a"], "served_at": T0} for n, arm in enumerate(["control", "treatment"] * 3)]
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    card = _json(db_url)
    row = next(r for r in card["metrics"] if r["metric"] == "ndcg" and not r["control"])
    assert row["p_value"] is None and row["reason"] == "zero_variance"
    assert row["verdict"] == "inconclusive"


def test_table_and_csv_formats_and_an_experiment_without_rollup(tracker, db_url):
    create(tracker)
    env = {"TRACKER_DATABASE_URL": db_url}
    empty = CliRunner().invoke(main, ["report", "home"], env=env)
    assert empty.exit_code == 0 and "tracker rollup" in empty.stdout
    stored = tracker.log_impressions(
        [{"impression_id": "x", "experiment": "home", "arm": "control", "user_id": "u",
          "items": ["a"], "served_at": T0}])
    assert stored.stored == 1
    tracker.rollup("home", now=NOW)
    table = CliRunner().invoke(main, ["report", "home"], env=env)
    assert "hit_rate@2" in table.stdout and "control" in table.stdout
    csv_out = CliRunner().invoke(main, ["report", "home", "--format", "csv", "--daily"], env=env)
    assert csv_out.stdout.splitlines()[0].startswith("metric,k,arm,control")


def test_an_unknown_primary_metric_is_refused_with_the_names_to_use(tracker, db_url):
    _log_known_users(tracker)
    result = CliRunner().invoke(main, ["report", "home", "--primary", "ndcg@7"],
                                env={"TRACKER_DATABASE_URL": db_url})
    assert result.exit_code == 2  # a usage error
    assert "unknown primary or guardrail metric(s) ndcg@7" in result.stderr
    assert "hit_rate@2" in result.stderr


def test_guardrails_get_a_one_sided_non_inferiority_test(tracker, db_url):
    _log_known_users(tracker)
    card = _json(db_url, "--guardrail", "precision@2=9", "--guardrail", "recall@2=0")
    rows = {(r["metric"], r["k"]): r for r in card["metrics"] if r["arm"] == "treatment"}
    wide, none = rows[("precision", 2)], rows[("recall", 2)]
    assert wide["guardrail_margin"] == 9 and none["guardrail_margin"] == 0
    # no loss tolerated and +50% measured on 4 users: not shown non-inferior at 95%
    assert none["guardrail_ok"] is False and 0 < none["guardrail_p_value"] < 1
    # a 900% loss tolerated (H0: T <= -8 C) is far easier to clear on the same users
    assert wide["guardrail_p_value"] < none["guardrail_p_value"] / 3
    for row in (wide, none):
        assert row["guardrail_ok"] == (row["guardrail_p_value"] < 0.05)
    bad = CliRunner().invoke(main, ["report", "home", "--guardrail", "recall@2"],
                             env={"TRACKER_DATABASE_URL": db_url})
    assert bad.exit_code == 2 and "METRIC@K=LOSS" in bad.output


def _verdict_agrees(verdict: str, low: float, high: float, lower_is_better: bool) -> bool:
    """better/worse need an interval on one side of 0 in that direction; inconclusive, 0 inside."""
    if verdict == "inconclusive":
        return low <= 0 <= high
    up = low > 0
    return (low > 0 or high < 0) and (verdict == "better") == (up != lower_is_better)


# the printed decisive interval (relative in %, or absolute), the two p-values, the verdict
_PRINTED = re.compile(
    r"\[([+-][\d.]+)%?, ([+-][\d.]+)%?\]\s+\S+\s+\S+\s+(better|worse|inconclusive)")


@pytest.mark.parametrize(
    "flags",
    [pytest.param([], id="fixed-horizon"), pytest.param(["--sequential"], id="sequential"),
     pytest.param(["--primary", "ndcg@5", "--primary", "hit_rate@5", "--primary", "map@10",
                   "--primary", "precision@10", "--primary", "mrr@10"],
                  id="fixed-horizon-with-five-corrected-primaries"),
     pytest.param(["--sequential", "--primary", "ndcg@5", "--primary", "hit_rate@5",
                   "--primary", "map@10"], id="sequential-with-corrected-primaries")],
)
def test_no_row_pairs_a_verdict_with_a_contradicting_interval_on_demo_data(tracker, db_url,
                                                                           flags):
    config = DemoConfig(days=2, users=250, items=500, start=datetime(2026, 11, 1, tzinfo=UTC))
    load(tracker, config)
    tracker.rollup(config.key, now=datetime(2026, 11, 20, tzinfo=UTC))
    env = {"TRACKER_DATABASE_URL": db_url}
    card = json.loads(CliRunner().invoke(
        main, ["report", config.key, "--format", "json", *flags], env=env).stdout)
    rows = [r for r in card["metrics"] if not r["control"] and r["kind"] == "user"
            and r["p_value"] is not None]
    verdicts = {r["verdict"] for r in rows}
    assert "inconclusive" in verdicts and verdicts & {"better", "worse"}, verdicts
    for r in rows:
        lower = r["metric"] in LOWER_IS_BETTER
        decisive = "relative_lift" if r["decided_on"] == "relative_lift" else "lift"
        assert r[f"{decisive}_ci_low"] is not None, r
        for scale in ("relative_lift", "lift"):  # the decisive interval and its image
            if r[f"{scale}_ci_low"] is not None:
                assert _verdict_agrees(r["verdict"], r[f"{scale}_ci_low"],
                                       r[f"{scale}_ci_high"], lower), r
        if r["primary"] and r["p_value_adjusted"] > r["p_value"]:
            assert r["interval_level"] > card["level"]  # drawn at the corrected level
    if "--primary" in flags:
        assert any(r["interval_level"] > card["level"] for r in rows if r["primary"])
    table = CliRunner().invoke(main, ["report", config.key, *flags], env=env).stdout
    printed = [line for line in table.splitlines() if _PRINTED.search(line)]
    # a metric 0 for control by definition (unexpectedness) prints as descriptive, no verdict
    compared = [r for r in rows if not CATALOG[r["metric"]].zero_for_control]
    assert len(printed) == len(compared) < len(rows)
    for line in printed:
        low, high, verdict = _PRINTED.search(line).groups()
        lower = line.split()[0].split("@")[0] in LOWER_IS_BETTER
        assert _verdict_agrees(verdict, float(low), float(high), lower) or (
            verdict != "inconclusive" and float(low) * float(high) == 0  # "+0.0%" rounded
        ), line


def test_a_sample_ratio_mismatch_is_flagged_on_its_p_value_and_described(tracker, db_url):
    # 60 control and 20 treatment users declared 50/50: X^2 = 2 * 20^2 / 40 = 20, p ~ 8e-6
    create(tracker)
    imps = [{"impression_id": f"i{n}", "experiment": "home", "arm": arm, "user_id": f"u{n}",
             "items": ["a"], "served_at": T0}
            for n, arm in enumerate(["control"] * 60 + ["treatment"] * 20)]
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    health = _json(db_url)["health"]
    assert health["srm_p_value"] == pytest.approx(math.erfc(math.sqrt(10)), rel=1e-9)
    assert health["srm_flagged"] is True
    assert health["srm_deviation"] == (
        "treatment lost 50.00% of its expected users, control got 50.00% more than expected")
    srm = next(i for i in health["checklist"] if i["check"] == "srm")
    assert srm["status"] == "fail" and health["status"] == "fail"
    table = CliRunner().invoke(main, ["report", "home"], env={"TRACKER_DATABASE_URL": db_url})
    # control expected 40 of the 80 users and got 60: 50% more
    assert "fail  srm: sample-ratio mismatch" in table.stdout
    assert "control got 50.00% more users than its declared share" in table.stdout
    assert "Decision: treatment — do not ship: health: sample-ratio mismatch" in table.stdout
