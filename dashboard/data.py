"""Every read the dashboard makes, cached; pages and components never query anything.

The dashboard opens the database read-only and computes nothing heavy: it reads the rollup's
tables through :mod:`tracker.store.computed` and the scorecard through
:func:`tracker.report.report` (the very function behind ``tracker report``, so the two
cannot show different numbers); the metrics over time from :mod:`tracker.report.series`
(the scorecard's comparison, day by day).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import pandas as pd
import streamlit as st

from tracker.config import Settings, mask_password
from tracker.errors import TrackerError
from tracker.report import Scorecard, report
from tracker.report.series import MetricSeries, metric_series
from tracker.store import computed
from tracker.store.db import create_engine, require_current_schema, transaction
from tracker.store.experiments import ExperimentInfo, get_experiment, list_experiments

TTL = 60  # seconds: a rollup runs nightly or every few minutes, not every second


@st.cache_resource
def engine():
    settings = Settings.from_env()
    return create_engine(settings.database_url, settings, read_only=True)


def schema_problem() -> str | None:
    """Why the database cannot be read (a bad URL, unreachable, no schema, or behind), or
    None; one line, with no secret in it (tracker's errors are redacted)."""
    try:
        require_current_schema(engine())
    except TrackerError as problem:
        return str(problem)
    return None


def where() -> str:
    return mask_password(engine().url.render_as_string(hide_password=False))


@st.cache_data(ttl=TTL)
def experiments() -> list[ExperimentInfo]:
    with transaction(engine()) as conn:
        return list_experiments(conn, include_archived=False)


@st.cache_data(ttl=TTL)
def experiment(key: str) -> ExperimentInfo:
    with transaction(engine()) as conn:
        return get_experiment(conn, key)


@st.cache_data(ttl=TTL)
def metric_table(key: str, cumulative: bool) -> pd.DataFrame:
    return computed.metric_table(engine(), key, cumulative)


@st.cache_data(ttl=TTL)
def health_table(key: str, cumulative: bool) -> pd.DataFrame:
    return computed.health_table(engine(), key, cumulative)


@st.cache_data(ttl=TTL)
def day_table(key: str) -> pd.DataFrame:
    return computed.day_table(engine(), key)


@st.cache_data(ttl=TTL)
def card(key: str, as_of: date | None, cumulative: bool, intervals: str,
         level: float, cuped: bool = True) -> Scorecard:
    """The scorecard from the very function behind ``tracker report`` (same tables, same
    latest received event for freshness, the day's health in a daily view; ``cuped`` as
    ``--cuped/--no-cuped``)."""
    return report(engine(), key, cumulative=cumulative, as_of=as_of, intervals=intervals,
                  level=level, cuped=cuped)


@dataclass(frozen=True)
class ArmDecision:
    """One treatment arm's decision as the experiments list shows it."""

    arm: str
    outcome: str


@dataclass(frozen=True)
class Summary:
    """One line of the experiments page: the experiment, its users, latest complete day, the
    scorecard's decision per treatment arm and health (overall status and the worst item's
    sentence), and the first primary metric's relative lift per treatment arm."""

    info: ExperimentInfo
    users: int
    latest_final_day: date | None
    decisions: tuple[ArmDecision, ...]
    health_status: str | None
    health_note: str | None
    headline: str | None
    headline_lift: dict[str, float | None]


def _label(row: dict) -> str:
    return row["metric"] if row["k"] is None else f"{row['metric']}@{row['k']}"


def _worst_item(checklist: list[dict]) -> str | None:
    """The sentence of the most severe failing or warning item (None when all pass)."""
    for status in ("fail", "warn"):
        for item in checklist:
            if item["status"] == status:
                return f"{item['check']}: {item['message']}"
    return None


@st.cache_data(ttl=TTL)
def summaries() -> list[Summary]:
    out = []
    for info in experiments():
        days = day_table(info.key)
        if days.empty:
            out.append(Summary(info, 0, None, (), None, None, None, {}))
            continue
        sc = card(info.key, None, True, "fixed_horizon", 0.95)
        final = days[~days["provisional"]]["day"]
        headline = sc.primary[0] if sc.primary else None
        lifts = {r["arm"]: r["relative_lift"] for r in sc.metrics
                 if headline and _label(r) == headline and not r["control"]}
        decisions = tuple(ArmDecision(d["arm"], d["outcome"])
                          for d in sc.decisions)
        checklist = sc.health["checklist"]
        out.append(Summary(info, sum(sc.health["users"].values()),
                           max(final) if len(final) else None, decisions,
                           sc.health["status"], _worst_item(checklist), headline, lifts))
    return out


@st.cache_data(ttl=TTL)
def covariate_table(key: str, cumulative: bool) -> pd.DataFrame:
    return computed.covariate_table(engine(), key, cumulative)


@st.cache_data(ttl=TTL)
def series(key: str, metric: str, k: int | None, cumulative: bool, intervals: str,
           level: float, cuped: bool = True) -> MetricSeries:
    """One metric over time (:func:`tracker.report.series.metric_series`): per (day, arm) the
    estimate and its interval, and per (day, treatment arm) the scorecard's comparison against
    control (fixed-horizon or always-valid); with ``cuped``, regression-adjusted on the days
    the rollup stored covariate sums for, as the scorecard is."""
    covariates = covariate_table(key, cumulative) if cuped else None
    return metric_series(experiment(key), metric_table(key, cumulative), metric, k,
                         level=level, intervals=intervals, covariates=covariates)


@st.cache_data(ttl=TTL)
def users_over_time(key: str) -> pd.DataFrame:
    """Cumulative users per arm and day, with the share each arm should have."""
    table = health_table(key, True)
    table = table[table["arm"].notna()]
    info = experiment(key)
    total = sum(arm.weight for arm in info.arms)
    expected = {arm.key: arm.weight / total for arm in info.arms}
    day_totals = table.groupby("day")["users"].transform("sum")
    return table.assign(share=table["users"] / day_totals.where(day_totals > 0),
                        expected=table["arm"].map(expected))
