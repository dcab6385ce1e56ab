"""The health checklist and the per-arm decisions of a scorecard (see :mod:`tracker.report`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import pandas as pd

from tracker import stats
from tracker.report.rows import RowTest, finite, metric_name
from tracker.report.trends import trend_notes
from tracker.stats.decision import ArmSample, Decision, GuardrailResult, PrimaryResult, decide
from tracker.stats.health import CheckStatus, HealthChecklist, health_checklist
from tracker.store.experiments import ExperimentInfo


@dataclass(frozen=True)
class Health:
    """The health of one view: the JSON fields (:meth:`Scorecard.to_dict`'s ``health``) and
    the checklist they were read from."""

    fields: dict[str, Any]
    checklist: HealthChecklist


def view_health(info: ExperimentInfo, health_table: pd.DataFrame, days: pd.DataFrame,
            as_of: date | None, now: datetime, newest_event: datetime | None, *,
            cumulative: bool) -> Health:
    """The checklist of :func:`tracker.stats.health.health_checklist` on the users of
    ``as_of`` in ``health_table`` (cumulative users, with the daily looks for the sequential
    SRM; or that day's users alone when not ``cumulative``), and the stable JSON fields
    read from the same counts (``srm_flagged`` is the checklist's srm item failing);
    ``newest_event``: the freshness check's "data through"."""
    arms = [arm.key for arm in info.arms]
    weights = {arm.key: arm.weight for arm in info.arms}
    total = sum(weights.values())
    provisional = ([d.isoformat() for d in days[days["provisional"]]["day"]]
                   if not days.empty else [])
    last_run = days.attrs.get("last_run")
    out: dict[str, Any] = {
        "srm_p_value": None, "srm_sequential_p_value": None, "srm_flagged": False,
        "srm_reason": "no_users", "srm_deviation": None, "users": dict.fromkeys(arms, 0),
        "expected_share": {a: w / total for a, w in weights.items()},
        "crossover_users": 0, "crossover_share": None, "crossover_status": None,
        "provisional_days": provisional,
        "last_rollup": last_run.isoformat() if last_run is not None else None,
        "data_lag_hours": None, "data_through": newest_event and newest_event.isoformat()}
    looks: list[list[int]] | None = None
    total_users = crossover_users = None
    if as_of is not None and not health_table.empty:
        table = health_table[health_table["day"] <= as_of]
        per_arm = table[table["arm"].notna()].pivot_table(index="day", columns="arm",
                                                           values="users", aggfunc="sum")
        per_arm = per_arm.reindex(columns=arms).fillna(0).astype(int).sort_index()
        if not cumulative:
            per_arm = per_arm[per_arm.index == as_of]
        today = per_arm.iloc[-1] if len(per_arm) else pd.Series(0, index=arms)
        out["users"] = {a: int(today[a]) for a in arms}
        looks = per_arm.to_numpy().tolist() if cumulative else None
        srm = stats.srm_test([out["users"][a] for a in arms], [weights[a] for a in arms])
        out["srm_p_value"] = finite(srm.p_value)
        out["srm_reason"] = srm.reason.value
        out["srm_deviation"] = srm.describe(arms)
        if looks and sum(looks[-1]):
            sequential = stats.sequential_srm(looks, [weights[a] for a in arms])
            out["srm_sequential_p_value"] = finite(sequential.p_value)
        whole = table[table["arm"].isna() & (table["day"] == as_of)]
        if len(whole):
            row = whole.iloc[0]
            total_users, crossover_users = int(row["users"]), int(row["crossover_users"])
            crossover = stats.crossover_health(total_users, crossover_users)
            out["crossover_users"] = crossover_users
            out["crossover_share"] = finite(crossover.share)
            out["crossover_status"] = crossover.status.value if crossover.status else None
    checklist = health_checklist(
        users=out["users"], weights=weights, now=now, newest_event=newest_event,
        last_rollup=last_run, logged=days.attrs.get("logged"), total_users=total_users,
        crossover_users=crossover_users, provisional_days=len(provisional), srm_looks=looks,
        running=info.status in ("draft", "running"))
    out["srm_flagged"] = checklist.item("srm").status is CheckStatus.FAIL
    out["data_lag_hours"] = checklist.data_lag_hours
    out["status"] = checklist.status.value
    out["checklist"] = [{"check": i.check, "status": i.status.value, "message": i.message}
                        for i in checklist.items]
    return Health(out, checklist)


GROWTH_DAYS = 7
"""New users per day are measured over the last week of the cumulative view (or since the
first day when it is younger)."""


def users_per_day(health_table: pd.DataFrame, info: ExperimentInfo,
                   as_of: date) -> dict[str, float | None]:
    """New users per day of each arm as of ``as_of``: the growth of its cumulative users over
    the last :data:`GROWTH_DAYS` days (all of them on the first day). None when unknown."""
    arms = [arm.key for arm in info.arms]
    if health_table.empty:
        return dict.fromkeys(arms)
    table = health_table[(health_table["day"] <= as_of) & health_table["arm"].notna()]
    per_arm = table.pivot_table(index="day", columns="arm", values="users", aggfunc="sum")
    per_arm = per_arm.reindex(columns=arms).fillna(0).sort_index()
    if per_arm.empty:
        return dict.fromkeys(arms)
    last = per_arm.index[-1]
    earlier = [d for d in per_arm.index if (last - d).days >= GROWTH_DAYS]
    if earlier:
        start = earlier[-1]
        span = (last - start).days
        grown = per_arm.loc[last] - per_arm.loc[start]
    else:
        span = (last - per_arm.index[0]).days + 1
        grown = per_arm.loc[last]
    return {a: float(grown[a]) / span for a in arms}


def daily_new_users(health_table: pd.DataFrame, info: ExperimentInfo,
                    as_of: date) -> dict[str, list[float]]:
    """New users of each arm on each day through ``as_of`` (oldest first): the growth of its
    cumulative users from one day to the next, the first day's users on the first day; a
    day without a row keeps the previous total (0 new users). Empty without data. The
    decision fits its model of arrivals to these (:func:`tracker.stats.fit_arrivals`)."""
    arms = [arm.key for arm in info.arms]
    if health_table.empty:
        return {a: [] for a in arms}
    table = health_table[(health_table["day"] <= as_of) & health_table["arm"].notna()]
    per_arm = table.pivot_table(index="day", columns="arm", values="users", aggfunc="sum")
    if per_arm.empty:
        return {a: [] for a in arms}
    days = pd.date_range(min(per_arm.index), max(per_arm.index), freq="D").date
    per_arm = per_arm.reindex(index=days, columns=arms).ffill().fillna(0)
    grown = per_arm.diff().fillna(per_arm).clip(lower=0)
    return {a: [float(v) for v in grown[a]] for a in arms}


def arm_decisions(info: ExperimentInfo, tests: list[RowTest], checklist: HealthChecklist,
               growth: dict[str, float | None], level: float, correction: str,
               target_effect: float, trends: list[dict[str, Any]] = (), *,
               intervals: str = "fixed_horizon",
               arrivals: dict[str, list[float]] | None = None,
               days_left: int | None = None) -> list[Decision]:
    """One :func:`tracker.stats.decision.decide` per treatment arm, from the scorecard's own
    rows: each primary's relative lift with the interval shown beside its verdict (drawn at
    the corrected level) and its adjusted p-value, each guardrail's non-inferiority test, the
    health checklist, and for power the users, user-level variances and new users per day of
    the two arms. The family planned for is every corrected test (primaries x treatments).
    ``trends`` (:func:`tracker.report.trends.trends`): a primary whose lift fades keeps a
    winning arm running (:func:`tracker.stats.decision.decide`). ``intervals``: the
    analysis' interval mode, which power and the guardrails follow; ``arrivals``: the new
    users of each arm per day (:func:`daily_new_users`), the model of arrivals is fitted to
    both arms' sum (``growth``, a constant rate, when absent); ``days_left``: days to the
    planned end (None: none planned)."""
    family = sum(1 for t in tests if t.row["primary"])
    label = {"holm": "Holm", "bh": "Benjamini-Hochberg"}.get(correction, correction)
    out = []
    for arm in (a.key for a in info.arms if a.key != info.control):
        mine = [t for t in tests if t.row["arm"] == arm]
        series = _both_arms(arrivals, arm, info.control)
        primaries = [_primary_result(t, growth, info.control, series)
                     for t in mine if t.row["primary"]]
        if not primaries:
            continue
        guards = [GuardrailResult.from_test(metric_name(t.row["metric"], t.row["k"]),
                                            t.guardrail, t.treatment.n + t.control.n)
                  for t in mine if t.guardrail is not None]
        fading = {t["metric"]: _settle(t) for t in trends
                  if t["arm"] == arm and t["trend"] == "fading"}
        out.append(decide(arm, primaries, guards, checklist, alpha=1 - level,
                          target_effect=target_effect, correction=label,
                          family_size=max(family, len(primaries)), fading=fading,
                          interval_kind=intervals, days_left=days_left))
    return out


def _both_arms(arrivals: dict[str, list[float]] | None, arm: str,
               control: str) -> tuple[float, ...] | None:
    """The daily new users of ``arm`` and ``control`` together (None when unknown)."""
    if not arrivals or not arrivals.get(arm) or not arrivals.get(control):
        return None
    return tuple(a + b for a, b in zip(arrivals[arm], arrivals[control], strict=True))


def _settle(trend: dict[str, Any]) -> str:
    """A fading primary as a decision's reason: the report's trend line without its arm."""
    return trend_notes([trend])[0].split(" — ", 1)[1] + ": keep running until it settles"


def _primary_result(test: RowTest, growth: dict[str, float | None], control: str,
                    series: tuple[float, ...] | None = None) -> PrimaryResult:
    """A primary row as the decision reads it: the shown relative lift and interval (the
    difference's, in metric units, when the relative one is unbounded) and the sample."""
    r = test.row
    rates = (growth.get(r["arm"]), growth.get(control))
    per_day = None if None in rates else sum(rates)
    if test.adjusted is None:
        sample = ArmSample.from_stats(test.treatment, test.control, per_day, series)
    else:  # CUPED: power from the adjusted arms' variances
        t, c = test.adjusted
        sample = ArmSample(t.n, c.n, None if t.variance is None else t.variance * t.n,
                           None if c.variance is None else c.variance * c.n, c.estimate,
                           per_day, series)
    relative = r["decided_on"] == "relative_lift" or r["lift_ci_low"] is None
    prefix = "relative_lift" if relative else "lift"
    return PrimaryResult(metric_name(r["metric"], r["k"]), r[prefix], r[f"{prefix}_ci_low"],
                         r[f"{prefix}_ci_high"], r["p_value_adjusted"],
                         higher_is_better=r["direction"] != "lower", sample=sample,
                         relative=relative)


