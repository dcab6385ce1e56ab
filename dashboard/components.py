"""Display components: functions from prepared data to Streamlit elements (no queries, no
formulas: the numbers come from :mod:`dashboard.data`)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from tracker.metrics import catalog
from tracker.report import Scorecard, format_p, shown_interval

GROUPS = tuple(group.label for group in catalog.GROUPS) + ("Other",)
MARKERS = {"better": "▲ better", "worse": "▼ worse", "inconclusive": "· inconclusive",
           None: "— (set-level: no test)"}
DIRECTIONS = {"higher": "↑ higher", "lower": "↓ lower", None: ""}


def _fmt(value, pattern="{:.4f}") -> str:
    return "" if value is None or value != value else pattern.format(value)


def _interval(low, high, pattern="{:.4f}") -> str:
    if low is None or high is None:
        return ""
    return f"[{pattern.format(low)}, {pattern.format(high)}]"


def health_banner(card: Scorecard) -> None:
    h = card.health
    srm = ("SRM: no users yet" if h["srm_p_value"] is None
           else f"SRM p = {h['srm_p_value']:.3g}"
           + (f", sequential p = {h['srm_sequential_p_value']:.3g}"
              if h["srm_sequential_p_value"] is not None else "")
           + (f" ({h['srm_deviation']})" if h["srm_flagged"] and h.get("srm_deviation") else ""))
    crossover = ("crossover: n/a" if h["crossover_share"] is None else
                 f"crossover {h['crossover_users']} users ({h['crossover_share']:.2%}, "
                 f"{h['crossover_status']})")
    lag = "" if h["data_lag_hours"] is None else f"data lag {h['data_lag_hours']:.0f} h"
    rollup = f"last rollup {h['last_rollup'][:16].replace('T', ' ')} UTC" if h["last_rollup"] \
        else "never rolled up"
    provisional = f"{len(h['provisional_days'])} provisional day(s)"
    text = " · ".join(x for x in (srm, crossover, provisional, rollup, lag) if x)
    if h["srm_flagged"] or h["crossover_status"] == "alert":
        st.error(f"Health alert — {text}. Do not trust the lifts until this is explained.")
    elif h["crossover_status"] == "warn" or h["provisional_days"]:
        st.warning(f"Health — {text}")
    else:
        st.success(f"Health OK — {text}")


def scorecard_frame(card: Scorecard, k: int | None) -> pd.DataFrame:
    """The scorecard rows at cutoff ``k`` (and the metrics without one) as a table."""
    rows = []
    for r in card.metrics:
        if r["k"] is not None and r["k"] != k:
            continue
        rows.append({
            "metric": r["metric"] if r["k"] is None else f"{r['metric']}@{r['k']}",
            "group": catalog.Group(r["group"]).label if r["group"] else "Other",
            "better": DIRECTIONS[r["direction"]],
            "arm": r["arm"] + (" (control)" if r["control"] else ""),
            "users": r["users"], "value": _fmt(r["mean"]),
            "interval": _interval(r["ci_low"], r["ci_high"]),
            "lift": "" if r["control"] else _fmt(r.get("lift"), "{:+.4f}"),
            "relative lift": "" if r["control"] else _fmt(r.get("relative_lift"), "{:+.2%}"),
            "lift interval": "" if r["control"] else shown_interval(r, digits=2,
                                                                    with_point=False),
            "p": "" if r["control"] or r.get("p_value") is None else format_p(r["p_value"]),
            "p adjusted": "" if r["control"] or r.get("p_value_adjusted") is None
            else format_p(r["p_value_adjusted"]),
            "verdict": "" if r["control"] else MARKERS.get(r.get("verdict"), ""),
        })
    return pd.DataFrame(rows)


def scorecard_tables(frame: pd.DataFrame) -> None:
    if frame.empty:
        st.info("No metric rows for this day.")
        return
    for group in GROUPS:
        part = frame[frame["group"] == group].drop(columns="group")
        if part.empty:
            continue
        st.markdown(f"**{group}**")
        st.dataframe(part, hide_index=True, width="stretch")


def _status(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(status=frame["provisional"].map({True: "provisional",
                                                         False: "final"}))


def metric_chart(values: pd.DataFrame, title: str) -> None:
    """One line per arm with its interval band; provisional days as hollow points."""
    if values.empty:
        st.info("No values yet.")
        return
    data = _status(values)
    base = alt.Chart(data).encode(x=alt.X("day:T", title="day"),
                                  color=alt.Color("arm:N", title="arm"))
    band = base.mark_area(opacity=0.15).encode(y="ci_low:Q", y2="ci_high:Q")
    line = base.mark_line().encode(y=alt.Y("mean:Q", title=title))
    points = base.mark_point(size=50).encode(
        y="mean:Q", shape=alt.Shape("status:N", title="day"),
        fill=alt.condition("datum.status == 'final'", alt.Color("arm:N"), alt.value("white")),
        tooltip=["day:T", "arm:N", alt.Tooltip("mean:Q", format=".4f"),
                 alt.Tooltip("ci_low:Q", format=".4f"), alt.Tooltip("ci_high:Q", format=".4f"),
                 "status:N"])
    st.altair_chart((band + line + points).properties(height=280), width="stretch")


def lift_chart(lifts: pd.DataFrame) -> None:
    if lifts.empty:
        st.info("No lift to show yet (needs users in control and a treatment arm).")
        return
    data = _status(lifts)
    base = alt.Chart(data).encode(x=alt.X("day:T", title="day"),
                                  color=alt.Color("arm:N", title="arm"))
    band = base.mark_area(opacity=0.15).encode(y="ci_low:Q", y2="ci_high:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("relative_lift:Q", title="relative lift vs control", axis=alt.Axis(format="%")),
        tooltip=["day:T", "arm:N", alt.Tooltip("relative_lift:Q", format="+.2%"),
                 alt.Tooltip("p_value:Q", format=".3g"), "status:N"])
    zero = alt.Chart(pd.DataFrame({"y": [0]})).mark_rule(strokeDash=[4, 4]).encode(y="y:Q")
    st.altair_chart((band + line + zero).properties(height=240), width="stretch")


def users_chart(users: pd.DataFrame) -> None:
    if users.empty:
        st.info("No users yet.")
        return
    base = alt.Chart(users).encode(x=alt.X("day:T", title="day"),
                                   color=alt.Color("arm:N", title="arm"))
    actual = base.mark_line(point=True).encode(
        y=alt.Y("share:Q", title="share of users (cumulative)", axis=alt.Axis(format="%")),
        tooltip=["day:T", "arm:N", "users:Q", alt.Tooltip("share:Q", format=".2%")])
    expected = base.mark_line(strokeDash=[6, 4]).encode(y="expected:Q")
    st.altair_chart((actual + expected).properties(height=220), width="stretch")
    st.caption("Solid: observed share of users per arm; dashed: the declared split.")


def glossary_entry(entry: catalog.MetricInfo) -> str:
    """One metric of the glossary as Markdown (its one-line description is the expander's
    label): formula (LaTeX between ``$``), direction, kind, range, cutoff and reference, all
    from the catalogue."""
    cutoff = "takes a cutoff k (`" + entry.label(10) + "`)" if entry.takes_k else "no cutoff"
    return (f"**Formula:** {entry.formula}\n\n"
            f"- **Better:** {DIRECTIONS[entry.direction.value]}\n"
            f"- **Kind:** {entry.kind.label}"
            + (" (one value per arm: no interval, no test)" if entry.kind is catalog.Kind.SET
               else " (mean over users of each user's mean)") + "\n"
            f"- **Range:** {entry.range_text}\n"
            f"- **Cutoff:** {cutoff}\n"
            f"- **Reference:** {entry.reference}")
