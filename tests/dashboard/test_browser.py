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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from dashboard.charts import SEGMENT_TAB, TABS
from tests.dashboard.browser import WIDTH, Browser, chromium, free_port, wait_for_http
from tests.helpers import T0, impression, make_experiment
from tracker.cli.serve import dashboard_command
from tracker.demo import ARMS, DemoConfig, load

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".ci" / "out"
SMALL = DemoConfig(days=4, users=300, items=300, start=datetime(2026, 11, 1, tzinfo=UTC))

if chromium() is None and not os.environ.get("CI"):
    pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it",
                allow_module_level=True)

CHARTS = "document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length"
CHARTS_READY = f"{CHARTS} >= 2 && document.querySelector('.tr-table') !== null"
"""The results table and the first chart tab's two charts (the metric and its lift)."""
TAB = ("Array.from(document.querySelectorAll('[data-testid=\"stTab\"]'))"
       ".find(e => e.innerText.includes('{}'))")
OVERFLOW = ("[document.documentElement.scrollWidth, ...Array.from(document.querySelectorAll("
            "'[data-testid=\"stMain\"], [data-testid=\"stMainBlockContainer\"]'), "
            "e => e.scrollWidth - e.clientWidth + ' overflow')]")
TOP = "(s => { const e = document.querySelector(s); return e && e.getBoundingClientRect().top; })"
ERRORS = ("document.querySelectorAll('[data-testid=\"stException\"], "
          "[data-testid=\"stAlertContentError\"]').length")


@contextmanager
def _dashboard(db_url: str, app: Path | None = None, **env: str) -> Iterator[int]:
    """``tracker dashboard`` on a free port over ``db_url``, healthy; stopped after
    (``app``: serve this Streamlit script instead, as ``tracker dashboard`` would)."""
    port = free_port()
    command = ([sys.executable, "-m", "tracker.cli", "dashboard", "--port", str(port)]
               if app is None else dashboard_command(app, "127.0.0.1", port))
    server = subprocess.Popen(
        command, env={**os.environ, "TRACKER_DATABASE_URL": db_url, **env}, cwd=ROOT,
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
        assert browser.evaluate(ERRORS) == 0, text[:2000]
        assert "Data through 2026-11-04" in text  # the demo's newest event, not today
        shown = browser.evaluate(CHARTS)
        for tab, words in zip(TABS[1:], ("days since first exposure", "declared split"),
                              strict=True):  # each other tab draws its chart when opened
            _click(browser, TAB.format(tab))
            _wait(browser, f"{CHARTS} > {shown}")
            shown = browser.evaluate(CHARTS)
            assert words in browser.text()
        _click(browser, TAB.format(TABS[0]))
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


METRIC = ("document.querySelector('[data-testid=\"stSelectbox\"] input[aria-label^=\"Metric\"]"
          "')")
CENTRE = ("(e => { const r = e.getBoundingClientRect(); return [r.left + r.width / 2, "
          "r.top + r.height / 2]; })")


def _click(browser: Browser, element: str) -> None:
    """A real mouse click at the centre of the element the expression ``element`` finds."""
    browser.evaluate(f"{element}.scrollIntoView({{block: 'center'}})")
    x, y = browser.evaluate(f"{CENTRE}({element})")
    for kind in ("mousePressed", "mouseReleased"):
        browser.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                     clickCount=1)


def _wait(browser: Browser, until: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not browser.evaluate(until):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{until!r} still false after {timeout} s")
        time.sleep(0.3)


def test_choosing_a_chart_metric_reruns_the_charts_alone_in_a_real_browser(tracker, db_url,
                                                                           tmp_path):
    """The metric chooser is in the charts' fragment (dashboard/charts.py): choosing a metric
    in the browser reruns that fragment on the server, never the page above it (the decision
    cards are drawn once, as a spy on the server counts), and the URL follows; the cutoff in
    the sidebar still reruns the whole page. Without the fragment, every choice is a full
    run."""
    load(tracker, SMALL)
    tracker.rollup(SMALL.key, now=datetime(2026, 11, 20, tzinfo=UTC))
    drawn = tmp_path / "drawn"
    runs = lambda: len(drawn.read_text().splitlines()) if drawn.exists() else 0  # noqa: E731
    app = ROOT / "tests" / "dashboard" / "counted_app.py"
    with _dashboard(db_url, app, TRACKER_TEST_DRAWN=str(drawn)) as port, Browser() as browser:
        browser.load(f"http://127.0.0.1:{port}/experiment?experiment={SMALL.key}",
                     f"{METRIC} !== null && document.querySelector('.tr-decision') !== null "
                     "&& document.body.innerText.includes(\"Each arm's mean of ndcg@10\")",
                     timeout=90)
        time.sleep(2)  # let the first run end
        before = runs()
        assert before >= 1
        _click(browser, METRIC)
        browser.call("Input.insertText", text="hit_rate")
        for kind in ("keyDown", "keyUp"):
            browser.call("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter",
                         windowsVirtualKeyCode=13)
        _wait(browser, "document.body.innerText.includes(\"Each arm's mean of hit_rate@10\")")
        _wait(browser, "window.location.search.includes('metric=hit_rate')")
        time.sleep(2)
        assert runs() == before  # the fragment alone ran: no decision card drawn again
        assert browser.evaluate("document.querySelectorAll('.tr-decision').length") > 0
        _click(browser, "Array.from(document.querySelectorAll('[data-testid=\"stSidebar\"] "
                        "label')).find(e => e.innerText.trim() === '5')")
        _wait(browser, "document.body.innerText.includes(\"Each arm's mean of hit_rate@5\")")
        time.sleep(1)
        assert runs() > before  # the spy counts full runs: the cutoff is one
        assert "metric=hit_rate" in browser.evaluate("window.location.search")


FOREST = ("Array.from(document.querySelectorAll('[data-testid=\"stTabPanel\"]'))"
          ".some(p => p.innerText.includes('Benjamini-Hochberg') "
          "&& p.querySelector('.vega-embed canvas, .vega-embed svg') !== null "
          "&& p.querySelector('[data-testid=\"stDataFrame\"]') !== null)")


@pytest.mark.parametrize("width", [pytest.param(WIDTH, id="laptop"),
                                   pytest.param(PHONE, id="phone")])
def test_the_segment_tab_draws_the_lift_per_slice_in_a_real_browser(tracker, db_url, width):
    """An experiment with a list dimension gets a "By segment" tab: the dimension from the
    link, a forest plot of the lift per slice for the chosen metric, the users per slice with
    their sample-ratio check; the URL keeps the dimension; nothing scrolls sideways."""
    from tests.rollup.scenario import create
    from tests.rollup.test_rollup import NOW
    from tests.rollup.test_slices import _sliced_logs

    imps, events = _sliced_logs(3, users=60, impressions=900)
    create(tracker, segments=["surface:list"], max_levels=3)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    name = "laptop" if width == WIDTH else "phone"
    with _dashboard(db_url) as port, Browser() as browser:
        _view(browser, width, False)
        browser.load(f"http://127.0.0.1:{port}/experiment?experiment=home&k=3"
                     "&segment=surface", f"{CHARTS} >= 2", timeout=90)
        _click(browser, TAB.format(SEGMENT_TAB))
        _wait(browser, FOREST, timeout=90)
        time.sleep(1)  # the chart's canvas drawn
        assert browser.evaluate(ERRORS) == 0, browser.text()[:2000]
        text = browser.text()
        assert all(f in text for f in ("home", "search", "(other)", "list dimension")), text
        assert "segment=surface" in browser.evaluate("window.location.search")
        document, *inner = browser.evaluate(OVERFLOW)
        assert document <= width and all(int(w.split()[0]) <= 0 for w in inner)
        browser.screenshot(OUT / f"dashboard-segment-{name}.png", width=width)
    assert (OUT / f"dashboard-segment-{name}.png").stat().st_size > 10_000
