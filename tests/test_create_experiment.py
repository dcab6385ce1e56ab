"""``Tracker.create_experiment(..., exist_ok=True)``: a script that registers its experiment
may run again; it gets the stored experiment back only when that is the experiment it asks
for."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.helpers import count
from tracker import ValidationError
from tracker.errors import AlreadyExists

DEFINITION = dict(arms={"control": 0.5, "two-tower": 0.5}, control="control",
                  attribution_window=timedelta(hours=24),
                  relevance={"click": 1, "play": 1, "save": 2, "purchase": 3},
                  cutoffs=(5, 10, 20), timezone="UTC", unknown_events="reject")


def test_a_missing_experiment_is_created(tracker, engine):
    created = tracker.create_experiment("home", **DEFINITION, exist_ok=True)
    assert created.key == "home"
    assert [a.key for a in created.arms] == ["control", "two-tower"]
    assert (count(engine, "experiment"), count(engine, "arm")) == (1, 2)


def test_the_stored_experiment_comes_back_unchanged_and_nothing_is_written(tracker, engine):
    first = tracker.create_experiment("home", **DEFINITION, name="Home v2",
                                      primary=["ndcg@10"])
    again = tracker.create_experiment("home", **DEFINITION, name="Renamed", description="x",
                                      status="draft", primary=["hit_rate@10"], exist_ok=True)
    assert again == first  # same id, created_at, name, status and roles: the stored ones
    assert (again.name, again.status, again.roles.primary) == ("Home v2", "running",
                                                                ("ndcg@10",))
    assert tracker.experiment("home") == first
    assert (count(engine, "experiment"), count(engine, "arm")) == (1, 2)


def test_without_exist_ok_an_existing_key_is_still_an_error(tracker):
    tracker.create_experiment("home", **DEFINITION)
    with pytest.raises(AlreadyExists, match="experiment 'home' already exists"):
        tracker.create_experiment("home", **DEFINITION)


def test_the_same_definition_written_differently_is_the_same_experiment(tracker):
    first = tracker.create_experiment("home", **DEFINITION)
    again = tracker.create_experiment(
        "home", arms={"two-tower": 3, "control": 3}, control="control",
        attribution_window=86400.0, relevance={"purchase": 3.0, "save": 2, "play": 1,
                                               "click": 1},
        cutoffs=[20, 5, 10, 10], exist_ok=True)
    assert again == first


@pytest.mark.parametrize("change, named", [
    pytest.param({"arms": {"control": 0.5, "two-tower": 0.5, "diverse": 0.5}}, "arms",
                 id="another-arm"),
    pytest.param({"arms": {"control": 0.8, "two-tower": 0.2}}, "arms", id="another-split"),
    pytest.param({"control": "two-tower"}, "control", id="another-control"),
    pytest.param({"attribution_window": timedelta(hours=1)}, "attribution_window",
                 id="another-window"),
    pytest.param({"relevance": {"click": 1, "play": 1, "save": 2}}, "relevance",
                 id="an-event-type-less"),
    pytest.param({"relevance": {"click": 1, "play": 1, "save": 5, "purchase": 3}},
                 "relevance", id="another-grade"),
    pytest.param({"relevance": None}, "relevance", id="no-mapping"),
    pytest.param({"unknown_events": "zero"}, "unknown_events", id="another-event-policy"),
    pytest.param({"timezone": "Europe/Berlin"}, "timezone", id="another-time-zone"),
    pytest.param({"cutoffs": (5, 10)}, "cutoffs", id="other-cutoffs"),
])
def test_another_definition_under_the_same_key_is_refused_naming_the_setting(
        tracker, engine, change, named):
    first = tracker.create_experiment("home", **DEFINITION)
    with pytest.raises(AlreadyExists, match=rf"already exists with other settings: {named} is "):
        tracker.create_experiment("home", **{**DEFINITION, **change}, exist_ok=True)
    assert tracker.experiment("home") == first
    assert (count(engine, "experiment"), count(engine, "arm")) == (1, 2)


def test_every_difference_is_named_at_once(tracker):
    tracker.create_experiment("home", **DEFINITION)
    with pytest.raises(AlreadyExists) as raised:
        tracker.create_experiment("home", **{**DEFINITION, "timezone": "Europe/Berlin",
                                             "cutoffs": (10,)}, exist_ok=True)
    message = str(raised.value)
    assert "timezone is 'UTC', not 'Europe/Berlin'" in message
    assert "cutoffs is (5, 10, 20), not (10,)" in message


def test_bad_input_is_a_validation_error_even_when_the_key_exists(tracker):
    tracker.create_experiment("home", **DEFINITION)
    with pytest.raises(ValidationError, match="at least two arms"):
        tracker.create_experiment("home", arms={"control": 1}, exist_ok=True)
