"""Every validation rule: a single call raises with a clear message and stores nothing;
a bulk call stores the valid records and reports each rejected one with its reason."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import pandas as pd
import pytest

from tests.helpers import T0, count, impression, interaction, make_experiment, stored_impressions
from tracker import Tracker, ValidationError
from tracker.config import Settings
from tracker.errors import AlreadyExists, ConfigError

FUTURE = datetime.now(UTC) + timedelta(days=2)

BAD_IMPRESSIONS = [
    pytest.param({"experiment": "nope"}, "experiment", "unknown experiment 'nope'",
                 id="unknown-experiment"),
    pytest.param({"arm": "ghost"}, "arm", "has no arm 'ghost' (arms: control, treatment)",
                 id="unknown-arm"),
    pytest.param({"items": []}, "items", "must not be empty", id="empty-list"),
    pytest.param({"items": ["a"] * 0 + [f"i{n}" for n in range(1001)]}, "items",
                 "has 1001 items, the limit is 1000", id="list-over-the-limit"),
    pytest.param({"items": ["a", "b", "a"]}, "items", "item 'a' appears twice",
                 id="duplicate-item-in-list"),
    pytest.param({"items": "abc"}, "items", "must be a list of item ids", id="items-a-string"),
    pytest.param({"items": ["a", ""]}, "items[1]", "must not be empty", id="empty-item-id"),
    pytest.param({"items": ["a", None]}, "items[1]", "is required", id="null-item-id"),
    pytest.param({"items": ["a", 1.5]}, "items[1]", "must be a string", id="float-item-id"),
    pytest.param({"scores": [1.0, 2.0]}, "scores", "has 2 values for 5 items",
                 id="scores-wrong-length"),
    pytest.param({"scores": [1.0, math.nan, 0, 0, 0]}, "scores", "must be finite",
                 id="score-nan"),
    pytest.param({"scores": [1.0, math.inf, 0, 0, 0]}, "scores", "must be finite",
                 id="score-infinite"),
    pytest.param({"scores": ["x", 1, 2, 3, 4]}, "scores", "must hold numbers only",
                 id="score-not-a-number"),
    pytest.param({"impression_id": ""}, "impression_id", "must not be empty", id="empty-id"),
    pytest.param({"impression_id": "x" * 257}, "impression_id",
                 "is 257 characters long, the limit is 256", id="over-long-id"),
    pytest.param({"user_id": ""}, "user_id", "must not be empty", id="empty-user"),
    pytest.param({"user_id": None}, "user_id", "is required", id="missing-user"),
    pytest.param({"served_at": FUTURE}, "served_at", "in the future", id="far-future-time"),
    pytest.param({"served_at": "yesterday"}, "served_at", "not an ISO 8601 date-time",
                 id="unparseable-time"),
    pytest.param({"served_at": 1700000000}, "served_at", "must be a datetime",
                 id="number-as-time"),
    pytest.param({"served_at": None}, "served_at", "is required", id="missing-time"),
    pytest.param({"baseline_items": ["a", "a"]}, "baseline_items", "appears twice",
                 id="duplicate-in-baseline"),
    pytest.param({"context": {"surface": object()}}, "context", "JSON-serialisable",
                 id="context-not-json"),
    pytest.param({"context": ["home"]}, "context", "must be a mapping", id="context-a-list"),
]


@pytest.fixture
def home(tracker):
    make_experiment(tracker)
    return tracker


@pytest.mark.parametrize(("change", "field", "message"), BAD_IMPRESSIONS)
def test_single_impression_is_rejected_with_its_reason_and_nothing_is_stored(
        home, change, field, message):
    with pytest.raises(ValidationError, match=_re(message)) as raised:
        home.log_impression(**impression(1, **change))
    assert raised.value.field == field
    assert count(home.engine, "impression") == 0


@pytest.mark.parametrize(("change", "field", "message"), BAD_IMPRESSIONS)
def test_bulk_stores_the_valid_records_and_reports_the_rejected_one(home, change, field, message):
    records = [impression(0), impression(1, **change), impression(2)]
    result = home.log_impressions(records)
    assert result.stored == 2
    assert [(r.index, r.field) for r in result.rejected] == [(1, field)]
    assert message in result.rejected[0].reason
    assert set(stored_impressions(home.engine)) == {"imp-0", "imp-2"}


def test_all_or_nothing_stores_nothing_when_one_record_is_invalid(home):
    result = home.log_impressions([impression(0), impression(1, items=[])],
                                  on_invalid="all_or_nothing")
    assert result.stored == 0 and len(result.rejected) == 1
    assert count(home.engine, "impression") == 0


def test_bulk_requires_client_ids_but_a_single_call_makes_one(home):
    record = impression(0)
    del record["impression_id"]
    result = home.log_impressions([record])
    assert result.rejected[0].field == "impression_id"
    assert home.log_impression(**record).stored == 1
    assert len(next(iter(stored_impressions(home.engine)))) == 32


def test_unknown_fields_are_named(home):
    result = home.log_impressions([{**impression(0), "item": ["x"]}])
    assert "unknown field(s) item" in result.rejected[0].reason


def test_a_single_dict_passed_to_the_bulk_call_is_a_clear_error(home):
    with pytest.raises(ValidationError, match="got one dict"):
        home.log_impressions(impression(0))


def test_limits_come_from_settings(settings):
    with Tracker(settings=settings.replace(max_items=3, max_id_length=5)) as t:
        make_experiment(t, cutoffs=[1, 3])
        result = t.log_impressions([impression(0, items=["a", "b", "c", "d"]),
                                    impression(1, impression_id="abcdef", items=["a"])])
    assert ["has 4 items, the limit is 3" in result.rejected[0].reason,
            "is 6 characters long, the limit is 5" in result.rejected[1].reason] == [True, True]


# ------------------------------------------------------------------ times

@pytest.mark.parametrize("served_at", [
    pytest.param(datetime(2026, 11, 1, 12, 0), id="naive-is-utc"),
    pytest.param(datetime(2026, 11, 1, 13, 0, tzinfo=timezone(timedelta(hours=1))),
                 id="aware-other-zone"),
    pytest.param("2026-11-01T12:00:00Z", id="iso-string-z"),
    pytest.param("2026-11-01T07:00:00-05:00", id="iso-string-offset"),
    pytest.param(pd.Timestamp("2026-11-01 12:00", tz="UTC"), id="pandas-timestamp"),
])
def test_instants_are_stored_in_utc(home, served_at):
    home.log_impression(**impression(0, served_at=served_at))
    assert stored_impressions(home.engine)["imp-0"]["served_at"] == T0


def test_small_clock_skew_is_accepted(home):
    soon = datetime.now(UTC) + timedelta(seconds=60)
    assert home.log_impression(**impression(0, served_at=soon)).stored == 1


def test_ids_may_be_integers_and_are_stored_as_text(home):
    home.log_impression(**impression(0, user_id=42, items=[7, 8], scores=None))
    row = stored_impressions(home.engine)["imp-0"]
    assert (row["user_id"], row["items"]) == ("42", ["7", "8"])


# ------------------------------------------------------------------ interactions

BAD_INTERACTIONS = [
    pytest.param({"event": "wink"}, "event", "event type 'wink' is not declared",
                 id="unknown-event-type"),
    pytest.param({"event": ""}, "event", "must not be empty", id="empty-event"),
    pytest.param({"item_id": None}, "item_id", "is required", id="missing-item"),
    pytest.param({"value": "much"}, "value", "must be a number", id="value-not-a-number"),
    pytest.param({"value": math.inf}, "value", "must be finite", id="value-infinite"),
    pytest.param({"occurred_at": FUTURE}, "occurred_at", "in the future", id="future-event"),
    pytest.param({"event_id": "e" * 300}, "event_id", "the limit is 256", id="over-long-id"),
]


@pytest.mark.parametrize(("change", "field", "message"), BAD_INTERACTIONS)
def test_single_interaction_is_rejected_with_its_reason(home, change, field, message):
    with pytest.raises(ValidationError, match=_re(message)) as raised:
        home.log_interaction(**interaction(0, **change))
    assert raised.value.field == field
    assert count(home.engine, "interaction") == 0


def test_unknown_event_is_stored_when_the_experiment_says_grade_zero(tracker):
    make_experiment(tracker, unknown_events="zero")
    assert tracker.log_interaction(**interaction(0, event="wink")).stored == 1


def test_named_impression_makes_its_experiment_govern_the_event_type(tracker):
    make_experiment(tracker, "strict")
    make_experiment(tracker, "lenient", relevance={"like": 1}, unknown_events="zero")
    tracker.log_impression(**impression(0, experiment="lenient"))
    tracker.log_impression(**impression(1, experiment="strict"))
    assert tracker.log_interaction(**interaction(0, event="wink", impression_id="imp-0")).stored
    with pytest.raises(ValidationError, match="not in experiment 'strict'"):
        tracker.log_interaction(**interaction(1, event="wink", impression_id="imp-1"))


def test_without_any_relevance_mapping_every_event_type_is_accepted(tracker):
    make_experiment(tracker, relevance=None)
    assert tracker.log_interaction(**interaction(0, event="anything")).stored == 1


# ------------------------------------------------------------------ experiments

BAD_EXPERIMENTS = [
    pytest.param({"key": "has space"}, "key", id="key-with-space"),
    pytest.param({"arms": {"only": 1}}, "arms", id="one-arm"),
    pytest.param({"arms": {"a": 1, "b": 0}}, "arms", id="zero-weight"),
    pytest.param({"arms": {"a": 1, "b": math.nan}}, "arms", id="nan-weight"),
    pytest.param({"control": "c"}, "control", id="control-not-an-arm"),
    pytest.param({"attribution_window": timedelta(0)}, "attribution_window", id="zero-window"),
    pytest.param({"relevance": {"click": -1}}, "relevance", id="negative-grade"),
    pytest.param({"timezone": "Mars/Olympus"}, "timezone", id="unknown-time-zone"),
    pytest.param({"cutoffs": [0, 5]}, "cutoffs", id="cutoff-zero"),
    pytest.param({"status": "paused"}, "status", id="unknown-status"),
    pytest.param({"unknown_events": "ignore"}, "unknown_events", id="unknown-policy"),
    pytest.param({"starts_at": T0, "ends_at": T0}, "ends_at", id="ends-before-start"),
    pytest.param({"arms": {"a": 1, "b c": 1}}, "arms", id="arm-key-with-space"),
    pytest.param({"arms": {"a": 1, "b": True}}, "arms", id="bool-weight"),
    pytest.param({"attribution_window": "1h"}, "attribution_window", id="window-as-text"),
    pytest.param({"relevance": {}}, "relevance", id="empty-relevance"),
    pytest.param({"relevance": {"x" * 65: 1}}, "relevance", id="event-type-too-long"),
    pytest.param({"cutoffs": ["ten"]}, "cutoffs", id="cutoff-not-a-number"),
    pytest.param({"name": "n" * 201}, "name", id="name-too-long"),
    pytest.param({"arms": {"a": 1}, "timezone": "Mars/Olympus"}, "arms",
                 id="the-first-bad-field-in-order-is-named"),
]


@pytest.mark.parametrize(("change", "field"), BAD_EXPERIMENTS)
def test_bad_experiment_definitions_name_the_field(tracker, change, field):
    options = {"key": "home", "arms": {"a": 1, "b": 1}} | change
    key = options.pop("key")
    with pytest.raises(ValidationError) as raised:
        tracker.create_experiment(key, **options)
    assert raised.value.field == field
    assert tracker.experiments() == []


def test_experiment_round_trips_and_its_key_is_unique(tracker):
    created = make_experiment(tracker, timezone="Europe/Berlin", cutoffs=[20, 5, 5],
                              starts_at=T0)
    assert tracker.experiment("home") == created
    assert (created.control, created.timezone, created.cutoffs, created.starts_at) == (
        "control", "Europe/Berlin", (5, 20), T0)
    assert created.attribution_window == timedelta(hours=24)
    assert created.relevance == {"click": 1, "play": 1, "save": 2, "purchase": 3}
    with pytest.raises(AlreadyExists):
        make_experiment(tracker)


def test_bad_setting_names_the_variable_and_the_expected_form():
    with pytest.raises(ConfigError, match="TRACKER_DATABASE_URL='mysql://x': expected sqlite"):
        Settings.from_env({"TRACKER_DATABASE_URL": "mysql://x"})
    with pytest.raises(ConfigError, match="TRACKER_MAX_FUTURE_SECONDS='-1': expected a finite"):
        Settings.from_env({"TRACKER_MAX_FUTURE_SECONDS": "-1"})


def _re(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize(("setting", "stored"), [
    pytest.param(None, False, id="default-minimum-rejects-a-1995-time"),
    pytest.param("1990-01-01T00:00:00Z", True, id="lowered-minimum-accepts-a-1995-backfill"),
    pytest.param("1996-01-01", False, id="naive-minimum-is-utc"),
])
def test_min_event_time_bounds_event_times_and_is_settable_for_backfills(db_url, setting,
                                                                         stored):
    environ = {"TRACKER_DATABASE_URL": db_url}
    if setting is not None:
        environ["TRACKER_MIN_EVENT_TIME"] = setting
    with Tracker(settings=Settings.from_env(environ)) as t:
        make_experiment(t)
        old = datetime(1995, 6, 1, tzinfo=UTC)
        result = t.log_impressions([impression(0), impression(1, served_at=old)])
        clicks = t.log_interactions([interaction(0, occurred_at=old)])
    assert (result.stored, clicks.stored) == ((2, 1) if stored else (1, 0))
    if not stored:
        assert "TRACKER_MIN_EVENT_TIME" in result.rejected[0].reason
        assert clicks.rejected[0].field == "occurred_at"


def test_a_bad_min_event_time_names_the_variable_and_the_form():
    with pytest.raises(ConfigError, match="TRACKER_MIN_EVENT_TIME='last year': expected an "
                                          "ISO 8601 date-time"):
        Settings.from_env({"TRACKER_MIN_EVENT_TIME": "last year"})


@pytest.mark.parametrize(("raw_id", "shown"), [
    pytest.param("x" * 1_000_000, "x" * 64 + "…", id="megabyte-id-is-cut-to-64-characters"),
    pytest.param("a\ud800b", "a\\ud800b", id="lone-surrogate-in-id-is-escaped"),
    pytest.param(7, "7", id="whole-number-id-is-shown-as-text"),
    pytest.param(["imp"], None, id="id-of-another-type-is-not-shown"),
])
def test_a_rejection_names_the_record_by_a_bounded_printable_id(home, raw_id, shown):
    result = home.log_impressions([impression(0), impression(1, impression_id=raw_id,
                                                             experiment="nope")])
    (rejection,) = result.rejected
    assert (rejection.index, rejection.id) == (1, shown)
    assert len(str(rejection)) < 200
