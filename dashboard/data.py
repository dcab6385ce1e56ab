"""Every read the dashboard makes, cached; pages and components never query anything.

The dashboard opens the database read-only and computes nothing heavy: it reads the rollup's
tables through :mod:`tracker.store.computed` and the scorecard through
:func:`tracker.report.report` (the very function behind ``tracker report``, so the two
cannot show different numbers); the metrics over time from :mod:`tracker.report.series`
(the scorecard's comparison, day by day).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

import pandas as pd
import streamlit as st

from tracker.config import Settings, mask_password
from tracker.errors import TrackerError
from tracker.report import Scorecard, report
from tracker.report.series import MetricSeries, metric_series
from tracker.report.summary import ExperimentSummary
from tracker.store import computed
from tracker.store.db import create_engine, require_current_schema, transaction
from tracker.store.experiments import (
    ExperimentInfo,
    find_experiment,
    get_experiment,
    list_experiments,
)
from tracker.store.summaries import read_summaries

TTL = 60  # seconds: a rollup runs nightly or every few minutes, not every second
# Each cached read names what it does while it runs (Streamlit's default is the function's
# name: "Running `summaries()`"), so a cold start reads as progress, not as a blank page.


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


@st.cache_data(ttl=TTL, show_spinner="Reading the experiments…")
def experiments() -> list[ExperimentInfo]:
    with transaction(engine()) as conn:
        return list_experiments(conn, include_archived=False)


@st.cache_data(ttl=TTL, show_spinner="Reading the experiment…")
def experiment(key: str) -> ExperimentInfo:
    with transaction(engine()) as conn:
        return get_experiment(conn, key)


@st.cache_data(ttl=TTL, show_spinner="Looking the experiment up…")
def find(key: str) -> ExperimentInfo | None:
    """Experiment ``key`` (archived ones too: a shared link may name one), or None."""
    with transaction(engine()) as conn:
        return find_experiment(conn, key)


@st.cache_data(ttl=TTL, show_spinner="Reading the rolled-up metrics…")
def metric_table(key: str, cumulative: bool) -> pd.DataFrame:
    return computed.metric_table(engine(), key, cumulative)


@st.cache_data(ttl=TTL, show_spinner="Reading the users per arm…")
def health_table(key: str, cumulative: bool) -> pd.DataFrame:
    return computed.health_table(engine(), key, cumulative)


@st.cache_data(ttl=TTL, show_spinner="Reading the rolled-up days…")
def day_table(key: str) -> pd.DataFrame:
    return computed.day_table(engine(), key)


@st.cache_data(ttl=TTL, show_spinner="Computing the scorecard (decision, health, results)…")
def card(key: str, as_of: date | None, cumulative: bool, intervals: str | None,
         level: float, cuped: bool | None = None) -> Scorecard:
    """The scorecard from the very function behind ``tracker report`` (same tables, same
    stored newest event time for freshness, the day's health in a daily view; ``cuped`` as
    ``--cuped/--no-cuped``; None: as the experiment's analysis plan says)."""
    return report(engine(), key, cumulative=cumulative, as_of=as_of, intervals=intervals,
                  level=level, cuped=cuped)


@dataclass(frozen=True)
class Summary:
    """One line of the experiments page: the experiment and the summary the last rollup
    stored for it (None before any rollup since summaries exist), and when it was written."""

    info: ExperimentInfo
    summary: ExperimentSummary | None
    written_at: datetime | None


@st.cache_data(ttl=TTL, show_spinner="Reading each experiment's stored summary…")
def summaries() -> list[Summary]:
    """Every listed experiment with its stored summary: two queries, however many
    experiments (the rollup wrote the summaries: :mod:`tracker.publish`)."""
    with transaction(engine()) as conn:
        infos = list_experiments(conn, include_archived=False)
        stored = read_summaries(conn)
    out = []
    for info in infos:
        written, document = stored.get(info.key, (None, None))
        out.append(Summary(info, None if document is None
                           else ExperimentSummary.from_dict(document), written))
    return out


@st.cache_data(ttl=TTL, show_spinner="Reading the CUPED covariates…")
def covariate_table(key: str, cumulative: bool) -> pd.DataFrame:
    return computed.covariate_table(engine(), key, cumulative)


@st.cache_data(ttl=TTL, show_spinner="Computing the metric over time…")
def series(key: str, metric: str, k: int | None, cumulative: bool, intervals: str,
           level: float, cuped: bool = True) -> MetricSeries:
    """One metric over time (:func:`tracker.report.series.metric_series`): per (day, arm) the
    estimate and its interval, and per (day, treatment arm) the scorecard's comparison against
    control (fixed-horizon or always-valid); with ``cuped``, regression-adjusted on the days
    the rollup stored covariate sums for, as the scorecard is."""
    covariates = covariate_table(key, cumulative) if cuped else None
    return metric_series(experiment(key), metric_table(key, cumulative), metric, k,
                         level=level, intervals=intervals, covariates=covariates)


@st.cache_data(ttl=TTL, show_spinner="Reading the users per arm over time…")
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
