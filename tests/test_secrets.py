"""No secret in any message (issue 29): a planted database password and a planted API key
secret are searched for in every exception (its text, its repr and its whole traceback),
every line the CLI prints, every line the collector logs and every error the dashboard shows.
"""

from __future__ import annotations

import logging
import traceback

import httpx
import pytest
import streamlit as st
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from tests.collector.server import in_thread, make_keys
from tests.dashboard.test_app import APP
from tests.helpers import make_experiment
from tracker import Tracker
from tracker.cli import main
from tracker.config import Settings
from tracker.errors import TrackerError, redact

SECRET = "PLANTEDs3cret"
UNREACHABLE = f"postgresql+psycopg://tracker:{SECRET}@127.0.0.1:1/tracker"
BAD_URLS = [
    pytest.param(f"mysql://root:{SECRET}@db/x", id="unknown-driver"),
    pytest.param(f"postgresql://root:{SECRET}@db:fivefour/x", id="port-that-is-no-number"),
    pytest.param(f"postgresql://root:{SECRET}@[::1/x", id="unclosed-ipv6-bracket"),
    pytest.param(f"postgres://root@127.0.0.1:1/x?sslmode=disable&password={SECRET}",
                 id="password-parameter-of-an-unreachable-server"),
    pytest.param(UNREACHABLE, id="unreachable-server"),
]


def with_password(url: str) -> str:
    """``url`` carrying the planted secret as a ``password=`` parameter (PostgreSQL under
    trust authentication and SQLite both ignore it)."""
    return f"{url}{'&' if '?' in url else '?'}password={SECRET}"


def every_text_of(error: BaseException) -> str:
    return "\n".join([str(error), repr(error), *traceback.format_exception(error)])


@pytest.mark.parametrize("url", BAD_URLS)
def test_the_python_api_never_shows_the_password(url):
    try:
        with Tracker(url) as t:
            t.experiments()
    except TrackerError as error:
        assert SECRET not in every_text_of(error)
    else:
        pytest.fail(f"{url} was accepted")


@pytest.mark.parametrize("url", BAD_URLS)
@pytest.mark.parametrize("command", [["config"], ["db", "upgrade"], ["experiments", "list"]],
                         ids=["config", "db-upgrade", "experiments-list"])
def test_the_cli_never_prints_the_password(url, command):
    result = CliRunner().invoke(main, command, env={"TRACKER_DATABASE_URL": url})
    assert SECRET not in result.output + (result.stderr or "")
    assert "Traceback" not in result.output


@pytest.mark.filterwarnings("ignore:Query string argument")
def test_a_database_without_schema_is_named_without_its_password(empty_url):
    """On main this message held ``password=...`` (SQLAlchemy's hide_password masks only the
    user part)."""
    url = with_password(empty_url)
    with pytest.raises(TrackerError, match="no tracker schema") as refused:
        Tracker(url)
    assert SECRET not in every_text_of(refused.value)
    result = CliRunner().invoke(main, ["experiments", "list"], env={"TRACKER_DATABASE_URL": url})
    assert result.exit_code == 1 and "no tracker schema" in result.output
    assert SECRET not in result.output


@pytest.mark.filterwarnings("ignore:Query string argument")
def test_the_collector_logs_no_password_and_no_key_secret(db_url, tracker):
    make_experiment(tracker)
    keys = make_keys(db_url)
    key_secret = keys.ingest.split("_", 2)[2]  # the secret may itself hold "_"
    wrong = keys.ingest[: -len(SECRET)] + SECRET  # the right key id, a planted wrong secret
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(self.format(record))

    handler = Keep()
    watched = [logging.getLogger(n) for n in ("tracker", "tracker.collector.access", "uvicorn")]
    levels = [logger.level for logger in watched]
    for logger in watched:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        settings = Settings(database_url=with_password(db_url))
        with in_thread(settings) as base:
            event = {"event_id": "e1", "user_id": "u1", "item_id": "i1", "event": "click",
                     "occurred_at": "2026-11-01T00:00:00Z"}
            for token, path in [(keys.ingest, "/v1/interactions"),
                                (keys.ingest, "/v1/experiments"),  # 403: wrong scope
                                (wrong, "/v1/interactions"),  # 401
                                (f"{keys.ingest} {SECRET}", "/v1/interactions")]:  # malformed
                httpx.post(base + path, json=[event],
                           headers={"Authorization": f"Bearer {token}"}, timeout=10)
    finally:
        for logger, level in zip(watched, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)
    logged = "\n".join(lines)
    assert lines, "the collector logged nothing"
    assert SECRET not in logged and key_secret not in logged


@pytest.mark.parametrize("url", [pytest.param(UNREACHABLE, id="unreachable-server"),
                                 pytest.param(f"mysql://root:{SECRET}@db/x", id="unknown-driver"),
                                 pytest.param(None, id="database-without-schema")])
@pytest.mark.filterwarnings("ignore:Query string argument")
def test_the_dashboard_shows_one_error_line_without_the_password(url, empty_url, monkeypatch):
    monkeypatch.setenv("TRACKER_DATABASE_URL", url or with_password(empty_url))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    (error,) = at.error
    assert error.value.startswith("Cannot read the tracker database")
    assert SECRET not in error.value


def test_redact_masks_every_shape_it_knows():
    text = (f"a postgresql://u:{SECRET}@h/db, b ?sslpassword={SECRET}&x=1, "
            f"c trk_0123456789ab_{SECRET}{'x' * 20}")
    assert SECRET not in redact(text)
    assert "trk_0123456789ab_***" in redact(text)  # the public key id stays


def test_the_alert_webhooks_secret_path_is_never_printed_or_logged(caplog):
    """A Slack incoming webhook's path is its secret: ``tracker config`` (a good and a bad
    value), ``tracker alerts test`` against a webhook that is down and the alert's warning
    show the host only (on main ``tracker config`` printed the whole URL)."""
    from tests.dashboard.browser import free_port
    from tracker.alerts import post

    hook = f"http://127.0.0.1:{free_port()}/services/T0/B0/{SECRET}"
    shown = CliRunner().invoke(main, ["config"], env={"TRACKER_ALERT_URL": hook})
    assert shown.exit_code == 0 and "TRACKER_ALERT_URL=http://127.0.0.1:" in shown.output
    bad = CliRunner().invoke(main, ["config"],
                             env={"TRACKER_ALERT_URL": f"hooks.example/services/{SECRET}"})
    assert bad.exit_code != 0 and "TRACKER_ALERT_URL=" in bad.output
    with caplog.at_level(logging.WARNING):
        down = CliRunner().invoke(main, ["alerts", "test"], env={"TRACKER_ALERT_URL": hook})
        assert post(hook, "text", retries=0) is False
    assert down.exit_code == 1 and "NOT delivered" in down.output
    assert "not delivered" in caplog.text
    for text in (shown.output, bad.output, down.output, caplog.text):
        assert SECRET not in text
