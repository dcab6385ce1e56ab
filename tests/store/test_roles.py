"""Metric roles stored on the experiment: set at creation, changed by update, validated once."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tests.helpers import T0, insert_plain_experiment, make_experiment
from tracker.errors import NotFound, ValidationError
from tracker.store import schema
from tracker.store.db import SCHEMA_HISTORY, create_engine
from tracker.store.experiments import Roles


def test_roles_set_at_creation_are_stored_and_shown(tracker):
    info = make_experiment(tracker, primary=["ndcg@10", "hit_rate@5"],
                           guardrails={"song_clicks": 0.05, "precision@20": 0})
    again = tracker.experiment("home")
    assert again.roles == info.roles == Roles(("ndcg@10", "hit_rate@5"),
                                              {"song_clicks": 0.05, "precision@20": 0.0})
    assert again.to_dict()["roles"] == {"primary": ["ndcg@10", "hit_rate@5"],
                                        "guardrails": {"song_clicks": 0.05,
                                                       "precision@20": 0.0}}
    assert [again.roles.role(n) for n in ("ndcg@10", "song_clicks", "mrr@10")] == [
        "primary", "guardrail", "secondary"]


def test_an_experiment_without_roles_has_none_and_its_column_is_sql_null(tracker):
    make_experiment(tracker)
    assert tracker.experiment("home").roles is None
    assert tracker.experiment("home").to_dict()["roles"] is None
    with tracker.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM experiment WHERE roles IS NULL")
                            ).scalar_one() == 1


def test_update_replaces_only_the_roles_it_is_given(tracker):
    make_experiment(tracker, primary=["ndcg@10"], guardrails={"song_clicks": 0.05})
    updated = tracker.update_experiment("home", primary=["mrr@5", "ndcg@20"])
    assert updated.roles == Roles(("mrr@5", "ndcg@20"), {"song_clicks": 0.05})
    updated = tracker.update_experiment("home", guardrails={"recall@10": 0.02})
    assert updated.roles == Roles(("mrr@5", "ndcg@20"), {"recall@10": 0.02})
    assert tracker.experiment("home").roles == updated.roles


def test_emptying_both_roles_returns_to_no_roles(tracker):
    make_experiment(tracker, primary=["ndcg@10"], guardrails={"song_clicks": 0.05})
    assert tracker.update_experiment("home", primary=[]).roles == Roles(
        (), {"song_clicks": 0.05})
    assert tracker.update_experiment("home", guardrails={}).roles is None
    assert tracker.experiment("home").roles is None


def test_update_changes_name_description_and_end_and_leaves_the_rest(tracker):
    before = make_experiment(tracker, starts_at=T0, primary=["ndcg@10"])
    after = tracker.update_experiment("home", name="Home page", description="two towers",
                                      ends_at="2026-12-01T00:00:00+00:00")
    assert (after.name, after.description, after.ends_at) == (
        "Home page", "two towers", datetime(2026, 12, 1, tzinfo=UTC))
    unchanged = ("arms", "attribution_window", "relevance", "cutoffs", "timezone", "control",
                 "starts_at", "roles", "created_at", "status")
    assert [getattr(after, f) for f in unchanged] == [getattr(before, f) for f in unchanged]


def test_update_with_nothing_to_change_keeps_everything(tracker):
    before = make_experiment(tracker, primary=["ndcg@10"])
    assert tracker.update_experiment("home") == before


def test_update_of_an_unknown_experiment_says_so(tracker):
    with pytest.raises(NotFound, match="unknown experiment 'nope'"):
        tracker.update_experiment("nope", name="x")


@pytest.mark.parametrize(("roles", "field", "message"), [
    pytest.param({"primary": ["ndcg@7"]}, "primary",
                 "k = 7 is not one of the experiment's cutoffs; accepted: ndcg@5, ndcg@10, "
                 "ndcg@20", id="cutoff-the-experiment-does-not-report"),
    pytest.param({"primary": ["clicks@10"]}, "primary", "unknown metric 'clicks@10'; known "
                 "metrics: hit_rate, map", id="unknown-metric-lists-the-known-ones"),
    pytest.param({"primary": ["ndcg"]}, "primary", "needs a cutoff: write it as 'ndcg@<k>', "
                 "e.g. 'ndcg@10'; this experiment's cutoffs: 5, 10, 20",
                 id="metric-with-a-cutoff-named-without-one"),
    pytest.param({"primary": ["song_clicks@10"]}, "primary", "takes no cutoff",
                 id="metric-without-cutoff-named-with-one"),
    pytest.param({"primary": "ndcg@10"}, "primary", "must be a list of names",
                 id="a-bare-string-is-not-a-list"),
    pytest.param({"guardrails": {"song_clicks": -0.1}}, "guardrails",
                 "a loss is a relative share in [0, 1)", id="negative-loss"),
    pytest.param({"guardrails": {"song_clicks": 5}}, "guardrails", "e.g. 0.05 for 5 %",
                 id="loss-given-in-percent"),
    pytest.param({"guardrails": {"song_clicks": float("nan")}}, "guardrails", "[0, 1)",
                 id="loss-not-a-number"),
    pytest.param({"guardrails": ["song_clicks"]}, "guardrails",
                 "must map metric names to tolerated losses", id="guardrails-not-a-mapping"),
    pytest.param({"primary": ["ndcg@10"], "guardrails": {"ndcg@10": 0.05}}, "guardrails",
                 "'ndcg@10' cannot be both primary and guardrail", id="primary-and-guardrail"),
])
def test_bad_roles_are_refused_with_the_value_and_what_is_accepted(tracker, roles, field,
                                                                   message):
    with pytest.raises(ValidationError) as created:
        make_experiment(tracker, **roles)
    assert created.value.field == field and message in str(created.value)
    with pytest.raises(NotFound):  # nothing was stored
        tracker.experiment("home")
    make_experiment(tracker, primary=["hit_rate@5"], guardrails={"song_clicks": 0.01})
    with pytest.raises(ValidationError) as updated:
        tracker.update_experiment("home", **roles)
    assert updated.value.field == field and message in str(updated.value)
    assert tracker.experiment("home").roles == Roles(("hit_rate@5",), {"song_clicks": 0.01})


def test_a_new_primary_cannot_take_a_metric_already_guarded(tracker):
    make_experiment(tracker, guardrails={"song_clicks": 0.05})
    with pytest.raises(ValidationError, match="'song_clicks' cannot be both primary"):
        tracker.update_experiment("home", primary=["song_clicks"])


@pytest.mark.parametrize(("change", "field", "message"), [
    pytest.param({"ends_at": "2026-10-01T00:00:00+00:00"}, "ends_at",
                 "must be after the experiment's start", id="end-before-start"),
    pytest.param({"ends_at": "next tuesday"}, "ends_at", "not an ISO 8601 date-time",
                 id="end-not-a-date"),
    pytest.param({"name": ""}, "name", "a name is a string of 1-200 characters",
                 id="empty-name"),
    pytest.param({"description": 3}, "description", "must be text", id="description-not-text"),
])
def test_bad_updates_are_refused_and_change_nothing(tracker, change, field, message):
    before = make_experiment(tracker, starts_at=T0)
    with pytest.raises(ValidationError) as refused:
        tracker.update_experiment("home", **{"description": "changed", **change})
    assert refused.value.field == field and message in str(refused.value)
    assert tracker.experiment("home") == before


def test_primary_names_are_canonical_and_kept_once(tracker):
    info = make_experiment(tracker, primary=["ndcg@10", "ndcg@10", "song_clicks"])
    assert info.roles.primary == ("ndcg@10", "song_clicks")


_BEFORE_ROLES = SCHEMA_HISTORY[SCHEMA_HISTORY.index("0007") - 1]  # before roles


def test_experiments_stored_before_roles_have_none_and_downgrade_keeps_them(empty_url):
    engine = create_engine(empty_url)
    schema.upgrade(engine, _BEFORE_ROLES)
    with engine.begin() as conn:
        insert_plain_experiment(conn, 1, arms=True)
    schema.upgrade(engine)
    from tracker import Tracker

    with Tracker(empty_url) as t:
        assert t.experiment("old").roles is None
        t.update_experiment("old", primary=["ndcg@5"])
    schema.downgrade(engine, _BEFORE_ROLES)
    with engine.connect() as conn:
        assert "roles" not in {c["name"] for c in sa.inspect(conn).get_columns("experiment")}
        assert conn.execute(sa.text("SELECT key FROM experiment")).scalars().all() == ["old"]
    engine.dispose()
