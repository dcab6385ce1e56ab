"""Intent-to-treat beside per-protocol: the scorecard's crossover users (issue 30).

The metric rows count each arm's own users (per-protocol: a user exposed to two arms counts
in neither). The rollup also stores, in the cumulative view, per arm the crossover users whose
first exposure was in it, over every list of theirs (segment ``(crossover)``,
:data:`tracker.rollup.cells.CROSSED`). Sufficient statistics add, so an arm's rows plus its
crossover rows are the **intent-to-treat** population: every user in the arm of her first
exposure (:func:`intent_to_treat`, and the same for CUPED's sums). :func:`compare_populations`
tests both populations with the scorecard's own options and, per treatment arm, picks the one
the decision reads (:func:`tracker.stats.crossover.choose_population`): intent-to-treat when
the two disagree in sign or in significance on a primary or guardrail metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from tracker.report.rows import RowTest, corrected, metric_rows
from tracker.stats.crossover import Population, choose_population
from tracker.store.experiments import ExperimentInfo, Roles

ADDED = ("users", "sum", "sum_sq", "impressions", "impressions_sq", "ratio_sum",
         "ratio_sum_sq", "ratio_cross")
"""The columns of :func:`tracker.store.computed.metric_table` that add across users."""
_KEYS = ["day", "arm", "metric", "k"]


def intent_to_treat(metric_table: pd.DataFrame, crossover: pd.DataFrame | None
                    ) -> pd.DataFrame | None:
    """The per-user rows of ``metric_table`` with each arm's crossover users added
    (``crossover``: :func:`~tracker.store.computed.metric_table` of the segment
    ``(crossover)``); None when no arm has any. Set-level rows are left out (one number
    per arm, no test)."""
    if crossover is None or crossover.empty or not (crossover["users"] > 0).any():
        return None
    own = metric_table[metric_table["kind"] == "user"]
    extra = crossover.rename(columns={"provisional": "_provisional"})
    both = _added(own, extra, [c for c in ADDED if c in own.columns], ["_provisional"])
    both["kind"] = "user"
    both["provisional"] = both["provisional"].fillna(both.pop("_provisional")).astype(bool)
    both["users"] = both["users"].astype("int64")
    both["mean"] = both["sum"] / both["users"].where(both["users"] > 0)
    return both[list(metric_table.columns)]


def intent_to_treat_covariates(covariates: pd.DataFrame | None,
                               crossover: pd.DataFrame | None) -> pd.DataFrame | None:
    """CUPED's sums of :func:`intent_to_treat`'s users (``crossover``: the ``(crossover)``
    segment's :func:`~tracker.store.computed.covariate_table`); None without both (the
    crossover users' sums missing, the arms' alone would adjust with the wrong users)."""
    if covariates is None or covariates.empty or crossover is None or crossover.empty:
        return None
    columns = [c for c in covariates.columns if c not in _KEYS]
    out = _added(covariates, crossover, columns)[list(covariates.columns)]
    out.attrs = dict(covariates.attrs)
    return out


def _added(own: pd.DataFrame, extra: pd.DataFrame, columns: list[str],
           carried: tuple[str, ...] = ()) -> pd.DataFrame:
    """``own`` with ``extra``'s ``columns`` added row by row on (day, arm, metric, k) (and
    its ``carried`` columns joined); a key only one side has keeps the other side's values."""
    def keyed(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        frame["_k"] = frame["k"].fillna(0).astype("int64")
        return frame.drop(columns="k")

    keys = ["day", "arm", "metric", "_k"]
    left, right = keyed(own), keyed(extra)[[*keys, *columns, *carried]]
    both = left.merge(right, on=keys, how="outer", suffixes=("", "_x"))
    for name in columns:
        both[name] = both[name].fillna(0) + both[f"{name}_x"].fillna(0)
    both["k"] = both.pop("_k").where(lambda k: k > 0).astype("Int64")
    return both.drop(columns=[f"{n}_x" for n in columns])


@dataclass(frozen=True)
class Populations:
    """What :func:`compare_populations` found: a row per (treatment arm, primary or
    guardrail metric) comparing the two estimates, and the tests the decision of each arm
    reads (its per-protocol ones, or intent-to-treat ones where they decide)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    tests: list[RowTest] = field(default_factory=list)
    deciding: frozenset[str] = frozenset()  # the arms decided on intent-to-treat


def compare_populations(info: ExperimentInfo, tests: list[RowTest], rows: pd.DataFrame | None,
                        covariates: pd.DataFrame | None, *, level: float, intervals: str,
                        correction: str, roles: Roles, cuped: bool) -> Populations:
    """Intent-to-treat tests of ``rows`` (:func:`intent_to_treat`'s of the reported day;
    ``covariates`` its CUPED sums, used when ``cuped``) next to the per-protocol ``tests``,
    corrected and drawn as the scorecard's are. An arm is decided on intent-to-treat when on
    any of its primary or guardrail metrics the two disagree in sign or in significance at
    the adjusted p-value (:func:`~tracker.stats.crossover.choose_population`)."""
    if rows is None or rows.empty:
        return Populations(tests=tests)
    if cuped and covariates is None:  # the adjusted arms would lack the crossover users
        return Populations(tests=tests)
    found: list[RowTest] = []
    metrics = metric_rows(info, rows, level, intervals, roles, found,
                          covariates if cuped else None)
    corrected(metrics, found, correction, level, intervals)
    other = {(t.row["arm"], t.row["metric"], t.row["k"]): t for t in found}
    out, deciding = [], set()
    for test in tests:
        r = test.row
        if r["role"] not in ("primary", "guardrail") or test.result is None:
            continue
        itt = other.get((r["arm"], r["metric"], r["k"]))
        if itt is None or itt.result is None:
            continue
        choice = choose_population(replace(test.result, p_value=r["p_value_adjusted"]),
                                   replace(itt.result, p_value=itt.row["p_value_adjusted"]),
                                   alpha=1 - level)
        if choice.decides is Population.INTENT_TO_TREAT:
            deciding.add(r["arm"])
        out.append({"arm": r["arm"], "metric": r["metric"], "k": r["k"], "role": r["role"],
                    "per_protocol": _summary(r), "intent_to_treat": _summary(itt.row),
                    "crossover_users": int(itt.row["users"] - r["users"]),
                    "disagree": choice.disagree, "decides": choice.decides.value,
                    "why": choice.why})
    chosen = [t for t in tests if t.row["arm"] not in deciding]
    chosen += [t for t in found if t.row["arm"] in deciding]
    return Populations(out, chosen, frozenset(deciding))


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    return {name: row.get(name) for name in
            ("users", "lift", "relative_lift", "relative_lift_ci_low", "relative_lift_ci_high",
             "p_value", "p_value_adjusted", "verdict")}
