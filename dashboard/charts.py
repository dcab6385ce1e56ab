"""The experiment page below the fold: the metric chooser and, in tabs, the metric over time
with its lift, the lift by days since exposure, the users per arm and, for an experiment
that declares dimensions, the lift per slice of the one chosen (:mod:`dashboard.segments`).

One :func:`st.fragment <streamlit.fragment>`: the metric chooser changes only these charts,
so choosing a metric reruns this function alone; the decision cards, the health checklist
and the results table above keep what they drew (a full rerun would rebuild them, cached or
not, and redraw the page). The metric stays in the URL, and the share link at the top of
the page is redrawn from here, so both follow a metric chosen here.
"""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from dashboard import components, data, exposure, segments
from tracker.metrics import catalog
from tracker.report import LOWER_IS_BETTER, Scorecard
from tracker.store.experiments import ExperimentInfo

TABS = ("Metrics over time", "Lift by days since exposure", "Users per arm")
SEGMENT_TAB = "By segment"
"""The fourth tab, shown when the experiment declares dimensions."""


@st.fragment
def charts(info: ExperimentInfo, card: Scorecard, names: list[str], view: dict[str, str],
           share, colours: dict[str, str]) -> None:
    """The metric chooser (starting from ``view["metric"]``) and the three chart tabs;
    ``view``: every parameter of the page as the URL spells it (the metric is rewritten
    here), ``share``: the container at the top of the page that holds the share link."""
    key, cumulative, cuped = info.key, card.cumulative, view["cuped"] == "on"
    metric = st.selectbox("Metric", names,
                          index=names.index(view["metric"]) if view["metric"] in names else 0,
                          format_func=lambda m: m + (" ↓" if m in LOWER_IS_BETTER else ""),
                          help="Charted in the tabs below; the results above do not change.")
    if st.query_params.get("metric") != metric:
        st.query_params["metric"] = metric
    with share:
        base = st.context.url or ""
        chosen = {**view, "metric": metric, "segment": st.query_params.get("segment", "")}
        st.code(f"{base}?{urlencode({n: v for n, v in chosen.items() if v})}", language=None,
                wrap_lines=True)
    entry = catalog.CATALOG.get(metric)
    k = int(view["k"]) if entry is None or entry.takes_k else None
    label = metric if k is None else f"{metric}@{k}"
    declared = [s.name for s in info.segments]
    over_time, since_exposure, users, *by_segment = st.tabs(
        list(TABS) + ([SEGMENT_TAB] if declared else []))
    with over_time:
        series = data.series(key, metric, k, cumulative, card.intervals, card.level, cuped)
        st.caption(components.series_caption(series, label, cumulative, view["intervals"],
                                             card.level, cuped))
        components.metric_chart(series.values, label, colours)
        if series.kind != "set":  # one value per arm a day: no lift interval to chart
            st.markdown(f"**Lift of {label} against {components.code(info.control)} "
                        "over time**")
            components.lift_chart(series.lifts, colours)
        st.download_button("Download time series (CSV)",
                           series.to_frame().to_csv(index=False),
                           f"{key}-{label}-{view['window']}.csv", "text/csv")
    with since_exposure:
        exposure.section(key, card, metric, k, colours)
    with users:
        components.users_chart(data.users_over_time(key), colours)
    for tab in by_segment:
        with tab:
            segment = st.selectbox("Dimension", declared,
                                   index=declared.index(view["segment"])
                                   if view["segment"] in declared else 0)
            if st.query_params.get("segment") != segment:
                st.query_params["segment"] = segment
            segments.section(key, card, segment, metric, k, colours)
