"""The `tracker` command, run in-process with click's runner against the test database."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.helpers import count, impression, interaction, stored_impressions
from tracker.cli import main
from tracker.store.db import SCHEMA_REVISION, create_engine

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(url: str, *args: str, code: int = 0):
    result = CliRunner().invoke(main, list(args), env={"TRACKER_DATABASE_URL": url})
    assert result.exit_code == code, result.output + (result.stderr or "")
    return result


def test_db_commands_create_migrate_and_report_the_schema(empty_url):
    assert "no schema" in run(empty_url, "db", "current").output
    assert f"-> {SCHEMA_REVISION}" in run(empty_url, "db", "upgrade").output
    assert "up to date" in run(empty_url, "db", "current").output
    assert "-> empty" in run(empty_url, "db", "downgrade", "--revision", "base").output
    assert "no schema" in run(empty_url, "db", "current").output


def test_commands_on_a_database_without_schema_say_to_upgrade(empty_url):
    result = run(empty_url, "experiments", "list", code=1)
    assert "run `tracker db upgrade`" in result.stderr


def _create(url: str, *extra: str, code: int = 0):
    return run(url, "experiments", "create", "home", "--arm", "control=0.5",
               "--arm", "treatment=0.5", "--window", "2h", "--relevance", "click=1",
               "--relevance", "save=2", *extra, code=code)


def test_experiments_create_list_and_show(db_url):
    assert "created experiment 'home'" in _create(db_url, "--timezone", "Europe/Paris").output
    listed = json.loads(run(db_url, "experiments", "list", "--format", "json").stdout)
    assert [e["key"] for e in listed] == ["home"]
    shown = json.loads(run(db_url, "experiments", "show", "home", "--format", "json").stdout)
    assert shown["arms"] == [{"key": "control", "weight": 0.5},
                             {"key": "treatment", "weight": 0.5}]
    assert (shown["control"], shown["attribution_window_seconds"], shown["timezone"]) == (
        "control", 7200.0, "Europe/Paris")
    assert shown["relevance"] == {"click": 1, "save": 2}
    assert "treatment (50.0%)" in run(db_url, "experiments", "show", "home").output
    assert "home" in run(db_url, "experiments", "list").output


def test_experiment_create_errors_are_clear(db_url):
    _create(db_url)
    assert "already exists" in _create(db_url, code=1).stderr
    assert "left unchanged" in _create(db_url, "--exist-ok").output
    bad = run(db_url, "experiments", "create", "x", "--arm", "a", "--window", "soon", code=2)
    assert "expected a number with a unit" in bad.output
    missing = run(db_url, "experiments", "show", "nope", code=1)
    assert "unknown experiment 'nope'" in missing.stderr


def test_import_of_the_shipped_sample_then_a_reimport_stores_nothing_new(db_url):
    run(db_url, "experiments", "create", "home-recs-v2", "--arm", "control", "--arm",
        "two-tower", "--relevance", "click=1", "--relevance", "play=1", "--relevance",
        "save=2", "--relevance", "purchase=3")
    first = run(db_url, "import", "impressions", str(EXAMPLES / "impressions.csv"))
    assert "200 received, 200 stored" in first.output
    events = run(db_url, "import", "interactions", str(EXAMPLES / "interactions.jsonl"))
    lines = (EXAMPLES / "interactions.jsonl").read_text().splitlines()
    distinct = len({json.loads(line)["event_id"] for line in lines})
    assert f"{len(lines)} received, {distinct} stored, {len(lines) - distinct} duplicates" in (
        events.output)
    again = run(db_url, "import", "impressions", str(EXAMPLES / "impressions.csv"))
    assert "0 stored, 200 duplicates" in again.output
    engine = create_engine(db_url)
    assert (count(engine, "impression"), count(engine, "interaction")) == (200, distinct)
    engine.dispose()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_import_each_format_reports_rejected_rows_and_stores_the_rest(db_url, tmp_path, fmt):
    _create(db_url)
    records = [impression(i, experiment="home") for i in range(3)]
    records[1]["items"] = ["dup", "dup"]
    path = tmp_path / f"impressions.{fmt}"
    if fmt == "csv":
        frame = pd.DataFrame(records)
        frame["items"] = frame["items"].map(json.dumps)
        frame["scores"] = frame["scores"].map(lambda s: "|".join(map(str, s)))
        frame["served_at"] = frame["served_at"].map(lambda t: t.isoformat())
        frame.to_csv(path, index=False)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r, default=str) + "\n" for r in records)
                        + "{not json\n")
    else:
        pd.DataFrame(records).to_parquet(path)
    result = run(db_url, "import", "impressions", str(path), "--json", code=2)
    summary = json.loads(result.stdout)
    rejected = [(r["index"], r["field"]) for r in summary["rejected"]]
    assert summary["stored"] == 2
    assert rejected[0] == (1, "items")
    if fmt == "jsonl":
        assert rejected[1][0] == 3 and "not valid JSON" in summary["rejected"][1]["reason"]
    engine = create_engine(db_url)
    stored = stored_impressions(engine)
    engine.dispose()
    assert stored["imp-2"]["items"] == records[2]["items"]
    assert stored["imp-2"]["served_at"] == records[2]["served_at"]
    assert stored["imp-0"]["scores"] == records[0]["scores"]


def test_import_interactions_from_csv_with_optional_columns(db_url, tmp_path):
    _create(db_url)
    path = tmp_path / "events.csv"
    rows = [interaction(0), interaction(1, value=2.5, impression_id="imp-9")]
    frame = pd.DataFrame(rows)
    frame["occurred_at"] = frame["occurred_at"].map(lambda t: t.isoformat())
    frame.to_csv(path, index=False)
    assert "2 stored" in run(db_url, "import", "interactions", str(path)).output
    engine = create_engine(db_url)
    with engine.connect() as conn:
        stored = conn.exec_driver_sql(
            "SELECT event_key, value, impression_key FROM interaction ORDER BY event_key").all()
    engine.dispose()
    assert [tuple(r) for r in stored] == [("evt-0", None, None), ("evt-1", 2.5, "imp-9")]


def test_unknown_file_format_is_a_usage_error(db_url, tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("")
    assert "cannot tell the format" in run(db_url, "import", "impressions", str(path),
                                           code=2).output


def test_help_everywhere():
    for args in ([], ["db"], ["db", "upgrade"], ["experiments", "create"], ["import"],
                 ["import", "impressions"], ["config"]):
        result = CliRunner().invoke(main, [*args, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output


def test_experiments_catalog_declares_shows_and_clears(db_url, tmp_path):
    _create(db_url)
    assert "no declared catalog" in run(db_url, "experiments", "catalog", "home").output
    items = tmp_path / "items.txt"
    items.write_text("song-1\nsong-2\n\nsong-1\nsong-3\n")
    declared = run(db_url, "experiments", "catalog", "home", str(items)).output
    assert "3 catalog items declared" in declared
    assert "3 declared catalog items" in run(db_url, "experiments", "catalog", "home").output
    bad = tmp_path / "bad.txt"
    bad.write_text("song-4\n" + "x" * 300 + "\n")
    refused = run(db_url, "experiments", "catalog", "home", str(bad), code=1)
    assert "catalog item #1" in refused.stderr
    assert "3 declared catalog items" in run(db_url, "experiments", "catalog", "home").output
    assert "catalog removed" in run(db_url, "experiments", "catalog", "home", "--clear").output
    assert "no declared catalog" in run(db_url, "experiments", "catalog", "home").output


def test_experiments_create_and_update_set_the_metric_roles(db_url):
    _create(db_url, "--primary", "ndcg@10", "--primary", "hit_rate@5",
            "--guardrail", "song_clicks=0.05")
    shown = json.loads(run(db_url, "experiments", "show", "home", "--format", "json").stdout)
    assert shown["roles"] == {"primary": ["ndcg@10", "hit_rate@5"],
                              "guardrails": {"song_clicks": 0.05}}
    assert "primary ndcg@10, hit_rate@5; guardrails song_clicks (loss 0.05)" in run(
        db_url, "experiments", "show", "home").output
    out = run(db_url, "experiments", "update", "home", "--guardrail", "precision@20=0.1",
              "--name", "Home page", "--ends-at", "2030-01-01T00:00:00Z").output
    assert "primary ndcg@10, hit_rate@5; guardrails precision@20 (loss 0.1)" in out
    shown = json.loads(run(db_url, "experiments", "show", "home", "--format", "json").stdout)
    assert (shown["name"], shown["ends_at"]) == ("Home page", "2030-01-01T00:00:00+00:00")
    assert "none declared" in run(db_url, "experiments", "update", "home",
                                  "--clear-roles").output
    shown = json.loads(run(db_url, "experiments", "show", "home", "--format", "json").stdout)
    assert shown["roles"] is None


@pytest.mark.parametrize(("args", "code", "message"), [
    pytest.param(("--guardrail", "song_clicks"), 2, "expected METRIC@K=LOSS",
                 id="guardrail-without-its-loss"),
    pytest.param(("--guardrail", "song_clicks=five"), 2, "expected METRIC@K=LOSS",
                 id="guardrail-loss-not-a-number"),
    pytest.param(("--primary", "ndcg@7"), 1, "accepted: ndcg@5, ndcg@10, ndcg@20",
                 id="primary-at-a-cutoff-not-reported"),
    pytest.param(("--primary", "ndcg@10", "--clear-roles"), 2, "not both",
                 id="clear-roles-with-new-roles"),
])
def test_experiments_update_refuses_bad_roles_and_keeps_the_stored_ones(db_url, args, code,
                                                                        message):
    _create(db_url, "--primary", "ndcg@10")
    result = run(db_url, "experiments", "update", "home", *args, code=code)
    assert message in result.stderr
    shown = json.loads(run(db_url, "experiments", "show", "home", "--format", "json").stdout)
    assert shown["roles"] == {"primary": ["ndcg@10"], "guardrails": {}}
