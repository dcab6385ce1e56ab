"""tracker's dashboard (``tracker dashboard``): experiments, scorecards, metrics over time.

Pages only compose: reads live in :mod:`dashboard.data` (cached), display in
:mod:`dashboard.components`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent
if str(ROOT.parent) not in sys.path:  # `streamlit run dashboard/app.py` from anywhere
    sys.path.insert(0, str(ROOT.parent))

st.set_page_config(page_title="tracker", page_icon=":material/monitoring:", layout="wide")
pages = [
    st.Page(ROOT / "views" / "experiments.py", title="Experiments", icon=":material/science:",
            default=True),
    st.Page(ROOT / "views" / "experiment.py", title="Experiment",
            icon=":material/insights:", url_path="experiment"),
    st.Page(ROOT / "views" / "glossary.py", title="Metric glossary",
            icon=":material/menu_book:", url_path="glossary"),
]
st.navigation(pages).run()
