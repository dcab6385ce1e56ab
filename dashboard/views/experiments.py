"""Every experiment on one screen (no sideways scrolling at 1280 px): status, dates, users so
far, latest complete day and how fresh the data is (through its newest event time), health
(the checklist's status and its worst item), the decision per treatment arm, and the first
primary metric's lift; the key links to the experiment."""

from __future__ import annotations

from datetime import UTC, datetime

import streamlit as st

from dashboard import components, data

st.title("Experiments")
problem = data.schema_problem()
if problem:
    st.error(f"Cannot read the tracker database: {problem}")
    st.stop()
summaries = data.summaries()
if not summaries:
    st.info("No experiments yet. Log one from Python (`Tracker().create_experiment(...)`, then "
            "`log_impressions` / `log_interactions`), import files with `tracker import`, or "
            f"run `tracker demo` to simulate one. Database: {data.where()}")
    st.stop()

st.caption("Decision and health as of each experiment's latest complete day, under its "
           "analysis plan, as the last rollup stored them: the same as `tracker report`. "
           "Data through: the newest event (list served or interaction) the rollup saw; stale "
           "after 36 h without one. "
           "A failing health shows no lift (untrusted). Open an experiment for its results.")
now = datetime.now(UTC)  # the one clock of the page: how old each experiment's data is
st.markdown(components.experiments_html(summaries, now), unsafe_allow_html=True)
for s in summaries:
    st.page_link("views/experiment.py", label=f"Open {components.code(s.info.key)}",
                 query_params={"experiment": s.info.key}, icon=":material/insights:")
