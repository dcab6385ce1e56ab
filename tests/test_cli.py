"""The `tracker` command, run in-process with click's runner against the test database."""

from __future__ import annotations

import json
import math
import string
from datetime import timedelta
from pathlib import Path

import click
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import T0, count, impression, interaction, stored_impressions
from tracker.cli import main
from tracker.cli.common import (
    MAX_DURATION,
    StepProgress,
    format_duration,
    parse_duration,
    parse_pairs,
)
from tracker.config import mask_password
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
    # --exist-ok accepts the same experiment only: another window is still an error
    differs = run(db_url, "experiments", "create", "home", "--arm", "control", "--arm",
                  "treatment", "--window", "3h", "--exist-ok", code=1)
    assert "already exists" in differs.stderr
    bad = run(db_url, "experiments", "create", "x", "--arm", "a", "--window", "soon", code=2)
    assert "expected a positive number with a unit" in bad.output
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


# ---------------------------------------------------------------------------- bad options
@pytest.mark.parametrize(("args", "says"), [
    pytest.param(["report", "home", "--level", "95"], "did you mean 0.95?",
                 id="level-given-as-a-percentage-suggests-the-fraction"),
    pytest.param(["report", "home", "--level", "0"], "strictly between 0 and 1",
                 id="level-zero"),
    pytest.param(["report", "home", "--level", "1"], "strictly between 0 and 1",
                 id="level-one"),
    pytest.param(["report", "home", "--guardrail", "song_clicks=-1"],
                 "METRIC@K=LOSS (e.g. ndcg@10=0.02) with a finite number >= 0",
                 id="negative-guardrail-margin"),
    pytest.param(["report", "home", "--guardrail", "song_clicks=nan"], "finite number >= 0",
                 id="nan-guardrail-margin"),
    pytest.param(["report", "home", "--guardrail", "song_clicks"], "expected METRIC@K=LOSS",
                 id="guardrail-without-margin"),
    pytest.param(["report", "home", "--guardrail", "=0.1"], "expected METRIC@K=LOSS",
                 id="guardrail-without-metric"),
    pytest.param(["report", "home", "--guardrail", "ndcg@10=0.1", "--guardrail",
                  "ndcg@10=0.2"], "metric@k 'ndcg@10' given twice",
                 id="guardrail-given-twice"),
    pytest.param(["experiments", "create", "x", "--arm", "a=1", "--arm", "a=2"],
                 "arm 'a' given twice", id="duplicate-arm"),
    pytest.param(["experiments", "create", "x", "--arm", "a=0", "--arm", "b"],
                 "ARM=WEIGHT with a finite number > 0", id="zero-arm-weight"),
    pytest.param(["experiments", "create", "x", "--arm", "a=inf", "--arm", "b"],
                 "ARM=WEIGHT with a finite number > 0", id="infinite-arm-weight"),
    pytest.param(["experiments", "create", "x", "--arm", "a", "--arm", "b", "--relevance",
                  "click=-1"], "EVENT=GRADE with a finite number >= 0",
                 id="negative-relevance-grade"),
    pytest.param(["experiments", "create", "x", "--arm", "a", "--arm", "b", "--relevance",
                  "click=1", "--relevance", "click=2"], "event 'click' given twice",
                 id="relevance-event-given-twice"),
    pytest.param(["experiments", "create", "x", "--arm", "a", "--arm", "b", "--window",
                  "999999999d"], "up to 365d", id="window-beyond-a-year"),
    pytest.param(["experiments", "create", "x", "--arm", "a", "--arm", "b", "--window", "0s"],
                 "a positive number with a unit", id="zero-window"),
    pytest.param(["experiments", "create", "x", "--arm", "a", "--arm", "b", "--timezone",
                  "Mars/Olympus"], "not an IANA time zone name", id="unknown-time-zone"),
    pytest.param(["experiments", "create", "x", "--arm", "a", "--arm", "b", "--cutoffs",
                  "0,5"], "each between 1 and", id="cutoff-zero"),
    pytest.param(["experiments", "create", "x", "--arm", "a", "--arm", "b", "--control", "c"],
                 "is not one of the arms (a, b)", id="control-not-an-arm"),
    pytest.param(["rollup", "--every", "999999999d"], "up to 365d",
                 id="rollup-every-beyond-a-year"),
    pytest.param(["rollup", "--every", "0s"], "a positive number with a unit",
                 id="rollup-every-zero"),
    pytest.param(["rollup", "--every", "0.0000001s"], "a positive number with a unit",
                 id="rollup-every-below-a-microsecond-is-zero"),
    pytest.param(["db", "upgrade", "--revision", "nope"], "Can't locate revision",
                 id="unknown-revision"),
    pytest.param(["demo", "--days", "0"], "1<=x<=366", id="demo-without-days"),
    pytest.param(["demo", "--seed", "-1"], "x>=0", id="negative-demo-seed"),
    pytest.param(["serve", "--port", "99999"], "1<=x<=65535", id="port-beyond-65535"),
    pytest.param(["dashboard", "--port", "0"], "1<=x<=65535", id="dashboard-port-zero"),
    pytest.param(["serve", "--host", "bad host"], "expected a host name or IP address",
                 id="host-with-a-space"),
    pytest.param(["keys", "create", "k" * 201, "--scope", "ingest"],
                 "a name of 1 to 200 characters", id="key-name-too-long"),
    pytest.param(["report", "home", "--day", "2026-01-01"],
                 "no day has results yet (run `tracker rollup`)",
                 id="report-day-before-any-rollup"),
])
def test_bad_option_values_are_usage_errors_that_say_the_accepted_form(db_url, args, says):
    _create(db_url)
    result = run(db_url, *args, code=2)
    assert says in result.output
    assert "Traceback" not in result.output
    listed = json.loads(run(db_url, "experiments", "list", "--format", "json").stdout)
    assert [e["key"] for e in listed] == ["home"]  # nothing was created or changed


def test_report_day_without_results_names_the_days_that_have_them(tracker, db_url):
    from tests.test_report import _log_known_users

    _log_known_users(tracker)
    day = T0.date()
    result = run(db_url, "report", "home", "--day", "2001-01-01", code=2)
    assert f"no results for 2001-01-01: the days with results run from {day} to {day}" in (
        result.output)
    assert run(db_url, "report", "home", "--day", day.isoformat()).exit_code == 0


# ---------------------------------------------------------------------------- secrets
@pytest.mark.parametrize(("url", "shown"), [
    pytest.param("postgresql+psycopg://tracker:s3cr3t-pw@db:5432/tracker",
                 "postgresql+psycopg://tracker:***@db:5432/tracker", id="password-in-user-part"),
    pytest.param("postgresql://tracker:s3cr3t-pw@db/tracker",
                 "postgresql+psycopg://tracker:***@db/tracker", id="password-with-driver-added"),
    pytest.param("postgresql+psycopg://tracker@db/tracker?sslmode=require&password=s3cr3t-pw",
                 "postgresql+psycopg://tracker@db/tracker?sslmode=require&password=***",
                 id="password-query-parameter"),
    pytest.param("postgresql+psycopg://tracker:p@ss:s3cr3t-pw@db/tracker",
                 "postgresql+psycopg://tracker:***@db/tracker", id="password-holding-an-at-sign"),
    pytest.param("sqlite:///s3cr3t-pw.db", "sqlite:///s3cr3t-pw.db",
                 id="sqlite-path-is-not-a-secret"),
])
def test_config_masks_database_passwords(url, shown):
    result = CliRunner().invoke(main, ["config"], env={"TRACKER_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    assert f"TRACKER_DATABASE_URL={shown}  (default" in result.output
    if not url.startswith("sqlite"):
        assert "s3cr3t-pw" not in result.output


def test_a_rejected_database_url_is_echoed_without_its_password():
    result = CliRunner().invoke(main, ["config"],
                                env={"TRACKER_DATABASE_URL": "mysql://tracker:s3cr3t-pw@db/x"})
    assert result.exit_code == 1
    assert "'mysql://tracker:***@db/x': expected sqlite:///PATH" in result.output
    assert "s3cr3t-pw" not in result.output


@given(password=st.text(alphabet=string.ascii_letters + string.digits + "!$%^*()~-_.", min_size=1,
                        max_size=40),
       in_query=st.booleans())
def test_no_password_survives_masking(password, in_query):
    secret = "§" + password  # a character no other part of the URL holds
    url = (f"postgresql+psycopg://user@host:5432/db?password={secret}" if in_query
           else f"postgresql+psycopg://user:{secret}@host:5432/db")
    masked = mask_password(url)
    assert secret not in masked and "***" in masked
    assert masked.startswith("postgresql+psycopg://user") and "host:5432/db" in masked


def test_a_catalog_file_that_is_not_utf8_is_a_usage_error_and_keeps_the_catalog(db_url,
                                                                               tmp_path):
    _create(db_url)
    good = tmp_path / "items.txt"
    good.write_text("song-1\nsong-2\n")
    run(db_url, "experiments", "catalog", "home", str(good))
    latin = tmp_path / "latin.txt"
    latin.write_bytes("song-1\ncaf\u00e9\n".encode("latin-1"))
    refused = run(db_url, "experiments", "catalog", "home", str(latin), code=2)
    assert "latin.txt: not UTF-8 text" in refused.output and "Traceback" not in refused.output
    assert "2 declared catalog items" in run(db_url, "experiments", "catalog", "home").output


@given(text=st.text(max_size=30) | st.from_regex(r"\A[0-9]{1,25}(\.[0-9]{1,12})?[smhd]\Z"))
def test_a_duration_is_positive_and_at_most_a_year_or_a_usage_error(text):
    try:
        duration = parse_duration(text, "--window")
    except click.BadParameter as error:
        assert "up to 365d" in error.message
    else:
        assert timedelta(0) < duration <= MAX_DURATION


@given(values=st.lists(st.text(max_size=12) | st.from_regex(r"\A[a-z]{1,3}=-?[0-9.e]{0,6}\Z")
                       | st.sampled_from(["a=nan", "a=inf", "a=-0", "a=1e400", "=1"]),
                       max_size=4))
def test_name_number_pairs_are_each_name_once_with_a_finite_number_or_a_usage_error(values):
    try:
        pairs = parse_pairs(tuple(values), "--relevance", "EVENT=GRADE", default=1.0)
    except click.BadParameter as error:
        assert "EVENT=GRADE" in error.message or "given twice" in error.message
    else:
        assert len(pairs) == len(values) and all(name.strip() for name in pairs)
        assert all(math.isfinite(v) and v >= 0 for v in pairs.values())


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


# ---------------------------------------------------------------------------- one CLI style
def _commands(group: click.Group = main, path: tuple[str, ...] = ()):
    """Every command of the CLI with its path, e.g. (("experiments", "show"), command)."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


def test_every_command_names_the_experiment_alike_and_formats_with_one_option():
    named = set()
    for path, command in _commands():
        usage = CliRunner().invoke(main, [*path, "--help"]).output.splitlines()[0]
        params = {p.name: p for p in command.params}
        experiment = [p for p in command.params
                      if isinstance(p, click.Argument) and p.name in ("experiment", "key")]
        if experiment:
            named.add(path)
            assert "EXPERIMENT" in usage and " KEY" not in usage, usage
        if "fmt" in params and path[0] != "import" or path[-1] == "impressions":
            option = params["fmt"]
            assert option.opts == ["--format"] and option.default == "text", path
            assert {"text", "json"} <= set(option.type.choices), path
        visible = [o for p in command.params if isinstance(p, click.Option) and not p.hidden
                   for o in p.opts]
        assert "--json" not in visible, path
        # `keys create --experiment KEY ...` lists the experiments a key is limited to (issue
        # 29's spelling, repeatable); no command names the experiment it acts on so
        assert "--experiment" not in visible or path == ("keys", "create"), path
    assert {("report",), ("rollup",), ("experiments", "show"), ("experiments", "create"),
            ("experiments", "update"), ("experiments", "catalog")} <= named


def test_usage_lines_show_optional_arguments_in_brackets():
    catalog = CliRunner().invoke(main, ["experiments", "catalog", "--help"]).output
    assert catalog.splitlines()[0].endswith("catalog [OPTIONS] EXPERIMENT [FILE]")
    rollup = CliRunner().invoke(main, ["rollup", "--help"]).output
    assert rollup.splitlines()[0].endswith("rollup [OPTIONS] [EXPERIMENT]")


def test_our_errors_and_clicks_usage_errors_read_alike(db_url):
    _create(db_url)
    ours = run(db_url, "experiments", "show", "nope", code=1).stderr
    usage = run(db_url, "report", "home", "--level", "95", code=2).stderr
    assert ours.startswith("Error: ") and "Error: " in usage


def test_windows_are_shown_as_given(db_url):
    _create(db_url)  # --window 2h
    listed = run(db_url, "experiments", "list").output.splitlines()
    assert listed[0].split() == ["KEY", "STATUS", "ARMS", "CONTROL", "WINDOW", "CREATED"]
    assert listed[1].split()[4] == "2h"
    shown = run(db_url, "experiments", "show", "home").output
    (window,) = [line for line in shown.splitlines() if "attribution_window" in line]
    assert window.split() == ["attribution_window:", "2h"]  # not 7200 (seconds)
    json_window = json.loads(run(db_url, "experiments", "show", "home", "--format", "json")
                             .stdout)["attribution_window_seconds"]
    assert json_window == 7200.0  # the JSON form is a stable interface: seconds stay


@pytest.mark.parametrize(("given", "shown"), [
    pytest.param("24h", "24h", id="a-day-in-hours-as-given"),
    pytest.param("7d", "7d", id="days"),
    pytest.param("30m", "30m", id="minutes"),
    pytest.param("90s", "90s", id="seconds-not-a-whole-minute"),
    pytest.param("1.5h", "90m", id="fraction-of-an-hour-in-minutes"),
    pytest.param("0.5s", "0.5s", id="below-a-second"),
])
def test_format_duration_shows_a_window_in_the_unit_it_is_given_in(given, shown):
    assert format_duration(parse_duration(given)) == shown


@given(st.integers(1, 365 * 86_400_000_000))
def test_format_duration_reads_back_as_the_same_duration(micros):
    duration = timedelta(microseconds=micros)
    assert parse_duration(format_duration(duration)) == duration


def test_rollup_takes_the_experiment_as_argument_and_the_old_option_still(tracker, db_url):
    from tests.test_report import _log_known_users

    _log_known_users(tracker)
    tracker.create_experiment("other", {"a": 1, "b": 1})
    new = json.loads(run(db_url, "rollup", "home", "--format", "json").stdout)
    assert [s["experiment"] for s in new] == ["home"]
    old = run(db_url, "rollup", "--experiment", "other", "--json")
    assert [s["experiment"] for s in json.loads(old.stdout)] == ["other"]
    assert "--json is deprecated; use --format json" in old.stderr
    both = run(db_url, "rollup", "home", "--experiment", "other", code=2)
    assert "two experiments given" in both.output


def test_import_prints_json_with_format_and_keeps_the_old_spellings(db_url):
    run(db_url, "experiments", "create", "home-recs-v2", "--arm", "control", "--arm",
        "two-tower", "--unknown-events", "zero")
    path = str(EXAMPLES / "impressions.csv")
    assert json.loads(run(db_url, "import", "impressions", path, "--format", "json")
                      .stdout)["stored"] == 200
    old = run(db_url, "import", "impressions", path, "--json")
    assert json.loads(old.stdout)["duplicates"] == 200
    assert "--json is deprecated" in old.stderr
    renamed = run(db_url, "import", "impressions", path, "--format", "csv")
    assert "0 stored, 200 duplicates" in renamed.stdout
    assert "use --input-format csv" in renamed.stderr
    assert "0 stored" in run(db_url, "import", "impressions", path, "--input-format",
                             "csv").stdout


def test_format_table_is_still_read_as_text(db_url):
    _create(db_url)
    assert (run(db_url, "experiments", "list", "--format", "table").output
            == run(db_url, "experiments", "list").output)


def test_import_progress_off_a_terminal_is_one_plain_line_per_step(db_url):
    run(db_url, "experiments", "create", "home-recs-v2", "--arm", "control", "--arm",
        "two-tower")
    result = CliRunner().invoke(main, ["import", "impressions", str(EXAMPLES /
                                                                    "impressions.csv")],
                                env={"TRACKER_DATABASE_URL": db_url,
                                     "TRACKER_BATCH_SIZE": "50"})
    assert result.exit_code == 0, result.output
    assert "\r" not in result.stderr
    assert result.stderr.splitlines() == [f"importing impressions {n}/200"
                                          for n in (50, 100, 150, 200)]


def test_progress_on_a_terminal_is_a_bar_redrawn_in_place(capsys):
    with StepProgress("days", 2, terminal=True) as bar:
        bar.advance(1, "2026-11-01")
        bar.advance(1, "2026-11-02")
    err = capsys.readouterr().err
    assert "2/2" in err and "━" in err  # rich's bar, complete
    assert "days 1/2 2026-11-01\n" not in err  # not the plain lines of a log
