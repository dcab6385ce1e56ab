"""One experiment, in the order an experimenter reads it: the decision per treatment arm and
the health checklist first; then the results table (primary metrics, guardrails, then the
rest by catalogue group, each row's interval as a bar centred on zero); then each metric over
time, users per arm against the declared split, every number in one table, downloads. One
colour per arm everywhere (control grey)."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data, exposure
from tracker.durations import format_duration
from tracker.metrics import catalog
from tracker.report import LOWER_IS_BETTER, METRIC_ORDER

problem = data.schema_problem()
if problem:
    st.error(f"Cannot read the tracker database: {problem}")
    st.stop()
keys = [info.key for info in data.experiments()]
if not keys:
    st.info("No experiments yet: run `tracker demo`, or log one (see the README).")
    st.stop()
requested = st.query_params.get("experiment")
key = st.selectbox("Experiment", keys, index=keys.index(requested) if requested in keys else 0)
st.query_params["experiment"] = key
info = data.experiment(key)
components.title(info.name)
st.caption(f"{components.code(info.key)} · {info.status} · control: "
           f"{components.code(info.control)} · attribution window "
           f"{format_duration(info.attribution_window)} · days in {info.timezone}")

days = data.day_table(key)
if days.empty:
    st.info(f"No rollup for {components.code(key)} yet: run "
            f"{components.code(f'tracker rollup {key}')} "
            "(or wait for the scheduled rollup).")
    st.stop()

with st.sidebar:
    st.header("View")
    cutoffs = list(info.cutoffs)
    k = st.radio("k (cutoff)", cutoffs, index=len(cutoffs) // 2, horizontal=True)
    window = st.radio("Window", ["cumulative", "daily"], horizontal=True)
    kind = st.radio("Intervals", ["fixed-horizon", "always-valid"], horizontal=True,
                    help="Always-valid (sequential) intervals stay valid when you look every day.")
    cuped = st.toggle("CUPED (pre-exposure adjustment)", value=True,
                      help="Adjust lifts, intervals and verdicts for each user's behaviour "
                           "before first exposure (where the rollup stored it).")
    all_days = sorted(days["day"])
    as_of = st.selectbox("As of day", ["latest complete"] + [d.isoformat() for d in
                                                             reversed(all_days)])
cumulative = window == "cumulative"
intervals = "sequential" if kind == "always-valid" else "fixed_horizon"
chosen = None if as_of == "latest complete" else next(d for d in all_days
                                                      if d.isoformat() == as_of)
card = data.card(key, chosen, cumulative, intervals, 0.95, cuped)

colours = components.arm_colours([arm.key for arm in info.arms], info.control)
components.decisions_and_health(card, colours)

st.subheader(f"Results — {'cumulative through' if cumulative else 'day'} {card.as_of}")
st.caption(f"{int(card.level * 100)}% {kind} intervals of the relative change against "
           f"{components.code(info.control)} (in metric units, marked abs., when the relative "
           f"one is unbounded); primaries corrected ({card.correction}) and drawn at the matching "
           "level; bars green when better, red when worse, grey when inconclusive, in the "
           "metric's direction (↑ higher is better, ↓ lower is better). Set-level metrics are "
           "one value per arm: no test, no verdict. Definitions: the "
           "[metric glossary](glossary).")
st.caption(components.cuped_caption(card))
components.results(card, k, colours, info.control)
with st.expander("Every number of the scorecard (table)"):
    components.scorecard_table(components.scorecard_frame(card, k))
st.download_button("Download scorecard (CSV)", card.to_csv(), f"{key}-scorecard.csv",
                   "text/csv")

st.subheader("Metrics over time")
present = set(data.metric_table(key, cumulative)["metric"])
names = [m for m in METRIC_ORDER if m in present]
metric = st.selectbox("Metric", names, index=names.index("ndcg") if "ndcg" in names else 0,
                      format_func=lambda m: m + (" ↓" if m in LOWER_IS_BETTER else ""))
entry = catalog.CATALOG.get(metric)
metric_k = k if entry is None or entry.takes_k else None
series = data.series(key, metric, metric_k, cumulative, intervals, 0.95, cuped)
label = metric if metric_k is None else f"{metric}@{metric_k}"
st.caption(components.series_caption(series, label, cumulative, kind, 0.95, cuped))
components.metric_chart(series.values, label, colours)
if series.kind != "set":  # one value per arm a day: no lift interval to chart
    st.markdown(f"**Lift of {label} against {components.code(info.control)} over time**")
    components.lift_chart(series.lifts, colours)
st.download_button("Download time series (CSV)", series.to_frame().to_csv(index=False),
                   f"{key}-{label}-{window}.csv", "text/csv")
exposure.section(key, card, metric, metric_k, colours)  # lift by days since exposure

st.subheader("Users per arm")
components.users_chart(data.users_over_time(key), colours)
