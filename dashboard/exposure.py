"""The lift by days since exposure (a tab of :mod:`dashboard.charts`): for the metric chosen
above the chart tabs, each treatment arm's relative lift against control on the users' d-th
day since their first exposure (day 0: the first day they were served a list of the
experiment), with its interval band, and the report's trend of that lift (fading: novelty,
growing: primacy). Never CUPED-adjusted: the rollup has no covariate sums by days since
exposure (the report's trends are unadjusted too), and the caption says so.

Reads the ``exposure_day`` view through :mod:`tracker.store.computed` (cached here, as
:mod:`dashboard.data` caches its reads) and draws the lifts of
:func:`tracker.report.trends.lift_by_exposure_day`, the very series the report's ``trends``
are fitted to.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import components, data
from tracker.report import Scorecard, format_p
from tracker.report.trends import lift_by_exposure_day
from tracker.store import computed

WORDS = {"fading": "fading — a novelty effect? The early lift overstates the long run",
         "growing": "growing — a primacy effect? Users adapt; the early lift understates it",
         "flat": "no significant trend", "none": "too few days since exposure for a trend"}


@st.cache_data(ttl=data.TTL, show_spinner="Computing the lift by days since exposure…")
def lifts(key: str, metric: str, k: int | None, level: float) -> pd.DataFrame:
    """Per (days since exposure, treatment arm) the relative lift and its interval."""
    table = computed.exposure_day_table(data.engine(), key)
    return lift_by_exposure_day(data.experiment(key), table, metric, k, level)


def section(key: str, card: Scorecard, metric: str, k: int | None,
            colours: dict[str, str]) -> None:
    """The chart and the report's trend line per treatment arm for ``metric@k``."""
    label = metric if k is None else f"{metric}@{k}"
    st.caption(f"Relative lift of {label} against control among the users on their n-th day "
               f"since first exposure (day 0: the first day they were served the "
               f"experiment), with its {int(card.level * 100)}% interval: a lift that falls "
               "with the days is a novelty effect, one that rises a primacy effect. "
               "Unadjusted, whatever the CUPED toggle says: the rollup stores pre-exposure "
               "covariate sums by calendar day only, not by days since exposure.")
    frame = lifts(key, metric, k, card.level)
    if frame.empty:
        st.info(f"No lift by days since exposure for {label} (set-level metrics have none; "
                "other metrics need users in control and a treatment arm).")
        return
    chart(frame, colours)
    for trend in (t for t in card.trends if t["metric"] == label):
        slope = "" if trend["slope"] is None else (
            f": {trend['slope']:+.2%} per day [{trend['slope_ci_low']:+.2%}, "
            f"{trend['slope_ci_high']:+.2%}], p adjusted {format_p(trend['p_value_adjusted'])}"
            if trend["slope_ci_low"] is not None else "")
        st.markdown(f"**{components.code(trend['arm'])}**: {WORDS[trend['trend']]}{slope}")


def chart(frame: pd.DataFrame, colours: dict[str, str]) -> None:
    """Each treatment arm's lift by days since exposure with its interval band; a rule at 0."""
    treated = {a: c for a, c in colours.items() if a in set(frame["arm"])}
    colour = alt.Color("arm:N", sort=list(treated),
                       legend=alt.Legend(title="arm", symbolOpacity=1, symbolType="circle"),
                       scale=alt.Scale(domain=list(treated), range=list(treated.values())))
    x = alt.X("exposure_day:Q", title="days since first exposure",
              axis=alt.Axis(tickMinStep=1, format="d", grid=False))
    base = alt.Chart(frame).encode(x=x, color=colour)
    band = base.mark_area(opacity=0.2).encode(y="ci_low:Q", y2="ci_high:Q")
    line = base.mark_line(point=True, strokeWidth=2.5).encode(
        y=alt.Y("relative_lift:Q", title="relative lift vs control", axis=alt.Axis(format="%")),
        tooltip=[alt.Tooltip("exposure_day:Q", title="days since exposure"), "arm:N",
                 alt.Tooltip("relative_lift:Q", format="+.2%"),
                 alt.Tooltip("ci_low:Q", format="+.2%"), alt.Tooltip("ci_high:Q", format="+.2%"),
                 alt.Tooltip("users:Q", title="users (arm)")])
    zero = alt.Chart(pd.DataFrame({"y": [0]})).mark_rule(
        color=components.SPLIT_COLOUR, strokeWidth=1.5).encode(y="y:Q")
    st.altair_chart((band + line + zero).properties(height=260), width="stretch")
