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
  (``fixed_horizon`` | ``sequential``), ``correction``, ``primary`` (metric names);
- ``health``: ``srm_p_value`` (chi-square), ``srm_sequential_p_value`` (anytime-valid),
  ``srm_flagged`` (either p-value below 0.001; the size never gates), ``srm_deviation`` (the
  deviation in words, "control lost 0.34% of its expected users"), ``users`` and
  ``expected_share`` per arm, ``crossover_users``,
  ``crossover_share``, ``crossover_status`` (ok / warn / alert), ``provisional_days``,
  ``last_rollup`` (ISO instant) and ``data_lag_hours`` (now minus the last impression day's
  end, None without data);
- ``metrics``: rows with ``metric``, ``k`` (None when the metric has none), ``arm``,
  ``control`` (bool), ``kind`` (user | set), ``group`` (online | ranking | beyond_accuracy),
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
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pandas as pd

from tracker import stats
from tracker.errors import ValidationError
from tracker.metrics import catalog
from tracker.store.experiments import ExperimentInfo

METRIC_ORDER = catalog.display_order()
LOWER_IS_BETTER = catalog.lower_is_better()
COLUMNS = ("metric", "k", "arm", "control", "kind", "users", "mean", "ci_low", "ci_high",
           "lift", "lift_ci_low", "lift_ci_high", "relative_lift", "relative_lift_ci_low",
           "relative_lift_ci_high", "p_value", "p_value_adjusted", "primary", "verdict",
           "reason", "group", "direction")
"""The fields of a metric row, in the order of the CSV and of :meth:`Scorecard.to_frame` (new
fields go at the end, so CSV columns keep their positions)."""
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment,
            "as_of": self.as_of.isoformat() if self.as_of else None,
            "cumulative": self.cumulative, "level": self.level, "intervals": self.intervals,
            "correction": self.correction, "primary": list(self.primary),
            "health": self.health, "metrics": self.metrics,
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


def scorecard(info: ExperimentInfo, metric_table: pd.DataFrame, health_table: pd.DataFrame,
              days: pd.DataFrame, *, as_of: date | None = None, cumulative: bool = True,
              level: float = 0.95, intervals: str = "fixed_horizon",
              correction: str = "holm", primary: tuple[str, ...] | None = None,
              guardrails: dict[str, float] | None = None,
              now: datetime | None = None) -> Scorecard:
    """Build the scorecard from the rollup's tables (see :mod:`tracker.rollup.read`).

    ``as_of``: the day to report (default: the latest day whose results are final, else the
    latest day; a day without results is a ValidationError naming the days with results).
    ``primary``: metric names such as ``"ndcg@10"`` (default: NDCG and hit rate
    at the experiment's middle cutoff). ``guardrails``: metric name -> tolerated relative loss
    (0.02 = 2%); each treatment arm gets a one-sided non-inferiority test on those
    (``guardrail_p_value``, ``guardrail_ok``; not corrected for multiplicity).
    """
    level = stats.results.check_level(level)
    if intervals not in ("fixed_horizon", "sequential"):
        raise ValueError(f"intervals must be 'fixed_horizon' or 'sequential', got {intervals!r}")
    cutoffs = list(info.cutoffs)
    middle = cutoffs[len(cutoffs) // 2]
    primary = tuple(primary) if primary else (f"ndcg@{middle}", f"hit_rate@{middle}")
    available = sorted(set(metric_table["day"])) if not metric_table.empty else []
    if as_of is None and available:
        final = days[~days["provisional"]]["day"] if not days.empty else []
        as_of = max(final) if len(final) else available[-1]
    if as_of is not None and as_of not in available:
        raise ValidationError(f"no results for {as_of}: " + (
            f"the days with results run from {available[0]} to {available[-1]}" if available
            else "no day has results yet (run `tracker rollup`)"), field="as_of")
    health = _health(info, health_table, days, as_of, now or datetime.now(UTC))
    card = Scorecard(info.key, as_of, cumulative, level, intervals, correction, primary,
                     health)
    if as_of is None:
        return card
    rows = metric_table[metric_table["day"] == as_of]
    tests: list[_Test] = []
    card.metrics.extend(_metric_rows(info, rows, level, intervals, primary,
                                     guardrails or {}, tests))
    known = {_name(r["metric"], r["k"]) for r in card.metrics if r["kind"] == "user"}
    unknown = [name for name in (*primary, *(guardrails or {})) if name not in known]
    if unknown and known:
        raise ValidationError(f"unknown primary or guardrail metric(s) {', '.join(unknown)}; "
                              f"expected names such as {', '.join(sorted(known)[:6])}",
                              field="primary")
    _adjust(card.metrics, correction, level)
    for test in tests:
        _adjust_intervals(test, level, intervals)
    return card


def _health(info: ExperimentInfo, health_table: pd.DataFrame, days: pd.DataFrame,
            as_of: date | None, now: datetime) -> dict[str, Any]:
    arms = [arm.key for arm in info.arms]
    weights = [arm.weight for arm in info.arms]
    total = sum(weights)
    out: dict[str, Any] = {
        "srm_p_value": None, "srm_sequential_p_value": None, "srm_flagged": False,
        "srm_reason": "no_users", "srm_deviation": None, "users": dict.fromkeys(arms, 0),
        "expected_share": {a: w / total for a, w in zip(arms, weights, strict=True)},
        "crossover_users": 0, "crossover_share": None, "crossover_status": None,
        "provisional_days": [d.isoformat() for d in days[days["provisional"]]["day"]]
        if not days.empty else [],
        "last_rollup": None, "data_lag_hours": None,
    }
    last_run = days.attrs.get("last_run")
    if last_run is not None:
        out["last_rollup"] = last_run.isoformat()
    if not days.empty:
        last_day = max(days["day"])
        end = datetime.combine(last_day + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
        out["data_lag_hours"] = round((now - end).total_seconds() / 3600, 1)
    if as_of is None or health_table.empty:
        return out
    table = health_table[health_table["day"] <= as_of]
    per_arm = table[table["arm"].notna()].pivot_table(index="day", columns="arm",
                                                       values="users", aggfunc="sum")
    per_arm = per_arm.reindex(columns=arms).fillna(0).astype(int).sort_index()
    today = per_arm.iloc[-1] if len(per_arm) else pd.Series(0, index=arms)
    out["users"] = {a: int(today[a]) for a in arms}
    srm = stats.srm_test([int(today[a]) for a in arms], weights)
    out["srm_p_value"] = _finite(srm.p_value)
    out["srm_reason"] = srm.reason.value
    out["srm_deviation"] = srm.describe(arms)
    looks = per_arm.to_numpy().tolist()
    if looks and sum(looks[-1]):
        sequential = stats.sequential_srm(looks, weights)
        out["srm_sequential_p_value"] = _finite(sequential.p_value)
        out["srm_flagged"] = bool(srm.flagged or sequential.flagged)
    else:
        out["srm_flagged"] = bool(srm.flagged)
    whole = table[table["arm"].isna() & (table["day"] == as_of)]
    if len(whole):
        row = whole.iloc[0]
        crossover = stats.crossover_health(int(row["users"]), int(row["crossover_users"]))
        out["crossover_users"] = int(row["crossover_users"])
        out["crossover_share"] = _finite(crossover.share)
        out["crossover_status"] = crossover.status.value if crossover.status else None
    return out


@dataclass(frozen=True)
class _Test:
    """A treatment row and the statistics its comparison was computed from."""

    row: dict[str, Any]
    treatment: stats.MeanStats
    control: stats.MeanStats


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
                 primary: tuple[str, ...], guardrails: dict[str, float], tests: list[_Test]
                 ) -> list[dict[str, Any]]:
    control = info.control
    arm_keys = [arm.key for arm in info.arms]
    out = []
    keys = rows[["metric", "k"]].drop_duplicates()
    order = {m: i for i, m in enumerate(METRIC_ORDER)}  # catalogue groups, then entries
    keys = sorted(((m, None if pd.isna(k) else int(k)) for m, k in keys.itertuples(index=False)),
                  key=lambda mk: (order.get(mk[0], len(order)), mk[0], mk[1] or 0))
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
                                   **_described(metric), "users": int(r.users)}
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
                tests.append(_Test(row, mean_stats, control_stats))
                margin = guardrails.get(_name(metric, k))
                if margin is not None:
                    guard = stats.non_inferiority(
                        mean_stats, control_stats, margin=margin, relative=True,
                        higher_is_better=metric not in LOWER_IS_BETTER, level=level)
                    row.update(guardrail_margin=margin,
                               guardrail_p_value=_finite(guard.p_value),
                               guardrail_ok=guard.non_inferior)
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


def render_table(card: Scorecard, only: tuple[str, ...] | None = None) -> str:
    """The scorecard for a terminal (``only``: these metric names, e.g. ``"ndcg@10"``)."""
    lines = [f"Experiment {card.experiment} — "
             + (f"{'cumulative through' if card.cumulative else 'day'} {card.as_of}"
                if card.as_of else "no rolled-up data yet (run `tracker rollup`)")]
    h = card.health
    srm = "n/a" if h["srm_p_value"] is None else f"p = {format_p(h['srm_p_value'])}"
    lines.append(
        f"Health: SRM {srm}"
        + (f" MISMATCH ({h['srm_deviation']})" if h["srm_flagged"] else "") + "; users "
        + ", ".join(f"{a} {n}" for a, n in h["users"].items())
        + f"; crossover {h['crossover_users']}"
        + (f" ({h['crossover_share']:.2%}, {h['crossover_status']})"
           if h["crossover_share"] is not None else "")
        + f"; provisional days {len(h['provisional_days'])}"
        + (f"; data lag {h['data_lag_hours']} h" if h["data_lag_hours"] is not None else ""))
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
    for group, members in _by_group(rows):
        lines.append(f"[{group}]")
        lines += [_table_line(r) for r in members]
    return "\n".join(lines)


LOWER_MARK = "↓"


def _by_group(rows: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Consecutive rows of one catalogue group, with the group's label ("Other" for a metric
    missing from the catalogue); rows arrive ordered by group."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for r in rows:
        label = catalog.Group(r["group"]).label if r["group"] else "Other"
        if not out or out[-1][0] != label:
            out.append((label, []))
        out[-1][1].append(r)
    return out


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
    from tracker.rollup import read
    from tracker.store.db import transaction
    from tracker.store.experiments import get_experiment

    with transaction(engine) as conn:
        info = get_experiment(conn, experiment)
    return scorecard(info, read.metric_table(engine, experiment, cumulative),
                     read.health_table(engine, experiment, cumulative=True),
                     read.day_table(engine, experiment), cumulative=cumulative, **options)
