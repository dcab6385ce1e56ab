"""The experiment page and the list under AppTest: every view parameter survives a round trip
through the URL, an unknown key is an error, a view departing from the analysis plan is
labelled exploratory with the plan's decision, failing health reaches the numbers (banner,
greyed untrusted rows, no headline lift on the list), an experiment without data says
how to start, both pages say the data runs through its newest event time (the experiment page
says it once), and the charts sit in tabs under their own metric chooser."""

from __future__ import annotations

import re
from datetime import timedelta

import sqlalchemy as sa

from dashboard.charts import SEGMENT_TAB, TABS
from tests.dashboard.test_app import SMALL, _app, _clean, demo_url  # noqa: F401 (fixture)
from tests.rollup.scenario import create
from tests.rollup.test_rollup import NOW
from tests.test_alerts import LOPSIDED
from tests.test_report_decisions import _log
from tracker.report.summary import ExperimentSummary
from tracker.store.db import create_engine
from tracker.store.summaries import read_summaries
from tracker.store.types import from_micros


def _page(url, monkeypatch, **params):
    at = _app(url, monkeypatch)
    at.switch_page("views/experiment.py")
    for name, value in params.items():
        at.query_params[name] = value
    return at.run()


def test_every_view_parameter_round_trips_through_the_url(demo_url, monkeypatch):  # noqa: F811
    first = _page(demo_url, monkeypatch, experiment=SMALL.key).run()
    days = first.sidebar.selectbox[0].options
    chosen = {"experiment": SMALL.key, "k": "20", "window": "daily", "intervals": "always-valid",
              "cuped": "off", "day": days[-1], "metric": "hit_rate"}
    at = _page(demo_url, monkeypatch, **chosen)
    _clean(at)
    sidebar = at.sidebar
    assert [r.value for r in sidebar.radio] == [20, "daily", "always-valid"]
    assert sidebar.toggle[0].value is False and sidebar.selectbox[0].value == days[-1]
    assert next(s for s in at.selectbox if s.label == "Metric").value == "hit_rate"
    assert {k: at.query_params[k][0] if isinstance(at.query_params[k], list)
            else at.query_params[k] for k in chosen} == chosen
    # changing a widget writes the URL back
    at.sidebar.radio[0].set_value(5).run()
    value = at.query_params["k"]
    assert (value[0] if isinstance(value, list) else value) == "5"


def test_an_unknown_key_is_an_error_not_another_experiment(demo_url, monkeypatch):  # noqa: F811
    at = _page(demo_url, monkeypatch, experiment="no-such-experiment")
    assert not at.exception
    assert "No experiment 'no-such-experiment'" in at.error[0].value
    assert not [m for m in at.markdown if "tr-decision" in m.value]


def test_a_departure_from_the_plan_is_exploratory_with_the_plans_decision(demo_url,  # noqa: F811
                                                                         monkeypatch):
    at = _page(demo_url, monkeypatch, experiment=SMALL.key)
    _clean(at)
    assert not [w for w in at.warning if "Exploratory" in w.value]  # the plan's own view
    assert any(c.value.startswith("Analysis plan: fixed-horizon intervals, CUPED on")
               for c in at.caption)
    at.sidebar.radio[2].set_value("always-valid").run()
    _clean(at)
    (note,) = [w.value for w in at.warning if "Exploratory view" in w.value]
    assert "always-valid intervals (plan: fixed-horizon)" in note
    assert "The plan's decision is " in note


def test_failing_health_puts_a_banner_above_greyed_untrusted_results(tracker, db_url,
                                                                    monkeypatch):
    create(tracker)
    _log(tracker, LOPSIDED)  # a sample-ratio mismatch
    tracker.rollup("home", now=NOW)
    at = _page(db_url, monkeypatch, experiment="home")
    assert not at.exception
    (banner,) = [e.value for e in at.error if "Health is failing" in e.value]
    assert "srm" in banner and "untrusted" in banner
    tables = [m.value for m in at.markdown if m.value.startswith('<table class="tr-table">')]
    assert tables and all("tr-grey" in t for t in tables)
    assert ">untrusted<" in tables[0]  # the primaries
    assert not any(">better<" in t or ">worse<" in t for t in tables)
    listed = _app(db_url, monkeypatch).run()
    table = next(m.value for m in listed.markdown if "tr-list" in m.value)
    headline = table.split('data-label="headline">')[1]
    assert "untrusted: health failing" in headline and "%" not in headline  # no lift


def test_an_experiment_without_data_says_none_was_logged_and_how_to_start(tracker, db_url,
                                                                          monkeypatch):
    tracker.create_experiment("fresh", arms={"a": 1, "b": 1})
    tracker.rollup("fresh", now=NOW)
    at = _page(db_url, monkeypatch, experiment="fresh")
    _clean(at)
    (info,) = [i.value for i in at.info]
    # the key and the command as code spans: stored text is never read as Markdown
    assert "No data logged for ` fresh ` yet" in info and "found no impressions" in info
    assert "log_impressions" in info and "` tracker rollup fresh `" in info
    listed = _app(db_url, monkeypatch).run()
    assert "no data logged yet" in next(m.value for m in listed.markdown if "tr-list" in m.value)


def test_every_cached_read_names_what_it_does_while_it_runs():
    """Streamlit's default spinner is the function's name ("Running `summaries()`"): each
    cached read of the dashboard says in words what it is doing instead."""
    import ast
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "dashboard"
    found = []
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    if isinstance(decorator, ast.Call) and \
                            ast.unparse(decorator.func) == "st.cache_data":
                        spinner = {k.arg: k.value for k in decorator.keywords}.get(
                            "show_spinner")
                        found.append((node.name, isinstance(spinner, ast.Constant)
                                      and isinstance(spinner.value, str)))
    assert len(found) >= 10 and all(ok for _, ok in found), found


def test_the_charts_sit_in_tabs_under_a_metric_chooser_that_writes_the_url(
        demo_url, monkeypatch):  # noqa: F811
    """The charts below the results are in tabs, under their metric chooser; a metric chosen
    there reaches the charts, the URL and the share link at the top. (That it reruns the
    charts alone is a browser test: AppTest reruns the whole script on every widget.)"""
    at = _page(demo_url, monkeypatch, experiment=SMALL.key)
    _clean(at)
    # the demo declares dimensions: their tab follows
    assert [t.label for t in at.tabs] == [*TABS, SEGMENT_TAB]
    assert [s.value for s in at.subheader][-1] == "Charts"
    next(s for s in at.selectbox if s.label == "Metric").set_value("hit_rate").run()
    _clean(at)
    assert any(c.value.startswith("Each arm's mean of hit_rate@10") for c in at.caption)
    assert any(c.value.startswith("Relative lift of hit_rate@10") for c in at.caption)
    assert _param(at, "metric") == "hit_rate"
    assert "metric=hit_rate" in at.code[0].value  # the share link follows
    at.sidebar.radio[0].set_value(5).run()  # a full run keeps the chosen metric
    _clean(at)
    assert _param(at, "metric") == "hit_rate"
    assert any(c.value.startswith("Each arm's mean of hit_rate@5") for c in at.caption)


def test_both_pages_say_the_data_runs_through_its_newest_event_time(demo_url,  # noqa: F811
                                                                    monkeypatch):
    """"Data through" is the newest event time the rollup saw (here the demo's last list or
    click, on 2026-11-03), not when the rollup ran (2026-11-20) nor when the logs arrived
    (today); read today, it is days old: a warning that says it is stale."""
    engine = create_engine(demo_url)
    try:
        with engine.connect() as conn:
            served = from_micros(conn.execute(sa.text("SELECT max(served_at) FROM impression"))
                                 .scalar())
            (_, stored), = read_summaries(conn).values()
    finally:
        engine.dispose()
    newest = ExperimentSummary.from_dict(stored).newest_event
    assert served <= newest < served + timedelta(days=1) < NOW  # a click after the last list
    through = f"data through {newest:%Y-%m-%d %H:%M} UTC"
    at = _page(demo_url, monkeypatch, experiment=SMALL.key)
    _clean(at)
    (line,) = [w.value for w in at.warning if f"D{through[1:]}" in w.value]
    assert "days ago): stale, no event for over" in line
    # said once: the health checklist keeps its freshness line (warn) and points up to it
    shown = [e.value for e in [*at.warning, *at.caption, *at.markdown, *at.info]]
    assert sum(through.lower() in text.lower() for text in shown) == 1, shown
    health = next(m.value for m in at.markdown if "tr-health" in m.value)
    assert re.search(r'title="warn".*?<b>freshness</b>.*?as said at the top of the page',
                     health)
    listed = _app(demo_url, monkeypatch).run()
    _clean(listed)
    table = next(m.value for m in listed.markdown if "tr-list" in m.value)
    assert through in table and "stale" in table


def _param(at, name: str) -> str:
    value = at.query_params[name]
    return value[0] if isinstance(value, list) else value
