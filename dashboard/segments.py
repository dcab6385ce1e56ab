"""The lift per slice of a declared dimension (a tab of :mod:`dashboard.charts`): for the
metric chosen above the chart tabs, a forest plot of each treatment arm's relative lift
against control in every slice of the chosen dimension, with its interval; the users per
arm of each slice with its sample-ratio check; whether the lift differs across slices.

The numbers are :func:`tracker.report.segment_report`'s (``tracker report --segment``), for
the scorecard's own view (day, window, intervals, CUPED). Slices are exploratory: their
verdicts are adjusted across the slices and never change the decision above.
"""

from __future__ import annotations

from datetime import date

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import components, data
from tracker.report import Scorecard, SegmentReport, format_p, segment_report
from tracker.report.rows import metric_name


@st.cache_data(ttl=data.TTL, show_spinner="Computing the results per slice…")
def report(key: str, segment: str, as_of: date | None, cumulative: bool, intervals: str,
           level: float, cuped: bool) -> SegmentReport:
    return segment_report(data.engine(), key, segment, cumulative=cumulative, as_of=as_of,
                          intervals=intervals, level=level, cuped=cuped)


def section(key: str, card: Scorecard, segment: str, metric: str, k: int | None,
            colours: dict[str, str]) -> None:
    """The chosen dimension's forest plot, users and checks for ``metric@k``."""
    found = report(key, segment, card.as_of, card.cumulative, card.intervals, card.level,
                   card.cuped)
    label = metric_name(metric, k)
    st.caption(" ".join(found.notes))
    rows = [r for r in found.metrics if r["metric"] == metric and r["k"] == k]
    if not rows:
        st.info(f"No results for {label} by {segment} yet.")
        return
    for check in found.heterogeneity:
        if (check["metric"], check["k"]) == (metric, k):
            flag = "⚠ " if check["differs"] else ""
            st.markdown(f"{flag}**{components.code(check['arm'])}**: {check['text']}")
    frame = forest_frame(rows, found.slices)
    if frame.empty:
        st.info(f"No lift of {label} to compare across slices (set-level metrics have no "
                "interval; the others need users in control and a treatment arm).")
    else:
        forest(frame, colours, label, card.level)
    st.dataframe(users_frame(found), hide_index=True, width="stretch")


def forest_frame(rows: list[dict], slices: tuple[str, ...]) -> pd.DataFrame:
    """Per (slice, treatment arm) the relative lift, its interval and adjusted p-value."""
    keep = [{"slice": r["slice"], "arm": r["arm"], "users": r["users"],
             "relative_lift": r["relative_lift"], "ci_low": r["relative_lift_ci_low"],
             "ci_high": r["relative_lift_ci_high"], "verdict": r.get("verdict"),
             "p_adjusted": format_p(r.get("p_value_adjusted"))}
            for r in rows if not r["control"] and r.get("relative_lift") is not None
            and r.get("relative_lift_ci_low") is not None]
    frame = pd.DataFrame(keep, columns=["slice", "arm", "users", "relative_lift", "ci_low",
                                        "ci_high", "verdict", "p_adjusted"])
    order = {name: at for at, name in enumerate(slices)}
    return frame.sort_values("slice", key=lambda s: s.map(order), kind="stable")


def forest(frame: pd.DataFrame, colours: dict[str, str], label: str, level: float) -> None:
    """One row per slice: each treatment arm's lift (a point) and interval (a bar); a rule
    at 0."""
    treated = {a: c for a, c in colours.items() if a in set(frame["arm"])}
    colour = alt.Color("arm:N", sort=list(treated),
                       scale=alt.Scale(domain=list(treated), range=list(treated.values())),
                       legend=alt.Legend(title="arm", symbolOpacity=1, symbolType="circle",
                                         orient="bottom"))
    y = alt.Y("slice:N", sort=list(dict.fromkeys(frame["slice"])), title=None,
              axis=alt.Axis(labelLimit=140, labelOverlap=False, labelFontSize=13))
    offset = alt.YOffset("arm:N", sort=list(treated))
    x = alt.X("relative_lift:Q", axis=alt.Axis(format="%"),
              title=f"relative lift of {label} vs control ({int(level * 100)}% interval)")
    base = alt.Chart(frame).encode(y=y, yOffset=offset, color=colour)
    bars = base.mark_rule(strokeWidth=3).encode(x="ci_low:Q", x2="ci_high:Q")
    points = base.mark_point(filled=True, size=80).encode(
        x=x, tooltip=["slice:N", "arm:N", "users:Q",
                      alt.Tooltip("relative_lift:Q", format="+.2%"),
                      alt.Tooltip("ci_low:Q", format="+.2%"),
                      alt.Tooltip("ci_high:Q", format="+.2%"),
                      alt.Tooltip("p_adjusted:N", title="p adjusted (BH, across slices)"),
                      "verdict:N"])
    zero = alt.Chart(pd.DataFrame({"x": [0]})).mark_rule(color="#424a53", strokeWidth=1.5
                                                         ).encode(x="x:Q")
    st.altair_chart((bars + points + zero).properties(height=alt.Step(max(
        36, 18 * len(treated)))), width="stretch")


def users_frame(found: SegmentReport) -> pd.DataFrame:
    """Per slice: its users per arm and its sample-ratio check (Holm across slices)."""
    rows = []
    for check in found.srm:
        row = {"slice": check["slice"], **{f"users: {a}": n for a, n in check["users"].items()},
               "SRM p adjusted": format_p(check["p_value_adjusted"]),
               "sample ratio": "MISMATCH" if check["flagged"] else "ok"}
        rows.append(row)
    return pd.DataFrame(rows)
