"""Does a treatment's lift fade or grow with time since exposure? The report's ``trends``.

From the ``exposure_day`` view (:func:`tracker.store.computed.exposure_day_table`: per-user
metrics by days since each user's first exposure), per exposure day the relative lift of a
treatment arm against control on a metric, with its delta-method variance and its Fieller
interval (:func:`tracker.stats.contrast`, :func:`tracker.stats.compare`: the report's own
test on that day's users); then the slope of the lifts over the exposure days with at least
:data:`~tracker.stats.trend.MIN_USERS_PER_DAY` users in both arms,
:func:`tracker.stats.trend.exposure_trend` (weights from the users alone, a z test whose
standard error is user-clustered when the store has the users' cross-day sums and takes the
days as independent otherwise, which the store's sums allow today; calibrated in
``benchmarks/README.md``, "Statistics calibration").

The JSON field ``trends`` has one entry per primary metric and treatment arm: ``metric``,
``arm``, ``days`` (exposure days with a lift), ``slope`` (relative lift per day),
``slope_ci_low``, ``slope_ci_high`` (at the report's level), ``p_value``,
``p_value_adjusted`` (the report's correction, Holm by default, over the trends of every
primary and treatment arm, as for the primaries' lifts), ``first_lift`` and ``last_lift``
(the fitted lift on the first and last exposure day), ``trend``, ``reason`` and ``method``
(``independent_days`` or ``user_clustered``, :class:`tracker.stats.trend.TrendMethod`). ``trend`` is
``fading`` (novelty: the treatment looks worse the longer users are exposed, in the metric's
direction) or ``growing`` (primacy: better) when the adjusted p-value is below 1 - level,
``flat`` when it is not, ``none`` when the slope cannot be tested (``reason``: fewer than
three exposure days with a lift, ...). A fading trend on a significantly better primary
keeps the decision at ``keep running`` (a fading lift overstates the long run:
:func:`tracker.stats.decision.decide`); any other trend is a warning to read beside the
decision, not a verdict.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracker import stats
from tracker.report.rows import LOWER_IS_BETTER
from tracker.stats.trend import (
    MIN_USERS_PER_DAY,
    ExposureDays,
    Trend,
    TrendDirection,
    exposure_trend,
)
from tracker.store.experiments import ExperimentInfo

LIFT_COLUMNS = ["exposure_day", "arm", "relative_lift", "ci_low", "ci_high", "variance",
                "users", "control_users", "provisional"]


def _split(name: str) -> tuple[str, int | None]:
    metric, _, k = name.partition("@")
    return metric, int(k) if k else None


def lift_by_exposure_day(info: ExperimentInfo, table: pd.DataFrame, metric: str,
                         k: int | None, level: float = 0.95) -> pd.DataFrame:
    """Per (exposure day, treatment arm) the relative lift of ``metric@k`` against control
    over that day's users, its interval at ``level`` (Fieller) and its delta-method variance
    (None when it has none: an arm without two users, a control mean of 0)."""
    rows = table[(table["metric"] == metric)
                 & (table["k"].isna() if k is None else table["k"] == k)]
    out = []
    for day, group in rows.groupby("exposure_day", sort=True):
        by_arm = {r.arm: r for r in group.itertuples(index=False) if r.users > 0}
        base = by_arm.get(info.control)
        if base is None:
            continue
        control = stats.MeanStats(int(base.users), float(base.sum), float(base.sum_sq))
        for arm in (a.key for a in info.arms if a.key in by_arm and a.key != info.control):
            r = by_arm[arm]
            treatment = stats.MeanStats(int(r.users), float(r.sum), float(r.sum_sq))
            pair = stats.contrast(treatment, control)
            lift = stats.compare(treatment, control, level=level).relative_lift
            out.append({"exposure_day": int(day), "arm": arm, "relative_lift": pair.lift,
                        "ci_low": lift.ci_low, "ci_high": lift.ci_high,
                        "variance": pair.lift_variance, "users": int(r.users),
                        "control_users": int(base.users),
                        "provisional": bool(r.provisional or base.provisional)})
    return pd.DataFrame(out, columns=LIFT_COLUMNS)


def exposure_days_of(info: ExperimentInfo, table: pd.DataFrame, metric: str, k: int | None,
                     arm: str) -> tuple[ExposureDays, ExposureDays] | None:
    """The treatment ``arm`` and control of ``metric@k`` as :class:`ExposureDays` over the
    exposure days both have (None without such a day). The store holds no cross-day sums
    yet, so the test takes the days as independent."""
    rows = table[(table["metric"] == metric)
                 & (table["k"].isna() if k is None else table["k"] == k)]
    by_arm = {a: g.groupby("exposure_day")[["users", "sum", "sum_sq"]].sum()
              for a, g in rows.groupby("arm")}
    if arm not in by_arm or info.control not in by_arm:
        return None
    days = sorted(set(by_arm[arm].index) & set(by_arm[info.control].index))
    if not days:
        return None

    def of(frame: pd.DataFrame) -> ExposureDays:
        part = frame.loc[days]
        return ExposureDays(tuple(int(d) for d in days), part["users"].to_numpy(float),
                            part["sum"].to_numpy(float), part["sum_sq"].to_numpy(float))

    return of(by_arm[arm]), of(by_arm[info.control])


def trend_of(info: ExperimentInfo, table: pd.DataFrame, metric: str, k: int | None, arm: str,
             level: float = 0.95, *, higher_is_better: bool = True) -> tuple[Trend, list[int]]:
    """:func:`exposure_trend` of one treatment arm's lifts, with the exposure days it used
    (those with at least :data:`MIN_USERS_PER_DAY` users in both arms)."""
    pair = exposure_days_of(info, table, metric, k, arm)
    if pair is None:
        return exposure_trend(ExposureDays((), *[np.zeros(0)] * 3),
                              ExposureDays((), *[np.zeros(0)] * 3), level=level), []
    result = exposure_trend(*pair, level=level, higher_is_better=higher_is_better)
    treatment, control = pair
    days = [d for d, nt, nc, s in zip(treatment.days, treatment.users, control.users,
                                      control.sums, strict=True)
            if nt >= MIN_USERS_PER_DAY and nc >= MIN_USERS_PER_DAY and s != 0]
    return result, days


def trends(info: ExperimentInfo, table: pd.DataFrame, primary: tuple[str, ...],
           level: float = 0.95, correction: str = "holm") -> list[dict[str, Any]]:
    """The ``trends`` of the report JSON (see the module docstring)."""
    tests = []
    for name in primary:
        metric, k = _split(name)
        for arm in (a.key for a in info.arms if a.key != info.control):
            result, days = trend_of(info, table, metric, k, arm, level,
                                    higher_is_better=metric not in LOWER_IS_BETTER)
            tests.append((name, arm, result, days))
    adjusted = stats.adjust_primary([t[2].p_value for t in tests], [True] * len(tests),
                                    method=correction)
    return [_entry(*test, p, level) for test, p in zip(tests, adjusted, strict=True)]


def _entry(name: str, arm: str, result: Trend, days: list[int], adjusted: float | None,
           level: float) -> dict[str, Any]:
    if result.slope is None or result.p_value is None or adjusted is None:
        trend = "none"
    elif adjusted >= 1 - level or result.direction is TrendDirection.NONE:
        trend = "flat"
    else:
        trend = result.direction.value
    fitted = (None, None)
    if result.slope is not None and result.intercept is not None:
        fitted = tuple(result.intercept + result.slope * d for d in (min(days), max(days)))
    return {"metric": name, "arm": arm, "days": len(days), "slope": result.slope,
            "slope_ci_low": result.ci_low, "slope_ci_high": result.ci_high,
            "p_value": result.p_value, "p_value_adjusted": adjusted,
            "first_lift": fitted[0], "last_lift": fitted[1],
            "trend": trend, "reason": result.reason.value, "method": result.method.value}


def trend_notes(trends_: list[dict[str, Any]]) -> list[str]:
    """One line per fading or growing trend, for the text report."""
    words = {"fading": "fading (novelty?)", "growing": "growing (primacy?)"}
    return [f"Trend: {t['arm']} — {t['metric']} lift {words[t['trend']]}: "
            f"{t['slope']:+.2%} per day since exposure [{t['slope_ci_low']:+.2%}, "
            f"{t['slope_ci_high']:+.2%}], p adjusted {t['p_value_adjusted']:.3g}"
            for t in trends_ if t["trend"] in words]
