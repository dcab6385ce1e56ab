"""One metric over calendar days: what the dashboard's "Metrics over time" charts draw.

For one metric and cutoff, per day of a view (daily, or cumulative through each day): each
arm's estimate with its interval, and each treatment arm's relative lift against control
with its interval and p-value. The lift is the scorecard's own comparison
(:func:`tracker.report.rows.comparison`, fixed-horizon or always-valid, with the CUPED inputs
of :func:`tracker.report.rows.cuped_inputs`), so the lift charted on a day is the one
``tracker report --day DAY`` prints for that day (before the multiple-comparison
correction, which widens the scorecard's primaries' and secondaries' intervals; a
guardrail's row is uncorrected).

**CUPED**: given the view's covariate sums (:func:`tracker.store.computed.covariate_table`),
a day that has them for every arm of the metric is regression-adjusted with θ fitted on that
day's arms (:func:`tracker.stats.fit_adjustment`): the lift is
:func:`tracker.stats.compare_adjusted` (or its sequential form), and each arm's estimate is
its adjusted mean Ŷ_a − θᵀ(x̄_a − x̄) (:func:`tracker.stats.adjusted_moments`, the very arms
that comparison subtracts) with the Student-t interval of its residual variance
(:func:`tracker.stats.moments_estimate`), so the gap between two lines is the lift drawn
below them. The scorecard's table keeps the arms' own means; ``unadjusted_mean`` carries them
here. Days without covariate sums stay unadjusted. ``adjusted`` says which, per row: True when
the day's adjustment used at least one covariate (with no pre-exposure data there is nothing
to adjust on and the numbers are the unadjusted ones exactly); ``variance_reduction`` is the
share of the lift's variance removed (0 unadjusted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from tracker import stats
from tracker.report.rows import Cuped, comparison, cuped_inputs, finite
from tracker.store.experiments import ExperimentInfo

VALUE_COLUMNS = ["day", "arm", "mean", "ci_low", "ci_high", "unadjusted_mean", "adjusted",
                 "provisional"]
LIFT_COLUMNS = ["day", "arm", "relative_lift", "ci_low", "ci_high", "p_value",
                "variance_reduction", "adjusted", "provisional"]


@dataclass(frozen=True)
class MetricSeries:
    """``values``: per (day, arm) the estimate and its interval (:data:`VALUE_COLUMNS`);
    ``lifts``: per (day, treatment arm) the relative lift against control
    (:data:`LIFT_COLUMNS`); ``kind``: the metric's (None without rows)."""

    values: pd.DataFrame
    lifts: pd.DataFrame
    kind: str | None = None  # the metric's: user (per-user values) or set (one per arm)

    def to_frame(self) -> pd.DataFrame:
        """One row per (day, arm): the values, then the lift's columns as the scorecard names
        them (``relative_lift``, ``relative_lift_ci_low``, ..., empty on control rows and
        set-level metrics): the CSV the dashboard offers."""
        lifts = self.lifts.drop(columns=["adjusted", "provisional"]).rename(
            columns={"ci_low": "relative_lift_ci_low", "ci_high": "relative_lift_ci_high"})
        return self.values.merge(lifts, on=["day", "arm"], how="left")

    @property
    def days(self) -> int:
        """How many days the series has."""
        return int(self.values["day"].nunique()) if len(self.values) else 0

    @property
    def adjusted_days(self) -> int:
        """How many of the days are regression-adjusted."""
        if self.values.empty:
            return 0
        return int(self.values.loc[self.values["adjusted"], "day"].nunique())


def metric_series(info: ExperimentInfo, table: pd.DataFrame, metric: str, k: int | None, *,
                  level: float = 0.95, intervals: str = "fixed_horizon",
                  covariates: pd.DataFrame | None = None) -> MetricSeries:
    """``metric@k`` over the days of ``table`` (:func:`tracker.store.computed.metric_table`,
    daily or cumulative), regression-adjusted on the days ``covariates`` (the same view's
    :func:`~tracker.store.computed.covariate_table`; None: CUPED off) has sums for."""
    rows = _of_metric(table, metric, k)
    sums = _by_day(None if covariates is None or covariates.empty
                   else _of_metric(covariates, metric, k))
    values: list[dict[str, Any]] = []
    lifts: list[dict[str, Any]] = []
    for day, group in rows.groupby("day", sort=True):
        by_arm = {r.arm: r for r in group.itertuples(index=False)}
        # as the report: no comparison (so no adjustment) on a day without control
        fits = cuped_inputs(by_arm, sums.get(day), metric, k) \
            if info.control in by_arm else None
        values.extend(_values(day, by_arm, fits, level))
        lifts.extend(_lifts(day, info.control, by_arm, fits, level, intervals))
    return MetricSeries(pd.DataFrame(values, columns=VALUE_COLUMNS),
                        pd.DataFrame(lifts, columns=LIFT_COLUMNS),
                        str(rows["kind"].iloc[0]) if len(rows) else None)


def _of_metric(frame: pd.DataFrame, metric: str, k: int | None) -> pd.DataFrame:
    return frame[(frame["metric"] == metric)
                 & (frame["k"].isna() if k is None else frame["k"] == k)]


def _by_day(covariates: pd.DataFrame | None) -> dict:
    """The covariate sums of each day, each keeping the names of the covariates."""
    if covariates is None or covariates.empty:
        return {}
    out = {}
    for day, group in covariates.groupby("day", sort=False):
        group.attrs["covariates"] = covariates.attrs["covariates"]
        out[day] = group
    return out


def _active(fits) -> bool:
    return fits is not None and fits[1].active


def _values(day, by_arm: dict, fits, level: float) -> list[dict[str, Any]]:
    """Each arm's estimate on ``day``: adjusted when ``fits`` adjusts (see the module doc)."""
    out = []
    for arm, r in by_arm.items():
        row = {"day": day, "arm": arm, "unadjusted_mean": finite(r.mean),
               "provisional": bool(r.provisional)}
        if r.kind == "set":  # one value per arm: no interval, nothing to adjust
            out.append({**row, "mean": finite(r.mean), "ci_low": None, "ci_high": None,
                        "adjusted": False})
            continue
        if _active(fits):
            estimate = stats.moments_estimate(stats.adjusted_moments(fits[0][arm], fits[1]),
                                              level=level)
        else:
            estimate = stats.arm_estimate(_mean_stats(r), level=level)
        out.append({**row, "mean": finite(estimate.estimate), "ci_low": finite(estimate.ci_low),
                    "ci_high": finite(estimate.ci_high), "adjusted": _active(fits)})
    return out


def _lifts(day, control: str, by_arm: dict, fits, level: float,
           intervals: str) -> list[dict[str, Any]]:
    """Each treatment arm's comparison against ``control`` on ``day``, as the scorecard's."""
    base = by_arm.get(control)
    if base is None or base.kind == "set":
        return []
    out = []
    for arm, r in by_arm.items():
        if arm == control:
            continue
        cuped = None if fits is None else Cuped(fits[0][arm], fits[0][control], fits[1])
        compared = comparison(intervals, _mean_stats(r), _mean_stats(base), level, level, cuped)
        lift = compared.result.relative_lift
        out.append({"day": day, "arm": arm, "relative_lift": finite(lift.estimate),
                    "ci_low": finite(lift.ci_low), "ci_high": finite(lift.ci_high),
                    "p_value": finite(compared.result.p_value),
                    "variance_reduction": compared.variance_reduction,
                    "adjusted": _active(fits), "provisional": bool(r.provisional)})
    return out


def _mean_stats(r) -> stats.MeanStats:
    return stats.MeanStats(int(r.users), float(r.sum), float(r.sum_sq))
