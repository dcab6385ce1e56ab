"""Every experiment: status, dates, arms, users so far, latest complete day, health, and the
headline metric's lift."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data

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

rows = []
for s in summaries:
    info = s.info
    badge = ("no rollup yet" if s.latest_final_day is None and not s.users else
             "SRM alert" if s.srm_flagged else
             f"crossover {s.crossover_status}" if s.crossover_status in ("warn", "alert") else
             "stale" if s.data_lag_hours is not None and s.data_lag_hours > 48 else "ok")
    lift = ", ".join(f"{arm} {value:+.2%}" for arm, value in s.headline_lift.items()
                     if value is not None)
    rows.append({
        "experiment": info.key, "name": info.name, "status": info.status,
        "starts": info.starts_at.date().isoformat() if info.starts_at else "",
        "ends": info.ends_at.date().isoformat() if info.ends_at else "",
        "arms": ", ".join(a.key + (" (control)" if a.key == info.control else "")
                          for a in info.arms),
        "users": s.users,
        "latest complete day": s.latest_final_day.isoformat() if s.latest_final_day else "",
        "health": badge, "headline": s.headline or "", "lift": lift,
    })
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
for s in summaries:
    st.page_link("views/experiment.py", label=f"Open {s.info.key}",
                 query_params={"experiment": s.info.key}, icon=":material/insights:")
