"""The scorecard of an experiment as of a day: what ``tracker report`` prints and the
dashboard shows (both call :func:`scorecard`, so they cannot disagree).

For each metric and cutoff: every arm's mean over users with its interval; for every
treatment arm the difference against control (``lift``) and the relative lift, each with its
interval, the two-sided Welch p-value (fixed-horizon, uncorrected) and the p-value after the
correction for multiple comparisons (Holm by default) over the *primary* metrics x treatment
arms; the other metrics are reported uncorrected (``p_value_adjusted`` = ``p_value``). Which
metrics exist, their group, direction and labels come from the metric catalogue
(:mod:`tracker.metrics.catalog`); rows are ordered by group, then catalogue order, then k.

One test decides each row (:mod:`tracker.stats.compare`): Welch's test of T = C, and both
intervals invert it (Welch's for the difference, Fieller's for the relative lift), so they
exclude 0 exactly when the p-value is below 1 - level. ``decided_on`` names the interval shown
beside the verdict (the relative lift's, or the difference's when the lift's is unbounded).
They are drawn at ``interval_level``: ``level`` itself, or for a corrected primary
1 - (1 - level) p / p_adjusted, the level at which they exclude 0 exactly when
p_adjusted < 1 - level (the adjusted intervals of GrowthBook's results table). So a verdict
never stands beside an interval that contradicts it.
``intervals="sequential"`` swaps the intervals and p-values for always-valid ones (confidence
sequences) — the right choice when the scorecard is looked at every day. Set-level metrics
(coverage, gini, entropy) are one number per arm: no interval, no test, hence no verdict.

The JSON form (:meth:`Scorecard.to_dict`) is a stable interface:

- ``experiment``, ``as_of`` (ISO date), ``cumulative`` (bool), ``level``, ``intervals``
  (``fixed_horizon`` | ``sequential``), ``correction``, ``primary`` (metric names),
  ``guardrails`` (metric name -> tolerated relative loss), ``target_effect``; the roles are the
  experiment's stored ones unless ``primary`` / ``guardrails`` override them
  (:func:`roles_for`);
- ``decisions``: per treatment arm (cumulative view only; empty for a daily one) ``arm``,
  ``outcome`` (ship | do_not_ship | keep_running | no_detectable_effect), ``reasons`` (most
  decisive first) and ``power`` per primary (``mde``, ``mde_absolute``, ``target``,
  ``powered``, ``days_to_target``, ``note``): :func:`tracker.stats.decision.decide` on the
  rows' own comparisons (see :func:`_decisions`);
- ``health``: ``status`` (pass | warn | fail, the checklist's worst item) and ``checklist``
  (``[{check, status, message}]``, :func:`tracker.stats.health.health_checklist`: srm,
  sample, crossover, freshness, rollup, provisional); ``srm_p_value`` (chi-square),
  ``srm_sequential_p_value`` (anytime-valid), ``srm_flagged`` (the checklist's srm item
  fails: either p-value below 0.001; the size never gates), ``srm_deviation`` (the
  deviation in words, "control lost 0.34% of its expected users"), ``users`` and
  ``expected_share`` per arm, ``crossover_users``,
  ``crossover_share``, ``crossover_status`` (ok / warn / alert), ``provisional_days``,
  ``last_rollup`` (ISO instant) and ``data_lag_hours`` (now minus the latest received
  impression of the experiment, never negative; None without data). A daily view's health
  is that day's: its users, their SRM (no sequential test), its crossover;
- ``metrics``: rows with ``metric``, ``k`` (None when the metric has none), ``arm``,
  ``role`` (primary | guardrail | secondary), ``control`` (bool), ``kind`` (user | set),
  ``group`` (online | ranking | beyond_accuracy),
  ``direction`` (higher | lower: which way is better), ``users``, ``mean``, ``ci_low``,
  ``ci_high``, ``reason``; for treatment arms also ``lift``, ``lift_ci_low``,
  ``lift_ci_high``, ``relative_lift``, ``relative_lift_ci_low``, ``relative_lift_ci_high``,
  ``p_value``, ``p_value_adjusted``, ``primary``, ``decided_on`` (relative_lift |
  difference: which interval is shown beside the verdict), ``interval_level`` (the level of
  the row's intervals, see above) and ``verdict`` (better / worse / inconclusive, at the
  adjusted p-value against 1 - level and in the metric's direction; null for set-level
  metrics, which no test backs). Numbers that cannot be computed are null and ``reason``
  says why (e.g. ``zero_variance``). A metric missing from the catalogue (stored by an older
  version) has null ``group`` and ``direction`` and no
  verdict.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Any

import pandas as pd

from tracker import stats
from tracker.errors import ValidationError
from tracker.metrics import catalog
from tracker.stats.decision import (
    DEFAULT_TARGET_EFFECT,
    ArmSample,
    Decision,
    GuardrailResult,
    PrimaryResult,
    decide,
)
from tracker.stats.health import CheckStatus, HealthChecklist, health_checklist
from tracker.store.experiments import ExperimentInfo, Roles

METRIC_ORDER = catalog.display_order()
LOWER_IS_BETTER = catalog.lower_is_better()
COLUMNS = ("metric", "k", "arm", "control", "kind", "users", "mean", "ci_low", "ci_high",
           "lift", "lift_ci_low", "lift_ci_high", "relative_lift", "relative_lift_ci_low",
           "relative_lift_ci_high", "p_value", "p_value_adjusted", "primary", "verdict",
           "reason", "group", "direction", "role")
"""The fields of a metric row, in the order of the CSV and of :meth:`Scorecard.to_frame` (new
fields go at the end, so CSV columns keep their positions)."""
ROLE_ORDER = ("primary", "guardrail", "secondary")
"""Rows come in this order of roles, then by catalogue group."""
P_FLOOR = 1e-16
"""Smaller p-values print as ``<1e-16``: below the spacing of doubles near 1 (2.2e-16) a
p-value computed from a distribution's tail is not resolved, and ``0`` would be false."""


@dataclass(frozen=True)
class Scorecard:
    experiment: str
    as_of: date | None
    cumulative: bool
    level: float
    intervals: str
    correction: str
    primary: tuple[str, ...]
    health: dict[str, Any]
    metrics: list[dict[str, Any]] = field(default_factory=list)
    guardrails: dict[str, float] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    target_effect: float = DEFAULT_TARGET_EFFECT

    def to_dict(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment,
            "as_of": self.as_of.isoformat() if self.as_of else None,
            "cumulative": self.cumulative, "level": self.level, "intervals": self.intervals,
            "correction": self.correction, "primary": list(self.primary),
            "guardrails": dict(self.guardrails), "target_effect": self.target_effect,
            "decisions": self.decisions, "health": self.health, "metrics": self.metrics,
        }

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, COLUMNS, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.metrics)
        return out.getvalue()

    def to_frame(self) -> pd.DataFrame:
        """The metric rows of :meth:`to_dict` as a DataFrame: the :data:`COLUMNS`, then any
        guardrail fields; a field a row lacks (control rows have no lift) is missing."""
        extra = dict.fromkeys(c for row in self.metrics for c in row if c not in COLUMNS)
        return pd.DataFrame(self.metrics, columns=[*COLUMNS, *extra])


def select(card: Scorecard, metrics: Iterable[str] = (), ks: Iterable[int] = ()) -> Scorecard:
    """The scorecard with only the rows of ``metrics`` (catalogue names such as ``"ndcg"``)
    and of cutoffs ``ks``; empty means no filter on that side. Metrics without a cutoff
    (``r_precision``, ``song_clicks``) are kept whatever ``ks`` says. P-values were adjusted
    before: filtering never changes a number, only which rows are shown.

    A name missing from the catalogue, or a cutoff the scorecard has no row at, raises
    :class:`~tracker.errors.ValidationError` naming the ones that exist.
    """
    metrics, ks = tuple(metrics), tuple(ks)
    for name in metrics:
        try:
            catalog.info(name)
        except ValueError as error:
            hint = (f" (name the metric alone, {name.split('@')[0]!r}, and choose its cutoff "
                    "with k)" if "@" in str(name) else "")
            raise ValidationError(f"{error}{hint}", field="metric") from None
    present = sorted({r["k"] for r in card.metrics if r["k"] is not None})
    for k in ks:
        if present and k not in present:
            raise ValidationError(f"no results at k = {k!r}; this scorecard's cutoffs are "
                                  f"{', '.join(map(str, present))}", field="k")
    rows = [r for r in card.metrics
            if (not metrics or r["metric"] in metrics)
            and (not ks or r["k"] is None or r["k"] in ks)]
    return replace(card, metrics=rows)


def format_p(p: float | None) -> str:
    """A p-value for people: 3 significant digits, ``<1e-16`` below :data:`P_FLOOR` (never
    ``0``), ``—`` when there is none.

    >>> format_p(0.04441), format_p(0.0), format_p(3e-20), format_p(None)
    ('0.0444', '<1e-16', '<1e-16', '—')
    """
    if p is None:
        return "—"
    return f"<{P_FLOOR:.0e}" if p < P_FLOOR else f"{p:.3g}"


def _name(metric: str, k: int | None) -> str:
    return metric if k is None else f"{metric}@{k}"


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def roles_for(info: ExperimentInfo, primary: Iterable[str] | None = None,
              guardrails: dict[str, float] | None = None) -> Roles:
    """The roles one report uses: the experiment's stored roles, each side replaced by the
    one given here (``--primary`` / ``--guardrail`` override for one report); primaries
    default to NDCG and hit rate at the experiment's middle cutoff, guardrails to none."""
    stored = info.roles or Roles()
    chosen = tuple(primary) if primary else stored.primary
    if not chosen:
        cutoffs = list(info.cutoffs)
        middle = cutoffs[len(cutoffs) // 2]
        chosen = (f"ndcg@{middle}", f"hit_rate@{middle}")
    return Roles(chosen, dict(guardrails) if guardrails else dict(stored.guardrails))


def scorecard(info: ExperimentInfo, metric_table: pd.DataFrame, health_table: pd.DataFrame,
              days: pd.DataFrame, *, as_of: date | None = None, cumulative: bool = True,
              level: float = 0.95, intervals: str = "fixed_horizon",
              correction: str = "holm", primary: tuple[str, ...] | None = None,
              guardrails: dict[str, float] | None = None,
              target_effect: float = DEFAULT_TARGET_EFFECT,
              daily_health: pd.DataFrame | None = None,
              latest_received: datetime | None = None,
              now: datetime | None = None) -> Scorecard:
    """Build the scorecard from the rollup's tables (see :mod:`tracker.store.computed`).

    ``as_of``: the day to report (default: the latest day whose results are final, else the
    latest day; a day without results is a ValidationError naming the days with results).
    ``primary`` / ``guardrails``: override the experiment's stored roles for this report
    (:func:`roles_for`); guardrails map a metric name to its tolerated relative loss (0.02 =
    2%) and get a one-sided non-inferiority test per treatment arm (``guardrail_p_value``,
    ``guardrail_ok``; not corrected for multiplicity). ``health_table`` is the cumulative
    one; ``daily_health`` the daily one, which the health of a daily view (``cumulative``
    False) describes. ``latest_received``: when the experiment's latest event arrived (the
    data lag; default: ``days.attrs["latest_received"]``, set by the day table).
    ``target_effect``: the relative effect each primary must be able to detect before
    ``no_detectable_effect`` is said (the cumulative view decides; a daily view has no
    decisions).
    """
    level = stats.results.check_level(level)
    if intervals not in ("fixed_horizon", "sequential"):
        raise ValueError(f"intervals must be 'fixed_horizon' or 'sequential', got {intervals!r}")
    if not (isinstance(target_effect, int | float) and math.isfinite(target_effect)
            and target_effect > 0):
        raise ValidationError(f"target effect {target_effect!r}: expected a relative effect "
                              "above 0, e.g. 0.05 for 5%", field="target_effect")
    roles = roles_for(info, primary, guardrails)
    available = sorted(set(metric_table["day"])) if not metric_table.empty else []
    if as_of is None and available:
        final = days[~days["provisional"]]["day"] if not days.empty else []
        as_of = max(final) if len(final) else available[-1]
    if as_of is not None and as_of not in available:
        raise ValidationError(f"no results for {as_of}: " + (
            f"the days with results run from {available[0]} to {available[-1]}" if available
            else "no day has results yet (run `tracker rollup`)"), field="as_of")
    view = health_table if cumulative or daily_health is None else daily_health
    if latest_received is None:
        latest_received = days.attrs.get("latest_received")
    checked = _health(info, view, days, as_of, now or datetime.now(UTC), latest_received,
                      cumulative=cumulative or daily_health is None)
    card = Scorecard(info.key, as_of, cumulative, level, intervals, correction, roles.primary,
                     checked.fields, guardrails=dict(roles.guardrails),
                     target_effect=float(target_effect))
    if as_of is None:
        return card
    rows = metric_table[metric_table["day"] == as_of]
    tests: list[_Test] = []
    card.metrics.extend(_metric_rows(info, rows, level, intervals, roles, tests))
    _check_roles_have_tests(info, card.metrics, roles,
                            given=(*(primary or ()), *(guardrails or {})))
    _adjust(card.metrics, correction, level)
    for test in tests:
        _adjust_intervals(test, level, intervals)
    if cumulative:
        growth = _users_per_day(health_table, info, as_of)
        card.decisions.extend(
            d.to_dict() for d in _decisions(info, tests, checked.checklist, growth, level,
                                            correction, float(target_effect)))
    return card


def _check_roles_have_tests(info: ExperimentInfo, rows: list[dict[str, Any]], roles: Roles,
                            given: tuple[str, ...]) -> None:
    """Every primary and guardrail must name a per-user metric the scorecard has rows of
    (only those are tested); a set-level metric (one value per arm) is named as such. A bad
    name given for this report is an error on the flags (field ``primary``); one stored on the
    experiment says how to change the experiment's roles (field ``roles``)."""
    known = {_name(r["metric"], r["k"]) for r in rows if r["kind"] == "user"}
    if not known:
        return
    set_level = {_name(r["metric"], r["k"]) for r in rows if r["kind"] == "set"}
    bad = [name for name in (*roles.primary, *roles.guardrails) if name not in known]
    if not bad:
        return
    shown = ", ".join(f"{n} (a set-level metric: one value per arm, no test)"
                      if n in set_level else n for n in bad)
    examples = ", ".join(sorted(known)[:6])
    if all(n in given for n in bad):
        raise ValidationError(f"unknown primary or guardrail metric(s) {shown}; expected "
                              f"names such as {examples}", field="primary")
    raise ValidationError(
        f"the roles declared on experiment {info.key!r} name {shown}, which cannot be tested; "
        f"expected per-user metrics such as {examples}: change them with `tracker experiments "
        f"update {info.key} --primary METRIC@K` (or `--clear-roles`), or override them for "
        "one report with --primary/--guardrail", field="roles")


@dataclass(frozen=True)
class _Health:
    """The health of one view: the JSON fields (:meth:`Scorecard.to_dict`'s ``health``) and
    the checklist they were read from."""

    fields: dict[str, Any]
    checklist: HealthChecklist


def _health(info: ExperimentInfo, health_table: pd.DataFrame, days: pd.DataFrame,
            as_of: date | None, now: datetime, latest_received: datetime | None, *,
            cumulative: bool) -> _Health:
    """The checklist of :func:`tracker.stats.health.health_checklist` on the users of
    ``as_of`` in ``health_table`` (cumulative users, with the daily looks for the sequential
    SRM; or that day's users alone when not ``cumulative``), and the stable JSON fields
    read from the same counts (``srm_flagged`` is the checklist's srm item failing)."""
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
        "data_lag_hours": None,
    }
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
        out["srm_p_value"] = _finite(srm.p_value)
        out["srm_reason"] = srm.reason.value
        out["srm_deviation"] = srm.describe(arms)
        if looks and sum(looks[-1]):
            sequential = stats.sequential_srm(looks, [weights[a] for a in arms])
            out["srm_sequential_p_value"] = _finite(sequential.p_value)
        whole = table[table["arm"].isna() & (table["day"] == as_of)]
        if len(whole):
            row = whole.iloc[0]
            total_users, crossover_users = int(row["users"]), int(row["crossover_users"])
            crossover = stats.crossover_health(total_users, crossover_users)
            out["crossover_users"] = crossover_users
            out["crossover_share"] = _finite(crossover.share)
            out["crossover_status"] = crossover.status.value if crossover.status else None
    checklist = health_checklist(
        users=out["users"], weights=weights, now=now, latest_received=latest_received,
        last_rollup=last_run, total_users=total_users, crossover_users=crossover_users,
        provisional_days=len(provisional), srm_looks=looks,
        running=info.status in ("draft", "running"))
    out["srm_flagged"] = checklist.item("srm").status is CheckStatus.FAIL
    out["data_lag_hours"] = checklist.data_lag_hours
    out["status"] = checklist.status.value
    out["checklist"] = [{"check": i.check, "status": i.status.value, "message": i.message}
                        for i in checklist.items]
    return _Health(out, checklist)


GROWTH_DAYS = 7
"""New users per day are measured over the last week of the cumulative view (or since the
first day when it is younger)."""


def _users_per_day(health_table: pd.DataFrame, info: ExperimentInfo,
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


def _decisions(info: ExperimentInfo, tests: list[_Test], checklist: HealthChecklist,
               growth: dict[str, float | None], level: float, correction: str,
               target_effect: float) -> list[Decision]:
    """One :func:`tracker.stats.decision.decide` per treatment arm, from the scorecard's own
    rows: each primary's relative lift with the interval shown beside its verdict (drawn at
    the corrected level) and its adjusted p-value, each guardrail's non-inferiority test, the
    health checklist, and for power the users, user-level variances and new users per day of
    the two arms. The family planned for is every corrected test (primaries x treatments)."""
    family = sum(1 for t in tests if t.row["primary"])
    label = {"holm": "Holm", "bh": "Benjamini-Hochberg"}.get(correction, correction)
    out = []
    for arm in (a.key for a in info.arms if a.key != info.control):
        mine = [t for t in tests if t.row["arm"] == arm]
        primaries = [_primary_result(t, growth, info.control) for t in mine if t.row["primary"]]
        if not primaries:
            continue
        guards = [GuardrailResult.from_test(_name(t.row["metric"], t.row["k"]), t.guardrail)
                  for t in mine if t.guardrail is not None]
        out.append(decide(arm, primaries, guards, checklist, alpha=1 - level,
                          target_effect=target_effect, correction=label,
                          family_size=max(family, len(primaries))))
    return out


def _primary_result(test: _Test, growth: dict[str, float | None], control: str
                    ) -> PrimaryResult:
    """A primary row as the decision reads it: the shown relative lift and interval (the
    difference's, in metric units, when the relative one is unbounded) and the sample."""
    r = test.row
    rates = (growth.get(r["arm"]), growth.get(control))
    per_day = None if None in rates else sum(rates)
    sample = ArmSample.from_stats(test.treatment, test.control, per_day)
    relative = r["decided_on"] == "relative_lift" or r["lift_ci_low"] is None
    prefix = "relative_lift" if relative else "lift"
    return PrimaryResult(_name(r["metric"], r["k"]), r[prefix], r[f"{prefix}_ci_low"],
                         r[f"{prefix}_ci_high"], r["p_value_adjusted"],
                         higher_is_better=r["direction"] != "lower", sample=sample,
                         relative=relative)


@dataclass(frozen=True)
class _Test:
    """A treatment row and the statistics its comparison was computed from."""

    row: dict[str, Any]
    treatment: stats.MeanStats
    control: stats.MeanStats
    guardrail: stats.NonInferiority | None = None


def _comparison(intervals: str, treatment: stats.MeanStats, control: stats.MeanStats,
                level: float, nominal: float) -> stats.Comparison:
    """Fixed-horizon or always-valid comparison at ``level`` (sequences tuned for ``nominal``,
    so their p-value does not depend on the level they are drawn at)."""
    if intervals == "sequential":
        return stats.compare_sequential(treatment, control, level=level, tuning_level=nominal)
    return stats.compare(treatment, control, level=level)


def _shown_intervals(result: stats.Comparison) -> dict[str, Any]:
    """Both intervals of a comparison (each excludes 0 iff its p-value < 1 - its level)."""
    d, rel = result.difference, result.relative_lift
    return {"lift_ci_low": _finite(d.ci_low), "lift_ci_high": _finite(d.ci_high),
            "relative_lift_ci_low": _finite(rel.ci_low),
            "relative_lift_ci_high": _finite(rel.ci_high),
            "decided_on": result.decided_on.value, "interval_level": result.level}


def _adjust_intervals(test: _Test, level: float, intervals: str) -> None:
    """Redraw a corrected row's intervals at 1 - (1 - level) p / p_adjusted (see module doc)."""
    row = test.row
    p, adjusted = row["p_value"], row["p_value_adjusted"]
    if p is None or adjusted is None or not 0 < p < adjusted:
        return
    corrected = 1 - (1 - level) * p / adjusted
    result = _comparison(intervals, test.treatment, test.control, corrected, level)
    row.update(_shown_intervals(result))


def _metric_rows(info: ExperimentInfo, rows: pd.DataFrame, level: float, intervals: str,
                 roles: Roles, tests: list[_Test]) -> list[dict[str, Any]]:
    """The rows of every metric and arm, ordered by role (primary, guardrail, secondary),
    then catalogue group and order, then k; each user-level comparison is added to
    ``tests``."""
    primary, guardrails = roles.primary, roles.guardrails
    control = info.control
    arm_keys = [arm.key for arm in info.arms]
    out = []
    keys = rows[["metric", "k"]].drop_duplicates()
    order = {m: i for i, m in enumerate(METRIC_ORDER)}  # catalogue groups, then entries
    ranks = {role: i for i, role in enumerate(ROLE_ORDER)}
    keys = sorted(((m, None if pd.isna(k) else int(k)) for m, k in keys.itertuples(index=False)),
                  key=lambda mk: (ranks[roles.role(_name(*mk))], order.get(mk[0], len(order)),
                                  mk[0], mk[1] or 0))
    for metric, k in keys:
        mine = rows[(rows["metric"] == metric)
                    & (rows["k"].isna() if k is None else rows["k"] == k)]
        by_arm = {r.arm: r for r in mine.itertuples(index=False)}
        if control not in by_arm:
            continue
        base = by_arm[control]
        for arm in arm_keys:
            if arm not in by_arm:
                continue
            r = by_arm[arm]
            row: dict[str, Any] = {"metric": metric, "k": k, "arm": arm,
                                   "control": arm == control, "kind": r.kind,
                                   **_described(metric), "users": int(r.users),
                                   "role": roles.role(_name(metric, k))}
            if r.kind == "set":
                row.update(mean=_finite(r.mean), ci_low=None, ci_high=None,
                           reason="set_metric")
                if arm != control:
                    lift = None if base.mean is None else r.mean - base.mean
                    rel = (lift / abs(base.mean) if lift is not None and base.mean else None)
                    row.update(lift=_finite(lift), lift_ci_low=None, lift_ci_high=None,
                               relative_lift=_finite(rel), relative_lift_ci_low=None,
                               relative_lift_ci_high=None, p_value=None,
                               p_value_adjusted=None, primary=_name(metric, k) in primary,
                               verdict=None)  # one value per arm: no test backs a verdict
                out.append(row)
                continue
            mean_stats = stats.MeanStats(int(r.users), float(r.sum), float(r.sum_sq))
            estimate = stats.arm_estimate(mean_stats, level=level)
            row.update(mean=_finite(estimate.estimate), ci_low=_finite(estimate.ci_low),
                       ci_high=_finite(estimate.ci_high), reason=estimate.reason.value)
            if arm != control:
                control_stats = stats.MeanStats(int(base.users), float(base.sum),
                                                float(base.sum_sq))
                result = _comparison(intervals, mean_stats, control_stats, level, level)
                row.update(
                    lift=_finite(result.difference.estimate),
                    relative_lift=_finite(result.relative_lift.estimate),
                    **_shown_intervals(result),
                    p_value=_finite(result.p_value), p_value_adjusted=None,
                    primary=_name(metric, k) in primary, reason=result.reason.value,
                )
                margin = guardrails.get(_name(metric, k))
                guard = None
                if margin is not None:
                    guard = stats.non_inferiority(
                        mean_stats, control_stats, margin=margin, relative=True,
                        higher_is_better=metric not in LOWER_IS_BETTER, level=level)
                    row.update(guardrail_margin=margin,
                               guardrail_p_value=_finite(guard.p_value),
                               guardrail_ok=guard.non_inferior)
                tests.append(_Test(row, mean_stats, control_stats, guard))
            out.append(row)
    return out


def _described(metric: str) -> dict[str, str | None]:
    """The catalogue's ``group`` and ``direction`` of ``metric`` (None if not catalogued)."""
    entry = catalog.CATALOG.get(metric)
    if entry is None:
        return {"group": None, "direction": None}
    return {"group": entry.group.value, "direction": entry.direction.value}


def _adjust(rows: list[dict[str, Any]], correction: str, level: float) -> None:
    tests = [r for r in rows if not r["control"] and r["kind"] == "user"]
    adjusted = stats.adjust_primary([r["p_value"] for r in tests],
                                    [r["primary"] for r in tests], method=correction)
    for row, p in zip(tests, adjusted, strict=True):
        row["p_value_adjusted"] = _finite(p)
        significant = p is not None and p < 1 - level
        if row["direction"] is None:  # not in the catalogue: which way is better is unknown
            row["verdict"] = None
        elif not significant or row["lift"] is None:
            row["verdict"] = "inconclusive"
        else:
            up = row["lift"] > 0
            better = up != (row["metric"] in LOWER_IS_BETTER)
            row["verdict"] = "better" if better else "worse"


def _guard_note(row: dict[str, Any]) -> str:
    if "guardrail_margin" not in row:
        return ""
    state = {True: "holds", False: "NOT shown", None: "n/a"}[row["guardrail_ok"]]
    return f"; guardrail -{row['guardrail_margin']:.0%}: {state}"


def shown_interval(r: dict[str, Any], *, digits: int = 1, with_point: bool = True) -> str:
    """A treatment row's decisive interval as text: relative (in %) when it exists, else
    absolute (``digits`` + 3 decimals); the point estimate first when ``with_point``.

    The report and the dashboard both print this, so the interval beside a verdict is the
    same everywhere. Ends are rounded outwards, so rounding never moves an end across 0.

    >>> shown_interval({"relative_lift": 0.126, "relative_lift_ci_low": 0.0004,
    ...                 "relative_lift_ci_high": 0.2571})
    '+12.6% [+0.0%, +25.8%]'
    """
    if r.get("relative_lift_ci_low") is not None and r.get("relative_lift_ci_high") is not None:
        low, high, point = r["relative_lift_ci_low"], r["relative_lift_ci_high"], r["relative_lift"]
        scale, fmt = 10 ** (digits + 2), f"{{:+.{digits}%}}"
    elif r.get("lift_ci_low") is not None and r.get("lift_ci_high") is not None:
        low, high, point = r["lift_ci_low"], r["lift_ci_high"], r["lift"]
        scale, fmt = 10 ** (digits + 3), f"{{:+.{digits + 3}f}}"
    else:
        return ""
    low, high = math.floor(low * scale) / scale, math.ceil(high * scale) / scale
    shown = "" if point is None or not with_point else fmt.format(point) + " "
    return f"{shown}[{fmt.format(low)}, {fmt.format(high)}]"


def render_table(card: Scorecard, only: tuple[str, ...] | None = None, *,
                 decisions: bool = True) -> str:
    """The scorecard for a terminal (``only``: these metric names, e.g. ``"ndcg@10"``): the
    decision per treatment arm first (unless ``decisions`` is False), then the health
    checklist, then the rows grouped by role (primary, guardrails, secondary) and catalogue
    group."""
    lines = [f"Experiment {card.experiment} — "
             + (f"{'cumulative through' if card.cumulative else 'day'} {card.as_of}"
                if card.as_of else "no rolled-up data yet (run `tracker rollup`)")]
    if decisions:
        lines += render_decisions(card)
    lines += render_health(card)
    rows = [r for r in card.metrics
            if only is None or _name(r["metric"], r["k"]) in only]
    if not rows:
        return "\n".join(lines)
    kind = "always-valid" if card.intervals == "sequential" else "fixed-horizon"
    lines.append(f"{int(card.level * 100)}% {kind} intervals of the relative lift (Fieller; the "
                 f"difference's in metric units when unbounded); * primary, drawn at the level "
                 f"matching p adjusted ({card.correction}) over {', '.join(card.primary)}; "
                 f"{LOWER_MARK} lower is better; set-level metrics (one value per arm) have no "
                 "test, hence no verdict")
    header = (f"{'metric':<20}{'arm':<14}{'users':>7}  {'mean':>9} {'interval':<21}"
              f"{'lift':>9} {'relative lift interval':<26}{'p':>10}{'p adj':>10}  verdict")
    lines += [header, "-" * len(header)]
    for role, members in _consecutive(rows, lambda r: ROLE_LABELS[r.get("role", "secondary")]):
        lines.append(f"== {role} ==")
        for group, grouped in _by_group(members):
            lines.append(f"[{group}]")
            lines += [_table_line(r) for r in grouped]
    return "\n".join(lines)


ROLE_LABELS = {"primary": "Primary", "guardrail": "Guardrails", "secondary": "Secondary"}
OUTCOME_LABELS = {"ship": "ship", "do_not_ship": "do not ship",
                  "keep_running": "keep running", "no_detectable_effect": "no detectable effect"}


def decision_line(decision: dict[str, Any], health_status: str | None = None) -> str:
    """One arm's decision in a sentence: "Decision: personalised — ship: <reasons>; health
    passing" (the health words only when ``health_status`` is given)."""
    outcome = OUTCOME_LABELS.get(decision["outcome"], decision["outcome"])
    reasons = list(decision["reasons"])
    if health_status is not None and not any(r.startswith("health:") for r in reasons):
        reasons.append("health passing" if health_status == "pass"
                       else f"health {health_status} (see the checklist)")
    return f"Decision: {decision['arm']} — {outcome}: " + "; ".join(reasons)


def render_decisions(card: Scorecard) -> list[str]:
    """A line per treatment arm's decision (none in a daily view, which does not decide)."""
    if card.as_of is None or not card.cumulative:
        return []
    if not card.decisions:
        return ["Decision: none (no primary metric has results)"]
    return [decision_line(d, card.health.get("status")) for d in card.decisions]


def render_health(card: Scorecard) -> list[str]:
    """The health checklist compactly: the overall status with the passing checks named and
    the users per arm on one line, then one line per check that is not passing."""
    h = card.health
    if "checklist" not in h:
        return []
    items = h["checklist"]
    passing = [i["check"] for i in items if i["status"] == "pass"]
    users = ", ".join(f"{a} {n}" for a, n in h["users"].items())
    out = [f"Health: {h['status']}" + (f" ({', '.join(passing)} pass)" if passing else "")
           + f"; users {users}"]
    out += [f"  {i['status']:<5} {i['check']}: {i['message']}" for i in items
            if i["status"] != "pass"]
    return out


def _consecutive(rows: list[dict[str, Any]], label) -> list[tuple[str, list[dict[str, Any]]]]:
    """Runs of consecutive rows sharing ``label(row)``, in order."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for r in rows:
        name = label(r)
        if not out or out[-1][0] != name:
            out.append((name, []))
        out[-1][1].append(r)
    return out


LOWER_MARK = "↓"


def _by_group(rows: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Consecutive rows of one catalogue group, with the group's label ("Other" for a metric
    missing from the catalogue); rows arrive ordered by group."""
    return _consecutive(rows, lambda r: catalog.Group(r["group"]).label if r["group"]
                        else "Other")


def _num(value: float | None, pattern: str = "{:.4f}") -> str:
    return "—" if value is None else pattern.format(value)


def _table_line(r: dict[str, Any]) -> str:
    """One scorecard row for the terminal: the metric (``↓`` when lower is better), the arm's
    mean and interval and, for a treatment arm, lift, relative lift, p-values and verdict
    (``—`` when none: set-level metrics)."""
    label = _name(r["metric"], r["k"]) + (f" {LOWER_MARK}" if r["direction"] == "lower" else "")
    interval = "" if r["ci_low"] is None else f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
    line = f"{label:<20}{r['arm']:<14}{r['users']:>7}  {_num(r['mean']):>9} {interval:<21}"
    if r["control"]:
        return line
    rel = shown_interval(r)
    if not rel and r.get("relative_lift") is not None:  # a set-level difference: no interval
        rel = f"{r['relative_lift']:+.1%}"
    return (f"{line}{_num(r['lift'], '{:+.4f}'):>9} {rel:<26}"
            f"{format_p(r['p_value']):>10}{format_p(r['p_value_adjusted']):>10}"
            f"  {r['verdict'] or '—'}{' *' if r['primary'] else ''}" + _guard_note(r))


def report(engine, experiment: str, *, cumulative: bool = True, **options) -> Scorecard:
    """Read the rollup's tables of ``experiment`` and build its :func:`scorecard`."""
    from tracker.store import computed as read
    from tracker.store.db import transaction
    from tracker.store.experiments import get_experiment

    with transaction(engine) as conn:
        info = get_experiment(conn, experiment)
    daily = None if cumulative else read.health_table(engine, experiment, cumulative=False)
    return scorecard(info, read.metric_table(engine, experiment, cumulative),
                     read.health_table(engine, experiment, cumulative=True),
                     read.day_table(engine, experiment), cumulative=cumulative,
                     daily_health=daily, **options)
