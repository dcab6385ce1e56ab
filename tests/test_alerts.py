"""Alerts and the stored summaries: after each rollup the summary under the plan is stored for
the experiments list, and a change for the worse (health failing, a guardrail failing) or of a
decision is POSTed to TRACKER_ALERT_URL, checked against a live HTTP server on 127.0.0.1,
one that answers 500 first, and one that is down; the rollup succeeds whatever the webhook
does."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from tests.dashboard.browser import free_port
from tests.helpers import T0
from tests.rollup.scenario import create
from tests.rollup.test_rollup import NOW
from tests.test_report_decisions import CLEAR_WIN, _log
from tracker.alerts import alert_texts, post
from tracker.cli import main
from tracker.publish import after_rollup
from tracker.report import report
from tracker.report.summary import ExperimentSummary, summarise
from tracker.rollup.engine import run_rollup
from tracker.store import computed
from tracker.store.db import transaction
from tracker.store.summaries import read_summaries


class Webhook:
    """A local webhook: records each JSON body; answers ``fail_first`` 500s, then 200."""

    def __init__(self, fail_first: int = 0) -> None:
        self.bodies: list[dict] = []
        self.fail_first = fail_first
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 — the http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.bodies.append(body)
                failing = len(hook.bodies) <= hook.fail_first
                self.send_response(500 if failing else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 30.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while len(self.bodies) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.bodies

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.close()


LOPSIDED = {"control": [1] * 60 + [0] * 140, "treatment": [1] * 30 + [0] * 70}
"""200 users against 100 under a declared 50/50 split: a sample-ratio mismatch."""


def test_alert_texts_name_what_turned_for_the_worse_or_changed():
    before = ExperimentSummary(health_status="pass", decisions={"new": "keep_running"},
                               guardrails={"new song_clicks": "not shown yet"})
    after = ExperimentSummary(health_status="fail", health_note="srm: p = 1e-6",
                              decisions={"new": "do_not_ship"},
                              guardrails={"new song_clicks": "fails"})
    assert alert_texts("home", before, after) == [
        "home: health is failing — srm: p = 1e-6; its lifts and verdicts are untrusted",
        "home: guardrail new song_clicks fails (the loss exceeds its margin)",
        "home: decision for new changed from keep running to do not ship"]
    assert alert_texts("home", after, after) == []  # nothing changed: nothing sent again
    assert alert_texts("home", None, before) == []  # a first summary that is fine


def test_post_delivers_json_with_a_text_field(webhook):
    assert post(webhook.url, "hello") is True
    assert webhook.bodies == [{"text": "hello"}]


def test_post_retries_a_server_error_then_delivers():
    hook = Webhook(fail_first=2)
    try:
        waits: list[float] = []
        assert post(hook.url, "again", sleep=waits.append) is True
        assert [b["text"] for b in hook.bodies] == ["again"] * 3
        assert waits == [0.5, 1.0]  # exponential backoff
    finally:
        hook.close()


def test_post_to_a_server_that_is_down_gives_up_without_raising(caplog):
    waits: list[float] = []
    url = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    assert post(url, "lost", sleep=waits.append) is False
    assert waits == [0.5, 1.0, 2.0]
    assert "not delivered after 4 attempts" in caplog.text and "/hook" not in caplog.text


def test_a_rollup_stores_the_summary_of_the_plans_scorecard(tracker):
    create(tracker, intervals="sequential")
    _log(tracker, CLEAR_WIN)
    tracker.rollup("home", now=NOW)
    with transaction(tracker.engine) as conn:
        (_, stored), = read_summaries(conn).values()
    card = report(tracker.engine, "home", now=NOW)  # the run's clock
    served = T0  # the lists, and their clicks a minute later: the newest event times
    expected = summarise(card, computed.day_table(tracker.engine, "home"), served,
                         served + timedelta(minutes=1))
    assert ExperimentSummary.from_dict(stored) == expected
    assert expected.plan["intervals"] == "sequential" and expected.users == 300
    assert expected.decisions == {d["arm"]: d["outcome"] for d in card.decisions}


def test_failing_health_after_a_rollup_is_posted_and_not_again(tracker, settings, webhook):
    create(tracker)
    _log(tracker, LOPSIDED)
    tracker.rollup("home", now=NOW)  # no URL configured: stored, nothing sent
    with transaction(tracker.engine) as conn:
        stored = ExperimentSummary.from_dict(read_summaries(conn)["home"][1])
    assert stored.health_status == "fail" and not stored.trusted
    configured = settings.replace(alert_url=webhook.url)
    with transaction(tracker.engine, write=True) as conn:  # as before any summary
        conn.exec_driver_sql("DELETE FROM experiment_summary")
    sender = after_rollup(tracker.engine, configured, ["home"])
    sender.join(30)
    (body,) = webhook.bodies
    assert body["text"].startswith("home: health is failing — srm:")
    assert after_rollup(tracker.engine, configured, ["home"]) is None  # still failing: quiet


def test_a_rollup_with_a_dead_webhook_still_succeeds(tracker, settings):
    dead = settings.replace(alert_url=f"http://127.0.0.1:{free_port()}/hook")
    create(tracker)
    _log(tracker, LOPSIDED)
    (summary,) = run_rollup(tracker.engine, dead, "home", now=NOW)  # its health fails
    assert summary.days_recomputed
    with transaction(tracker.engine) as conn:
        assert read_summaries(conn)["home"][1]["health_status"] == "fail"


def test_alerts_test_command(webhook, monkeypatch):
    monkeypatch.setenv("TRACKER_ALERT_URL", webhook.url)
    result = CliRunner().invoke(main, ["alerts", "test"])
    assert result.exit_code == 0 and "alert delivered" in result.output
    assert webhook.bodies[0]["text"].startswith("tracker alert test from ")
    down = CliRunner().invoke(main, ["alerts", "test", "--url",
                                     f"http://127.0.0.1:{free_port()}/x"])
    assert down.exit_code == 1 and "NOT delivered" in down.output
