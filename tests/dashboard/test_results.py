"""The experiment page's pure layout: arm colours, the results table's order and rows, the
interval bars centred on zero, and the decision / health markup (no database, no Streamlit
session: these are functions from scorecard rows to layout)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard import components
from dashboard.results import (
    MIN_BAR,
    VERDICT_COLOURS,
    ResultRow,
    Section,
    bar,
    margin_at,
    result_rows,
    sections,
    table_html,
)


def _row(metric, k, arm, *, control=False, role="secondary", group="ranking", direction="higher",
         mean=1.0, rel=(None, None, None), verdict="inconclusive", **extra):
    point, low, high = rel
    row = {"metric": metric, "k": k, "arm": arm, "control": control, "group": group,
           "direction": direction, "mean": mean, "kind": "user", **extra}
    if not control:
        row.update(relative_lift=point, relative_lift_ci_low=low, relative_lift_ci_high=high,
                   lift=None, lift_ci_low=None, lift_ci_high=None, p_value_adjusted=0.01,
                   verdict=verdict, primary=role == "primary")
    row["role"] = role
    return row


def _result(low, high, point=None, *, relative=True, verdict="inconclusive"):
    return ResultRow("ndcg@10", "ndcg", "b", "secondary", "ranking", "higher", 1.0, 1.1, "",
                     relative, low, high, point, "", verdict)


# --- arm colours ---------------------------------------------------------------------------

@given(st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=9, unique=True),
       st.data())
def test_each_arm_keeps_one_colour_control_grey_treatments_distinct(arms, data):
    control = data.draw(st.sampled_from(arms))
    colours = components.arm_colours(arms, control)
    assert colours[control] == components.CONTROL_COLOUR
    treated = [colours[a] for a in arms if a != control]
    assert len(set(treated)) == len(treated)  # up to eight treatment arms: all distinct
    assert not set(treated) & {components.CONTROL_COLOUR, VERDICT_COLOURS["better"],
                               VERDICT_COLOURS["worse"]}
    assert components.arm_colours(list(arms), control) == colours  # same in every chart


# --- bars centred on zero ------------------------------------------------------------------

@pytest.mark.parametrize(("low", "high", "side"), [
    pytest.param(0.02, 0.10, "right", id="interval-above-zero-lies-right-of-centre"),
    pytest.param(-0.10, -0.02, "left", id="interval-below-zero-lies-left-of-centre"),
    pytest.param(-0.03, 0.05, "across", id="interval-crossing-zero-covers-the-centre"),
])
def test_bar_sits_on_the_side_of_zero_its_interval_is(low, high, side):
    shape = bar(_result(low, high, (low + high) / 2), half_width=0.2)
    where = ("right" if shape.low > 50 else "left" if shape.high < 50 else "across")
    assert where == side
    assert shape.low < shape.point < shape.high


@given(st.floats(-5, 5), st.floats(-5, 5), st.floats(0.01, 10))
def test_bar_covers_the_centre_exactly_when_the_interval_holds_zero(a, b, extra):
    low, high = min(a, b), max(a, b)
    shape = bar(_result(low, high), half_width=max(abs(low), abs(high)) + extra)
    assert (shape.low <= 50 <= shape.high) == (low <= 0 <= high)
    assert 0 <= shape.low <= shape.high <= 100 and not shape.clipped


def test_bar_beyond_the_axis_is_clipped_and_says_so():
    shape = bar(_result(0.1, 3.0, 0.5), half_width=1.0)
    assert shape.high == 100 and shape.clipped and shape.point == 75


def test_absolute_interval_gets_its_own_axis_and_no_interval_no_bar():
    own = bar(_result(0.5, 1.0, relative=False), half_width=0.01)  # 0.01 is the % axis
    assert 50 < own.low < own.high < 100
    assert bar(_result(None, None), half_width=0.2) is None


# --- rows and sections ---------------------------------------------------------------------

CARD = [
    _row("hit_rate", 10, "a", control=True, group="online", mean=0.30),
    _row("hit_rate", 10, "b", role="primary", group="online", mean=0.36,
         rel=(0.2, 0.1, 0.3), verdict="better"),
    _row("song_clicks", None, "a", control=True, group="online", direction="lower", mean=36),
    _row("song_clicks", None, "b", role="guardrail", group="online", direction="lower",
         mean=33, rel=(-0.09, -0.13, -0.05), verdict="better"),
    _row("precision", 5, "a", control=True),
    _row("precision", 5, "b", role="secondary", rel=(0.1, -0.05, 0.2)),
    _row("precision", 10, "a", control=True, mean=0.04),
    _row("precision", 10, "b", role="secondary", mean=0.05, rel=(0.3, 0.2, 0.4),
         verdict="better"),
    _row("ndcg", 5, "a", control=True),
    _row("ndcg", 5, "b", role="primary", rel=(0.1, 0.05, 0.2), verdict="better"),
    _row("gini", 10, "a", control=True, group="beyond_accuracy", direction="lower"),
    _row("gini", 10, "b", role="secondary", group="beyond_accuracy", direction="lower",
         rel=(-0.4, None, None), verdict=None),
]


def test_sections_put_primaries_first_then_guardrails_then_groups_in_catalogue_order():
    parts = sections(result_rows(CARD, 10))
    assert [p.title for p in parts] == ["Primary metrics", "Guardrails", "Ranking",
                                        "Beyond accuracy"]
    assert [r.label for r in parts[0].rows] == ["hit_rate@10", "ndcg@5"]
    assert [r.label for r in parts[1].rows] == ["song_clicks"]


def test_rows_carry_their_controls_value_and_follow_the_cutoff():
    rows = {r.label: r for r in result_rows(CARD, 10)}
    assert "precision@5" not in rows  # a secondary metric at another cutoff
    assert "ndcg@5" in rows  # a primary is shown whatever the cutoff
    assert (rows["precision@10"].control_value, rows["precision@10"].value) == (0.04, 0.05)
    assert rows["song_clicks"].control_value == 36  # a metric without a cutoff


def test_table_colours_bars_by_verdict_and_marks_the_direction():
    part = next(p for p in sections(result_rows(CARD, 10)) if p.title == "Guardrails")
    markup = table_html(part, {"a": "#8c959f", "b": "#0969da"}, "a")
    assert f"background:{VERDICT_COLOURS['better']}" in markup  # fewer clicks: better
    assert "song_clicks</b><span class=\"tr-dir\" title=\"lower is better\">↓" in markup
    ranking = next(p for p in sections(result_rows(CARD, 10)) if p.title == "Beyond accuracy")
    assert "set-level: no test" in table_html(ranking, {}, "a")


# --- decision and health -------------------------------------------------------------------

@pytest.mark.parametrize(("outcome", "colour", "label"), [
    pytest.param("ship", "#1a7f37", "Ship", id="ship-is-green"),
    pytest.param("do_not_ship", "#cf222e", "Do not ship", id="do-not-ship-is-red"),
    pytest.param("keep_running", "#9a6700", "Keep running", id="keep-running-is-amber"),
    pytest.param("no_detectable_effect", "#57606a", "No detectable effect",
                 id="no-detectable-effect-is-grey"),
])
def test_decision_card_shows_outcome_in_its_colour_with_every_reason(outcome, colour, label):
    markup = components.decision_html(
        {"arm": "b", "outcome": outcome, "reasons": ["first <reason>", "second"]}, "#0969da")
    assert f"border-left:6px solid {colour}" in markup and label in markup
    assert re.findall(r"<li>(.*?)</li>", markup) == ["first &lt;reason&gt;", "second"]


def test_a_decision_read_on_intent_to_treat_says_so_on_its_card():
    decision = {"arm": "b", "outcome": "keep_running", "reasons": ["first"]}
    plain = components.decision_html({**decision, "population": "per_protocol"}, "#0969da")
    assert re.findall(r"<li>(.*?)</li>", plain) == ["first"]
    itt = components.decision_html({**decision, "population": "intent_to_treat"}, "#0969da")
    assert re.findall(r"<li>(.*?)</li>", itt) == ["first", components.ITT_NOTE]


def test_checklist_has_one_icon_per_item_in_its_status_colour():
    items = [{"check": "srm", "status": "pass", "message": "split as declared"},
             {"check": "sample", "status": "warn", "message": "fewer than 100 users"},
             {"check": "crossover", "status": "fail", "message": "12% saw two arms"},
             {"check": "provisional", "status": "info", "message": "1 provisional day"}]
    markup = components.checklist_html(items, "fail")
    icons = re.findall(r'title="(\w+)" style="[^"]*background:(#\w+)', markup)
    assert icons == [(i["status"], components.CHECKS[i["status"]][1]) for i in items]
    assert "failing" in markup


@pytest.mark.parametrize(("low", "high"), [
    pytest.param(0.0001, 0.0002, id="thin-interval-above-zero-stays-right-of-zero"),
    pytest.param(-0.0002, -0.0001, id="thin-interval-below-zero-stays-left-of-zero"),
    pytest.param(-0.0001, 0.0001, id="thin-interval-holding-zero-still-covers-it"),
])
def test_thin_interval_is_drawn_wide_enough_to_see_on_its_side_of_zero(low, high):
    shape = bar(_result(low, high, (low + high) / 2), half_width=1.0)
    assert shape.high - shape.low >= MIN_BAR - 1e-9
    assert (shape.low <= 50 <= shape.high) == (low <= 0 <= high)


# --- guardrails, failing health, set-level rows ----------------------------------------------

@pytest.mark.parametrize(("ok", "direction", "low", "high", "state"), [
    pytest.param(True, "higher", -0.01, 0.03, "holds", id="shown-non-inferior-holds"),
    pytest.param(False, "higher", -0.09, -0.06, "fails",
                 id="interval-wholly-below-the-margin-fails"),
    pytest.param(False, "higher", -0.08, 0.01, "not shown yet",
                 id="interval-across-the-margin-is-not-shown-yet"),
    pytest.param(False, "lower", 0.06, 0.09, "fails",
                 id="lower-is-better-interval-wholly-above-the-margin-fails"),
    pytest.param(None, "higher", None, None, "not shown yet",
                 id="no-test-is-not-shown-yet"),
])
def test_a_guardrail_row_reads_holds_fails_or_not_shown_yet(ok, direction, low, high, state):
    row = _row("song_clicks", None, "b", role="guardrail", direction=direction,
               rel=(None if low is None else (low + high) / 2, low, high),
               guardrail_margin=0.05, guardrail_ok=ok)
    control = _row("song_clicks", None, "a", control=True, role="guardrail")
    (shown,) = result_rows([control, row], 10)
    assert shown.guard == state and shown.shown == state
    html = table_html(sections([shown])[0], {"a": "#888", "b": "#09d"}, "a")
    assert f"guardrail {state}" in html


def test_the_guardrail_margin_is_drawn_on_the_loss_side_of_zero():
    row = _row("song_clicks", None, "b", role="guardrail", rel=(-0.01, -0.04, 0.02),
               guardrail_margin=0.05, guardrail_ok=False)
    (shown,) = result_rows([_row("song_clicks", None, "a", control=True), row], 10)
    part = sections([shown])[0]  # the axis holds the margin: ±1.1 x 5%
    assert part.half_width == pytest.approx(0.055)
    assert margin_at(shown, 0.1) == pytest.approx(25.0)  # -5% on a ±10% axis
    at = margin_at(shown, part.half_width)
    assert at == pytest.approx(50 - 50 / 1.1)
    assert f'class="tr-margin" style="left:{at:.2f}%"' in table_html(part, {}, "a")
    lower = Section(part.title, (replace(shown, direction="lower"),), 0.1)
    assert margin_at(lower.rows[0], 0.1) == pytest.approx(75.0)  # a loss is an increase


def test_failing_health_greys_every_row_and_reads_untrusted():
    row = _row("ndcg", 10, "b", role="primary", rel=(0.2, 0.1, 0.3), verdict="better")
    part = sections(result_rows([_row("ndcg", 10, "a", control=True), row], 10))[0]
    trusted = table_html(part, {}, "a")
    grey = table_html(part, {}, "a", untrusted=True)
    assert ">better<" in trusted and VERDICT_COLOURS["better"] in trusted
    assert ">better<" not in grey and ">untrusted<" in grey and "tr-grey" in grey
    assert VERDICT_COLOURS["better"] not in grey


def test_a_set_level_row_shows_its_absolute_change():
    control = {**_row("coverage", 10, "a", control=True, mean=0.002), "kind": "set"}
    treated = {**_row("coverage", 10, "b", mean=0.1254, verdict=None), "kind": "set",
               "relative_lift": 61.7}
    (shown,) = result_rows([control, treated], 10)
    assert shown.change == "+0.1234 abs." and "%" not in shown.change


def test_a_metric_zero_for_control_by_definition_is_descriptive_without_a_verdict():
    control = _row("unexpectedness", 10, "a", control=True, mean=0.0)
    treated = _row("unexpectedness", 10, "b", mean=0.42, rel=(None, None, None),
                   verdict="better", lift=0.42, lift_ci_low=0.4, lift_ci_high=0.44)
    (shown,) = result_rows([control, treated], 10)
    assert shown.shown == "descriptive" and shown.change == "+0.42 abs."
    html = table_html(sections([shown])[0], {}, "a", untrusted=True)
    assert ">better<" not in html and "descriptive" in html
    assert "0 for control by definition" in html
