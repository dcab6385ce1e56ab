"""The collector's HTTP contract against a real server and the test database: the same
results as the SDK, whole-batch refusal with per-event errors, limits, health, metrics."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from tests.collector.server import in_thread, sample, scrape
from tests.helpers import T0, count, impression, interaction, stored_impressions


def wire(record: dict) -> dict:
    """A record as a producer sends it: JSON types only."""
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in record.items()}


def post(collector, kind: str, body, scope: str = "ingest", **kwargs) -> httpx.Response:
    if "content" not in kwargs:
        kwargs["json"] = body
    return httpx.post(f"{collector.base}/v1/{kind}", headers=collector.headers(scope),
                      timeout=30, **kwargs)


def test_one_event_or_a_batch_is_stored_through_the_sdk_path(collector):
    one = post(collector, "impressions", wire(impression(0)))
    batch = post(collector, "impressions", [wire(impression(i)) for i in range(1, 4)])
    clicks = post(collector, "interactions", [wire(interaction(i)) for i in range(3)])
    assert one.status_code == batch.status_code == clicks.status_code == 200
    assert one.json() == {"kind": "impressions", "received": 1, "stored": 1, "duplicates": 0,
                          "conflicts": 0, "conflict_ids": [], "rejected": []}
    assert (batch.json()["stored"], clicks.json()["stored"]) == (3, 3)
    engine = collector.tracker.engine
    assert (count(engine, "impression"), count(engine, "interaction")) == (4, 3)
    stored = stored_impressions(engine)["imp-2"]
    assert stored["items"] == impression(2)["items"] and stored["scores"] == impression(2)["scores"]


def test_resent_batch_is_duplicates_and_changed_payload_is_a_reported_conflict(collector):
    batch = [wire(impression(i)) for i in range(3)]
    assert post(collector, "impressions", batch).json()["stored"] == 3
    again = post(collector, "impressions", batch).json()
    assert (again["stored"], again["duplicates"], again["conflicts"]) == (0, 3, 0)
    before = stored_impressions(collector.tracker.engine)
    changed = [batch[0], {**batch[1], "user_id": "someone-else"}, wire(impression(3))]
    answer = post(collector, "impressions", changed)
    assert answer.status_code == 200
    assert answer.json()["conflict_ids"] == ["imp-1"]
    assert (answer.json()["stored"], answer.json()["duplicates"]) == (1, 1)
    after = stored_impressions(collector.tracker.engine)
    assert after["imp-1"] == before["imp-1"]
    clicks = [wire(interaction(i)) for i in range(2)]
    post(collector, "interactions", clicks)
    retried = post(collector, "interactions", [clicks[0], {**clicks[1], "value": 3.0}]).json()
    assert (retried["duplicates"], retried["conflict_ids"]) == (1, ["evt-1"])


@pytest.mark.parametrize(("bad", "field", "reason"), [
    pytest.param({"experiment": "nope"}, "experiment", "unknown experiment 'nope'",
                 id="unknown-experiment"),
    pytest.param({"arm": "nope"}, "arm", "has no arm 'nope'", id="unknown-arm"),
    pytest.param({"items": []}, "items", "must not be empty", id="empty-list"),
    pytest.param({"items": ["a", "a"], "scores": None}, "items", "appears twice",
                 id="item-twice"),
    pytest.param({"served_at": "yesterday"}, "served_at", "not an ISO 8601",
                 id="bad-time"),
    pytest.param({"served_at": 5}, "served_at", "must be a datetime", id="time-as-number"),
    pytest.param({"user_id": None}, "user_id", "is required", id="missing-user"),
    pytest.param({"experiment": ["home"]}, "experiment", "must be a string",
                 id="experiment-as-array"),
    pytest.param({"impression_id": None}, "impression_id", "is required",
                 id="no-id-the-collector-cannot-dedupe"),
    pytest.param({"colour": "red"}, None, "unknown field(s) colour", id="unknown-field"),
    pytest.param({"user_id": "a\x00b"}, "user_id", "NUL", id="nul-character"),
    pytest.param({"context": {"k": ["\x00"]}}, "context", "NUL", id="nul-in-context"),
    pytest.param({"served_at": "0001-01-01T00:00:00+14:00"}, "served_at",
                 "accepted: 2000-01-01T00:00:00Z (TRACKER_MIN_EVENT_TIME)",
                 id="time-before-year-1-in-utc"),
    pytest.param({"context": {"k": {"k": {"k": {"k": {"k": {"k": {"k": {"k": {}}}}}}}}}},
                 "context", "nested more than 8 levels", id="context-nested-too-deep"),
])
def test_a_batch_with_an_invalid_event_is_refused_whole_with_the_reasons(collector, bad,
                                                                          field, reason):
    batch = [wire(impression(i)) for i in range(3)]
    batch[1] = {**batch[1], **bad}
    answer = post(collector, "impressions", batch)
    assert answer.status_code == 422
    body = answer.json()
    assert body["error"] == "invalid_events"
    assert "nothing of this batch was stored" in body["message"]
    (rejection,) = body["rejected"]
    assert (rejection["index"], rejection["field"]) == (1, field)
    assert reason in rejection["reason"]
    assert count(collector.tracker.engine, "impression") == 0


def test_every_invalid_event_is_listed_including_non_objects(collector):
    batch = [wire(interaction(0)), 7, "text", None, [], wire(interaction(1, event="shrug"))]
    body = post(collector, "interactions", batch).json()
    assert [(r["index"], r["field"]) for r in body["rejected"]] == [
        (1, None), (2, None), (3, None), (4, None), (5, "event")]
    assert body["rejected"][1]["reason"] == "a record must be a mapping (a JSON object), got str"
    assert count(collector.tracker.engine, "interaction") == 0


@pytest.mark.parametrize(("content", "status", "code"), [
    pytest.param(b"{not json", 400, "malformed_json", id="malformed-json"),
    pytest.param(b"", 400, "malformed_json", id="empty-body"),
    pytest.param(b'[{"a": NaN}]', 400, "malformed_json", id="nan-is-not-json"),
    pytest.param(b'"a string"', 422, "invalid_body", id="top-level-string"),
    pytest.param(b"42", 422, "invalid_body", id="top-level-number"),
])
def test_bodies_that_are_not_events_get_a_clear_4xx(collector, content, status, code):
    answer = post(collector, "impressions", None, content=content)
    assert (answer.status_code, answer.json()["error"]) == (status, code)


def test_oversized_body_and_oversized_batch_get_413(settings, tracker):
    from tests.collector.server import make_keys
    from tests.helpers import make_experiment

    make_experiment(tracker)
    keys = make_keys(settings.database_url)
    small = settings.replace(collector_max_body_bytes=20_000, collector_max_batch=10)
    headers = {"Authorization": f"Bearer {keys.ingest}"}
    with in_thread(small) as base:
        big = httpx.post(base + "/v1/impressions", headers=headers, timeout=30,
                         json=[wire(impression(0, user_id="u" * 30_000))])
        many = httpx.post(base + "/v1/impressions", headers=headers, timeout=30,
                          json=[wire(impression(i)) for i in range(11)])

        def chunked():
            yield b"["
            for i in range(200):
                yield (b"," if i else b"") + httpx.Request("POST", "/", json=wire(
                    impression(i))).content
            yield b"]"

        streamed = httpx.post(base + "/v1/impressions", headers=headers, timeout=30,
                              content=chunked())
        ok = httpx.post(base + "/v1/impressions", headers=headers, timeout=30,
                        json=[wire(impression(i)) for i in range(10)])
    assert (big.status_code, big.json()["error"]) == (413, "body_too_large")
    assert (many.status_code, many.json()["error"]) == (413, "batch_too_large")
    assert "TRACKER_COLLECTOR_MAX_BATCH" in many.json()["message"]
    assert (streamed.status_code, streamed.json()["error"]) == (413, "body_too_large")
    assert ok.status_code == 200
    assert count(tracker.engine, "impression") == 10


def test_ids_and_strings_are_stored_verbatim_never_executed(collector):
    tricky = ["'; DROP TABLE impression; --", "ü🙂 ключ", 'quote"back\\slash\ttab',
              "Robert'); DELETE FROM experiment;--"]
    batch = [wire(impression(i, impression_id=text, user_id=text, items=[text, f"{i}"],
                             scores=None)) for i, text in enumerate(tricky)]
    assert post(collector, "impressions", batch).json()["stored"] == 4
    stored = stored_impressions(collector.tracker.engine)
    assert set(stored) == set(tricky)
    assert all(stored[t]["user_id"] == t and stored[t]["items"][0] == t for t in tricky)
    assert collector.tracker.experiment("home").key == "home"


def test_experiments_are_readable_with_a_read_key(collector):
    listed = httpx.get(collector.base + "/v1/experiments", headers=collector.headers("read"))
    one = httpx.get(collector.base + "/v1/experiments/home", headers=collector.headers("read"))
    missing = httpx.get(collector.base + "/v1/experiments/nope",
                        headers=collector.headers("read"))
    assert [e["key"] for e in listed.json()] == ["home"]
    assert one.json()["arms"] == [{"key": "control", "weight": 0.5},
                                  {"key": "treatment", "weight": 0.5}]
    assert missing.status_code == 404 and "unknown experiment 'nope'" in missing.json()["message"]


def test_health_checks_the_database_and_its_schema(collector, tmp_path):
    from tests.conftest import fresh_database
    from tracker.config import Settings

    ok = httpx.get(collector.base + "/health")
    assert (ok.status_code, ok.json()["status"]) == (200, "ok")
    with fresh_database(tmp_path) as empty, in_thread(Settings(database_url=empty)) as base:
        behind = httpx.get(base + "/health")
    assert behind.status_code == 503 and "tracker db upgrade" in behind.json()["database"]
    assert behind.headers["retry-after"]


def test_database_down_answers_503_with_retry_after(tmp_path):
    from tests.collector.server import free_port
    from tracker.config import Settings

    down = Settings(database_url=f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none",
                    collector_retry_after_seconds=3)
    headers = {"Authorization": "Bearer trk_0123456789ab_" + "s" * 43}
    with in_thread(down) as base:
        health = httpx.get(base + "/health", timeout=30)
        events = httpx.post(base + "/v1/impressions", json=[wire(impression(0))],
                            headers=headers, timeout=30)
        metrics = scrape(base)
    assert health.status_code == 503 and health.headers["retry-after"] == "3"
    assert (events.status_code, events.json()["error"]) == (503, "database_unavailable")
    assert events.headers["retry-after"] == "3"
    assert sample(metrics, "tracker_collector_database_unavailable_total") == 1


def test_metrics_count_events_and_latency_in_prometheus_format(collector):
    post(collector, "impressions", [wire(impression(i)) for i in range(3)])
    post(collector, "impressions", [wire(impression(i)) for i in range(4)])
    post(collector, "impressions", [wire(impression(0, experiment="nope"))])
    answer = httpx.get(collector.base + "/metrics")
    assert answer.headers["content-type"].startswith("text/plain; version=")
    families = {f.name: f for f in text_string_to_metric_families(answer.text)}
    assert families["tracker_collector_request_duration_seconds"].type == "histogram"
    assert families["tracker_collector_events"].type == "counter"
    metrics = scrape(collector.base)
    events = "tracker_collector_events_total"
    assert sample(metrics, events, kind="impressions", outcome="stored") == 4
    assert sample(metrics, events, kind="impressions", outcome="duplicate") == 3
    assert sample(metrics, events, kind="impressions", outcome="rejected") == 1
    assert sample(metrics, events, kind="interactions", outcome="conflict") == 0  # shown at 0
    requests = "tracker_collector_requests_total"
    assert sample(metrics, requests, route="/v1/impressions", method="POST", status="422") == 1
    assert sample(metrics, requests, route="/v1/impressions", method="POST", status="200") == 2
    latency = "tracker_collector_request_duration_seconds"
    assert sample(metrics, latency + "_count", route="/v1/impressions") == 3
    assert sample(metrics, latency + "_bucket", route="/v1/impressions", le="+Inf") == 3


def test_openapi_documents_the_endpoints_bodies_and_bearer_auth(collector):
    doc = httpx.get(collector.base + "/openapi.json").json()
    assert {"/v1/impressions", "/v1/interactions", "/v1/experiments", "/health",
            "/metrics"} <= set(doc["paths"])
    body = doc["paths"]["/v1/impressions"]["post"]["requestBody"]["content"]["application/json"]
    one, many = body["schema"]["oneOf"]
    assert {"impression_id", "experiment", "arm", "user_id", "items", "served_at"} <= set(
        one["required"])
    assert many["type"] == "array"
    assert doc["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert {"401", "403", "413", "422", "503"} <= set(
        doc["paths"]["/v1/impressions"]["post"]["responses"])


def test_times_are_stored_in_utc_as_sent(collector):
    served = T0 + timedelta(hours=1)
    record = wire(impression(0, served_at=served))
    record["served_at"] = served.astimezone().isoformat()  # a local offset
    post(collector, "impressions", [record, wire(impression(1, served_at=served.replace(
        tzinfo=None)))])
    with collector.tracker.engine.connect() as conn:
        times = set(conn.execute(sa.text("SELECT served_at FROM impression")).scalars())
    assert len(times) == 1


def test_an_unexpected_error_is_a_json_500_with_the_request_id_and_the_server_goes_on(
        collector, monkeypatch):
    import tracker.collector.routes as app_module

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(app_module, "log_impressions", boom)
    answer = post(collector, "impressions", [wire(impression(0))])
    assert answer.status_code == 500
    assert answer.json()["error"] == "internal_error"
    assert answer.json()["request_id"] == answer.headers["x-request-id"]
    monkeypatch.undo()
    assert post(collector, "impressions", [wire(impression(0))]).status_code == 200


@pytest.mark.parametrize(("path", "content", "headers", "status"), [
    pytest.param("/v1/impressions", None, {"Content-Encoding": "x" * 5000}, 415,
                 id="long-content-encoding"),
    pytest.param("/v1/impressions", "ID", {}, 422, id="long-rejected-id"),
    pytest.param("/v1/experiments/" + "k" * 5000, None, {}, 404,
                 id="long-unknown-experiment-key"),
])
def test_no_answer_echoes_more_than_a_prefix_of_a_rejected_value(collector, path, content,
                                                                 headers, status):
    import json as json_

    scope = "read" if path.startswith("/v1/experiments") else "ingest"
    if content == "ID":
        content = json_.dumps([wire(impression(0, impression_id="z" * 100_000))]).encode()
    send = {**collector.headers(scope), "Content-Type": "application/json", **headers}
    if content is None and path.startswith("/v1/experiments"):
        answer = httpx.get(collector.base + path, headers=send)
    else:
        answer = httpx.post(collector.base + path, content=content or b"[]", headers=send)
    assert answer.status_code == status, answer.text[:300]
    assert len(answer.content) < 2000, answer.text[:300]
    for run in ("x" * 65, "z" * 65, "k" * 65):
        assert run not in answer.text
