"""The read API of the computed tables (what the rollup wrote), shared by the report, the
dashboard and users (``Tracker.metric_table`` / ``health_table``). It lives in the store, not in
the rollup: reading the results needs no attribution or metric code, and the dashboard, which
reads only computed tables, imports nothing of :mod:`tracker.rollup`.

:func:`metric_table` returns one row per (day, arm, metric, k) with the sufficient statistics
and the mean (:func:`exposure_day_table` the same per days since each user's first exposure,
:func:`metric_view` any of the three views by name); :func:`health_table` the users,
impressions and crossover users per arm and day (``arm`` empty for the whole experiment).
``k`` is empty (``<NA>``) for metrics without a cutoff (``r_precision``, ``song_clicks``).

Columns of :func:`metric_table`: ``day, arm, metric, k, kind, users, mean, sum, sum_sq,
impressions, impressions_sq, ratio_sum, ratio_sum_sq, ratio_cross, provisional``.

- ``kind == "user"``: ``users`` counts the users with a value, ``mean = sum / users`` is the
  mean over users of each user's mean over their impressions; ``sum_sq`` is Σx². The
  ``impressions*`` and ``ratio_*`` columns are Σm, Σm², Σy, Σy², Σy·m with m the user's
  impressions and y the user's sum (the per-impression ratio view, delta method).
- ``kind == "set"`` (coverage, gini, entropy): one value for the arm's set of lists;
  ``mean == sum`` is that value and ``users`` the arm's users.
"""

from __future__ import annotations

import pandas as pd
import sqlalchemy as sa

from tracker.errors import ValidationError
from tracker.store import results
from tracker.store.db import require_current_schema, transaction
from tracker.store.experiments import get_experiment
from tracker.store.rollup_tables import (
    COVARIATES,
    CROSSOVER,
    WHOLE_ARM,
    RollupCovariateSums,
    RollupExposureDay,
    covariate_sum_columns,
)

METRIC_COLUMNS = ["day", "arm", "metric", "k", "kind", "users", "mean", "sum", "sum_sq",
                  "impressions", "impressions_sq", "ratio_sum", "ratio_sum_sq", "ratio_cross",
                  "provisional"]
HEALTH_COLUMNS = ["day", "arm", "users", "impressions", "crossover_users", "provisional"]


def _arm_frame(engine: sa.Engine, experiment: str, fetch, columns: list[str],
               segment: str | None = None) -> pd.DataFrame:
    """``fetch(conn, experiment_id)``'s rows as a frame with the arm keys in ``arm`` and a
    boolean ``provisional`` (``segment``: a dimension the experiment declares, else
    :class:`~tracker.errors.ValidationError`)."""
    require_current_schema(engine)
    with transaction(engine) as conn:
        info = get_experiment(conn, experiment)
        if segment not in (None, CROSSOVER) and segment not in {s.name for s in info.segments}:
            declared = ", ".join(s.name for s in info.segments) or "none"
            raise ValidationError(f"experiment {experiment!r} declares no dimension "
                                  f"{segment!r} (declared: {declared})", field="segment")
        rows = fetch(conn, info.id)
    frame = pd.DataFrame(rows, columns=columns)
    frame["arm"] = frame["arm_id"].map({arm.id: arm.key for arm in info.arms})
    frame["provisional"] = frame["provisional"].astype(bool)
    return frame


def _sliced(columns: list[str], segment: str | None) -> list[str]:
    """``columns`` with ``slice`` after ``arm`` when read for a dimension."""
    if segment is None:
        return columns
    at = columns.index("arm") + 1
    return [*columns[:at], "slice", *columns[at:]]


def metric_table(engine: sa.Engine, experiment: str, cumulative: bool = False,
                 segment: str | None = None) -> pd.DataFrame:
    """Arm-day statistics of ``experiment`` (daily, or cumulative from its first day); with
    ``segment`` (a declared dimension), its slices' instead, their values in ``slice``."""
    columns = _sliced(METRIC_COLUMNS, segment)
    frame = _arm_frame(engine, experiment, lambda conn, eid: results.metric_rows(
                           conn, eid, cumulative, WHOLE_ARM if segment is None else segment),
                       [c for c in METRIC_COLUMNS if c not in ("arm", "mean")]
                       + ["arm_id", "segment", "slice"], segment)
    frame["k"] = frame["k"].where(frame["k"] > 0).astype("Int64")
    users = frame["users"].where(frame["users"] > 0)
    frame["mean"] = (frame["sum"] / users).where(frame["kind"] == "user", frame["sum"])
    return frame[columns].reset_index(drop=True)


VIEWS = ("daily", "cumulative", "exposure_day")
EXPOSURE_DAY_COLUMNS = ["exposure_day"] + METRIC_COLUMNS[1:]


def metric_view(engine: sa.Engine, experiment: str, view: str) -> pd.DataFrame:
    """:func:`metric_table` (``view`` daily or cumulative) or :func:`exposure_day_table`."""
    if view not in VIEWS:
        raise ValidationError(f"unknown view {view!r}: expected one of {', '.join(VIEWS)}",
                              field="view")
    if view == "exposure_day":
        return exposure_day_table(engine, experiment)
    return metric_table(engine, experiment, cumulative=view == "cumulative")


def exposure_day_table(engine: sa.Engine, experiment: str,
                       segment: str | None = None) -> pd.DataFrame:
    """Per-user metrics by days since exposure: one row per (exposure_day, arm, metric, k),
    day 0 being each user's first day with an impression of the experiment, summed over the
    calendar days (see :mod:`tracker.rollup.exposure_days`). The columns of
    :func:`metric_table` with ``exposure_day`` (int) in place of ``day``; ``kind`` is always
    ``"user"`` (set-level metrics have no exposure-day value); ``provisional`` when any of
    the calendar days added up is. With ``segment`` (a declared dimension), its slices'
    instead, their values in ``slice``."""
    frame = _arm_frame(engine, experiment,
                       lambda conn, eid: _exposure_day_rows(conn, eid, segment),
                       ["exposure_day", "arm_id", "slice", "metric", "k", "users", "sum",
                        "sum_sq", "impressions", "impressions_sq", "ratio_sum",
                        "ratio_sum_sq", "ratio_cross", "provisional"], segment)
    frame["exposure_day"] = frame["exposure_day"].astype("int64")
    frame["users"] = frame["users"].astype("int64")
    frame["kind"] = "user"
    frame["k"] = frame["k"].where(frame["k"] > 0).astype("Int64")
    frame["mean"] = frame["sum"] / frame["users"].where(frame["users"] > 0)
    return frame[_sliced(EXPOSURE_DAY_COLUMNS, segment)].reset_index(drop=True)


def _exposure_day_rows(conn: sa.Connection, experiment_id: int,
                       segment: str | None) -> list[tuple]:
    """``rollup_exposure_day`` added up over calendar days, per (exposure day, arm, slice,
    metric, k) of the whole arms or of ``segment``'s slices: the sufficient statistics
    add."""
    table = RollupExposureDay.__table__
    keys = [table.c.exposure_day, table.c.arm_id, table.c.slice, table.c.metric, table.c.k]
    summed = [sa.func.sum(table.c[name]) for name in
              ("users", "sum", "sum_sq", "impressions", "impressions_sq", "ratio_sum",
               "ratio_sum_sq", "ratio_cross")]
    provisional = sa.func.max(sa.case((table.c.provisional, 1), else_=0))
    return [tuple(row) for row in conn.execute(
        sa.select(*keys, *summed, provisional).where(
            table.c.experiment_id == experiment_id,
            table.c.segment == (WHOLE_ARM if segment is None else segment))
        .group_by(*keys).order_by(*keys))]


def covariate_table(engine: sa.Engine, experiment: str, cumulative: bool = True,
                    day=None, segment: str | None = None) -> pd.DataFrame:
    """CUPED's covariate sums per (day, arm, metric, k): ``x:<c>`` = Σx_c, ``xx:<a>*<b>`` =
    Σx_a·x_b, ``xy:<c>`` = Σx_c·(user mean), ``xs:<c>`` / ``xm:<c>`` = Σx_c·(user sum) /
    Σx_c·(user impressions), over the users of the matching :func:`metric_table` row;
    ``attrs["covariates"]`` names the covariates (``pre_interactions, pre_graded,
    no_pre_period, pre_metric, no_pre_lists``; ``pre_metric`` is the row's own metric before
    exposure). Empty when the experiment has none (CUPED off, or not rolled up since it was
    on). ``day``: that day only; ``segment``: the slices of that dimension (``slice``)."""
    require_current_schema(engine)
    table = RollupCovariateSums.__table__
    sums = covariate_sum_columns()
    query = sa.select(table.c.day, table.c.arm_id, table.c.slice, table.c.metric, table.c.k,
                      *[table.c[column].label(name) for name, column in sums])
    with transaction(engine) as conn:
        info = get_experiment(conn, experiment)
        query = query.where(table.c.experiment_id == info.id,
                            table.c.cumulative.is_(cumulative),
                            table.c.segment == (WHOLE_ARM if segment is None else segment))
        if day is not None:
            query = query.where(table.c.day == day)
        rows = conn.execute(query.order_by(table.c.day, table.c.arm_id, table.c.slice,
                                           table.c.metric, table.c.k)).all()
    frame = pd.DataFrame(rows, columns=["day", "arm_id", "slice", "metric", "k"]
                         + [name for name, _ in sums])
    frame.insert(1, "arm", frame.pop("arm_id").map({a.id: a.key for a in info.arms}))
    if segment is None:
        frame = frame.drop(columns="slice")
    frame["k"] = frame["k"].where(frame["k"] > 0).astype("Int64")
    frame.attrs["covariates"] = list(COVARIATES) if rows else []
    return frame


def health_table(engine: sa.Engine, experiment: str, cumulative: bool = False,
                 segment: str | None = None) -> pd.DataFrame:
    """Users, impressions and crossover users per arm and day (``arm`` None: all arms); with
    ``segment``, per arm, slice and day."""
    frame = _arm_frame(engine, experiment, lambda conn, eid: results.health_rows(
                           conn, eid, cumulative, WHOLE_ARM if segment is None else segment),
                       ["day", "arm_id", "segment", "slice", "users", "impressions",
                        "crossover_users", "provisional"], segment)
    return frame[_sliced(HEALTH_COLUMNS, segment)].reset_index(drop=True)


def day_table(engine: sa.Engine, experiment: str) -> pd.DataFrame:
    """Per rolled-up day: impressions, users, when its windows close, when it was computed;
    ``attrs["last_run"]``: the last rollup, ``attrs["logged"]``: whether any impression of
    the experiment is stored (rolled up or not). How fresh the data is comes from the
    experiment's stored summary (the newest event times the last run saw), not from here."""
    require_current_schema(engine)
    with transaction(engine) as conn:
        info = get_experiment(conn, experiment)
        rows = results.day_rows(conn, info.id)
        last = results.last_run(conn, info.id)
        logged = results.logged(conn, info.id)
    frame = pd.DataFrame(rows, columns=["day", "impressions", "users", "closes_at",
                                        "computed_at"])
    frame["provisional"] = frame["computed_at"] < frame["closes_at"]
    frame.attrs["last_run"] = last
    frame.attrs["logged"] = logged
    return frame
