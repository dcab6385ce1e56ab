"""One experiment, in the order an experimenter reads it: the decision per treatment arm under
the experiment's analysis plan and the health checklist first (a view that departs from the
plan says so and what the plan decides; failing health puts a banner above the results and
greys them), under a line saying how fresh the data is (through its newest event time);
then the results table (primary metrics, guardrails with their margin, then the rest by
catalogue group, each row's interval as a bar centred on zero), every number in one table,
downloads; then, below the fold, the charts in tabs (:mod:`dashboard.charts`, a fragment: the
metric chosen there reruns the charts alone): each metric over time, the lift by days since
exposure, users per arm against the declared split. One colour per arm everywhere (control
grey). Every view parameter lives in the URL."""

from __future__ import annotations

import streamlit as st

from dashboard import components, data
from dashboard.charts import charts
from dashboard.params import NAMES, pick
from tracker.durations import format_duration
from tracker.report import METRIC_ORDER
from tracker.report.render import plan_decision_text

MODES = {"fixed_horizon": "fixed-horizon", "sequential": "always-valid"}

problem = data.schema_problem()
if problem:
    st.error(f"Cannot read the tracker database: {problem}")
    st.stop()
keys = [info.key for info in data.experiments()]
requested = st.query_params.get("experiment")
if requested is not None and data.find(requested) is None:
    st.error(f"No experiment {requested!r} in this database ({data.where()}). Check the link, "
             "or choose one of the experiments below.", icon=":material/error:")
    for known in keys:
        st.page_link("views/experiment.py", label=known, query_params={"experiment": known})
    st.stop()
if requested is not None and requested not in keys:  # archived: reachable by its link
    keys.append(requested)
if not keys:
    st.info("No experiments yet: run `tracker demo`, or log one (see docs/logging.md).")
    st.stop()
key = st.selectbox("Experiment", keys, index=keys.index(requested) if requested in keys else 0)
info = data.experiment(key)
components.title(info.name)
st.caption(f"{components.code(info.key)} · {info.status} · control: "
           f"{components.code(info.control)} · attribution window "
           f"{format_duration(info.attribution_window)} · days in {info.timezone}")

days = data.day_table(key)
if days.empty:
    st.query_params.from_dict({"experiment": key})
    last = days.attrs.get("last_run")
    ran = (f"The last rollup ran at {last:%Y-%m-%d %H:%M} UTC and found no impressions"
           if last else "No rollup has run for it yet")
    st.info(f"No data logged for {components.code(key)} yet. {ran}. To start: log served "
            "lists and interactions (`Tracker().log_impressions` / `log_interactions`, the "
            "HTTP collector of `tracker serve`, or `tracker import`), then run "
            f"{components.code(f'tracker rollup {key}')} (or wait for the scheduled one).")
    st.stop()

plan = info.plan
query = st.query_params
with st.sidebar:
    st.header("View")
    cutoffs = list(info.cutoffs)
    k = st.radio("k (cutoff)", cutoffs, horizontal=True,
                 index=cutoffs.index(pick(query, "k", cutoffs, cutoffs[len(cutoffs) // 2])))
    windows = ["cumulative", "daily"]
    window = st.radio("Window", windows, horizontal=True,
                      index=windows.index(pick(query, "window", windows, "cumulative")))
    kinds = list(MODES.values())
    kind = st.radio("Intervals", kinds, horizontal=True,
                    index=kinds.index(pick(query, "intervals", kinds, MODES[plan.intervals])),
                    help="Always-valid (sequential) intervals stay valid when you look every "
                         f"day. The analysis plan says {MODES[plan.intervals]}.")
    cuped = st.toggle("CUPED (pre-exposure adjustment)",
                      value=pick(query, "cuped", ["on", "off"],
                                 "on" if plan.cuped else "off") == "on",
                      help="Adjust lifts, intervals and verdicts for each user's behaviour "
                           "before first exposure (where the rollup stored it). The analysis "
                           f"plan says {'on' if plan.cuped else 'off'}.")
    all_days = sorted(days["day"])
    day_options = ["latest complete"] + [d.isoformat() for d in reversed(all_days)]
    as_of = st.selectbox("As of day", day_options,
                         index=day_options.index(pick(query, "day", day_options,
                                                      "latest complete")))
cumulative = window == "cumulative"
intervals = "sequential" if kind == "always-valid" else "fixed_horizon"
chosen = None if as_of == "latest complete" else next(d for d in all_days
                                                      if d.isoformat() == as_of)
card = data.card(key, chosen, cumulative, intervals, 0.95, cuped)

present = set(data.metric_table(key, cumulative)["metric"])
names = [m for m in METRIC_ORDER if m in present]
metric_default = "ndcg" if "ndcg" in names else (names[0] if names else "")
metric_choice = pick(query, "metric", names, metric_default)
declared = [s.name for s in info.segments]
view = {"experiment": key, "k": str(k), "window": window, "intervals": kind,
        "cuped": "on" if cuped else "off", "day": as_of, "metric": metric_choice,
        "segment": pick(query, "segment", declared, declared[0] if declared else "")}
st.query_params.from_dict({name: view[name] for name in NAMES if view[name]})
share = st.expander("Share this view", icon=":material/link:")
share.caption("The link holds every choice of this view (k, window, intervals, CUPED, day, "
              "metric, dimension): the copy button on the right copies it.")

colours = components.arm_colours([arm.key for arm in info.arms], info.control)
said = components.freshness(card)  # once: the checklist points up to it
st.caption(f"Analysis plan: {plan.describe()}"
           + (f", planned end {info.planned_end:%Y-%m-%d}" if info.planned_end else "")
           + " (`tracker experiments update` changes it; each change is recorded).")
if card.exploratory:
    planned = data.card(key, chosen, True, None, 0.95, None)
    st.warning("Exploratory view — " + "; ".join(card.exploratory) + ". The plan's decision "
               f"is {plan_decision_text(planned)}.", icon=":material/science:")
components.decisions_and_health(card, colours, said)

st.subheader(f"Results — {'cumulative through' if cumulative else 'day'} {card.as_of}")
components.health_banner(card)
st.caption(f"{int(card.level * 100)}% {kind} intervals of the relative change against "
           f"{components.code(info.control)} (in metric units, marked abs., when the relative "
           f"one is unbounded); primaries corrected ({card.correction}) and drawn at the matching "
           "level; bars green when better, red when worse, grey when inconclusive, in the "
           "metric's direction (↑ higher is better, ↓ lower is better). Guardrails read holds "
           "/ fails / not shown yet, their margin drawn as a red dashed line. Set-level "
           "metrics are one value per arm: their absolute change, no test, no verdict. "
           "Definitions: the [metric glossary](glossary).")
st.caption(components.cuped_caption(card))
components.results(card, k, colours, info.control)
with st.expander("Every number of the scorecard (table)"):
    components.scorecard_table(components.scorecard_frame(card, k))
st.download_button("Download scorecard (CSV)", card.to_csv(), f"{key}-scorecard.csv",
                   "text/csv")

st.subheader("Charts")
charts(info, card, names, view, share, colours)  # a fragment: its metric reruns it alone
