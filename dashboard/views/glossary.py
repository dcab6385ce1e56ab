"""Each metric's formula and convention, from the docstrings of ``tracker.metrics`` (one source
of truth)."""

from __future__ import annotations

import streamlit as st

from dashboard import data

st.title("Metric glossary")
st.caption("From the docstrings of tracker.metrics: the functions the rollup itself calls.")
for name, summary, doc in data.glossary():
    with st.expander(f"{name} — {summary}"):
        st.code(doc, language=None)
