"""Loading the demo through the real logging API (SQLite and PostgreSQL): every record is
accepted, retried sends are recognised, and loading again stores nothing new."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from tests.helpers import count
from tracker.cli import main
from tracker.demo import (
    GUARDRAILS,
    PRIMARY,
    DemoConfig,
    experiment_spec,
    load,
    pre_period,
    simulate,
)
from tracker.errors import AlreadyExists

SMALL = DemoConfig(days=3, users=300, items=400, start=datetime(2026, 11, 1, tzinfo=UTC))


def _all(config):
    """Every impression and every interaction: the pre-period's before the experiment's."""
    batches = list(simulate(config))
    lists, events = pre_period(config)
    return (lists + [i for b in batches for i in b.impressions],
            events + [e for b in batches for e in b.interactions])


def test_every_record_is_accepted_and_retries_are_duplicates(tracker):
    imps, events = _all(SMALL)
    retried = sum(n - 1 for n in Counter(e["event_id"] for e in events).values())
    assert retried > 0
    days = []
    summary = load(tracker, SMALL, after_day=days.append)
    assert days == [b.day for b in simulate(SMALL)]
    assert (summary.days, summary.impressions, summary.interactions) == (3, len(imps),
                                                                         len(events))
    assert (summary.rejected, summary.conflicts, summary.duplicates) == (0, 0, retried)
    assert summary.stored == len(imps) + len(events) - retried
    assert count(tracker.engine, "impression") == len(imps)
    assert count(tracker.engine, "interaction") == len(events) - retried
    stored = tracker.experiment(SMALL.key)
    assert [a.key for a in stored.arms] == ["control", "personalised", "diverse"]
    assert stored.control == "control" and stored.attribution_window == timedelta(hours=24)
    assert stored.starts_at == SMALL.start


def test_loading_twice_stores_nothing_new(tracker):
    imps, events = _all(SMALL)
    load(tracker, SMALL)
    again = load(tracker, SMALL)
    assert (again.stored, again.conflicts, again.rejected) == (0, 0, 0)
    assert again.duplicates == len(imps) + len(events)


def test_a_default_start_is_taken_from_the_stored_experiment_when_loading_again(tracker):
    config = dataclasses.replace(SMALL, days=2, start=None)
    first = load(tracker, config)
    started = tracker.experiment(config.key).starts_at
    assert started == datetime.combine(datetime.now(UTC).date() - timedelta(days=2),
                                       datetime.min.time(), UTC)
    again = load(tracker, config)  # e.g. run again tomorrow: the same records, not new ones
    assert again.stored == 0 and again.conflicts == 0
    assert again.duplicates == first.stored + first.duplicates


def test_an_existing_experiment_with_another_setup_is_not_reused(tracker):
    spec = experiment_spec(SMALL)
    spec["arms"] = {"control": 0.5, "personalised": 0.5}
    tracker.create_experiment(spec.pop("key"), **spec)
    with pytest.raises(AlreadyExists, match="arms"):
        load(tracker, SMALL)


def test_demo_command_simulates_rolls_up_and_prints_the_main_metrics(empty_url):
    args = ["demo", "--days", "2", "--users", "300"]
    result = CliRunner().invoke(main, args, env={"TRACKER_DATABASE_URL": empty_url})
    assert result.exit_code == 0, result.output
    assert "ndcg@10" in result.stdout and "personalised" in result.stdout
    assert "0 rejected" in result.stdout and "tracker report demo-home-recs" in result.stdout
    again = CliRunner().invoke(main, args, env={"TRACKER_DATABASE_URL": empty_url})
    assert again.exit_code == 0 and ": 0 stored" in again.stdout


def test_demo_declares_its_roles_and_ends_with_a_decision_per_treatment_arm(empty_url):
    env = {"TRACKER_DATABASE_URL": empty_url}
    result = CliRunner().invoke(main, ["demo", "--days", "2", "--users", "300"], env=env)
    assert result.exit_code == 0, result.output
    last = result.stdout.rstrip("\n").splitlines()[-2:]
    assert [line.split(" — ")[0] for line in last] == ["Decision: personalised",
                                                       "Decision: diverse"]
    outcomes = ("ship:", "do not ship:", "keep running:", "no detectable effect:")
    for line in last:
        assert line.split(" — ")[1].startswith(outcomes), line
    assert sum(line.startswith("Decision:") for line in result.stdout.splitlines()) == 2
    card = json.loads(CliRunner().invoke(
        main, ["report", "demo-home-recs", "--format", "json"], env=env).stdout)
    assert card["primary"] == list(PRIMARY) and card["guardrails"] == GUARDRAILS
    assert [d["arm"] for d in card["decisions"]] == ["personalised", "diverse"]


def test_loading_again_declares_the_roles_on_a_demo_experiment_stored_without_them(tracker):
    spec = experiment_spec(SMALL)
    del spec["primary"], spec["guardrails"]
    tracker.create_experiment(spec.pop("key"), **spec)
    assert tracker.experiment(SMALL.key).roles is None
    load(tracker, dataclasses.replace(SMALL, days=1))
    roles = tracker.experiment(SMALL.key).roles
    assert roles.primary == PRIMARY and roles.guardrails == GUARDRAILS
