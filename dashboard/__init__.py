"""The Streamlit dashboard: reads the rollup's tables and ``tracker.stats``, never raw logs."""
