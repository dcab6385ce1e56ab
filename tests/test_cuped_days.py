"""The ``cuped_days`` experiment setting: checked once in tracker/ingest, stored, shown, and
changeable (a change makes the next rollup recompute every day)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.rollup.scenario import create
from tracker.cli import main
from tracker.errors import ValidationError


@pytest.mark.parametrize("days", [
    pytest.param(-1, id="negative"), pytest.param(366, id="over-a-year"),
    pytest.param(1.5, id="not-whole"), pytest.param(True, id="a-bool-is-not-a-number"),
    pytest.param("14", id="a-string")])
def test_a_bad_window_is_refused_naming_the_field(tracker, days):
    with pytest.raises(ValidationError) as error:
        create(tracker, cuped_days=days)
    assert error.value.field == "cuped_days" and "0 (no CUPED" in error.value.reason
    assert tracker.experiments() == []


def test_the_default_is_14_days_and_0_is_accepted(tracker):
    create(tracker)
    create(tracker, key="off", cuped_days=0)
    assert tracker.experiment("home").cuped_days == 14
    assert tracker.experiment("off").to_dict()["cuped_days"] == 0


def test_the_cli_creates_shows_and_updates_it(db_url):
    env = {"TRACKER_DATABASE_URL": db_url}
    run = CliRunner().invoke
    created = run(main, ["experiments", "create", "x", "--arm", "a=1", "--arm", "b=1",
                         "--cuped-days", "7"], env=env)
    assert created.exit_code == 0, created.output
    shown = json.loads(run(main, ["experiments", "show", "x", "--format", "json"],
                           env=env).stdout)
    assert shown["cuped_days"] == 7
    bad = run(main, ["experiments", "update", "x", "--cuped-days", "-3"], env=env)
    assert bad.exit_code == 2 and "--cuped-days" in bad.output
    assert run(main, ["experiments", "update", "x", "--cuped-days", "0"], env=env).exit_code == 0
    shown = json.loads(run(main, ["experiments", "show", "x", "--format", "json"],
                           env=env).stdout)
    assert shown["cuped_days"] == 0
