"""The dashboard's "Metrics over time" (``dashboard.data.series``) on a rolled-up demo with
pre-exposure data: each day's lift is the one ``tracker report --day DAY`` computes, CUPED
on or off, daily or cumulative, fixed-horizon or always-valid; a day the rollup stored no
covariate sums for stays unadjusted and says so."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pandas as pd
import pytest
import sqlalchemy as sa
import streamlit as st

from dashboard import components, data
from tracker.demo import DemoConfig, load
from tracker.report import report
from tracker.store import computed
from tracker.store.rollup_tables import RollupCovariateSums

SMALL = DemoConfig(days=3, users=300, items=300, start=datetime(2026, 11, 1, tzinfo=UTC))
NOW = datetime(2026, 11, 20, tzinfo=UTC)
FIELDS = {"relative_lift": "relative_lift", "ci_low": "relative_lift_ci_low",
          "ci_high": "relative_lift_ci_high", "p_value": "p_value",
          "variance_reduction": "variance_reduction"}
"""Series lift column -> the report row's field it must equal."""


@pytest.fixture
def demo(tracker, db_url, monkeypatch):
    """The demo rolled up (its users have 14 days of pre-exposure interactions), and the
    dashboard's reads pointed at it with empty caches."""
    load(tracker, SMALL)
    tracker.rollup(SMALL.key, now=NOW)
    monkeypatch.setenv("TRACKER_DATABASE_URL", db_url)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield tracker
    st.cache_data.clear()
    st.cache_resource.clear()


def _report_rows(engine, cumulative: bool, day, intervals: str, cuped: bool, metric: str,
                 k: int | None) -> tuple[bool, dict[str, dict]]:
    # ndcg@5 as a guardrail: uncorrected, so its row's intervals are at the nominal level the
    # chart draws (a secondary's are redrawn at its Benjamini-Hochberg level since issue 30)
    card = report(engine, SMALL.key, cumulative=cumulative, as_of=day, intervals=intervals,
                  cuped=cuped, now=NOW, guardrails={f"{metric}@{k}": 0.5})
    return card.cuped, {r["arm"]: r for r in card.metrics
                        if (r["metric"], r["k"]) == (metric, k) and not r["control"]}


def _assert_same(row: dict, expected: dict) -> None:
    """The series' lift fields equal the report row's (an unbounded interval end is null:
    None in the report, None or NaN in the frame)."""
    def number(value):
        return float("nan") if value is None else value

    assert {c: number(row[c]) for c in FIELDS} == pytest.approx(
        {c: number(expected[f]) for c, f in FIELDS.items()}, rel=1e-12, abs=1e-15,
        nan_ok=True)


def _lifts_by_day(lifts: pd.DataFrame) -> dict:
    return {day: {r["arm"]: r for r in group.to_dict("records")}
            for day, group in lifts.groupby("day")}


@pytest.mark.parametrize("cumulative", [True, False], ids=["cumulative", "daily"])
@pytest.mark.parametrize("intervals", ["fixed_horizon", "sequential"])
@pytest.mark.parametrize("cuped", [True, False], ids=["cuped-on", "cuped-off"])
def test_each_days_lift_is_the_reports_lift_for_that_day(demo, cumulative, intervals, cuped):
    # ndcg@5 read as a guardrail (intervals at the nominal level, as the chart draws them)
    series = data.series(SMALL.key, "ndcg", 5, cumulative, intervals, 0.95, cuped)
    days = sorted(set(computed.metric_table(demo.engine, SMALL.key, cumulative)["day"]))
    shown = _lifts_by_day(series.lifts)
    assert sorted(shown) == days
    for day in days:
        adjusted, expected = _report_rows(demo.engine, cumulative, day, intervals, cuped,
                                          "ndcg", 5)
        assert adjusted == cuped  # the demo has covariate sums on every day
        assert sorted(shown[day]) == sorted(expected)
        for arm, row in shown[day].items():
            assert row["adjusted"] == cuped
            _assert_same(row, expected[arm])
    removed = series.lifts["variance_reduction"]
    assert (removed > 0).all() if cuped else (removed == 0).all()


def test_a_primarys_lift_and_p_value_are_the_reports_before_the_correction(demo):
    series = data.series(SMALL.key, "ndcg", 10, True, "fixed_horizon", 0.95, True)
    for day, arms in _lifts_by_day(series.lifts).items():
        _, expected = _report_rows(demo.engine, True, day, "fixed_horizon", True, "ndcg", 10)
        for arm, row in arms.items():
            assert expected[arm]["primary"]
            assert (row["relative_lift"], row["p_value"]) == pytest.approx(
                (expected[arm]["relative_lift"], expected[arm]["p_value"]), rel=1e-12)


@pytest.mark.parametrize("cumulative", [True, False], ids=["cumulative", "daily"])
def test_adjusted_arms_are_the_lifts_terms_and_keep_their_own_means(demo, cumulative):
    series = data.series(SMALL.key, "hit_rate", 10, cumulative, "fixed_horizon", 0.95, True)
    values = {(r["day"], r["arm"]): r for r in series.values.to_dict("records")}
    table = computed.metric_table(demo.engine, SMALL.key, cumulative)
    raw = table[(table["metric"] == "hit_rate") & (table["k"] == 10)]
    for r in raw.itertuples(index=False):
        assert values[(r.day, r.arm)]["unadjusted_mean"] == pytest.approx(r.mean, rel=1e-12)
    moved = 0
    for lift in series.lifts.to_dict("records"):
        arm, control = values[(lift["day"], lift["arm"])], values[(lift["day"], "control")]
        assert arm["adjusted"] and control["adjusted"]
        assert (arm["mean"] - control["mean"]) / abs(control["mean"]) == pytest.approx(
            lift["relative_lift"], rel=1e-9)
        assert arm["ci_low"] < arm["mean"] < arm["ci_high"]
        moved += arm["mean"] != pytest.approx(arm["unadjusted_mean"], rel=1e-9)
    assert moved  # the adjustment moves the arms' estimates


def _drop_covariate_sums(engine, day, cumulative: bool) -> None:
    """Remove one day's stored covariate sums: the state of a day rolled up by a version
    without CUPED (the migration that added the table left earlier days without sums)."""
    with engine.begin() as conn:
        conn.execute(sa.delete(RollupCovariateSums).where(
            RollupCovariateSums.day == day, RollupCovariateSums.cumulative.is_(cumulative)))


@pytest.mark.parametrize("cumulative", [True, False], ids=["cumulative", "daily"])
def test_a_day_without_covariate_sums_is_unadjusted_and_says_so(demo, cumulative):
    days = sorted(set(computed.metric_table(demo.engine, SMALL.key, cumulative)["day"]))
    bare = days[1]
    _drop_covariate_sums(demo.engine, bare, cumulative)
    series = data.series(SMALL.key, "ndcg", 5, cumulative, "fixed_horizon", 0.95, True)
    assert series.adjusted_days == len(days) - 1 and series.days == len(days)
    for frame in (series.values, series.lifts):
        assert frame.set_index("day")["adjusted"].groupby(level=0).all().to_dict() == {
            day: day != bare for day in days}
    shown = _lifts_by_day(series.lifts)
    for day in days:
        adjusted, expected = _report_rows(demo.engine, cumulative, day, "fixed_horizon",
                                          day != bare, "ndcg", 5)
        assert adjusted == (day != bare)
        for arm, row in shown[day].items():
            _assert_same(row, expected[arm])
    plain = series.values[series.values["day"] == bare]
    assert list(plain["mean"]) == pytest.approx(list(plain["unadjusted_mean"]), rel=1e-12)
    caption = components.series_caption(series, "ndcg@5", cumulative, "fixed-horizon", 0.95,
                                        True)
    assert f"CUPED on: {len(days) - 1} of {len(days)} days regression-adjusted" in caption
    assert "the others have no usable pre-exposure data and stay unadjusted" in caption


def test_the_csv_carries_each_rows_adjustment_and_its_lift(demo):
    _drop_covariate_sums(demo.engine, SMALL.start.date(), True)
    series = data.series(SMALL.key, "ndcg", 10, True, "sequential", 0.95, True)
    csv = pd.read_csv(io.StringIO(series.to_frame().to_csv(index=False)))
    assert {"adjusted", "unadjusted_mean", "relative_lift", "relative_lift_ci_low",
            "relative_lift_ci_high", "p_value", "variance_reduction"} <= set(csv.columns)
    assert len(csv) == len(series.values)
    lifts = {(str(r["day"]), r["arm"]): r for r in series.lifts.to_dict("records")}
    for row in csv.to_dict("records"):
        lift = lifts.get((row["day"], row["arm"]))
        assert row["adjusted"] == (row["day"] != SMALL.start.date().isoformat())
        if lift is None:
            assert row["arm"] == "control" and pd.isna(row["relative_lift"])
        else:
            assert row["relative_lift"] == pytest.approx(lift["relative_lift"], rel=1e-12)


def test_an_experiment_without_covariates_charts_unadjusted_and_says_why(demo):
    # the next rollup drops every sum (cohort, which reads the pre-period too, leaves)
    demo.update_experiment(SMALL.key, cuped_days=0, segments=["surface:list"])
    demo.rollup(SMALL.key, now=NOW)
    series = data.series(SMALL.key, "ndcg", 5, True, "fixed_horizon", 0.95, True)
    plain = data.series(SMALL.key, "ndcg", 5, True, "fixed_horizon", 0.95, False)
    assert series.days and series.adjusted_days == 0
    pd.testing.assert_frame_equal(series.lifts, plain.lifts)
    pd.testing.assert_frame_equal(series.values, plain.values)
    assert "no day has usable pre-exposure data" in components.series_caption(
        series, "ndcg@5", True, "fixed-horizon", 0.95, True)


def test_a_set_level_metric_has_no_lift_and_its_caption_claims_no_adjustment(demo):
    series = data.series(SMALL.key, "coverage", 10, True, "fixed_horizon", 0.95, True)
    assert series.kind == "set" and series.lifts.empty and not series.values["adjusted"].any()
    caption = components.series_caption(series, "coverage@10", True, "fixed-horizon", 0.95,
                                        True)
    assert "set-level metric" in caption and "CUPED on" not in caption


def test_the_day_legend_draws_its_symbols_in_a_visible_colour(monkeypatch):
    """Vega-Lite draws the "day" (shape) legend's symbols with the points' conditional
    fill's constant: it was white, so the legend showed "final" and "provisional" beside
    nothing (the review's screenshot). That constant now is a grey of both themes."""
    drawn = []
    monkeypatch.setattr(st, "altair_chart", lambda chart, **_: drawn.append(chart))
    values = pd.DataFrame({
        "day": pd.to_datetime(["2026-11-01", "2026-11-02"] * 2, utc=True),
        "arm": ["a", "a", "b", "b"], "mean": [.1, .2, .3, .4], "ci_low": [0, .1, .2, .3],
        "ci_high": [.2, .3, .4, .5], "provisional": [False, True, False, True],
        "cuped": ["off"] * 4, "unadjusted_mean": [.1, .2, .3, .4]})
    components.metric_chart(values, "ndcg@10", {"a": "#1f77b4", "b": "#ff7f0e"})
    (points,) = [layer for layer in drawn[0].to_dict()["layer"]
                 if "shape" in layer.get("encoding", {})]
    fill = points["encoding"]["fill"]["value"].lower()
    assert fill not in ("white", "#fff", "#ffffff", "transparent", "none")
    assert points["encoding"]["shape"]["legend"]["title"] == "day"
