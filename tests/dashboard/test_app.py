"""Every dashboard page under Streamlit's AppTest, on a database filled by the demo simulation:
no exception, and the scorecard shows exactly the numbers of ``tracker report --format json``."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
import streamlit as st
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from dashboard import components
from tests.conftest import fresh_database
from tracker.cli import main
from tracker.demo import ARMS, DemoConfig, load
from tracker.metrics import catalog
from tracker.report import report
from tracker.store import computed
from tracker.store.db import create_engine, transaction
from tracker.store.experiments import get_experiment

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
SMALL = DemoConfig(days=3, users=300, items=300, start=datetime(2026, 11, 1, tzinfo=UTC))
NOW = datetime(2026, 11, 20, tzinfo=UTC)


def _app(url: str, monkeypatch) -> AppTest:
    monkeypatch.setenv("TRACKER_DATABASE_URL", url)
    st.cache_data.clear()
    st.cache_resource.clear()
    return AppTest.from_file(str(APP), default_timeout=120)


def card_info(url: str):
    engine = create_engine(url)
    try:
        with transaction(engine) as conn:
            return get_experiment(conn, SMALL.key)
    finally:
        engine.dispose()


def _clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture
def demo_url(tracker, db_url):
    load(tracker, SMALL)
    tracker.rollup(SMALL.key, now=NOW)
    return db_url


def _card(url: str):
    """The scorecard ``tracker report`` computes (cumulative, latest complete day)."""
    engine = create_engine(url)
    try:
        return report(engine, SMALL.key)
    finally:
        engine.dispose()


def test_experiments_page_shows_each_arms_decision_and_the_health_status(demo_url,
                                                                         monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    _clean(at)
    card = _card(demo_url)
    table = next(m.value for m in at.markdown if "tr-list" in m.value)
    assert f"<b>{SMALL.key}</b>" in table
    for decision in card.decisions:
        label = components.OUTCOMES[decision["outcome"]][0]
        assert re.search(rf"{decision['arm']} <span[^>]*>[^<]*{label}</span>", table)
    assert components.health_badge(card.health["status"]) in table


def test_experiment_page_scorecard_equals_the_report_json(demo_url, monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    at.switch_page("views/experiment.py").run()
    _clean(at)
    result = CliRunner().invoke(main, ["report", SMALL.key, "--format", "json"],
                                env={"TRACKER_DATABASE_URL": demo_url})
    report = json.loads(result.stdout)
    k = 10  # the page's default cutoff: the middle one of 5, 10, 20
    expected = {}
    for r in report["metrics"]:
        if r["k"] not in (None, k):
            continue
        name = r["metric"] if r["k"] is None else f"{r['metric']}@{r['k']}"
        p = r.get("p_value")
        expected[(name, r["arm"])] = (
            f"{r['mean']:.4f}", "" if r["control"] or p is None
            else "<1e-16" if p < 1e-16 else f"{p:.3g}")
    shown = {}
    for frame in at.dataframe[:1]:  # every number, in the expander under the results
        for row in frame.value.itertuples(index=False):
            arm = row.arm.replace(" (control)", "")
            shown[(row.metric, arm)] = (row.value, row.p)
    assert shown == expected
    assert any(SMALL.key in s.value or "cumulative" in s.value for s in at.subheader)


def test_experiment_page_shows_the_decision_and_the_health_checklist_first(demo_url,
                                                                           monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    at.switch_page("views/experiment.py").run()
    _clean(at)
    headings = [s.value for s in at.subheader]
    assert headings[0] == "Decision" and headings[1].startswith("Results"), headings
    blocks = [m.value for m in at.markdown]
    first = {kind: next(i for i, b in enumerate(blocks) if kind in b)
             for kind in ("tr-decision", "tr-health", "tr-table")}
    assert first["tr-decision"] < first["tr-health"] < first["tr-table"], first
    card = _card(demo_url)
    arms = [a.key for a in card_info(demo_url).arms if a.key != "control"]
    shown = [b for b in blocks if "tr-decision" in b]
    assert len(shown) == len(card.decisions) == len(arms)
    for decision, markup in zip(card.decisions, shown, strict=True):
        assert f"<b>{decision['arm']}</b>" in markup
        assert components.OUTCOMES[decision["outcome"]][0] in markup
    health = blocks[first["tr-health"]]
    shown = re.findall(r'title="(\w+)".*?<b>(\w+)</b>', health)
    # the page's and the report's "now" differ by seconds: compare checks and statuses
    assert shown == [(i["status"], i["check"]) for i in card.health["checklist"]]
    titles = [b for b in blocks if b.startswith("**")]
    assert titles[0] == "**Primary metrics**", titles
    # the window as it is given (the demo's is a day), not timedelta's "1 day, 0:00:00"
    hours = card_info(demo_url).attribution_window.total_seconds() / 3600
    assert any(f"attribution window {hours:g}h ·" in c.value for c in at.caption), \
        [c.value for c in at.caption]


def test_experiment_page_controls_daily_and_always_valid(demo_url, monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    at.switch_page("views/experiment.py").run()
    at.sidebar.radio[1].set_value("daily").run()
    at.sidebar.radio[2].set_value("always-valid").run()
    at.sidebar.radio[0].set_value(5).run()
    _clean(at)
    assert any("@5" in m for m in at.dataframe[0].value["metric"])
    headings = [s.value for s in at.subheader]
    assert headings[0] == "Decision" and headings[1].startswith("Results — day "), headings


def test_glossary_page_renders_every_catalogue_entry_as_markdown(demo_url, monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    at.switch_page("views/glossary.py").run()
    _clean(at)
    labels = [e.label for e in at.expander]
    assert [label.split()[0] for label in labels] == list(catalog.display_order())
    assert [s.value for s in at.subheader] == [g.label for g in catalog.GROUPS]
    assert any(label.startswith("song_clicks ↓") for label in labels)
    text = " ".join(m.value for m in at.markdown)
    assert ">>>" not in text  # no doctest prompts
    for entry in catalog.CATALOG.values():
        assert entry.formula in text and entry.reference in text, entry.name
    assert "**Better:** ↓ lower" in components.glossary_entry(catalog.CATALOG["gini"])


def test_set_level_rows_show_no_verdict_and_direction_is_a_column(demo_url, monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    at.switch_page("views/experiment.py").run()
    _clean(at)
    rows = at.dataframe[0].value
    treated = rows[~rows["arm"].str.endswith("(control)")]
    coverage = treated[treated["metric"] == "coverage@10"]
    assert len(coverage) and (coverage["verdict"] == "— (set-level: no test)").all()
    assert set(rows.loc[rows["metric"] == "song_clicks", "better"]) == {"↓ lower"}
    assert set(rows.loc[rows["metric"] == "ndcg@10", "better"]) == {"↑ higher"}


def test_empty_states_explain_themselves(tmp_path, db_url, tracker, monkeypatch):
    with fresh_database(tmp_path) as no_schema:
        at = _app(no_schema, monkeypatch).run()
        assert not at.exception and "tracker db upgrade" in at.error[0].value
    at = _app(db_url, monkeypatch).run()  # schema, no experiments
    _clean(at)
    assert "tracker demo" in at.info[0].value
    tracker.create_experiment("fresh", arms={"a": 1, "b": 1})
    at = _app(db_url, monkeypatch).run()
    at.switch_page("views/experiment.py").run()
    _clean(at)
    assert "tracker rollup" in at.info[0].value


def _encodings(spec, channel: str):
    """Every ``channel`` encoding in a Vega-Lite spec, layers included."""
    if isinstance(spec, dict):
        if channel in spec.get("encoding", {}):
            yield spec["encoding"][channel]
        for value in spec.values():
            yield from _encodings(value, channel)
    elif isinstance(spec, list):
        for value in spec:
            yield from _encodings(value, channel)


def _marks(spec):
    if isinstance(spec, dict):
        if isinstance(spec.get("mark"), dict):
            yield spec["mark"]
        for value in spec.values():
            yield from _marks(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from _marks(value)


def test_every_chart_gives_each_arm_one_colour_and_counts_days(demo_url, monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    at.switch_page("views/experiment.py").run()
    _clean(at)
    specs = [json.loads(e.proto.spec) for e in at.main
             if getattr(e, "type", "") == "vega_lite_chart"]
    # metric, lift, lift by days since exposure, users, and the lift per slice of a
    # dimension (the demo declares two)
    assert len(specs) == 5
    expected = components.arm_colours(list(ARMS), "control")
    assert expected["control"] == components.CONTROL_COLOUR
    for spec in specs:
        for colour in _encodings(spec, "color"):
            scale = colour["scale"]
            assert dict(zip(scale["domain"], scale["range"], strict=True)).items() \
                <= expected.items()
        for x in _encodings(spec, "x"):
            if x.get("type") == "temporal":
                assert x["timeUnit"] == "utcyearmonthdate"
                assert x["axis"]["tickCount"]["interval"] == "day"
    split = [m for m in _marks(specs[3]) if m["type"] == "rule"]
    assert split and split[0]["strokeDash"] and split[0]["strokeWidth"] >= 2
    bands = [m for spec in specs[:3] for m in _marks(spec) if m["type"] == "area"]
    assert len(bands) == 3 and all(m["opacity"] >= 0.2 for m in bands)


def test_experiment_page_charts_the_lift_by_days_since_exposure(demo_url, monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    at.switch_page("views/experiment.py").run()
    _clean(at)
    assert "Lift by days since exposure" in [t.label for t in at.tabs]
    charts = [e for e in at.main if getattr(e, "type", "") == "vega_lite_chart"]
    (chart,) = [e for e in charts if any(x.get("field") == "exposure_day"
                                         for x in _encodings(json.loads(e.proto.spec), "x"))]
    assert {m["type"] for m in _marks(json.loads(chart.proto.spec))} == {"area", "line", "rule"}
    # the chart's rows are the exposure_day view's lifts, per treatment arm and day
    frames = [pa.ipc.open_stream(d.data.data).read_all().to_pandas()
              for d in chart.proto.datasets]
    rows = [r for f in frames if "exposure_day" in f for r in f.to_dict("records")]
    engine = create_engine(demo_url)
    try:
        table = computed.exposure_day_table(engine, SMALL.key)
    finally:
        engine.dispose()
    treated = [a for a in ARMS if a != "control"]
    days = sorted(set(table["exposure_day"]))
    assert sorted({(r["arm"], r["exposure_day"]) for r in rows}) == sorted(
        (arm, day) for arm in treated for day in days)
    # one line per treatment arm: the report's trend of the metric charted (ndcg@10)
    card = _card(demo_url)
    notes = [m.value for m in at.markdown if m.value.startswith("**") and ":" in m.value
             and any(m.value.startswith(f"**` {arm} `**") for arm in treated)  # as code
             and "slices" not in m.value]  # the segment tab's heterogeneity, per arm too
    assert [n.split("**")[1].strip("` ") for n in notes] == [t["arm"] for t in card.trends
                                                             if t["metric"] == "ndcg@10"]


def _removed(url: str, cuped: bool) -> dict[tuple[str, str], str]:
    """The variance removed per treatment row at k = 10, from ``tracker report``."""
    flags = [] if cuped else ["--no-cuped"]
    result = CliRunner().invoke(main, ["report", SMALL.key, "--format", "json", *flags],
                                env={"TRACKER_DATABASE_URL": url})
    return {(r["metric"] if r["k"] is None else f"{r['metric']}@{r['k']}", r["arm"]):
            f"{r['variance_reduction']:.0%}" for r in json.loads(result.stdout)["metrics"]
            if not r["control"] and r["kind"] == "user" and r["k"] in (None, 10)}


def test_the_cuped_toggle_is_on_by_default_and_turns_the_adjustment_off(demo_url, monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    at.switch_page("views/experiment.py").run()
    _clean(at)
    (toggle,) = at.sidebar.toggle
    assert toggle.label == "CUPED (pre-exposure adjustment)" and toggle.value is True
    for cuped in (True, False):
        if not cuped:
            toggle.set_value(False).run()
            _clean(at)
        captions = [c.value for c in at.caption]
        assert any(c.startswith("CUPED on" if cuped else "CUPED off") for c in captions)
        frame = at.dataframe[0].value
        shown = {(r["metric"], r["arm"]): r["variance removed"]
                 for r in frame.to_dict("records")
                 if "(control)" not in r["arm"] and r["variance removed"]}
        expected = _removed(demo_url, cuped)
        assert shown == expected
        assert any(v != "0%" for v in expected.values()) == cuped


def _chart_rows(chart) -> list[dict]:
    frames = [pa.ipc.open_stream(d.data.data).read_all().to_pandas()
              for d in chart.proto.datasets]
    return [r for f in frames if "adjusted" in f for r in f.to_dict("records")]


def test_the_charts_over_time_follow_the_cuped_toggle_and_say_so(demo_url, monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    at.switch_page("views/experiment.py").run()
    _clean(at)
    for cuped in (True, False):
        if not cuped:
            at.sidebar.toggle[0].set_value(False).run()
            _clean(at)
        captions = [c.value for c in at.caption]
        (series,) = [c for c in captions if c.startswith("Each arm's mean of ndcg@10")]
        assert ("CUPED on: every day regression-adjusted" in series if cuped
                else series.endswith("CUPED off: unadjusted.")), series
        charts = [e for e in at.main if getattr(e, "type", "") == "vega_lite_chart"][:2]
        for chart in charts:  # the metric's chart, then its lift's: adjusted or not, per point
            rows = _chart_rows(chart)
            assert rows and {r["adjusted"] for r in rows} == {cuped}
            tooltips = [t["field"] for t in _encodings(json.loads(chart.proto.spec), "tooltip")
                        for t in t if isinstance(t, dict)]
            assert "cuped" in tooltips, tooltips
        # the lift by days since exposure has no covariate sums: its caption says unadjusted
        assert any(c.startswith("Relative lift of ndcg@10") and "Unadjusted" in c
                   for c in captions), captions
