"""API keys: bearer tokens stored only as hashes, one scope each, revocable; 401 without a
valid key, 403 with the wrong scope; keys never reach the logs."""

from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace

import httpx
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tests.collector.server import in_thread, make_keys
from tests.helpers import impression
from tracker.cli import main


def wire(record: dict) -> dict:
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in record.items()}


@pytest.mark.parametrize(("header", "status"), [
    pytest.param(None, 401, id="no-key"),
    pytest.param("Basic dXNlcjpwYXNz", 401, id="not-bearer"),
    pytest.param("Bearer", 401, id="bearer-without-token"),
    pytest.param("Bearer not-a-tracker-key", 401, id="malformed-token"),
    pytest.param("Bearer trk_0123456789ab_" + "x" * 43, 401, id="unknown-key-id"),
    pytest.param("WRONG-SECRET", 401, id="known-id-wrong-secret"),
    pytest.param("READ", 403, id="read-key-cannot-ingest"),
    pytest.param("INGEST", 200, id="ingest-key-ingests"),
])
def test_ingest_needs_a_valid_key_with_the_ingest_scope(collector, header, status):
    if header == "WRONG-SECRET":
        header = "Bearer " + collector.keys.ingest[:-4] + "AAAA"
    elif header in ("READ", "INGEST"):
        header = "Bearer " + getattr(collector.keys, header.lower())
    headers = {"Authorization": header} if header else {}
    answer = httpx.post(collector.base + "/v1/impressions", json=[wire(impression(0))],
                        headers=headers)
    assert answer.status_code == status, answer.text
    if status == 401:
        assert answer.headers["www-authenticate"] == "Bearer"
        assert answer.json()["error"] == "unauthorized"
    if status == 403:
        assert "scope 'read'" in answer.json()["message"]


def test_reading_needs_the_read_scope(collector):
    url = collector.base + "/v1/experiments"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers=collector.headers("ingest")).status_code == 403
    assert httpx.get(url, headers=collector.headers("read")).status_code == 200
    assert httpx.get(collector.base + "/health").status_code == 200  # probes need no key


def run(url: str, *args: str, code: int = 0):
    result = CliRunner().invoke(main, list(args), env={"TRACKER_DATABASE_URL": url})
    assert result.exit_code == code, result.output + (result.stderr or "")
    return result


def test_keys_cli_creates_lists_and_revokes_and_stores_only_hashes(settings, tracker):
    url = settings.database_url
    created = run(url, "keys", "create", "checkout-service", "--scope", "ingest")
    token = created.stdout.strip()
    assert token.startswith("trk_") and "not shown again" in created.stderr
    key_id = token.split("_")[1]
    listed = json.loads(run(url, "keys", "list", "--format", "json").stdout)
    assert [(k["key_id"], k["name"], k["scope"], k["revoked_at"]) for k in listed] == [
        (key_id, "checkout-service", "ingest", None)]
    assert token not in run(url, "keys", "list").output
    with tracker.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT * FROM api_key")).all()
    dumped = repr(rows)
    assert token not in dumped and token.split("_", 2)[2] not in dumped
    assert f"revoked API key {key_id}" in run(url, "keys", "revoke", key_id).output
    assert json.loads(run(url, "keys", "list", "--format", "json").stdout)[0]["revoked_at"]
    assert "no API key 'nope'" in run(url, "keys", "revoke", "nope", code=1).stderr
    other = run(url, "keys", "create", "dashboard", "--scope", "read").stdout.strip()
    assert "revoked API key" in run(url, "keys", "revoke", other).output  # the whole key works
    assert run(url, "keys", "create", "x", "--scope", "admin", code=2)


def test_a_revoked_key_is_refused(settings, tracker):
    from tests.helpers import make_experiment

    make_experiment(tracker)
    keys = make_keys(settings.database_url)
    headers = {"Authorization": f"Bearer {keys.ingest}"}
    with in_thread(settings.replace(collector_key_cache_seconds=0)) as base:
        before = httpx.post(base + "/v1/impressions", json=[wire(impression(0))],
                            headers=headers)
        run(settings.database_url, "keys", "revoke", keys.ingest.split("_")[1])
        after = httpx.post(base + "/v1/impressions", json=[wire(impression(1))],
                           headers=headers)
    assert (before.status_code, after.status_code) == (200, 401)


def test_access_log_has_request_ids_and_no_secrets(collector):
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    handler = Keep()
    logging.getLogger("tracker.collector.access").addHandler(handler)
    try:
        ok = httpx.post(collector.base + "/v1/impressions", json=[wire(impression(0))],
                        headers={**collector.headers(), "X-Request-ID": "req-42"})
        bad = httpx.post(collector.base + "/v1/impressions?token=abc",
                         json=[wire(impression(1))],
                         headers={"Authorization": "Bearer " + collector.keys.ingest[:-4] + "AAAA"})
        deadline = time.monotonic() + 5  # a line is written just after its response is sent
        while sum('"access"' in line for line in lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        logging.getLogger("tracker.collector.access").removeHandler(handler)
    assert ok.headers["x-request-id"] == "req-42"
    assert len(bad.headers["x-request-id"]) == 32
    records = [json.loads(line) for line in lines if '"access"' in line]
    first, second = records
    assert (first["request_id"], first["status"], first["stored"]) == ("req-42", 200, 1)
    assert first["key_id"] == collector.keys.ingest.split("_")[1]
    assert (second["request_id"], second["status"]) == (bad.headers["x-request-id"], 401)
    assert "key_id" not in second  # an unverified id is not trusted, even in the log
    text = "\n".join(lines)
    for secret in (collector.keys.ingest, collector.keys.ingest.split("_", 2)[2],
                   collector.keys.ingest[:-4] + "AAAA", "Bearer", "token=abc"):
        assert secret not in text


def _count_key_lookups(engine: sa.Engine) -> list[str]:
    """Every statement on ``engine`` that reads the api_key table (the real engine's own
    events: no mock between the collector and the database)."""
    seen: list[str] = []

    @sa.event.listens_for(engine, "before_cursor_execute")
    def _keep(_conn, _cursor, statement, *_args):
        if "api_key" in statement:
            seen.append(statement)

    return seen


@pytest.mark.parametrize(("cache_seconds", "lookups"), [
    pytest.param(60, 1, id="unknown-id-is-looked-up-once-per-cache-period"),
    pytest.param(0, 4, id="without-a-cache-every-request-asks-the-database"),
])
def test_an_unknown_key_id_is_cached_as_unknown(settings, tracker, cache_seconds, lookups):
    from tracker.collector import create_app
    from tracker.store.db import create_engine

    engine = create_engine(settings.database_url)
    seen = _count_key_lookups(engine)
    app = create_app(settings.replace(collector_key_cache_seconds=cache_seconds), engine)
    unknown = {"Authorization": "Bearer trk_0123456789ab_" + "x" * 43}
    with in_thread(settings, app=app) as base:
        answers = [httpx.get(base + "/v1/experiments", headers=unknown).status_code
                   for _ in range(4)]
    engine.dispose()
    assert answers == [401] * 4
    assert len(seen) == lookups


def test_an_unknown_id_is_asked_again_once_the_cache_period_is_over(settings, tracker,
                                                                     monkeypatch):
    """The cache's clock is set by the test (a loaded machine may take longer than the
    cache period between two requests): 0.4 s later the answer is still cached, 0.6 s
    later it is asked again."""
    from tracker.collector import auth, create_app
    from tracker.store.db import create_engine

    now = [1000.0]
    monkeypatch.setattr(auth, "time", SimpleNamespace(monotonic=lambda: now[0]))
    engine = create_engine(settings.database_url)
    seen = _count_key_lookups(engine)
    app = create_app(settings.replace(collector_key_cache_seconds=0.5), engine)
    unknown = {"Authorization": "Bearer trk_0123456789ab_" + "x" * 43}
    with in_thread(settings, app=app) as base:
        httpx.get(base + "/v1/experiments", headers=unknown)
        now[0] += 0.4
        httpx.get(base + "/v1/experiments", headers=unknown)
        now[0] += 0.2
        httpx.get(base + "/v1/experiments", headers=unknown)
    engine.dispose()
    assert len(seen) == 2


def test_a_flood_of_unknown_ids_does_not_evict_a_known_key(settings, tracker, monkeypatch):
    from tracker.collector.auth import KeyVerifier
    from tracker.store.db import create_engine

    keys = make_keys(settings.database_url)
    known = keys.read.split("_")[1]
    engine = create_engine(settings.database_url)
    monkeypatch.setattr(KeyVerifier, "CACHE_SIZE", 3)
    verifier = KeyVerifier(engine, 60)
    assert verifier.load(known) is not None
    for i in range(10):
        assert verifier.load(f"{i:012x}") is None
    engine.dispose()
    assert verifier.cached(known).stored.key_id == known
    assert verifier.cached("000000000009").stored is None
