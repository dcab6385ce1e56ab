"""Display components: functions from prepared data to Streamlit elements (no queries, no
formulas: the numbers come from :mod:`dashboard.data`)."""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import UTC, datetime
from html import escape
from urllib.parse import quote

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import results as results_layout
from tracker.metrics import catalog
from tracker.report import Scorecard, format_p, render_crossover, shown_interval
from tracker.report.series import MetricSeries
from tracker.stats.health import CheckStatus, ago, data_lag_hours, freshness_item

GROUPS = tuple(group.label for group in catalog.GROUPS) + ("Other",)
MARKERS = {"better": "▲ better", "worse": "▼ worse", "inconclusive": "· inconclusive",
           None: "— (set-level: no test)"}
DIRECTIONS = {"higher": "↑ higher", "lower": "↓ lower", None: ""}


def title(name: str) -> None:
    """A page title made of stored text (an experiment's free-text name), shown as its very
    characters: escaped HTML in one HTML block, which Markdown leaves alone (no emphasis, link,
    image, bare-URL autolink, Streamlit directive or LaTeX can come from it); ``st.title``
    would render it as Markdown."""
    st.markdown(f"<h1>{escape(' '.join(name.split()))}</h1>", unsafe_allow_html=True)


def code(value: object) -> str:
    """Stored text (a key, an arm) for an element that renders Markdown (``st.caption``,
    ``st.info``, labels): a code span, which Markdown shows literally (no emphasis, emoji
    code or autolink inside), fenced by more backticks than any run inside it.

    >>> code("a`b")
    '`` a`b ``'
    """
    value = " ".join(str(value).split())
    fence = "`" * (max((len(run) for run in re.findall("`+", value)), default=0) + 1)
    return f"{fence} {value} {fence}"


def _fmt(value, pattern="{:.4f}") -> str:
    return "" if value is None or value != value else pattern.format(value)


def _interval(low, high, pattern="{:.4f}") -> str:
    if low is None or high is None:
        return ""
    return f"[{pattern.format(low)}, {pattern.format(high)}]"


PALETTE = ("#0969da", "#e16f24", "#8250df", "#1b7c83", "#bf3989", "#9a6700", "#0550ae",
           "#6639ba")
"""Treatment arms' colours, by arm order: distinguishable hues, none green or red (those mean
better and worse); control is always :data:`CONTROL_COLOUR`."""
CONTROL_COLOUR = "#8c959f"

OUTCOMES = {
    "ship": ("Ship", "#1a7f37", "#dafbe1", "✔"),
    "do_not_ship": ("Do not ship", "#cf222e", "#ffebe9", "✖"),
    "keep_running": ("Keep running", "#9a6700", "#fff8c5", "↻"),
    "no_detectable_effect": ("No detectable effect", "#57606a", "#f0f2f4", "○"),
}
"""Outcome -> (label, colour, background, icon): ship green, do not ship red, keep running
amber, no detectable effect grey."""
CHECKS = {"pass": ("✔", "#1a7f37"), "warn": ("!", "#9a6700"), "fail": ("✖", "#cf222e"),
          "info": ("i", "#0969da")}
"""Health item status -> (icon, colour)."""
HEALTH_WORDS = {"pass": "healthy", "warn": "warnings", "fail": "failing", "info": "healthy"}


def arm_colours(arms: list[str], control: str) -> dict[str, str]:
    """One colour per arm, the same in every chart and table: control grey, the treatment arms
    :data:`PALETTE` in arm order (cycling past eight arms)."""
    treated = [a for a in arms if a != control]
    return {a: CONTROL_COLOUR if a == control else PALETTE[treated.index(a) % len(PALETTE)]
            for a in arms}


def outcome_badge(outcome: str | None) -> str:
    """A decision's outcome as a coloured HTML pill (grey "no decision" when unknown)."""
    label, colour, _, icon = OUTCOMES.get(
        outcome or "", ("No decision", "#57606a", "#f0f2f4", "—"))
    return (f'<span style="display:inline-block;padding:1px 9px;border-radius:10px;'
            f'background:{tint(colour)};color:{colour};border:1px solid {colour};'
            f'font-weight:600;white-space:nowrap">{icon} {escape(label)}</span>')


def tint(colour: str, share: int = 16) -> str:
    """A background of ``colour`` at ``share`` percent over whatever the theme's background
    is (light or dark), so a card reads in both."""
    return f"color-mix(in srgb, {colour} {share}%, transparent)"


def health_badge(status: str | None) -> str:
    """The checklist's overall status as a coloured HTML pill."""
    icon, colour = CHECKS.get(status or "", ("?", "#57606a"))
    word = HEALTH_WORDS.get(status or "", "unknown")
    return (f'<span style="display:inline-block;padding:1px 9px;border-radius:10px;'
            f'color:{colour};border:1px solid {colour};font-weight:600;white-space:nowrap">'
            f'{icon} {word}</span>')


ITT_NOTE = ("Read on intent-to-treat (every user in the arm of their first exposure): "
            "per-protocol disagrees, see Crossover below")


def decision_html(decision: dict, colour: str) -> str:
    """One treatment arm's decision as a card: the arm, the outcome in its colour, and the
    reasons, one per line (and :data:`ITT_NOTE` when it read intent-to-treat)."""
    label, fg, _, icon = OUTCOMES.get(decision["outcome"],
                                      ("No decision", "#57606a", "#f0f2f4", "—"))
    said = list(decision.get("reasons", []))
    if decision.get("population") == "intent_to_treat":
        said.append(ITT_NOTE)
    reasons = "".join(f"<li>{escape(r)}</li>" for r in said)
    return (f'<div class="tr-decision" style="border-left:6px solid {fg};background:'
            f'{tint(fg)};padding:10px 14px;border-radius:6px;margin-bottom:8px">'
            f'<div style="font-size:0.85rem"><span style="display:inline-block;'
            f'width:10px;height:10px;border-radius:50%;background:{colour};margin-right:6px">'
            f'</span><b>{escape(decision["arm"])}</b></div>'
            f'<div style="font-size:1.35rem;font-weight:700;color:{fg}">{icon} {label}</div>'
            f'<ul style="margin:4px 0 0 0;padding-left:18px;font-size:0.85rem">'
            f'{reasons}</ul></div>')


def checklist_html(items: list[dict], status: str | None,
                   said_above: Collection[str] = ()) -> str:
    """The health checklist: the overall status, then one line per check with its
    pass / warn / fail / info icon and sentence; the checks of ``said_above`` keep their
    line and icon but point up to the sentence the page shows already (said once)."""
    lines = []
    for item in items:
        icon, colour = CHECKS.get(item["status"], ("?", "#57606a"))
        message = "as said at the top of the page" if item["check"] in said_above \
            else item["message"]
        lines.append(
            f'<li style="list-style:none;margin:3px 0;display:flex;gap:8px">'
            f'<span title="{escape(item["status"])}" style="flex:none;width:20px;height:20px;'
            f'border-radius:50%;background:{colour};color:white;text-align:center;'
            f'font-weight:700;font-size:0.75rem;line-height:20px">{icon}</span>'
            f'<span><b>{escape(item["check"])}</b> <span style="opacity:0.7">'
            f'{escape(item["status"])}</span> — {escape(message)}</span></li>')
    return (f'<div class="tr-health"><div style="margin-bottom:4px">Health: '
            f'{health_badge(status)}</div>'
            f'<ul style="padding-left:0;margin:0;font-size:0.85rem">{"".join(lines)}</ul></div>')


def decisions_and_health(card: Scorecard, colours: dict[str, str],
                         said_above: Collection[str] = ()) -> None:
    """The page's first block: a decision card per treatment arm, then the checklist (whose
    checks of ``said_above`` the page shows already, e.g. ``"freshness"``:
    :func:`freshness`)."""
    decisions = card.decisions
    st.subheader("Decision")
    if decisions:
        columns = st.columns(min(len(decisions), 3))
        for i, decision in enumerate(decisions):
            with columns[i % len(columns)]:
                st.markdown(decision_html(decision, colours.get(decision["arm"], "#57606a")),
                            unsafe_allow_html=True)
    else:
        st.info("Decisions are taken on the cumulative results: choose the cumulative window "
                "(a single day's users are too few to decide on)." if not card.cumulative
                else "No decision yet: no treatment arm has results.")
    if card.intent_to_treat:  # crossover users: both estimates, said in the report's words
        lines = render_crossover(card)
        with st.expander(lines[0].split(":")[0], expanded=bool(
                any(d.get("population") == "intent_to_treat" for d in decisions))):
            st.markdown("\n".join(f"- {escape(line.strip())}" for line in lines))
    st.markdown(checklist_html(card.health["checklist"], card.health["status"], said_above),
                unsafe_allow_html=True)


def freshness(card: Scorecard) -> tuple[str, ...]:
    """How fresh the data is, in the health checklist's own words ("data through … UTC
    (newest event 2.0 h ago)": the newest event time the rollup saw, not when it ran or when
    logs arrived); a warning when stale, saying after how long. Returns the checks it said
    (``("freshness",)``, or none), for the checklist not to say them again
    (:func:`decisions_and_health`)."""
    item = next((i for i in card.health.get("checklist", []) if i["check"] == "freshness"),
                None)
    if item is None:
        return ()
    text = item["message"][:1].upper() + item["message"][1:]
    if item["status"] in ("warn", "fail"):
        st.warning(text, icon=":material/schedule:")
    else:
        st.caption(f":material/schedule: {text}")
    return ("freshness",)


def untrusted(card: Scorecard) -> bool:
    """Failing health: every lift and verdict of the scorecard is untrusted."""
    return card.health.get("status") == "fail"


def health_banner(card: Scorecard) -> None:
    """Above the results when health fails: which check, and that nothing below is to be
    trusted."""
    if not untrusted(card):
        return
    failing = "; ".join(f"{i['check']}: {i['message']}" for i in card.health["checklist"]
                        if i["status"] == "fail")
    st.error(f"Health is failing ({failing}). Every lift, interval and verdict below is "
             "untrusted: they are greyed until the check passes.", icon=":material/block:")


def results(card: Scorecard, k: int | None, colours: dict[str, str], control: str) -> None:
    """The results table, one HTML table per section (primary, guardrails, groups); greyed
    and marked untrusted when health fails."""
    parts = results_layout.sections(results_layout.result_rows(card.metrics, k))
    if not parts:
        st.info("No metric rows for this day.")
        return
    st.markdown(results_layout.STYLE, unsafe_allow_html=True)
    for part in parts:
        st.markdown(f"**{part.title}**")
        st.markdown(results_layout.table_html(part, colours, control, untrusted(card)),
                    unsafe_allow_html=True)


def cuped_caption(card: Scorecard) -> str:
    """Whether the scorecard is CUPED-adjusted, with the variance removed per primary row."""
    if not card.cuped:
        return "CUPED off: lifts unadjusted for behaviour before exposure."
    removed = ", ".join(f"{r['metric']}@{r['k']} {r['arm']} {r['variance_reduction']:.0%}"
                        if r["k"] is not None else
                        f"{r['metric']} {r['arm']} {r['variance_reduction']:.0%}"
                        for r in card.metrics if r.get("primary") and not r["control"])
    return ("CUPED on: lifts adjusted for each user's interactions and lists before first "
            f"exposure; variance removed: {removed or 'none'}.")


def scorecard_frame(card: Scorecard, k: int | None) -> pd.DataFrame:
    """The scorecard rows at cutoff ``k`` (and the metrics without one) as a table."""
    rows = []
    for r in card.metrics:
        if r["k"] is not None and r["k"] != k:
            continue
        rows.append({
            "metric": r["metric"] if r["k"] is None else f"{r['metric']}@{r['k']}",
            "group": catalog.Group(r["group"]).label if r["group"] else "Other",
            "better": DIRECTIONS[r["direction"]],
            "arm": r["arm"] + (" (control)" if r["control"] else ""),
            "users": r["users"], "value": _fmt(r["mean"]),
            "interval": _interval(r["ci_low"], r["ci_high"]),
            "lift": "" if r["control"] else _fmt(r.get("lift"), "{:+.4f}"),
            "relative lift": "" if r["control"] else _fmt(r.get("relative_lift"), "{:+.2%}"),
            "lift interval": "" if r["control"] else shown_interval(r, digits=2,
                                                                    with_point=False),
            "p": "" if r["control"] or r.get("p_value") is None else format_p(r["p_value"]),
            "p adjusted": "" if r["control"] or r.get("p_value_adjusted") is None
            else format_p(r["p_value_adjusted"]),
            "verdict": "" if r["control"] else MARKERS.get(r.get("verdict"), ""),
            "variance removed": "" if r["control"] or r["kind"] != "user"
            else f"{r.get('variance_reduction') or 0.0:.0%}",
        })
    return pd.DataFrame(rows)


def scorecard_table(frame: pd.DataFrame) -> None:
    """Every number of the scorecard in one sortable table (the view's cutoff)."""
    if frame.empty:
        st.info("No metric rows for this day.")
        return
    st.dataframe(frame, hide_index=True, width="stretch")


def _status(frame: pd.DataFrame) -> pd.DataFrame:
    """``status`` (final / provisional) and, for the series, ``cuped`` (adjusted or not) as
    words for the tooltips."""
    frame = frame.assign(status=frame["provisional"].map({True: "provisional",
                                                          False: "final"}))
    if "adjusted" in frame:
        frame = frame.assign(cuped=frame["adjusted"].map({True: "adjusted",
                                                          False: "unadjusted"}))
    return frame


def series_caption(series: MetricSeries, label: str, cumulative: bool, kind: str,
                   level: float, cuped: bool) -> str:
    """What the two charts over time show, and on which days CUPED adjusted them."""
    percent = f"{level:.0%}"
    if series.kind == "set":
        return (f"{label} is a set-level metric: one value per arm and day (over "
                f"{'all lists up to' if cumulative else 'the lists of'} that day), so no "
                "interval, no test and nothing for CUPED to adjust.")
    shows = (f"Each arm's mean of {label} over the users "
             f"{'up to' if cumulative else 'of'} each day with its {percent} interval "
             "(grey squares: provisional days); below, each treatment arm's relative lift "
             f"against control with its {percent} {kind} interval, the scorecard's comparison "
             "day by day (before the correction of the primaries).")
    adjusted, days = series.adjusted_days, series.days
    if not days:
        return shows
    if not cuped:
        return f"{shows} CUPED off: unadjusted."
    words = ("regression-adjusted for each user's interactions and lists before first exposure "
             "(arms at the pooled pre-exposure mean; the table above keeps the arms' own "
             "means, the CSV both)")
    if adjusted == days:
        return f"{shows} CUPED on: every day {words}."
    if adjusted:
        return (f"{shows} CUPED on: {adjusted} of {days} days {words}; the others have no "
                "usable pre-exposure data and stay unadjusted (the tooltip says which).")
    return (f"{shows} CUPED on, but no day has usable pre-exposure data to adjust on "
            "(`tracker rollup` stores it when the experiment's cuped_days > 0, for users with "
            "history): unadjusted.")


def _colour(colours: dict[str, str]) -> alt.Color:
    """The arm encoding every chart shares: fixed domain and colours (see :func:`arm_colours`)."""
    return alt.Color("arm:N", sort=list(colours),
                     scale=alt.Scale(domain=list(colours), range=list(colours.values())),
                     legend=alt.Legend(title="arm", symbolOpacity=1, symbolType="circle"))


def day_axis(days: pd.Series) -> alt.X:
    """A date axis in whole days (UTC calendar days, as the rollup stores them): one tick per
    day up to ten days, then every n-th day; no hour ticks."""
    span = len(pd.unique(days))
    step = max(1, -(-span // 10))
    return alt.X("utcyearmonthdate(day):T", title="day",
                 axis=alt.Axis(format="%b %d", labelAngle=0, labelOverlap=True,
                               tickCount={"interval": "day", "step": step}, grid=False),
                 scale=alt.Scale(type="utc"))


_GREY = "#8c959f"  # provisional days' points and the "day" legend: readable on both themes
_STATUS_LEGEND = alt.Legend(title="day", symbolSize=120, symbolStrokeWidth=2)


def metric_chart(values: pd.DataFrame, title: str, colours: dict[str, str]) -> None:
    """One line per arm with its interval band; provisional days as grey-filled squares (a
    white fill, as before, left the "day" legend's symbols white on white: Vega-Lite draws a
    shape legend with the points' conditional fill's constant)."""
    if values.empty:
        st.info("No values yet.")
        return
    data = _status(values)
    base = alt.Chart(data).encode(x=day_axis(data["day"]), color=_colour(colours))
    band = base.mark_area(opacity=0.22).encode(y="ci_low:Q", y2="ci_high:Q")
    line = base.mark_line(strokeWidth=2.5).encode(
        y=alt.Y("mean:Q", title=title, scale=alt.Scale(zero=False)))
    points = base.mark_point(size=60, strokeWidth=2).encode(
        y="mean:Q", shape=alt.Shape("status:N", scale=alt.Scale(
            domain=["final", "provisional"], range=["circle", "square"]),
            legend=_STATUS_LEGEND),
        fill=alt.condition("datum.status == 'final'", _colour(colours), alt.value(_GREY)),
        tooltip=["day:T", "arm:N", alt.Tooltip("mean:Q", format=".4f"),
                 alt.Tooltip("ci_low:Q", format=".4f"), alt.Tooltip("ci_high:Q", format=".4f"),
                 alt.Tooltip("cuped:N", title="CUPED"),
                 alt.Tooltip("unadjusted_mean:Q", format=".4f", title="unadjusted mean"),
                 "status:N"])
    layers = band + line + points
    if data["day"].nunique() == 1:  # one day: a band has no width, draw the interval as bars
        layers += base.mark_rule(strokeWidth=3).encode(y="ci_low:Q", y2="ci_high:Q")
    st.altair_chart(layers.properties(height=280), width="stretch")


def lift_chart(lifts: pd.DataFrame, colours: dict[str, str]) -> None:
    """Each treatment arm's relative lift over time with its interval band; a rule at 0."""
    if lifts.empty:
        st.info("No lift to show yet (needs users in control and a treatment arm).")
        return
    data = _status(lifts)
    treated = {a: c for a, c in colours.items() if a in set(data["arm"])}
    base = alt.Chart(data).encode(x=day_axis(data["day"]), color=_colour(treated))
    band = base.mark_area(opacity=0.22).encode(y="ci_low:Q", y2="ci_high:Q")
    line = base.mark_line(point=True, strokeWidth=2.5).encode(
        y=alt.Y("relative_lift:Q", title="relative lift vs control", axis=alt.Axis(format="%")),
        tooltip=["day:T", "arm:N", alt.Tooltip("relative_lift:Q", format="+.2%"),
                 alt.Tooltip("ci_low:Q", format="+.2%"), alt.Tooltip("ci_high:Q", format="+.2%"),
                 alt.Tooltip("p_value:Q", format=".3g"), alt.Tooltip("cuped:N", title="CUPED"),
                 alt.Tooltip("variance_reduction:Q", format=".0%", title="variance removed"),
                 "status:N"])
    zero = alt.Chart(pd.DataFrame({"y": [0]})).mark_rule(color="#424a53", strokeWidth=1.5
                                                         ).encode(y="y:Q")
    layers = band + line + zero
    if data["day"].nunique() == 1:  # one day: a band has no width, draw the interval as bars
        layers += base.mark_rule(strokeWidth=3).encode(y="ci_low:Q", y2="ci_high:Q")
    st.altair_chart(layers.properties(height=240), width="stretch")


SPLIT_COLOUR = "#24292f"
"""The declared split's dashed line: near-black, so it stands out from every arm's colour."""


def users_chart(users: pd.DataFrame, colours: dict[str, str]) -> None:
    """Each arm's observed share of users (solid, in the arm's colour) against its declared
    share (a dark dashed line, labelled); the axis is zoomed to the shares, so a drift of a
    point or two is visible."""
    if users.empty:
        st.info("No users yet.")
        return
    x = day_axis(users["day"])
    shares = alt.Y("share:Q", title="share of users (cumulative)",
                   axis=alt.Axis(format="%"), scale=alt.Scale(zero=False, padding=12))
    actual = alt.Chart(users).mark_line(point=True, strokeWidth=2.5).encode(
        x=x, y=shares, color=_colour(colours),
        tooltip=["day:T", "arm:N", "users:Q", alt.Tooltip("share:Q", format=".2%"),
                 alt.Tooltip("expected:Q", format=".2%", title="declared")])
    declared = users[["expected"]].drop_duplicates().assign(label=lambda f: f["expected"].map(
        "declared {:.1%}".format))
    rule = alt.Chart(declared).mark_rule(color=SPLIT_COLOUR, strokeDash=[8, 5],
                                         strokeWidth=2).encode(y="expected:Q")
    label = alt.Chart(declared).mark_text(align="left", dx=4, dy=-7, color=SPLIT_COLOUR,
                                          fontWeight="bold").encode(
        y="expected:Q", x=alt.value(0), text="label:N")
    st.altair_chart((rule + actual + label).properties(height=220), width="stretch")
    st.caption("Solid: observed share of users per arm; dark dashed: the declared split.")


def glossary_entry(entry: catalog.MetricInfo) -> str:
    """One metric of the glossary as Markdown (its one-line description is the expander's
    label): formula (LaTeX between ``$``), direction, kind, range, cutoff and reference, all
    from the catalogue."""
    cutoff = "takes a cutoff k (`" + entry.label(10) + "`)" if entry.takes_k else "no cutoff"
    return (f"**Formula:** {entry.formula}\n\n"
            f"- **Better:** {DIRECTIONS[entry.direction.value]}\n"
            f"- **Kind:** {entry.kind.label}"
            + (" (one value per arm: no interval, no test)" if entry.kind is catalog.Kind.SET
               else " (mean over users of each user's mean)") + "\n"
            f"- **Range:** {entry.range_text}\n"
            f"- **Cutoff:** {cutoff}\n"
            f"- **Reference:** {entry.reference}")


LIST_WIDTHS = (22, 8, 12, 7, 22, 18, 11)
"""Percent of the experiments table per column: experiment, status, dates, users, health,
decision, headline lift."""


def _dates(info) -> str:
    start = info.starts_at.date().isoformat() if info.starts_at else "—"
    end = info.ends_at.date().isoformat() if info.ends_at else "open"
    return f"{start} → {end}"


def data_through(summary, status: str, now: datetime) -> str:
    """How fresh one experiment's data is, for the list: "data through … UTC, 2.0 h ago"
    from the newest event time its last rollup stored, marked stale by the health
    checklist's own rule (:func:`tracker.stats.health.freshness_item`) as of ``now``; empty
    when no event was rolled up."""
    newest = None if summary is None else summary.newest_event
    if newest is None:
        return ""
    item = freshness_item(newest, now, running=status in ("draft", "running"))
    lag = data_lag_hours(newest, now)
    stale = (f" <b style='color:{CHECKS['warn'][1]}'>! stale</b>"
             if item.status is CheckStatus.WARN else "")
    return (f"<div class='tr-p' title='{escape(item.message)}'>data through "
            f"{newest.astimezone(UTC):%Y-%m-%d %H:%M} UTC, {ago(lag)}{stale}</div>")


def experiments_html(summaries: list, now: datetime) -> str:
    """The experiments list as one HTML table that wraps to the window: each experiment's
    key (a link to its page) and name, status, dates, users, latest complete day and how
    fresh its data is as of ``now`` (:func:`data_through`), health badge with its worst
    item, a decision badge per treatment arm, and the headline metric's lift, all from the
    summary the last rollup stored. A failing health shows no lift: it would be
    untrusted."""
    cols = "".join(f'<col style="width:{w}%">' for w in LIST_WIDTHS)
    head = ("<tr class='tr-head'><th>experiment</th><th>status</th><th>dates</th>"
            "<th class='tr-n'>users</th>"
            "<th>health</th><th>decision</th><th>headline</th></tr>")
    body = []
    for line in summaries:
        info, s = line.info, line.summary
        colours = arm_colours([a.key for a in info.arms], info.control)
        link = f'experiment?experiment={quote(info.key)}'
        if s is None or s.health_status is None:
            health = ('<span class="tr-muted">no rollup yet</span>' if s is None else
                      '<span class="tr-muted">no data logged yet</span>')
        else:
            note = f'<div class="tr-p">{escape(s.health_note)}</div>' if s.health_note else ""
            health = health_badge(s.health_status) + note
        decisions = "".join(
            f'<div style="margin:2px 0"><span class="tr-dot" style="background:'
            f'{colours.get(arm, CONTROL_COLOUR)}"></span>{escape(arm)} '
            f'{outcome_badge(outcome)}</div>'
            for arm, outcome in (s.decisions.items() if s else ())) or "—"
        if s is None or not s.headline:
            headline = "—"
        elif not s.trusted:
            headline = (f"{escape(s.headline)}<div class='tr-p tr-untrusted'>untrusted: "
                        "health failing</div>")
        else:
            lifts = ", ".join(f"{escape(arm)} {value:+.1%}" for arm, value
                              in s.headline_lift.items() if value is not None)
            headline = f"{escape(s.headline)}<div class='tr-p'>{lifts}</div>"
        latest = (f"<div class='tr-p'>complete through {s.latest_final_day.isoformat()}</div>"
                  if s and s.latest_final_day else "") + data_through(s, info.status, now)
        users = f"{s.users:,}" if s else "—"
        body.append(
            f'<tr><td data-label="experiment"><a href="{link}" target="_self">'
            f'<b>{escape(info.key)}</b></a><div class="tr-p">{escape(info.name)}</div></td>'
            f'<td data-label="status">{escape(info.status)}</td>'
            f'<td data-label="dates">{_dates(info)}{latest}</td>'
            f'<td class="tr-n" data-label="users">{users}</td>'
            f'<td data-label="health">{health}</td><td data-label="decision">{decisions}</td>'
            f'<td data-label="headline">{headline}</td></tr>')
    return (results_layout.STYLE + f'<table class="tr-table tr-list"><colgroup>{cols}'
            f'</colgroup>{head}{"".join(body)}</table>')
