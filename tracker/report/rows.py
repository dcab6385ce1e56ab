"""The metric rows of a scorecard: each arm's mean and interval, each treatment's comparison
against control, the multiple-comparison correction and the verdicts (see :mod:`tracker.report`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tracker import stats
from tracker.metrics import catalog
from tracker.store.experiments import ExperimentInfo, Roles

METRIC_ORDER = catalog.display_order()
LOWER_IS_BETTER = catalog.lower_is_better()
COLUMNS = ("metric", "k", "arm", "control", "kind", "users", "mean", "ci_low", "ci_high",
           "lift", "lift_ci_low", "lift_ci_high", "relative_lift", "relative_lift_ci_low",
           "relative_lift_ci_high", "p_value", "p_value_adjusted", "primary", "verdict",
           "reason", "group", "direction", "role", "variance_reduction", "exploratory")
"""The fields of a metric row, in the order of the CSV and of :meth:`Scorecard.to_frame` (new
fields go at the end, so CSV columns keep their positions)."""
ROLE_ORDER = ("primary", "guardrail", "secondary")
"""Rows come in this order of roles, then by catalogue group."""
P_FLOOR = 1e-16
"""Smaller p-values print as ``<1e-16``: below the spacing of doubles near 1 (2.2e-16) a
p-value computed from a distribution's tail is not resolved, and ``0`` would be false."""


def metric_name(metric: str, k: int | None) -> str:
    return metric if k is None else f"{metric}@{k}"


def finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


@dataclass(frozen=True)
class Cuped:
    """A treatment row's CUPED inputs: both arms' sums with their pre-exposure covariates,
    and θ fitted on every arm of the metric (:func:`tracker.stats.fit_adjustment`)."""

    treatment: stats.CovariateMeanStats
    control: stats.CovariateMeanStats
    adjustment: stats.Adjustment


@dataclass(frozen=True)
class RowTest:
    """A treatment row and the statistics its comparison was computed from (``cuped``: the
    regression adjustment it used, None when unadjusted)."""

    row: dict[str, Any]
    treatment: stats.MeanStats
    control: stats.MeanStats
    guardrail: stats.NonInferiority | None = None
    cuped: Cuped | None = None
    adjusted: tuple[stats.Moments, stats.Moments] | None = None  # the adjusted arms
    result: stats.Comparison | None = None  # the comparison the row shows


@dataclass(frozen=True)
class Compared:
    """A comparison, the share of its variance CUPED removed (0 unadjusted) and the
    adjusted arms (None unadjusted)."""

    result: stats.Comparison
    variance_reduction: float = 0.0
    adjusted: tuple[stats.Moments, stats.Moments] | None = None


def comparison(intervals: str, treatment: stats.MeanStats, control: stats.MeanStats,
               level: float, nominal: float, cuped: Cuped | None = None) -> Compared:
    """Fixed-horizon or always-valid comparison at ``level`` (sequences tuned for ``nominal``,
    so their p-value does not depend on the level they are drawn at); with ``cuped``, of the
    regression-adjusted arms (:func:`tracker.stats.compare_adjusted` and its sequential
    form)."""
    if cuped is not None:
        args = (cuped.treatment, cuped.control)
        if intervals == "sequential":
            done = stats.compare_adjusted_sequential(*args, adjustment=cuped.adjustment,
                                                     level=level, tuning_level=nominal)
        else:
            done = stats.compare_adjusted(*args, adjustment=cuped.adjustment, level=level)
        return Compared(done.comparison, done.variance_reduction, (done.treatment, done.control))
    if intervals == "sequential":
        return Compared(stats.compare_sequential(treatment, control, level=level,
                                                 tuning_level=nominal))
    return Compared(stats.compare(treatment, control, level=level))


def shown_intervals(result: stats.Comparison) -> dict[str, Any]:
    """Both intervals of a comparison (each excludes 0 iff its p-value < 1 - its level)."""
    d, rel = result.difference, result.relative_lift
    return {"lift_ci_low": finite(d.ci_low), "lift_ci_high": finite(d.ci_high),
            "relative_lift_ci_low": finite(rel.ci_low),
            "relative_lift_ci_high": finite(rel.ci_high),
            "decided_on": result.decided_on.value, "interval_level": result.level}


def adjust_intervals(test: RowTest, level: float, intervals: str) -> None:
    """Redraw a corrected row's intervals (primaries after ``correction``, secondaries after
    Benjamini-Hochberg) at 1 - (1 - level) p / p_adjusted (see module doc), so that the
    interval beside a verdict agrees with it."""
    row = test.row
    p, adjusted = row["p_value"], row["p_value_adjusted"]
    if p is None or adjusted is None or not 0 < p < adjusted:
        return
    corrected = 1 - (1 - level) * p / adjusted
    result = comparison(intervals, test.treatment, test.control, corrected, level, test.cuped)
    row.update(shown_intervals(result.result))


def corrected(rows: list[dict[str, Any]], tests: list[RowTest], correction: str, level: float,
              intervals: str) -> None:
    """:func:`adjust_p_values` of ``rows``, then each of their ``tests``' intervals redrawn
    (:func:`adjust_intervals`)."""
    adjust_p_values(rows, correction, level)
    for test in tests:
        adjust_intervals(test, level, intervals)


def metric_rows(info: ExperimentInfo, rows: pd.DataFrame, level: float, intervals: str,
                roles: Roles, tests: list[RowTest],
                covariates: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """The rows of every metric and arm, ordered by role (primary, guardrail, secondary),
    then catalogue group and order, then k; each user-level comparison is added to
    ``tests``. ``covariates``: the day's CUPED sums (:func:`tracker.store.computed.
    covariate_table`); with them the comparisons are regression-adjusted."""
    control = info.control
    out = []
    for metric, k in _ordered_metrics(rows, roles):
        mine = rows[(rows["metric"] == metric)
                    & (rows["k"].isna() if k is None else rows["k"] == k)]
        by_arm = {r.arm: r for r in mine.itertuples(index=False)}
        if control not in by_arm:
            continue
        fits = cuped_inputs(by_arm, covariates, metric, k)
        for arm in (a.key for a in info.arms if a.key in by_arm):
            r, base = by_arm[arm], by_arm[control]
            row: dict[str, Any] = {"metric": metric, "k": k, "arm": arm,
                                   "control": arm == control, "kind": r.kind,
                                   **_described(metric), "users": int(r.users),
                                   "role": roles.role(metric_name(metric, k))}
            if r.kind == "set":
                _set_level(row, r, base)
            else:
                pair = None if fits is None or row["control"] else Cuped(
                    fits[0][arm], fits[0][control], fits[1])
                test = _user_level(row, r, base, level, intervals, roles, pair)
                if test is not None:
                    tests.append(test)
            out.append(row)
    return out


def _ordered_metrics(rows: pd.DataFrame, roles: Roles) -> list[tuple[str, int | None]]:
    """The (metric, k) pairs of ``rows`` by role, then catalogue group and order, then k."""
    order = {m: i for i, m in enumerate(METRIC_ORDER)}  # catalogue groups, then entries
    ranks = {role: i for i, role in enumerate(ROLE_ORDER)}
    keys = rows[["metric", "k"]].drop_duplicates()
    return sorted(((m, None if pd.isna(k) else int(k)) for m, k in keys.itertuples(index=False)),
                  key=lambda mk: (ranks[roles.role(metric_name(*mk))],
                                  order.get(mk[0], len(order)), mk[0], mk[1] or 0))


def _set_level(row: dict[str, Any], r, base) -> None:
    """A set-level metric's row: one value per arm, so no interval, no test, no verdict."""
    row.update(mean=finite(r.mean), ci_low=None, ci_high=None, reason="set_metric",
               variance_reduction=0.0)
    if row["control"]:
        return
    lift = None if base.mean is None else r.mean - base.mean
    rel = lift / abs(base.mean) if lift is not None and base.mean else None
    row.update(lift=finite(lift), lift_ci_low=None, lift_ci_high=None,
               relative_lift=finite(rel), relative_lift_ci_low=None,
               relative_lift_ci_high=None, p_value=None, p_value_adjusted=None,
               primary=row["role"] == "primary", verdict=None)


def _user_level(row: dict[str, Any], r, base, level: float, intervals: str,
                roles: Roles, cuped: Cuped | None) -> RowTest | None:
    """A per-user metric's row: the arm's mean and interval; for a treatment arm its
    comparison against control (and its guardrail test), returned as the row's test."""
    name = metric_name(row["metric"], row["k"])
    mean_stats = stats.MeanStats(int(r.users), float(r.sum), float(r.sum_sq))
    estimate = stats.arm_estimate(mean_stats, level=level)
    row.update(mean=finite(estimate.estimate), ci_low=finite(estimate.ci_low),
               ci_high=finite(estimate.ci_high), reason=estimate.reason.value,
               variance_reduction=0.0)
    if row["control"]:
        return None
    control_stats = stats.MeanStats(int(base.users), float(base.sum), float(base.sum_sq))
    compared = comparison(intervals, mean_stats, control_stats, level, level, cuped)
    result = compared.result
    row.update(variance_reduction=compared.variance_reduction,
               lift=finite(result.difference.estimate),
               relative_lift=finite(result.relative_lift.estimate),
               **shown_intervals(result), p_value=finite(result.p_value),
               p_value_adjusted=None, primary=name in roles.primary,
               reason=result.reason.value)
    margin = roles.guardrails.get(name)
    guard = None
    if margin is not None:
        options = {"margin": margin, "relative": True, "level": level,
                   "higher_is_better": row["metric"] not in LOWER_IS_BETTER}
        sequential = intervals == "sequential"
        if cuped is not None:
            guard = stats.non_inferiority_adjusted(cuped.treatment, cuped.control,
                                                   adjustment=cuped.adjustment,
                                                   sequential=sequential, **options)
        elif sequential:  # judged by the same mode as the comparisons: always-valid
            guard = stats.non_inferiority_sequential_of(
                stats.contrast(mean_stats, control_stats), **options)
        else:
            guard = stats.non_inferiority(mean_stats, control_stats, **options)
        row.update(guardrail_margin=margin, guardrail_p_value=finite(guard.p_value),
                   guardrail_ok=guard.non_inferior)
    return RowTest(row, mean_stats, control_stats, guard, cuped, compared.adjusted, result)


def cuped_inputs(by_arm: dict, covariates: pd.DataFrame | None, metric: str, k: int | None
                 ) -> tuple[dict[str, stats.CovariateMeanStats], stats.Adjustment] | None:
    """Each arm's sums with covariates for one metric and θ fitted on all of them; None
    without covariate sums for every arm (CUPED off, or the day not rolled up with it). The
    covariates are those the sums name (``covsums/2``: the pre-exposure interactions, their
    graded sum, the no-history indicator, the metric's own pre-period value and the
    no-pre-period-lists indicator); the fit drops the constant ones."""
    if covariates is None or covariates.empty or by_arm[next(iter(by_arm))].kind != "user":
        return None
    names = covariates.attrs["covariates"]
    mine = covariates[(covariates["metric"] == metric)
                      & (covariates["k"].isna() if k is None else covariates["k"] == k)]
    found = {r["arm"]: r for _, r in mine.iterrows()}
    if set(by_arm) - set(found):
        return None
    arms = {}
    for arm, r in by_arm.items():
        c = found[arm]
        arms[arm] = stats.CovariateMeanStats(
            int(r.users), float(r.sum), float(r.sum_sq), [c[f"x:{n}"] for n in names],
            [[c[_pair(names, a, b)] for b in names] for a in names],
            [c[f"xy:{n}"] for n in names])
    return arms, stats.fit_adjustment(list(arms.values()))


def _pair(names: list[str], a: str, b: str) -> str:
    """The column of Σx_a·x_b (stored once per unordered pair, in the covariates' order)."""
    first, second = sorted((a, b), key=names.index)
    return f"xx:{first}*{second}"


def _described(metric: str) -> dict[str, str | None]:
    """The catalogue's ``group`` and ``direction`` of ``metric`` (None if not catalogued)."""
    entry = catalog.CATALOG.get(metric)
    if entry is None:
        return {"group": None, "direction": None}
    return {"group": entry.group.value, "direction": entry.direction.value}


def adjust_p_values(rows: list[dict[str, Any]], correction: str, level: float) -> None:
    """``p_value_adjusted`` and ``verdict`` of every tested row: primaries corrected with
    ``correction``, secondaries by Benjamini-Hochberg among themselves and marked
    ``exploratory`` (:func:`tracker.stats.multiple.adjust_by_role`), guardrails as they are."""
    tests = [r for r in rows if not r["control"] and r["kind"] == "user"]
    roles = ["primary" if r["primary"] else r["role"] for r in tests]
    adjusted = stats.adjust_by_role([r["p_value"] for r in tests], roles, method=correction)
    for row, p, role in zip(tests, adjusted, roles, strict=True):
        row["p_value_adjusted"] = finite(p)
        row["exploratory"] = role == "secondary"
        significant = p is not None and p < 1 - level
        if row["direction"] is None:  # not in the catalogue: which way is better is unknown
            row["verdict"] = None
        elif not significant or row["lift"] is None:
            row["verdict"] = "inconclusive"
        else:
            up = row["lift"] > 0
            better = up != (row["metric"] in LOWER_IS_BETTER)
            row["verdict"] = "better" if better else "worse"


