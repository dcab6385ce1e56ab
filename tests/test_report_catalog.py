"""What the report takes from the metric catalogue: group and direction on every row, rows
grouped by group, ``--metric``/``--k`` filters, no verdict on set-level metrics, p-values that
never print as 0, and ``Tracker.scorecard``."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tests.test_report import _json, _log_hits, _log_known_users
from tracker.cli import main
from tracker.errors import ValidationError
from tracker.metrics.catalog import CATALOG, GROUPS, Group
from tracker.report import COLUMNS, ROLE_ORDER, format_p
from tracker.store.rollup_tables import RollupMetric


def _run(url: str, *args: str):
    return CliRunner().invoke(main, ["report", "home", *args], env={"TRACKER_DATABASE_URL": url})


def _row(rows, metric, k, arm):
    return next(r for r in rows if (r["metric"], r["k"], r["arm"]) == (metric, k, arm))


def test_every_row_carries_the_catalogue_group_and_direction(tracker, db_url):
    _log_known_users(tracker)
    rows = _json(db_url)["metrics"]
    assert {r["metric"] for r in rows} == set(CATALOG)
    for r in rows:
        entry = CATALOG[r["metric"]]
        assert (r["group"], r["direction"]) == (entry.group.value, entry.direction.value)
    assert _row(rows, "song_clicks", None, "treatment")["direction"] == "lower"
    assert _row(rows, "ndcg", 2, "treatment")["group"] == "ranking"
    order = [(ROLE_ORDER.index(r["role"]), GROUPS.index(Group(r["group"]))) for r in rows]
    assert order == sorted(order)  # ordered by role, then by group


def test_set_level_rows_show_value_and_difference_but_no_verdict(tracker, db_url):
    _log_known_users(tracker)
    rows = _json(db_url)["metrics"]
    control, treatment = _row(rows, "coverage", 2, "control"), _row(rows, "coverage", 2,
                                                                       "treatment")
    assert treatment["mean"] is not None and control["mean"] is not None
    assert treatment["lift"] == pytest.approx(treatment["mean"] - control["mean"])
    assert treatment["verdict"] is None and treatment["p_value"] is None
    for r in rows:
        if r["kind"] == "set" and not r["control"]:
            assert r["verdict"] is None, r["metric"]
    table = _run(db_url, "--metric", "coverage", "--metric", "gini", "--k", "2").stdout
    lines = [line for line in table.splitlines() if line.split()[:1] in (["coverage@2"],
                                                                         ["gini@2"])]
    treated = [line for line in lines if "treatment" in line]
    assert len(treated) == 2
    for line in treated:
        assert line.rstrip().endswith("—")
        assert not any(word in line for word in ("better", "worse", "inconclusive"))


def test_a_lower_is_better_metric_improves_when_it_falls(tracker, db_url):
    _log_hits(tracker, {"control": [1] * 6 + [0] * 54, "treatment": [1] * 54 + [0] * 6})
    rows = _json(db_url, "--metric", "song_clicks", "--metric", "hit_rate", "--k", "2")["metrics"]
    clicks = _row(rows, "song_clicks", None, "treatment")
    hits = _row(rows, "hit_rate", 2, "treatment")
    assert clicks["lift"] < 0 and clicks["verdict"] == "better"  # fewer refreshes
    assert hits["lift"] > 0 and hits["verdict"] == "better"
    assert "song_clicks ↓" in _run(db_url, "--metric", "song_clicks").stdout


def test_tiny_p_values_print_below_the_floor_and_never_as_zero(tracker, db_url):
    _log_hits(tracker, {"control": [1] * 6 + [0] * 54, "treatment": [1] * 54 + [0] * 6})
    row = _row(_json(db_url)["metrics"], "hit_rate", 2, "treatment")
    assert row["p_value"] < 1e-16  # the JSON keeps the number
    line = next(line for line in _run(db_url, "--metric", "hit_rate", "--k", "2").stdout
                .splitlines() if line.startswith("hit_rate@2") and "treatment" in line)
    assert line.split().count("<1e-16") == 2  # p and p adjusted
    assert " 0 " not in line


@pytest.mark.parametrize(("p", "shown"), [
    pytest.param(0.0, "<1e-16", id="underflow-to-zero-is-not-zero"),
    pytest.param(5.8e-27, "<1e-16", id="below-double-resolution"),
    pytest.param(1e-16, "1e-16", id="the-floor-itself-prints"),
    pytest.param(0.04441, "0.0444", id="three-significant-digits"),
    pytest.param(1.0, "1", id="one"),
    pytest.param(None, "—", id="none-is-a-dash"),
])
def test_format_p(p, shown):
    assert format_p(p) == shown


@pytest.mark.parametrize(("args", "expected"), [
    pytest.param(["--metric", "ndcg"], {("ndcg", 2), ("ndcg", 3), ("ndcg", 5)},
                 id="one-metric-every-cutoff"),
    pytest.param(["--metric", "ndcg", "--metric", "song_clicks", "--k", "2"],
                 {("ndcg", 2), ("song_clicks", None)}, id="repeatable-metric-and-cutoff"),
    pytest.param(["--k", "3", "--k", "5", "--metric", "coverage", "--metric", "r_precision"],
                 {("coverage", 3), ("coverage", 5), ("r_precision", None)},
                 id="cutoff-filter-keeps-metrics-without-one"),
])
def test_filters_keep_only_the_asked_rows_with_unchanged_numbers(tracker, db_url, args,
                                                                 expected):
    _log_known_users(tracker)
    everything = {(r["metric"], r["k"], r["arm"]): r for r in _json(db_url)["metrics"]}
    rows = _json(db_url, *args)["metrics"]
    assert {(r["metric"], r["k"]) for r in rows} == expected
    assert len(rows) == 2 * len(expected)  # control and treatment
    for r in rows:
        assert r == everything[(r["metric"], r["k"], r["arm"])]


def test_without_k_every_metric_without_a_cutoff_and_with_k_only_that_cutoff(tracker, db_url):
    _log_known_users(tracker)
    rows = _json(db_url, "--k", "3")["metrics"]
    assert {r["k"] for r in rows} == {3, None}
    assert {r["metric"] for r in rows if r["k"] is None} == {"r_precision", "song_clicks"}


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--metric", "ndgc"], "unknown metric 'ndgc'; known metrics: hit_rate, "
                 "song_clicks, coverage, precision", id="misspelt-metric-lists-known-names"),
    pytest.param(["--metric", "ndcg@10"],
                 "(name the metric alone, 'ndcg', and choose its cutoff with k)",
                 id="metric-with-cutoff-says-how-to-write-it"),
    pytest.param(["--k", "7"], "no results at k = 7; this scorecard's cutoffs are 2, 3, 5",
                 id="unknown-cutoff-lists-the-experiments-cutoffs"),
    pytest.param(["--k", "0"], "0 is not in the range x>=1", id="cutoff-below-one"),
])
def test_bad_filters_are_usage_errors_that_say_what_is_accepted(tracker, db_url, args,
                                                                message):
    _log_known_users(tracker)
    result = _run(db_url, *args)
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())


def test_the_table_groups_rows_by_role_then_under_their_group(tracker, db_url):
    _log_known_users(tracker)
    lines = _run(db_url, "--guardrail", "song_clicks=0.1").stdout.splitlines()
    sections = [line for line in lines if line.startswith("== ")]
    assert sections == ["== Primary ==", "== Guardrails ==", "== Secondary =="]
    roles = {"== Primary ==": {"ndcg@3", "hit_rate@3"}, "== Guardrails ==": {"song_clicks"}}
    role = group = None
    seen: dict[str, list[Group]] = {}
    for line in lines[lines.index(sections[0]):]:
        if line.startswith("== "):
            role, group = line, None
            continue
        if line.startswith("["):
            group = next(g for g in GROUPS if f"[{g.label}]" == line)
            seen.setdefault(role, []).append(group)
            continue
        name = line.split()[0]
        assert CATALOG[name.split("@")[0]].group is group, line
        assert (name in roles[role]) if role in roles else all(
            name not in names for names in roles.values()), line
    for groups in seen.values():  # each role's groups once, in catalogue order
        assert groups == sorted(set(groups), key=GROUPS.index)
    assert seen["== Secondary =="] == list(GROUPS)


def test_tracker_scorecard_is_the_report_json_as_a_dataframe(tracker, db_url):
    _log_known_users(tracker)
    frame = tracker.scorecard("home", guardrails={"recall@2": 0.1})
    rows = _json(db_url, "--guardrail", "recall@2=0.1")["metrics"]
    assert isinstance(frame, pd.DataFrame) and len(frame) == len(rows)
    assert list(frame.columns[:len(COLUMNS)]) == list(COLUMNS)
    assert "guardrail_ok" in frame.columns
    for got, want in zip(frame.to_dict("records"), rows, strict=True):
        for field, value in want.items():
            shown = got[field]
            if value is None:
                assert shown is None or (isinstance(shown, float) and math.isnan(shown)), field
            else:
                assert shown == value, field
    small = tracker.scorecard("home", metrics=["ndcg"], ks=[2])
    assert sorted(zip(small["metric"], small["arm"], strict=True)) == [
        ("ndcg", "control"), ("ndcg", "treatment")]
    with pytest.raises(ValidationError, match="unknown metric 'bogus'"):
        tracker.scorecard("home", metrics=["bogus"])


def test_json_output_still_has_every_field_of_before(tracker, db_url):
    _log_known_users(tracker)
    row = _row(_json(db_url)["metrics"], "ndcg", 2, "treatment")
    before = {"metric", "k", "arm", "control", "kind", "users", "mean", "ci_low", "ci_high",
              "reason", "lift", "lift_ci_low", "lift_ci_high", "relative_lift",
              "relative_lift_ci_low", "relative_lift_ci_high", "p_value", "p_value_adjusted",
              "primary", "verdict"}
    assert before | {"group", "direction", "role"} <= set(row)
    assert json.loads(json.dumps(row)) == row
    header = _run(db_url, "--format", "csv").stdout.splitlines()[0]
    assert header == ("metric,k,arm,control,kind,users,mean,ci_low,ci_high,lift,lift_ci_low,"
                      "lift_ci_high,relative_lift,relative_lift_ci_low,relative_lift_ci_high,"
                      "p_value,p_value_adjusted,primary,verdict,reason,group,direction,role,"
                      "variance_reduction,exploratory")  # new fields at the end (issue 30)


def test_a_stored_metric_missing_from_the_catalogue_gets_no_direction_and_no_verdict(
        tracker, db_url):
    """Rows an older version stored under a name the catalogue no longer has are shown under
    "Other", and no verdict guesses which way is better."""
    _log_known_users(tracker)
    table = RollupMetric.__table__
    with tracker.engine.begin() as conn:
        rows = conn.execute(sa.select(table).where(table.c.metric == "hit_rate")).mappings()
        conn.execute(table.insert(), [dict(r, metric="retired") for r in rows])
    rows = _json(db_url)["metrics"]
    retired = _row(rows, "retired", 2, "treatment")
    assert (retired["group"], retired["direction"], retired["verdict"]) == (None, None, None)
    assert retired["lift"] == _row(rows, "hit_rate", 2, "treatment")["lift"]
    assert rows[-1]["metric"] == "retired"  # after every catalogued group
    lines = _run(db_url).stdout.splitlines()
    assert lines[lines.index("[Other]") + 1].startswith("retired@2")
