"""API keys limited to experiments (issue 29): ``tracker keys create --experiment``; the
collector refuses an impression of any other experiment with a 403 naming it, record by
record, and stores the rest of the batch; a read key sees only its experiments. Over HTTP,
through ``TrackerClient`` and on the command line."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from tests.collector.server import in_thread
from tests.collector.test_auth import wire
from tests.helpers import impression, interaction, make_experiment, stored_impressions
from tracker.cli import main
from tracker.client import TrackerClient
from tracker.errors import NotFound, ValidationError
from tracker.store.db import transaction
from tracker.store.keys import create_key, find_key, list_keys


def _key(tracker, scope: str, experiments) -> str:
    with transaction(tracker.engine) as conn:
        return create_key(conn, f"{scope}-{experiments}", scope, experiments)[1]


@pytest.fixture
def two(tracker, settings):
    """Experiments ``home`` and ``other``, a collector, and keys limited to ``home``."""
    make_experiment(tracker, "home")
    make_experiment(tracker, "other")
    with in_thread(settings) as base:
        yield base


def _post(base: str, token: str, path: str, records: list[dict]) -> httpx.Response:
    return httpx.post(base + path, json=[wire(r) for r in records],
                      headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_an_impression_outside_the_keys_experiments_is_refused_and_the_rest_stored(tracker,
                                                                                    two):
    token = _key(tracker, "ingest", ["home"])
    batch = [impression(0, experiment="home"), impression(1, experiment="other"),
             impression(2, experiment="home")]
    answer = _post(two, token, "/v1/impressions", batch)
    assert answer.status_code == 403, answer.text
    body = answer.json()
    assert body["error"] == "forbidden_experiment" and "'other'" in body["message"]
    (refused,) = body["rejected"]
    assert (refused["index"], refused["id"], refused["field"]) == (1, "imp-1", "experiment")
    assert "may not write to experiment 'other'" in refused["reason"]
    assert (body["received"], body["stored"]) == (3, 2)
    assert set(stored_impressions(tracker.engine)) == {"imp-0", "imp-2"}
    # resending the whole batch stores nothing twice and refuses the same record
    again = _post(two, token, "/v1/impressions", batch).json()
    assert (again["stored"], again["duplicates"], len(again["rejected"])) == (0, 2, 1)


def test_a_batch_with_an_invalid_record_stores_nothing_and_lists_both(tracker, two):
    token = _key(tracker, "ingest", ["home"])
    batch = [impression(0, experiment="other"), impression(1, experiment="home", items=[]),
             impression(2, experiment="home")]
    answer = _post(two, token, "/v1/impressions", batch)
    assert answer.status_code == 422, answer.text
    assert [(r["index"], r["field"]) for r in answer.json()["rejected"]] == \
        [(0, "experiment"), (1, "items")]
    assert stored_impressions(tracker.engine) == {}


@pytest.mark.parametrize("experiments", [["home"], None],
                         ids=["limited-key-logs-interactions", "unlimited-key-writes-everywhere"])
def test_interactions_belong_to_no_experiment_and_an_unlimited_key_is_as_before(
        tracker, two, experiments):
    token = _key(tracker, "ingest", experiments)
    answer = _post(two, token, "/v1/interactions", [interaction(0)])
    assert answer.status_code == 200 and answer.json()["stored"] == 1
    if experiments is None:
        answer = _post(two, token, "/v1/impressions", [impression(0, experiment="other")])
        assert answer.status_code == 200 and answer.json()["stored"] == 1


def test_a_read_key_sees_only_its_experiments(tracker, two):
    headers = {"Authorization": f"Bearer {_key(tracker, 'read', ['home'])}"}
    listed = httpx.get(two + "/v1/experiments", headers=headers, timeout=10)
    assert [e["key"] for e in listed.json()] == ["home"]
    assert httpx.get(two + "/v1/experiments/home", headers=headers, timeout=10).status_code \
        == 200
    refused = httpx.get(two + "/v1/experiments/other", headers=headers, timeout=10)
    assert refused.status_code == 403 and "may not read experiment 'other'" in \
        refused.json()["message"]


def test_the_client_counts_refused_records_rejected_and_the_rest_stored(tracker, two):
    token = _key(tracker, "ingest", ["home"])
    with TrackerClient(two, token, flush_interval=0.05) as client:
        client.log_impressions([impression(i, experiment=("other" if i == 1 else "home"))
                                for i in range(4)])
        assert client.flush(30)
        counters = client.counters()
    assert (counters.stored, counters.rejected, counters.failed) == (3, 1, 0)
    assert set(stored_impressions(tracker.engine)) == {"imp-0", "imp-2", "imp-3"}


def test_keys_create_limits_a_key_and_keys_list_shows_it(tracker, settings):
    make_experiment(tracker, "home")
    make_experiment(tracker, "other")
    env = {"TRACKER_DATABASE_URL": settings.database_url}
    made = CliRunner().invoke(main, ["keys", "create", "svc", "--scope", "ingest",
                                     "--experiment", "home", "--experiment", "other"], env=env)
    assert made.exit_code == 0, made.output
    assert "experiments home, other" in made.stderr
    token = made.stdout.strip()
    with transaction(tracker.engine) as conn:
        assert find_key(conn, token.split("_")[1]).experiments == {"home", "other"}
    listed = CliRunner().invoke(main, ["keys", "list"], env=env)
    assert "home, other" in listed.output
    CliRunner().invoke(main, ["keys", "create", "all", "--scope", "read"], env=env)
    as_json = json.loads(CliRunner().invoke(main, ["keys", "list", "--format", "json"],
                                            env=env).output)
    assert [(k["name"], k["experiments"]) for k in as_json] == \
        [("svc", ["home", "other"]), ("all", None)]


def test_a_key_for_an_unknown_experiment_is_refused_and_none_is_created(tracker, settings):
    make_experiment(tracker, "home")
    refused = CliRunner().invoke(main, ["keys", "create", "svc", "--scope", "ingest",
                                        "--experiment", "hom"],
                                 env={"TRACKER_DATABASE_URL": settings.database_url})
    assert refused.exit_code == 1 and "no experiment 'hom'" in refused.output
    with transaction(tracker.engine) as conn:
        assert list_keys(conn) == []
        with pytest.raises(ValidationError, match="at least one experiment"):
            create_key(conn, "svc", "ingest", [])
        with pytest.raises(NotFound):
            create_key(conn, "svc", "ingest", ["home", "nope"])
