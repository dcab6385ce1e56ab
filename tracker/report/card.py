"""Building the scorecard: :class:`Scorecard`, :func:`scorecard` from the rollup's tables,
:func:`report` from the database, :func:`select` of rows (see :mod:`tracker.report`)."""

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
from tracker.report.crossover import (
    Populations,
    compare_populations,
    intent_to_treat,
    intent_to_treat_covariates,
)
from tracker.report.decisions import arm_decisions, daily_new_users, users_per_day, view_health
from tracker.report.rows import (
    COLUMNS,
    RowTest,
    corrected,
    metric_name,
    metric_rows,
)
from tracker.report.trends import trends
from tracker.stats.decision import DEFAULT_TARGET_EFFECT
from tracker.store.experiments import AnalysisPlan, ExperimentInfo, Roles
from tracker.store.rollup_tables import CROSSOVER


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
    trends: list[dict[str, Any]] = field(default_factory=list)  # tracker.report.trends
    cuped: bool = False  # comparisons regression-adjusted on pre-exposure covariates
    plan: dict[str, Any] = field(default_factory=lambda: AnalysisPlan().to_dict())
    # how this view departs from the experiment's analysis plan, one phrase each ("always-valid
    # intervals (plan: fixed-horizon)"); empty: the plan's own analysis
    exploratory: tuple[str, ...] = ()
    # per treatment arm and primary or guardrail metric, intent-to-treat beside per-protocol
    # (tracker.report.crossover); empty without crossover users
    intent_to_treat: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment,
            "as_of": self.as_of.isoformat() if self.as_of else None,
            "cumulative": self.cumulative, "level": self.level, "intervals": self.intervals,
            "correction": self.correction, "primary": list(self.primary),
            "guardrails": dict(self.guardrails), "target_effect": self.target_effect,
            "cuped": self.cuped, "plan": dict(self.plan),
            "exploratory": list(self.exploratory),
            "decisions": self.decisions, "health": self.health, "metrics": self.metrics,
            "trends": self.trends, "intent_to_treat": self.intent_to_treat,
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
    return replace(card, metrics=filter_rows(card.metrics, metrics, ks))


def filter_rows(rows: list[dict[str, Any]], metrics: Iterable[str] = (),
                ks: Iterable[int] = ()) -> list[dict[str, Any]]:
    """The metric rows :func:`select` keeps (a slice report's too), checked as it checks."""
    metrics, ks = tuple(metrics), tuple(ks)
    for name in metrics:
        try:
            catalog.info(name)
        except ValueError as error:
            hint = (f" (name the metric alone, {name.split('@')[0]!r}, and choose its cutoff "
                    "with k)" if "@" in str(name) else "")
            raise ValidationError(f"{error}{hint}", field="metric") from None
    present = sorted({r["k"] for r in rows if r["k"] is not None})
    for k in ks:
        if present and k not in present:
            raise ValidationError(f"no results at k = {k!r}; this scorecard's cutoffs are "
                                  f"{', '.join(map(str, present))}", field="k")
    return [r for r in rows if (not metrics or r["metric"] in metrics)
            and (not ks or r["k"] is None or r["k"] in ks)]


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
              level: float = 0.95, intervals: str | None = None,
              correction: str | None = None, primary: tuple[str, ...] | None = None,
              guardrails: dict[str, float] | None = None,
              target_effect: float | None = None, cuped: bool | None = None,
              daily_health: pd.DataFrame | None = None,
              newest_event: datetime | None = None,
              now: datetime | None = None,
              exposure_days: pd.DataFrame | None = None,
              covariates: pd.DataFrame | None = None, planned_end: date | None = None,
              crossover: pd.DataFrame | None = None,
              crossover_covariates: pd.DataFrame | None = None) -> Scorecard:
    """Build the scorecard from the rollup's tables (see :mod:`tracker.store.computed`).

    ``as_of``: the day to report (default: the latest final day, else the latest; a day
    without results is a ValidationError naming those with results). ``primary`` /
    ``guardrails`` override the stored roles for this report (:func:`roles_for`); a guardrail
    maps a metric to its tolerated relative loss (0.02 = 2%) and gets a one-sided
    non-inferiority test per treatment arm (``guardrail_p_value``, ``guardrail_ok``).
    ``daily_health``: what a daily view's health describes. ``newest_event``: the newest event
    time rolled up, the freshness check's "data through" (None: no event known).
    ``target_effect``: what each primary must be able to
    detect before ``no_detectable_effect``. ``exposure_days``: the ``trends``' view.
    ``covariates``: CUPED's sums; holding the day, every comparison, guardrail and power is
    regression-adjusted. ``intervals``, ``correction``, ``target_effect``, ``cuped``: None
    follows the analysis plan (:func:`planned`); a departure is named in ``exploratory``.
    ``planned_end``: the horizon of "days to target" (default: the experiment's end);
    ``crossover``, ``crossover_covariates``: the ``(crossover)`` segment's tables."""
    exploratory = deviations(info.plan, intervals=intervals, correction=correction,
                             target_effect=target_effect, cuped=cuped)
    intervals, correction, target_effect = planned(info.plan, intervals, correction, target_effect)
    planned_end = planned_end or (info.ends_at.date() if info.ends_at else None)
    level = _check_options(level, intervals, target_effect)
    roles = roles_for(info, primary, guardrails)
    as_of = _reported_day(metric_table, days, as_of)
    view = health_table if cumulative or daily_health is None else daily_health
    checked = view_health(info, view, days, as_of, now or datetime.now(UTC), newest_event,
                          cumulative=cumulative or daily_health is None)
    card = Scorecard(info.key, as_of, cumulative, level, intervals, correction, roles.primary,
                     checked.fields, guardrails=dict(roles.guardrails),
                     target_effect=float(target_effect), plan=info.plan.to_dict(),
                     exploratory=exploratory)
    if as_of is None:
        return card
    rows = metric_table[metric_table["day"] == as_of]
    covariates = _of_day(covariates, as_of)
    card = replace(card, cuped=covariates is not None)
    tests: list[RowTest] = []
    card.metrics.extend(metric_rows(info, rows, level, intervals, roles, tests, covariates))
    _check_roles_have_tests(info, card.metrics, roles, (*(primary or ()), *(guardrails or {})))
    corrected(card.metrics, tests, correction, level, intervals)
    if exposure_days is not None:  # the exposure_day view (tracker.report.trends)
        card.trends.extend(trends(info, exposure_days, roles.primary, level, correction))
    if cumulative:
        found = _populations(info, card, tests, roles, rows, crossover, intent_to_treat_covariates(
            covariates, _of_day(crossover_covariates, as_of)))
        card.decisions.extend(_decisions(info, card, found, checked.checklist, health_table,
                                         planned_end))
    return card


def _populations(info: ExperimentInfo, card: Scorecard, tests: list[RowTest], roles: Roles,
                 rows: pd.DataFrame, crossover: pd.DataFrame | None,
                 covariates: pd.DataFrame | None) -> Populations:
    """The reported day's intent-to-treat tests beside ``tests`` (None: no crossover), their
    rows added to ``card.intent_to_treat``."""
    mine = None if crossover is None else crossover[crossover["day"] == card.as_of]
    found = compare_populations(info, tests, intent_to_treat(rows, mine), covariates,
                                level=card.level, intervals=card.intervals,
                                correction=card.correction, roles=roles, cuped=card.cuped)
    card.intent_to_treat.extend(found.rows)
    return found


_MODES = {"fixed_horizon": "fixed-horizon", "sequential": "always-valid"}


def planned(plan: AnalysisPlan, intervals: str | None, correction: str | None,
            target_effect: float | None) -> tuple[str, str, float]:
    """The options of a scorecard: each one given, else the analysis plan's. ``cuped``
    (whether the view asked for CUPED) only labels the view: the adjustment follows the
    covariates given, which :func:`report` reads when the plan or the view asks for it."""
    return (plan.intervals if intervals is None else intervals,
            plan.correction if correction is None else correction,
            plan.target_effect if target_effect is None else target_effect)


def deviations(plan: AnalysisPlan, *, intervals: str | None = None,
               correction: str | None = None, target_effect: float | None = None,
               cuped: bool | None = None) -> tuple[str, ...]:
    """How the options of a view depart from ``plan`` (None: as planned), one phrase each.

    >>> deviations(AnalysisPlan(), intervals="sequential", cuped=True)
    ('always-valid intervals (plan: fixed-horizon)',)
    """
    out = []
    if intervals is not None and intervals != plan.intervals:
        out.append(f"{_MODES.get(intervals, intervals)} intervals "
                   f"(plan: {_MODES.get(plan.intervals, plan.intervals)})")
    if cuped is not None and cuped != plan.cuped:
        out.append(f"CUPED {'on' if cuped else 'off'} (plan: {'on' if plan.cuped else 'off'})")
    if correction is not None and correction != plan.correction:
        out.append(f"{correction} correction (plan: {plan.correction})")
    if target_effect is not None and target_effect != plan.target_effect:
        out.append(f"target effect {target_effect:.1%} (plan: {plan.target_effect:.1%})")
    return tuple(out)


def _decisions(info: ExperimentInfo, card: Scorecard, found: Populations,
               checklist: stats.HealthChecklist, health_table: pd.DataFrame,
               planned_end: date | None) -> list[dict[str, Any]]:
    """The cumulative view's decisions (:func:`arm_decisions`) as JSON, with the new users
    of each day for the model of arrivals and the days left to ``planned_end``; each says
    which ``population`` it read (intent-to-treat where ``found`` says it decides)."""
    as_of = card.as_of
    days_left = None if planned_end is None or as_of is None else (planned_end - as_of).days
    out = [d.to_dict() for d in arm_decisions(
        info, found.tests, checklist, users_per_day(health_table, info, as_of), card.level,
        card.correction, card.target_effect, card.trends, intervals=card.intervals,
        arrivals=daily_new_users(health_table, info, as_of), days_left=days_left)]
    for decision in out:
        itt = decision["arm"] in found.deciding
        decision["population"] = "intent_to_treat" if itt else "per_protocol"
    return out


def _check_options(level: float, intervals: str, target_effect: float) -> float:
    """The checked level; a bad ``intervals`` or ``target_effect`` raises."""
    level = stats.results.check_level(level)
    if intervals not in ("fixed_horizon", "sequential"):
        raise ValueError(f"intervals must be 'fixed_horizon' or 'sequential', got {intervals!r}")
    if not (isinstance(target_effect, int | float) and math.isfinite(target_effect)
            and target_effect > 0):
        raise ValidationError(f"target effect {target_effect!r}: expected a relative effect "
                              "above 0, e.g. 0.05 for 5%", field="target_effect")
    return level


def _of_day(covariates: pd.DataFrame | None, day: date) -> pd.DataFrame | None:
    """The covariate sums of ``day``; None when there are none (no CUPED for that day)."""
    if covariates is None or covariates.empty:
        return None
    mine = covariates[covariates["day"] == day]
    return None if mine.empty else mine


def _reported_day(metric_table: pd.DataFrame, days: pd.DataFrame,
                  as_of: date | None) -> date | None:
    """The day to report: ``as_of``, or the latest day whose results are final (else the
    latest day; None without results). A day without results is a ValidationError naming
    the days with results."""
    available = sorted(set(metric_table["day"])) if not metric_table.empty else []
    if as_of is None and available:
        final = days[~days["provisional"]]["day"] if not days.empty else []
        as_of = max(final) if len(final) else available[-1]
    if as_of is not None and as_of not in available:
        raise ValidationError(f"no results for {as_of}: " + (
            f"the days with results run from {available[0]} to {available[-1]}" if available
            else "no day has results yet (run `tracker rollup`)"), field="as_of")
    return as_of


def _check_roles_have_tests(info: ExperimentInfo, rows: list[dict[str, Any]], roles: Roles,
                            given: tuple[str, ...]) -> None:
    """Every primary and guardrail must name a per-user metric the scorecard has rows of
    (only those are tested); a set-level metric (one value per arm) is named as such. A bad
    name given for this report is an error on the flags (field ``primary``); one stored on the
    experiment says how to change the experiment's roles (field ``roles``)."""
    known = {metric_name(r["metric"], r["k"]) for r in rows if r["kind"] == "user"}
    if not known:
        return
    set_level = {metric_name(r["metric"], r["k"]) for r in rows if r["kind"] == "set"}
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


def report(engine, experiment: str, *, cumulative: bool = True, cuped: bool | None = None,
           **options) -> Scorecard:
    """Read the rollup's tables of ``experiment`` and build its :func:`scorecard`
    (``cuped``: regression-adjusted where the rollup stored pre-exposure covariates; None:
    as the experiment's analysis plan says, as every option left out). Freshness
    (``newest_event``, unless given) is the newest event time the last rollup stored in the
    experiment's summary (:mod:`tracker.publish`): no scan of the raw logs."""
    from tracker.report.summary import ExperimentSummary
    from tracker.store import computed as read
    from tracker.store.db import transaction
    from tracker.store.experiments import get_experiment
    from tracker.store.summaries import read_summaries

    with transaction(engine) as conn:
        info = get_experiment(conn, experiment)
        if "newest_event" not in options:
            stored = read_summaries(conn, [experiment]).get(experiment)
            options["newest_event"] = (None if stored is None else
                                       ExperimentSummary.from_dict(stored[1]).newest_event)
    daily = None if cumulative else read.health_table(engine, experiment, cumulative=False)
    adjust = info.plan.cuped if cuped is None else cuped
    covariates = read.covariate_table(engine, experiment, cumulative) if adjust else None
    if cumulative:  # the crossover cells (tracker.report.crossover)
        options.setdefault("crossover", read.metric_table(engine, experiment, True, CROSSOVER))
        if adjust:
            options.setdefault("crossover_covariates", read.covariate_table(
                engine, experiment, True, segment=CROSSOVER))
    return scorecard(info, read.metric_table(engine, experiment, cumulative),
                     read.health_table(engine, experiment, cumulative=True),
                     read.day_table(engine, experiment), cumulative=cumulative,
                     daily_health=daily, exposure_days=read.exposure_day_table(engine, experiment),
                     covariates=covariates, cuped=cuped, **options)
