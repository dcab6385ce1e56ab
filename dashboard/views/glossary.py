"""Each metric's description, formula, direction, range and reference, rendered as Markdown
from the metric catalogue (``tracker.metrics.catalog``: the list the rollup and the report
read too)."""

from __future__ import annotations

import streamlit as st

from dashboard import components
from tracker.metrics import catalog

st.title("Metric glossary")
st.caption("From the metric catalogue (tracker.metrics.catalog): the same list the rollup, "
           "the report and this dashboard read. ↓ marks a metric where lower is better.")
for group in catalog.GROUPS:
    st.subheader(group.label)
    for name in catalog.in_group(group):
        entry = catalog.CATALOG[name]
        mark = " ↓" if entry.direction is catalog.Direction.LOWER else ""
        with st.expander(f"{name}{mark} — {entry.description}"):
            st.markdown(components.glossary_entry(entry))
