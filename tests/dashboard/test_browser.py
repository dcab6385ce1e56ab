"""The real thing: ``tracker dashboard`` serving the demo data to headless Chromium.

Loads the experiment page and the experiments list in a 1280-pixel-wide window, saves a
full-page screenshot of each to ``.ci/out/dashboard-experiment.png`` and
``.ci/out/dashboard-list.png`` (CI artifacts), and checks that each shows no error box and
does not scroll sideways, that the experiment page puts the decision and the health checklist
above the results, and that the list shows a decision per treatment arm and the health.
Chromium is Debian's package, installed by ``.ci/run``; outside CI the
test is skipped when it is missing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.dashboard.browser import WIDTH, Browser, chromium, free_port, wait_for_http
from tests.helpers import T0, impression, make_experiment
from tracker.demo import ARMS, DemoConfig, load

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".ci" / "out"
SMALL = DemoConfig(days=4, users=300, items=300, start=datetime(2026, 11, 1, tzinfo=UTC))

if chromium() is None and not os.environ.get("CI"):
    pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)

CHARTS_READY = ("document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 4"
                " && document.querySelector('.tr-table') !== null")
OVERFLOW = ("[document.documentElement.scrollWidth, ...Array.from(document.querySelectorAll("
            "'[data-testid=\"stMain\"], [data-testid=\"stMainBlockContainer\"]'), "
            "e => e.scrollWidth - e.clientWidth + ' overflow')]")
TOP = "(s => { const e = document.querySelector(s); return e && e.getBoundingClientRect().top; })"
ERRORS = ("document.querySelectorAll('[data-testid=\"stException\"], "
          "[data-testid=\"stAlertContentError\"]').length")


@contextmanager
def _dashboard(db_url: str) -> Iterator[int]:
    """``tracker dashboard`` on a free port over ``db_url``, healthy; stopped after."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tracker.cli", "dashboard", "--port", str(port)],
        env={**os.environ, "TRACKER_DATABASE_URL": db_url}, cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/_stcore/health", timeout=90)
        yield port
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


def test_dashboard_in_a_real_browser(tracker, db_url):
    load(tracker, SMALL)
    tracker.rollup(SMALL.key, now=datetime(2026, 11, 20, tzinfo=UTC))
    with _dashboard(db_url) as port, Browser() as browser:
        browser.load(f"http://127.0.0.1:{port}/experiment?experiment={SMALL.key}",
                     CHARTS_READY, timeout=90)
        text = browser.text()
        assert all(arm in text for arm in ARMS), text[:2000]
        assert "Lift by days since exposure" in text and "days since first exposure" in text
        assert browser.evaluate(ERRORS) == 0, text[:2000]
        tops = {name: browser.evaluate(f"{TOP}('{selector}')") for name, selector in
                [("decision", ".tr-decision"), ("health", ".tr-health"),
                 ("results", ".tr-table")]}
        assert None not in tops.values(), tops
        assert tops["decision"] < tops["health"] < tops["results"], tops
        widths = browser.evaluate(OVERFLOW)
        assert _fits(widths), widths
        browser.screenshot(OUT / "dashboard-experiment.png")

        # the page links are drawn after the table: wait for them too
        browser.load(f"http://127.0.0.1:{port}/", "document.querySelector('.tr-list') "
                     "!== null && document.querySelector('[data-testid=\"stPageLink\"]') "
                     "!== null", timeout=60)
        assert browser.evaluate(ERRORS) == 0
        listed = browser.evaluate("document.querySelector('.tr-list').innerText")
        assert SMALL.key in listed and all(arm in listed for arm in ARMS[1:]), listed
        assert any(word in listed for word in ("healthy", "warnings", "failing")), listed
        widths = browser.evaluate(OVERFLOW)
        assert _fits(widths), widths
        browser.screenshot(OUT / "dashboard-list.png")
    for name in ("dashboard-experiment.png", "dashboard-list.png"):
        assert (OUT / name).stat().st_size > 10_000


def _fits(widths: list) -> bool:
    """The document is at most :data:`WIDTH` wide and no main container scrolls sideways."""
    document, *inner = widths
    return document <= WIDTH and all(int(w.split()[0]) <= 0 for w in inner)


HOSTILE_NAME = ("Name **bold** [link](http://example.invalid/n) "
                "![image](http://example.invalid/i.png) <img src='http://example.invalid/h.png'> "
                "<i>tag</i> :red[red] $x^2$ www.example.invalid")
HOSTILE_KEY = "k:_em_:smile:"  # keys are letters, digits and . _ : - (emphasis, emoji codes)
HOSTILE_ARMS = ("ctl:_b_", "trt:smile:")
FOREIGN = ("[...document.querySelectorAll('a[href*=\"example.invalid\"], "
           "img[src*=\"example.invalid\"], [data-testid=\"stMain\"] em, "
           "[data-testid=\"stMain\"] i, .katex')]"
           ".map(e => e.outerHTML.slice(0, 200))")


def test_stored_text_is_shown_as_text_never_as_markdown_or_html(tracker, db_url):
    """An experiment whose name holds a link, an image, HTML, a Streamlit colour directive and
    LaTeX, and whose key and arms hold Markdown emphasis and emoji codes: the pages show those
    characters, and the browser holds no element made from them (on main the title rendered
    the link and the image)."""
    control, treatment = HOSTILE_ARMS
    make_experiment(tracker, HOSTILE_KEY, name=HOSTILE_NAME, control=control,
                    arms={control: 0.5, treatment: 0.5})
    tracker.log_impressions([impression(i, experiment=HOSTILE_KEY, user_id=f"u{i % 20}",
                                        arm=HOSTILE_ARMS[i % 20 % 2],
                                        served_at=T0 + timedelta(hours=i))
                             for i in range(60)])
    tracker.rollup(HOSTILE_KEY, now=T0 + timedelta(days=30))
    with _dashboard(db_url) as port, Browser() as browser:
        browser.load(f"http://127.0.0.1:{port}/experiment?experiment="
                     f"{quote(HOSTILE_KEY, safe='')}",
                     "document.querySelector('.tr-decision') !== null && "
                     "document.querySelector('h1') !== null", timeout=90)
        assert browser.evaluate(ERRORS) == 0, browser.text()[:2000]
        title = browser.evaluate("document.querySelector('h1').innerText")
        assert title == HOSTILE_NAME
        text = browser.text()
        assert HOSTILE_KEY in text and all(arm in text for arm in HOSTILE_ARMS), text[:3000]
        foreign = browser.evaluate(FOREIGN)
        assert foreign == [], "\n".join(foreign)

        # the page links are drawn after the table: wait for them too
        browser.load(f"http://127.0.0.1:{port}/", "document.querySelector('.tr-list') "
                     "!== null && document.querySelector('[data-testid=\"stPageLink\"]') "
                     "!== null", timeout=60)
        listed = browser.text()
        assert HOSTILE_NAME in listed and f"Open {HOSTILE_KEY}" in listed, listed[:3000]
        foreign = browser.evaluate(FOREIGN)
        assert foreign == [], "\n".join(foreign)


PHONE = 390
CARDS = ("(() => { const td = document.querySelector('table.tr-table td'); "
         "return td && getComputedStyle(td).display; })()")
BANNER_ABOVE_RESULTS = (
    "(() => { const b = Array.from(document.querySelectorAll('[data-testid=\"stAlert\"]'))"
    ".find(e => e.innerText.includes('Health is failing')); const t = document.querySelector("
    "'table.tr-table'); return b && t ? b.getBoundingClientRect().top < "
    "t.getBoundingClientRect().top : null; })()")
BACKGROUND = ("getComputedStyle(document.querySelector('[data-testid=\"stApp\"]'))"
              ".backgroundColor")


def _view(browser: Browser, width: int, dark: bool) -> None:
    """The window ``width`` CSS pixels wide (a phone's below 640), light or dark system theme
    (Streamlit follows it)."""
    browser.call("Emulation.setDeviceMetricsOverride", width=width, height=900,
                 deviceScaleFactor=1, mobile=width < 640, screenWidth=width, screenHeight=900)
    browser.call("Emulation.setEmulatedMedia", features=[
        {"name": "prefers-color-scheme", "value": "dark" if dark else "light"}])


def _dark(rgb: str) -> bool:
    red, green, blue = (int(v) for v in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3])
    return red + green + blue < 3 * 100


@pytest.mark.parametrize(("width", "dark"), [
    pytest.param(WIDTH, False, id="laptop-light"),
    pytest.param(WIDTH, True, id="laptop-dark"),
    pytest.param(PHONE, False, id="phone-light"),
    pytest.param(PHONE, True, id="phone-dark"),
])
def test_failing_health_banner_and_phone_cards_in_a_real_browser(tracker, db_url, width, dark):
    from tests.rollup.scenario import create
    from tests.rollup.test_rollup import NOW
    from tests.test_alerts import LOPSIDED
    from tests.test_report_decisions import _log

    create(tracker, guardrails={"hit_rate@2": 0.05})
    _log(tracker, LOPSIDED)  # a sample-ratio mismatch: health fails
    tracker.rollup("home", now=NOW)
    name = f"{'phone' if width < 640 else 'laptop'}-{'dark' if dark else 'light'}"
    with _dashboard(db_url) as port, Browser() as browser:
        _view(browser, width, dark)
        browser.load(f"http://127.0.0.1:{port}/experiment?experiment=home&k=2",
                     "document.querySelector('table.tr-table') !== null", timeout=90)
        assert browser.evaluate(ERRORS) == 1, browser.text()[:2000]  # the banner alone
        assert browser.evaluate(BANNER_ABOVE_RESULTS) is True
        text = browser.text()
        assert "untrusted" in text and "Guardrails" in text
        assert browser.evaluate(CARDS) == ("flex" if width < 640 else "table-cell")
        assert _dark(browser.evaluate(BACKGROUND)) is dark
        document, *inner = browser.evaluate(OVERFLOW)
        assert document <= width and all(int(w.split()[0]) <= 0 for w in inner)
        assert "k=2" in browser.evaluate("window.location.search")
        browser.screenshot(OUT / f"dashboard-failing-{name}.png", width=width)
    assert (OUT / f"dashboard-failing-{name}.png").stat().st_size > 10_000
