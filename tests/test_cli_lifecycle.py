"""``tracker experiments start|stop|archive|delete``, ``users delete``, ``logs expire`` and the
rollup's retention, through the command line, on both databases."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tests.helpers import count
from tests.rollup.scenario import create, make_logs
from tracker import Tracker
from tracker.cli import main
from tracker.store.db import create_engine


def run(url: str, *args: str, code: int = 0, **env: str):
    result = CliRunner().invoke(main, list(args), env={"TRACKER_DATABASE_URL": url, **env})
    assert result.exit_code == code, result.output + (result.stderr or "")
    return result


def _logged(url: str) -> tuple[list[dict], list[dict]]:
    imps, events = make_logs(3, days=2)
    with Tracker(url) as t:
        create(t)
        t.log_impressions(imps)
        t.log_interactions(events)
    return imps, events


def _rows(url: str, table: str) -> int:
    engine = create_engine(url)
    try:
        return count(engine, table)
    finally:
        engine.dispose()


def test_stop_archive_and_the_lists(db_url):
    _logged(db_url)
    assert "is stopped" in run(db_url, "experiments", "stop", "home").output
    assert "already" in run(db_url, "experiments", "stop", "home").output
    refused = run(db_url, "experiments", "archive", "home", code=1)
    assert "Error: experiment 'home' has impressions its rollup has not taken" in \
        refused.output
    run(db_url, "rollup")
    assert "is archived" in run(db_url, "experiments", "archive", "home").output
    assert "home" not in run(db_url, "experiments", "list").output
    listed = json.loads(run(db_url, "experiments", "list", "--all", "--format", "json").output)
    assert [(e["key"], e["status"]) for e in listed] == [("home", "archived")]
    refused = run(db_url, "experiments", "start", "home", code=1)
    assert "archived experiment is final" in refused.output


def test_delete_asks_refuses_without_a_terminal_and_reports_the_rows(db_url):
    imps, _ = _logged(db_url)
    refused = run(db_url, "experiments", "delete", "home", code=2)
    assert "refusing without a terminal" in refused.output and "--yes" in refused.output
    assert _rows(db_url, "impression") == len(imps)
    done = run(db_url, "experiments", "delete", "home", "--yes").output
    assert f"deleted experiment 'home': {len(imps)} impression" in done
    assert _rows(db_url, "impression") == 0 and _rows(db_url, "experiment") == 0


def test_users_delete_reports_per_experiment(db_url):
    imps, events = _logged(db_url)
    run(db_url, "rollup")
    user = imps[0]["user_id"]
    run(db_url, "users", "delete", user, code=2)
    assert _rows(db_url, "impression") == len(imps)
    out = json.loads(run(db_url, "users", "delete", user, "--yes", "--format", "json").output)
    mine = sum(r["user_id"] == user for r in imps)
    assert (out["impressions"], out["interactions"]) == \
        (mine, sum(r["user_id"] == user for r in events))
    (part,) = out["experiments"]
    assert part["experiment"] == "home" and part["impressions"] == mine and part["days_marked"]
    again = run(db_url, "users", "delete", user, "--yes").output
    assert f"user {user!r}: deleted 0 impressions and 0 interactions" in again


def test_logs_expire_and_the_rollup_with_a_retention_setting(db_url):
    imps, events = _logged(db_url)
    run(db_url, "rollup")
    assert "give --older-than" in run(db_url, "logs", "expire", code=2).output
    preview = run(db_url, "logs", "expire", "--older-than", "1d", "--dry-run").output
    assert f"would delete {len(imps)} impressions and {len(events)} interactions" in preview
    run(db_url, "logs", "expire", "--older-than", "1d", code=2)  # no terminal, no --yes
    assert _rows(db_url, "impression") == len(imps)
    with Tracker(db_url) as t:  # logged since: the rollup takes it, then expires it
        t.log_impressions([dict(imps[0], impression_id="late")])
    metrics = _rows(db_url, "rollup_metric")
    result = run(db_url, "rollup", TRACKER_RETENTION_DAYS="1")
    assert "retention (1 days): deleted" in result.output
    assert _rows(db_url, "impression") == _rows(db_url, "interaction") == 0
    assert _rows(db_url, "rollup_metric") == metrics  # the results stay
    refused = run(db_url, "rollup", "home", "--full", code=1)
    assert "Error: experiment 'home': raw logs before" in refused.output
    assert _rows(db_url, "rollup_metric") == metrics
    engine = create_engine(db_url)
    with engine.connect() as conn:
        runs = conn.execute(sa.text("SELECT impressions FROM log_expiry")).scalars().all()
    engine.dispose()
    assert runs == [len(imps) + 1]


def test_config_declares_the_retention_setting(db_url):
    assert "TRACKER_RETENTION_DAYS" in run(db_url, "config").output
    bad = run(db_url, "logs", "expire", "--yes", code=1, TRACKER_RETENTION_DAYS="soon")
    assert "TRACKER_RETENTION_DAYS='soon': expected a whole number >= 1" in bad.output


def _every_row(url: str) -> dict[str, int]:
    return {table: _rows(url, table) for table in ("experiment", "impression", "interaction")}


@pytest.mark.parametrize(("args", "code", "said"), [
    pytest.param(("experiments", "delete", "hom", "--yes"), 1, "'hom'",
                 id="experiments-delete-of-an-unknown-key-names-it"),
    pytest.param(("users", "delete", "%", "--yes"), 0, "deleted 0 impressions",
                 id="users-delete-of-a-wildcard-is-no-pattern"),
    pytest.param(("logs", "expire", "--older-than", "1d", "--yes"), 1, "nothing was deleted",
                 id="logs-expire-refuses-impressions-not-rolled-up"),
    pytest.param(("db", "downgrade", "--revision", "9999", "--yes"), 2, "9999",
                 id="db-downgrade-to-an-unknown-revision-names-it"),
])
def test_a_destructive_command_with_a_wrong_target_loses_nothing(db_url, args, code, said):
    _logged(db_url)
    before = _every_row(db_url)
    result = run(db_url, *args, code=code)
    assert said in result.output
    assert _every_row(db_url) == before
