"""The results table of the experiment page, after GrowthBook's: one row per metric x treatment
arm with the control and variant values, the relative change and its interval drawn as a bar
centred on zero, coloured by the row's verdict (already in the metric's direction).

Pure layout over the scorecard's rows (:func:`tracker.report.scorecard`): no query, no
statistic. The interval drawn is the decisive one (:func:`tracker.report.shown_interval`'s):
the relative lift's, or the difference's when the relative one is unbounded, so the bar never
contradicts the verdict beside it. The page renders the result as HTML so that it wraps to
the window (no horizontal scrolling at 1280 px).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tracker.metrics import catalog
from tracker.report import format_p, shown_interval
from tracker.report.render import guardrail_state

ROLES = ("primary", "guardrail", "secondary")
ROLE_TITLES = {"primary": "Primary metrics", "guardrail": "Guardrails"}
ARROWS = {"higher": "↑", "lower": "↓"}
VERDICT_COLOURS = {"better": "#1a7f37", "worse": "#cf222e", "inconclusive": "#8c959f",
                   None: "#8c959f", "holds": "#1a7f37", "fails": "#cf222e",
                   "not shown yet": "#9a6700", "untrusted": "#8c959f", "descriptive": "#8c959f"}
"""Bar and verdict colour: green better (a guardrail that holds), red worse (one that
fails), grey inconclusive (or no test, or untrusted), amber a guardrail not shown yet. Each
reads on a light and a dark background alike."""


GAP = 0.5
"""Least distance, in percent of the bar's width, between zero and an interval excluding it."""
MIN_BAR = 3.0
"""Least drawn width of an interval, in percent, so its colour shows around the point's tick."""


@dataclass(frozen=True)
class Bar:
    """An interval on a row's axis, in percent of the bar's width: zero sits at 50 %.

    ``low``/``high``/``point`` are clipped to [0, 100]; ``clipped`` says an end ran off the
    axis (drawn as an open end)."""

    low: float
    high: float
    point: float | None
    clipped: bool


@dataclass(frozen=True)
class ResultRow:
    """One metric x treatment arm of the results table."""

    label: str
    metric: str
    arm: str
    role: str
    group: str
    direction: str | None
    control_value: float | None
    value: float | None
    change: str
    relative: bool
    low: float | None
    high: float | None
    point: float | None
    p_adjusted: str
    verdict: str | None
    guard: str | None = None  # a guardrail's state: holds / fails / not shown yet
    margin: float | None = None  # a guardrail's tolerated relative loss

    @property
    def shown(self) -> str | None:
        """What the verdict column says: the guardrail's state for a guardrail row, else the
        verdict."""
        return self.guard if self.guard is not None else self.verdict


@dataclass(frozen=True)
class Section:
    """Rows under one heading, sharing one axis: ``half_width`` is the largest |interval end|
    among the section's relative intervals and guardrail margins, so every margin is drawn
    (each absolute interval gets its own axis)."""

    title: str
    rows: tuple[ResultRow, ...]
    half_width: float | None


def _label(metric: str, k: int | None) -> str:
    return metric if k is None else f"{metric}@{k}"


def result_rows(metrics: Iterable[Mapping[str, Any]], k: int | None) -> list[ResultRow]:
    """The treatment rows at cutoff ``k`` (primaries and guardrails at any cutoff, metrics
    without one always), each with its control's value, in the scorecard's order."""
    metrics = list(metrics)
    control = {(r["metric"], r["k"]): r["mean"] for r in metrics if r["control"]}
    out = []
    for r in metrics:
        role = r["role"]
        if r["control"] or (r["k"] not in (None, k) and role == "secondary"):
            continue
        relative = r.get("relative_lift_ci_low") is not None
        low, high, point = ((r.get("relative_lift_ci_low"), r.get("relative_lift_ci_high"),
                             r.get("relative_lift")) if relative else
                            (r.get("lift_ci_low"), r.get("lift_ci_high"), r.get("lift")))
        change = shown_interval(r)
        base = control.get((r["metric"], r["k"]))
        if not change and r["mean"] is not None and base is not None:  # set-level
            change = f"{r['mean'] - base:+.4g} abs."  # a relative change of a near-0 base
        entry = catalog.CATALOG.get(r["metric"])
        if entry is not None and entry.zero_for_control:  # descriptive: no test, no verdict
            out.append(ResultRow(
                _label(r["metric"], r["k"]), r["metric"], r["arm"], role, r.get("group") or "",
                r.get("direction"), base, r["mean"],
                "" if r["mean"] is None or base is None else f"{r['mean'] - base:+.4g} abs.",
                False, None, None, None, "", "descriptive"))
            continue
        out.append(ResultRow(
            _label(r["metric"], r["k"]), r["metric"], r["arm"], role, r.get("group") or "",
            r.get("direction"), base, r["mean"], change,
            relative, low, high, point,
            "" if r.get("p_value_adjusted") is None else format_p(r["p_value_adjusted"]),
            r.get("verdict"), guardrail_state(r), r.get("guardrail_margin")))
    return out


def _group_title(group: str) -> str:
    return catalog.Group(group).label if group else "Other"


def sections(rows: Iterable[ResultRow]) -> list[Section]:
    """Primary metrics first, guardrails next, then the secondary metrics by catalogue group
    (in :data:`tracker.metrics.catalog.GROUPS` order); empty sections are left out."""
    rows = list(rows)
    parts = [(ROLE_TITLES[role], [r for r in rows if r.role == role])
             for role in ("primary", "guardrail")]
    groups = [g.value for g in catalog.GROUPS]
    for group in [*groups, *sorted({r.group for r in rows} - set(groups))]:
        parts.append((_group_title(group),
                      [r for r in rows if r.role == "secondary" and r.group == group]))
    return [Section(title, tuple(members), _half_width(members))
            for title, members in parts if members]


def _half_width(rows: Iterable[ResultRow]) -> float | None:
    ends = [abs(v) for r in rows if r.relative for v in (r.low, r.high, r.margin)
            if v is not None and v == v]  # a guardrail's margin stays on the axis
    return max(ends) * 1.1 if ends and max(ends) > 0 else None


def bar(row: ResultRow, half_width: float | None) -> Bar | None:
    """Where ``row``'s interval sits on an axis from -``half_width`` (0 %) to +``half_width``
    (100 %), zero at 50 %; an absolute interval uses its own axis. None without an interval.
    An interval thinner than :data:`MIN_BAR` is drawn that wide around its middle; one that
    excludes zero stays at least :data:`GAP` away from it, so the bar covers the zero line
    exactly when the interval holds zero."""
    if row.low is None or row.high is None:
        return None
    scale = half_width if row.relative and half_width else max(abs(row.low), abs(row.high)) * 1.1
    if not scale:
        return None

    def at(value: float) -> float:
        return 50 + 50 * value / scale

    low, high = at(row.low), at(row.high)
    clipped = low < 0 or high > 100
    if high - low < MIN_BAR:  # too thin to see: widen around its middle
        middle = (low + high) / 2
        low, high = middle - MIN_BAR / 2, middle + MIN_BAR / 2
    if row.low > 0:  # excludes zero: never drawn touching it, however close it is
        shift = max(0.0, 50 + GAP - low)
        low, high = low + shift, high + shift
    elif row.high < 0:
        shift = max(0.0, high - (50 - GAP))
        low, high = low - shift, high - shift
    point = None if row.point is None else min(100.0, max(0.0, at(row.point)))
    return Bar(max(0.0, low), min(100.0, high), point, clipped)


def _num(value: float | None) -> str:
    if value is None or value != value:
        return "—"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"


def margin_at(row: ResultRow, half_width: float | None) -> float | None:
    """Where a guardrail's margin (the largest tolerated loss) sits on the row's relative
    axis, in percent of the bar's width: left of zero when higher is better, right of it when
    lower is better; None without a margin, on an absolute axis, or off the axis."""
    if row.margin is None or not row.relative or not half_width:
        return None
    loss = row.margin if row.direction == "lower" else -row.margin
    at = 50 + 50 * loss / half_width
    return at if 0 <= at <= 100 else None


def _bar_html(row: ResultRow, half_width: float | None, untrusted: bool = False) -> str:
    shape = bar(row, half_width)
    zero = '<div class="tr-zero"></div>'
    margin = margin_at(row, half_width)
    line = ("" if margin is None else
            f'<div class="tr-margin" style="left:{margin:.2f}%" title="guardrail margin '
            f'{-row.margin if row.direction != "lower" else row.margin:+.0%}"></div>')
    if shape is None:
        note = {None: "set-level: no test", "descriptive": "0 for control by definition"
                }.get(row.verdict, "no interval")
        return f'<div class="tr-axis">{zero}{line}<span class="tr-none">{note}</span></div>'
    colour = VERDICT_COLOURS.get("untrusted" if untrusted else row.shown, VERDICT_COLOURS[None])
    tick = ("" if shape.point is None else
            f'<div class="tr-tick" style="left:calc({shape.point:.2f}% - 1px)"></div>')
    scale = "" if row.relative else '<span class="tr-abs">abs.</span>'
    hint = html.escape(f"{row.verdict or 'no verdict'}: {row.change}", quote=True)
    return (f'<div class="tr-axis" title="{hint}">{zero}{line}'
            f'<div class="tr-ci" style="left:{shape.low:.2f}%;'
            f'width:{shape.high - shape.low:.2f}%;background:{colour}"></div>'
            f'{tick}{scale}</div>')


def _verdict_html(row: ResultRow, untrusted: bool = False) -> str:
    if row.shown is None:
        return '<span class="tr-v tr-v-none">—</span>'
    if untrusted and row.shown != "descriptive":
        return (f'<span class="tr-v tr-untrusted" title="health is failing: '
                f'{html.escape(row.shown)} is not to be trusted">untrusted</span>')
    prefix = "guardrail " if row.guard is not None else ""
    return (f'<span class="tr-v" style="color:{VERDICT_COLOURS.get(row.shown, "inherit")}">'
            f'{prefix}{html.escape(row.shown)}</span>')


COLUMN_WIDTHS = (17, 13, 8, 8, 17, 26, 11)
"""Percent of the table's width per column: metric, arm, control, variant, change, bar,
verdict. Fixed shares wrap long text instead of scrolling sideways."""
STYLE = """<style>
.tr-table{width:100%;table-layout:fixed;border-collapse:collapse;font-size:0.86rem;
  margin-bottom:0.6rem;color:inherit}
.tr-table th{font-weight:600;opacity:0.75;text-align:left;padding:4px 6px;
  border-bottom:1px solid rgba(128,128,128,0.45);font-size:0.78rem}
.tr-table td{padding:5px 6px;border-bottom:1px solid rgba(128,128,128,0.22);
  vertical-align:middle;overflow-wrap:break-word}
.tr-table td.tr-n,.tr-table th.tr-n{text-align:right;font-variant-numeric:tabular-nums}
.tr-arm{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.tr-p,.tr-muted{display:block;opacity:0.7;font-size:0.75rem}
.tr-muted{display:inline}
.tr-dot{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:5px}
.tr-dir{opacity:0.7;font-weight:700;margin-left:3px}
.tr-axis{position:relative;height:22px;background:rgba(128,128,128,0.12);border-radius:3px}
.tr-zero{position:absolute;left:50%;top:0;bottom:0;width:1px;background:currentColor;
  opacity:0.7}
.tr-margin{position:absolute;top:0;bottom:0;width:0;border-left:2px dashed #cf222e}
.tr-ci{position:absolute;top:6px;height:10px;border-radius:2px;opacity:0.85}
.tr-tick{position:absolute;top:2px;height:18px;width:2px;background:currentColor}
.tr-none{position:absolute;right:4px;top:3px;font-size:0.7rem;opacity:0.7}
.tr-abs{position:absolute;left:4px;top:3px;font-size:0.7rem;opacity:0.7}
.tr-scale{display:flex;justify-content:space-between;font-weight:400}
.tr-v{font-weight:700}
.tr-v-none,.tr-untrusted{color:#8c959f}
.tr-grey td{opacity:0.55}
@media (max-width:640px){
  .tr-table,.tr-table tbody,.tr-table tr,.tr-table td{display:block;width:100%}
  .tr-table colgroup,.tr-table tr.tr-head{display:none}
  .tr-table tr{border:1px solid rgba(128,128,128,0.35);border-radius:6px;
    margin-bottom:8px;padding:4px 8px}
  .tr-table td{border:none;padding:3px 0;text-align:left !important;
    display:flex;gap:8px;align-items:center}
  .tr-table td::before{content:attr(data-label);flex:0 0 34%;opacity:0.7;
    font-size:0.75rem;overflow-wrap:break-word}
  .tr-table td>*{min-width:0}
  .tr-table td>.tr-axis{flex:1 1 auto}
  .tr-arm{white-space:normal}
}
</style>"""


def table_html(section: Section, colours: Mapping[str, str], control: str,
               untrusted: bool = False) -> str:
    """One section as an HTML table (the page adds :data:`STYLE` once); ``untrusted``
    (failing health) greys every bar and verdict and says so."""
    w = section.half_width
    scale = ("" if w is None else
             f'<div class="tr-scale"><span>{-w:+.0%}</span><span>0</span>'
             f'<span>{w:+.0%}</span></div>')
    head = ("<colgroup>" + "".join(f'<col style="width:{w}%">' for w in COLUMN_WIDTHS)
            + "</colgroup>"
            '<tr class="tr-head"><th>metric</th><th>arm</th>'
            f'<th class="tr-n">{html.escape(control)}</th>'
            '<th class="tr-n">variant</th><th>change [interval]</th>'
            f'<th>interval, centred on 0{scale}</th><th>verdict</th></tr>')
    body = []
    for r in section.rows:
        arrow = ARROWS.get(r.direction or "", "")
        dot = colours.get(r.arm, "#57606a")
        p_text = f"p adj. {html.escape(r.p_adjusted)}" if r.p_adjusted else ""
        body.append(
            f'<tr{" class=tr-grey" if untrusted else ""}><td data-label="metric">'
            f'<b>{html.escape(r.label)}</b><span class="tr-dir" title="'
            f'{html.escape(r.direction or "")} is better">{arrow}</span></td>'
            f'<td class="tr-arm" data-label="arm"><span class="tr-dot" '
            f'style="background:{dot}"></span>{html.escape(r.arm)}</td>'
            f'<td class="tr-n" data-label="{html.escape(control)}">{_num(r.control_value)}</td>'
            f'<td class="tr-n" data-label="variant">{_num(r.value)}</td>'
            f'<td data-label="change">{html.escape(r.change)}</td>'
            f'<td data-label="interval">{_bar_html(r, w, untrusted)}</td>'
            f'<td data-label="verdict">{_verdict_html(r, untrusted)}'
            f'<span class="tr-p">{p_text}</span></td></tr>')
    return f'<table class="tr-table">{head}{"".join(body)}</table>'
