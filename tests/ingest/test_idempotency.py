"""Producers retry: the same id again stores nothing new; the same id with another payload is
a conflict that is reported and never overwrites what is stored."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

from tests.helpers import T0, count, impression, interaction, make_experiment, stored_impressions
from tracker import ConflictError


@pytest.fixture
def home(tracker):
    make_experiment(tracker)
    return tracker


def test_retried_impression_is_a_duplicate_not_an_error(home):
    first = home.log_impression(**impression(1))
    again = home.log_impression(**impression(1))
    assert (first.stored, first.duplicates, again.stored, again.duplicates) == (1, 0, 0, 1)
    assert count(home.engine, "impression") == 1


@pytest.mark.parametrize("change", [
    pytest.param({"items": ["other"], "scores": None}, id="different-items"),
    pytest.param({"items": [f"item-1-{j}" for j in (1, 0, 2, 3, 4)]}, id="same-items-reordered"),
    pytest.param({"scores": [0.0] * 5}, id="different-scores"),
    pytest.param({"arm": "treatment"}, id="different-arm"),
    pytest.param({"user_id": "someone-else"}, id="different-user"),
    pytest.param({"served_at": T0 + timedelta(microseconds=1)}, id="time-off-by-a-microsecond"),
    pytest.param({"context": {"surface": "home"}}, id="context-added"),
])
def test_same_id_with_another_payload_is_a_conflict_and_the_stored_one_is_kept(home, change):
    home.log_impression(**impression(1))
    before = stored_impressions(home.engine)
    with pytest.raises(ConflictError, match="'imp-1'") as raised:
        home.log_impression(**impression(1, **change))
    assert raised.value.ids == ["imp-1"]
    assert stored_impressions(home.engine) == before


def test_bulk_reports_stored_duplicates_and_conflicts_by_id(home):
    home.log_impressions([impression(i) for i in range(3)])
    result = home.log_impressions([
        impression(0),                              # retry
        impression(1, items=["changed"], scores=None),  # conflict
        impression(3), impression(4),               # new
        impression(4),                              # repeated inside the batch
        impression(3, user_id="other"),             # conflicting repeat inside the batch
    ])
    assert (result.stored, result.duplicates, result.conflict_ids) == (2, 2, ["imp-3", "imp-1"])
    assert result.received == 6
    assert stored_impressions(home.engine)["imp-3"]["user_id"] == "u3"
    assert stored_impressions(home.engine)["imp-1"]["items"][0] == "item-1-0"


def test_duplicates_and_conflicts_are_classified_across_chunks(settings):
    from tracker import Tracker

    with Tracker(settings=settings.replace(batch_size=2)) as t:
        make_experiment(t)
        first = t.log_impressions([impression(i) for i in range(5)])
        second = t.log_impressions([impression(i, **({"user_id": "x"} if i == 4 else {}))
                                    for i in range(7)])
    assert (first.stored, second.stored, second.duplicates, second.conflict_ids) == (
        5, 2, 4, ["imp-4"])


def test_retried_interaction_is_a_duplicate_and_a_changed_one_conflicts(home):
    assert home.log_interaction(**interaction(1)).stored == 1
    assert home.log_interaction(**interaction(1)).duplicates == 1
    with pytest.raises(ConflictError):
        home.log_interaction(**interaction(1, value=2.5))
    result = home.log_interactions([interaction(1), interaction(2), interaction(1, event="play")])
    assert (result.stored, result.duplicates, result.conflict_ids) == (1, 1, ["evt-1"])
    assert count(home.engine, "interaction") == 2


@pytest.mark.parametrize("text", [
    pytest.param('quote"inside', id="double-quote"),
    pytest.param("back\\slash", id="backslash"),
    pytest.param("tab\there", id="tab"),
    pytest.param("new\nline", id="newline"),
    pytest.param("NULL", id="the-word-null"),
    pytest.param("{a,b}", id="braces-and-comma"),
    pytest.param("  spaced  ", id="surrounding-spaces"),
    pytest.param("ユーザー🎵", id="unicode"),
    pytest.param("'; DROP TABLE impression; --", id="sql-looking"),
])
def test_ids_round_trip_verbatim_and_retries_still_match(home, text):
    record = impression(1, user_id=text, items=[text, "plain"], scores=[0.5, 0.25],
                        baseline_items=[text], context={"note": text})
    assert home.log_impressions([record]).stored == 1
    row = stored_impressions(home.engine)["imp-1"]
    assert (row["user_id"], row["items"], row["baseline_items"], row["context"]) == (
        text, [text, "plain"], [text], {"note": text})
    assert home.log_impressions([record]).duplicates == 1
    interaction_record = interaction(1, event_id=text, item_id=text, user_id=text)
    assert home.log_interactions([interaction_record]).stored == 1
    assert home.log_interactions([interaction_record]).duplicates == 1


def test_scores_round_trip_exactly(home):
    scores = [0.1, 1 / 3, 2.5e-300, -7.0, 123456789.123456789]
    home.log_impression(**impression(1, scores=scores))
    assert stored_impressions(home.engine)["imp-1"]["scores"] == scores
    assert home.log_impression(**impression(1, scores=scores)).duplicates == 1


def test_dataframe_input_is_the_same_as_dicts(home):
    records = [impression(i) for i in range(4)]
    frame = pd.DataFrame(records)
    frame.loc[2, "scores"] = None  # optional values may be missing in a frame
    result = home.log_impressions(frame)
    assert result.stored == 4
    stored = stored_impressions(home.engine)
    assert stored["imp-1"]["served_at"] == records[1]["served_at"]
    assert stored["imp-1"]["items"] == records[1]["items"]
    assert stored["imp-2"]["scores"] is None
    assert home.log_impressions([dict(records[0])]).duplicates == 1
