"""The real thing: ``tracker dashboard`` serving the demo data to headless Chromium.

Loads the experiment page, waits for the charts, saves a screenshot to
``.ci/out/dashboard.png`` (a CI artifact), and checks that the page shows the experiment's
arms and no error box. Chromium is Debian's package, installed by ``.ci/run``; outside CI the
test is skipped when it is missing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.dashboard.browser import Browser, chromium, free_port, wait_for_http
from tracker.demo import ARMS, DemoConfig, load

ROOT = Path(__file__).resolve().parents[2]
SHOT = ROOT / ".ci" / "out" / "dashboard.png"
SMALL = DemoConfig(days=4, users=300, items=300, start=datetime(2026, 11, 1, tzinfo=UTC))

if chromium() is None and not os.environ.get("CI"):
    pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)

CHARTS_READY = ("document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 3"
                " && document.body.innerText.includes('Scorecard')")
ERRORS = ("document.querySelectorAll('[data-testid=\"stException\"], "
          "[data-testid=\"stAlertContentError\"]').length")


def test_dashboard_in_a_real_browser(tracker, db_url):
    load(tracker, SMALL)
    tracker.rollup(SMALL.key, now=datetime(2026, 11, 20, tzinfo=UTC))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tracker.cli", "dashboard", "--port", str(port)],
        env={**os.environ, "TRACKER_DATABASE_URL": db_url}, cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/_stcore/health", timeout=90)
        with Browser() as browser:
            browser.load(f"http://127.0.0.1:{port}/experiment?experiment={SMALL.key}",
                         CHARTS_READY, timeout=90)
            browser.screenshot(SHOT)
            text = browser.text()
            assert all(arm in text for arm in ARMS), text[:2000]
            assert browser.evaluate(ERRORS) == 0, text[:2000]
            browser.load(f"http://127.0.0.1:{port}/", f"document.body.innerText.includes("
                         f"'{SMALL.key}')", timeout=60)
            assert browser.evaluate(ERRORS) == 0
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    assert SHOT.stat().st_size > 10_000
