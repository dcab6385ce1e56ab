"""Every dashboard page under Streamlit's AppTest, on a database filled by the demo simulation:
no exception, and the scorecard shows exactly the numbers of ``tracker report --format json``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from dashboard import components
from tests.conftest import fresh_database
from tracker.cli import main
from tracker.demo import DemoConfig, load
from tracker.metrics import catalog

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
SMALL = DemoConfig(days=3, users=300, items=300, start=datetime(2026, 11, 1, tzinfo=UTC))
NOW = datetime(2026, 11, 20, tzinfo=UTC)


def _app(url: str, monkeypatch) -> AppTest:
    monkeypatch.setenv("TRACKER_DATABASE_URL", url)
    st.cache_data.clear()
    st.cache_resource.clear()
    return AppTest.from_file(str(APP), default_timeout=120)


def _clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture
def demo_url(tracker, db_url):
    load(tracker, SMALL)
    tracker.rollup(SMALL.key, now=NOW)
    return db_url


def test_experiments_page_lists_the_experiment_with_its_arms(demo_url, monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    _clean(at)
    table = at.dataframe[0].value
    row = table[table["experiment"] == SMALL.key].iloc[0]
    assert "personalised" in row["arms"] and row["users"] > 0 and row["health"]


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
    for frame in at.dataframe[:3]:  # the three metric groups
        for row in frame.value.itertuples(index=False):
            arm = row.arm.replace(" (control)", "")
            shown[(row.metric, arm)] = (row.value, row.p)
    assert shown == expected
    assert any(SMALL.key in s.value or "cumulative" in s.value for s in at.subheader)


def test_experiment_page_controls_daily_and_always_valid(demo_url, monkeypatch):
    at = _app(demo_url, monkeypatch).run()
    at.switch_page("views/experiment.py").run()
    at.sidebar.radio[1].set_value("daily").run()
    at.sidebar.radio[2].set_value("always-valid").run()
    at.sidebar.radio[0].set_value(5).run()
    _clean(at)
    assert any("@5" in m for m in at.dataframe[0].value["metric"])


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
    rows = pd.concat([frame.value for frame in at.dataframe[:3]])
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
