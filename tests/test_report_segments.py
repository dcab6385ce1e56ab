"""`tracker report EXPERIMENT --segment DIM`, `Tracker.scorecard(segment=)` and
`Tracker.metric_table(segment=)` (issue 33): the scorecard's comparisons per slice, their
p-values adjusted across the slices, the sample ratio per slice and the heterogeneity of
each primary. Both databases."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner
from statsmodels.stats.multitest import multipletests

from tests.rollup.scenario import create
from tests.rollup.test_rollup import NOW
from tests.rollup.test_slices import _sliced_logs
from tracker.cli import main
from tracker.stats.srm import srm_test


@pytest.fixture
def sliced(tracker):
    imps, events = _sliced_logs(3, users=60, impressions=900)
    create(tracker, segments=["surface:list", "device"], max_levels=3)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    return tracker


def _cli(db_url: str, *args: str):
    return CliRunner().invoke(main, ["report", "home", *args],
                              env={"TRACKER_DATABASE_URL": db_url})


def test_json_gives_a_row_per_metric_arm_and_slice_adjusted_across_the_slices(sliced, db_url):
    result = _cli(db_url, "--segment", "surface", "--format", "json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert (found["segment"], found["kind"]) == ("surface", "list")
    assert found["slices"] == ["home", "search", "pdp", "(other)", "(none)"]
    rows = found["metrics"]
    assert {r["slice"] for r in rows} == set(found["slices"])
    assert all(r["segment"] == "surface" and r["exploratory"] for r in rows)
    whole = json.loads(_cli(db_url, "--format", "json").output)
    assert len(rows) == len(whole["metrics"]) * len(found["slices"])
    # one family per metric and treatment arm: its slices' p-values, Benjamini-Hochberg
    family = [r for r in rows if (r["metric"], r["k"], r["arm"]) == ("ndcg", 3, "treatment")]
    assert len(family) == 5
    expected = multipletests([r["p_value"] for r in family], method="fdr_bh")[1]
    assert [r["p_value_adjusted"] for r in family] == pytest.approx(expected, rel=1e-12)
    for r in family:
        assert r["verdict"] == ("inconclusive" if r["p_value_adjusted"] >= 0.05 else
                                "better" if r["lift"] > 0 else "worse")


def test_each_slice_gets_its_sample_ratio_check_and_a_list_dimension_no_heterogeneity_test(
        sliced, db_url):
    found = json.loads(_cli(db_url, "--segment", "surface", "--format", "json").output)
    checks = {row["slice"]: row for row in found["srm"]}
    health = sliced.metric_table("home", cumulative=True, segment="surface")
    last = health[(health["day"] == health["day"].max()) & (health["metric"] == "ndcg")
                  & (health["k"] == 3)]
    for name, check in checks.items():
        users = [int(last[(last["slice"] == name) & (last["arm"] == arm)]["users"].iloc[0])
                 for arm in ("control", "treatment")]
        assert list(check["users"].values()) == users
        assert check["p_value"] == pytest.approx(srm_test(users, [0.5, 0.5]).p_value)
    adjusted = multipletests([checks[s]["p_value"] for s in checks], method="holm")[1]
    assert [checks[s]["p_value_adjusted"] for s in checks] == pytest.approx(adjusted)
    assert {h["reason"] for h in found["heterogeneity"]} == {"shared_users"}
    assert any("list dimension" in note for note in found["notes"])


def test_text_shows_a_block_per_slice_and_csv_the_rows_with_their_slice(sliced, db_url):
    text = _cli(db_url, "--segment", "surface", "--metric", "ndcg", "--k", "3")
    assert text.exit_code == 0, text.output
    blocks = [line for line in text.output.splitlines() if line.startswith("== surface = ")]
    assert [b.split(":")[0] for b in blocks] == [
        "== surface = home", "== surface = search", "== surface = pdp",
        "== surface = (other)", "== surface = (none)"]
    assert "Benjamini-Hochberg" in text.output and "coverage" not in text.output
    rows = list(csv.DictReader(io.StringIO(_cli(db_url, "--segment", "surface", "--format",
                                                "csv", "--metric", "ndcg").output)))
    assert rows and {r["segment"] for r in rows} == {"surface"}
    assert {r["metric"] for r in rows} == {"ndcg"}
    assert len({r["slice"] for r in rows}) == 5


def test_the_sdk_gives_the_same_rows_as_the_json(sliced, db_url):
    frame = sliced.scorecard("home", segment="surface", metrics=["ndcg"], ks=[3])
    found = json.loads(_cli(db_url, "--segment", "surface", "--format", "json",
                            "--metric", "ndcg", "--k", "3").output)
    treated = frame[~frame["control"].astype(bool)]
    assert treated["p_value_adjusted"].tolist() == pytest.approx(
        [r["p_value_adjusted"] for r in found["metrics"] if not r["control"]])
    assert frame["slice"].tolist() == [r["slice"] for r in found["metrics"]]
    assert frame.attrs["heterogeneity"] == found["heterogeneity"]


def test_a_dimension_not_declared_is_a_usage_error_naming_those_declared(sliced, db_url):
    result = _cli(db_url, "--segment", "country")
    assert result.exit_code == 2
    assert "no dimension 'country'" in result.output and "surface, device" in result.output


def test_a_user_dimensions_slices_partition_the_users_and_get_a_heterogeneity_test(
        sliced, db_url):
    found = json.loads(_cli(db_url, "--segment", "device", "--format", "json").output)
    assert found["kind"] == "user" and set(found["slices"]) == {"ios", "(none)"}
    whole = json.loads(_cli(db_url, "--format", "json").output)
    for arm in ("control", "treatment"):
        users = [r["users"] for r in found["metrics"]
                 if (r["metric"], r["k"], r["arm"]) == ("ndcg", 3, arm)]
        total = [r["users"] for r in whole["metrics"]
                 if (r["metric"], r["k"], r["arm"]) == ("ndcg", 3, arm)]
        assert sum(users) == total[0]  # each user in one slice
    assert found["heterogeneity"] and all(
        h["reason"] in ("ok", "too_few_slices") for h in found["heterogeneity"])
    assert any(h["reason"] == "ok" and 0 <= h["p_value"] <= 1 for h in found["heterogeneity"])
    assert any("slices partition the users" in note for note in found["notes"])


def _segment_report(tracker, db_url: str, declared: str) -> dict:
    """The JSON segment report of ``declared``'s dimension on _sliced_logs' lists."""
    imps, _ = _sliced_logs(4)
    create(tracker, segments=[declared])
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    name = declared.split(":")[0]
    return json.loads(_cli(db_url, "--segment", name, "--format", "json").output)


def test_activity_without_a_pre_period_is_one_slice_said_to_be_its_terciles(tracker, db_url):
    found = _segment_report(tracker, db_url, "activity")
    assert found["slices"] == ["0+"]  # nobody interacted before: the terciles tie
    assert found["metrics"] and {r["slice"] for r in found["metrics"]} == {"0+"}
    assert any("terciles" in note for note in found["notes"])


def test_a_key_no_list_carries_says_so(tracker, db_url):
    found = _segment_report(tracker, db_url, "country:list")
    assert found["slices"] == ["(none)"]
    assert any("No list carries the context key 'country'" in n for n in found["notes"])


def test_a_dimension_declared_since_the_last_rollup_says_its_slices_come_with_the_next(
        tracker, db_url):
    imps, events = _sliced_logs(4)
    create(tracker)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    tracker.update_experiment("home", segments=["surface:list"])
    found = json.loads(_cli(db_url, "--segment", "surface", "--format", "json").output)
    assert found["slices"] == [] and found["metrics"] == []
    assert any("from its first run after the declaration" in n for n in found["notes"])
    tracker.rollup("home", now=NOW)
    found = json.loads(_cli(db_url, "--segment", "surface", "--format", "json").output)
    assert "home" in found["slices"] and found["metrics"]
