"""The scorecard as text for a terminal: decisions, health, then the metric rows in one table
(:func:`tracker.table.text_table`, the CLI's renderer too). :func:`shown_interval` and
:func:`format_p` are the dashboard's as well, so both show the same numbers."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tracker.metrics import catalog
from tracker.report.card import Scorecard
from tracker.report.rows import P_FLOOR, metric_name
from tracker.report.trends import trend_notes
from tracker.table import Column, table_lines

if TYPE_CHECKING:
    from tracker.report.segments import SegmentReport


def format_p(p: float | None) -> str:
    """A p-value for people: 3 significant digits, ``<1e-16`` below :data:`P_FLOOR` (never
    ``0``), ``—`` when there is none.

    >>> format_p(0.04441), format_p(0.0), format_p(3e-20), format_p(None)
    ('0.0444', '<1e-16', '<1e-16', '—')
    """
    if p is None:
        return "—"
    return f"<{P_FLOOR:.0e}" if p < P_FLOOR else f"{p:.3g}"


GUARDRAIL_STATES = ("holds", "fails", "not shown yet")


def guardrail_state(row: dict[str, Any]) -> str | None:
    """A guardrail row in words (None for a row that is not a guardrail): ``"holds"`` when
    its non-inferiority test shows the loss is within the margin; ``"fails"`` when the
    row's two-sided relative interval lies wholly beyond the margin on the harmful side (the
    loss exceeds what is tolerated); else ``"not shown yet"`` (neither: a lack of evidence,
    not harm).

    >>> guardrail_state({"guardrail_margin": 0.05, "guardrail_ok": False,
    ...                  "direction": "higher", "relative_lift_ci_high": -0.07})
    'fails'
    """
    if "guardrail_margin" not in row:
        return None
    if row.get("guardrail_ok"):
        return "holds"
    margin = row["guardrail_margin"]
    if row.get("direction") == "lower":
        low = row.get("relative_lift_ci_low")
        beyond = low is not None and low > margin
    else:
        high = row.get("relative_lift_ci_high")
        beyond = high is not None and high < -margin
    return "fails" if beyond else "not shown yet"


def _guard_note(row: dict[str, Any]) -> str:
    state = guardrail_state(row)
    if state is None:
        return ""
    return f"; guardrail -{row['guardrail_margin']:.0%}: {state}"


def plan_lines(card: Scorecard, planned: Scorecard | None = None) -> list[str]:
    """The analysis plan the scorecard follows, or, for a view that departs from it, that it
    is exploratory and what the plan's own decision is (from ``planned``, the plan's
    scorecard of the same day)."""
    plan = card.plan
    mode = "always-valid" if plan["intervals"] == "sequential" else "fixed-horizon"
    out = [f"Analysis plan: {mode} intervals, CUPED {'on' if plan['cuped'] else 'off'}, "
           f"{plan['correction']} correction, target effect {plan['target_effect']:.1%}"]
    if card.exploratory:
        out.append("EXPLORATORY VIEW (" + "; ".join(card.exploratory) + ")"
                   + ("" if planned is None else " — the plan's decision is "
                      + plan_decision_text(planned)))
    return out


def plan_decision_text(planned: Scorecard) -> str:
    """The plan's decision per treatment arm in a phrase ("treatment: ship")."""
    if not planned.decisions:
        return "none yet"
    return ", ".join(f"{d['arm']}: {OUTCOME_LABELS.get(d['outcome'], d['outcome'])}"
                     for d in planned.decisions)


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
                 decisions: bool = True, planned: Scorecard | None = None) -> str:
    """The scorecard for a terminal (``only``: these metric names, e.g. ``"ndcg@10"``): the
    analysis plan (and, for a view that departs from it, the plan's decision from
    ``planned``), the decision per treatment arm (unless ``decisions`` is False), then the
    health checklist, then the rows grouped by role (primary, guardrails, secondary) and
    catalogue group. Failing health marks every verdict untrusted."""
    lines = [f"Experiment {card.experiment} — "
             + (f"{'cumulative through' if card.cumulative else 'day'} {card.as_of}"
                if card.as_of else "no rolled-up data yet (run `tracker rollup`)")]
    if decisions:
        lines += render_decisions(card)
    lines += render_health(card)
    lines += render_crossover(card)
    lines += trend_notes(card.trends)
    lines += plan_lines(card, planned)
    rows = [r for r in card.metrics
            if only is None or metric_name(r["metric"], r["k"]) in only]
    if not rows:
        return "\n".join(lines)
    kind = "always-valid" if card.intervals == "sequential" else "fixed-horizon"
    lines.append(f"{int(card.level * 100)}% {kind} intervals of the relative lift (Fieller; the "
                 f"difference's in metric units when unbounded); * primary, drawn at the level "
                 f"matching p adjusted ({card.correction}) over {', '.join(card.primary)}; "
                 f"{LOWER_MARK} lower is better; set-level metrics (one value per arm) have no "
                 "test, hence no verdict")
    lines.append(cuped_line(card))
    untrusted = card.health.get("status") == "fail"
    if untrusted:
        lines.append("HEALTH FAILING: every lift and verdict below is untrusted (see the "
                     "checklist)")
    cells: list[tuple[str, ...]] = []
    for role, members in _consecutive(rows, lambda r: ROLE_LABELS[r.get("role", "secondary")]):
        cells.append((f"== {role} ==",))
        for group, grouped in _by_group(members):
            cells.append((f"[{group}]",))
            cells += [_table_cells(r, untrusted) for r in grouped]
    return "\n".join(lines + table_lines(SCORECARD_COLUMNS, cells, rule=True))


SCORECARD_COLUMNS = (Column("metric"), Column("arm"), Column("users", right=True),
                     Column("mean", right=True), Column("interval"), Column("lift", right=True),
                     Column("var −", right=True), Column("relative lift interval"),
                     Column("p", right=True), Column("p adj", right=True), Column("verdict"))
"""The scorecard's table: a row per arm of each metric (a control row stops at its
interval)."""


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
    if decision.get("population") == "intent_to_treat":
        reasons.append("read on intent-to-treat (every user in the arm of their first "
                       "exposure): per-protocol disagrees, see Crossover")
    return f"Decision: {decision['arm']} — {outcome}: " + "; ".join(reasons)


def render_crossover(card: Scorecard) -> list[str]:
    """Intent-to-treat beside per-protocol: one line when the two agree everywhere, else a
    line per treatment arm and primary or guardrail metric (none without crossover users)."""
    if not card.intent_to_treat:
        return []
    if not any(r["disagree"] for r in card.intent_to_treat):
        users = card.health.get("crossover_users")
        return [f"Crossover: intent-to-treat (the {users} crossover users too, each in the arm "
                "of their first exposure) agrees with per-protocol in sign and significance on "
                "every primary and guardrail"]
    out = ["Crossover: per-protocol (each arm's own users) against intent-to-treat (crossover "
           "users too, in the arm of their first exposure); adjusted p"]
    for r in card.intent_to_treat:
        pp, itt = r["per_protocol"], r["intent_to_treat"]
        out.append(f"  {r['arm']} {metric_name(r['metric'], r['k'])}: per-protocol "
                   f"{_lift(pp)} (p {format_p(pp['p_value_adjusted'])}, {pp['users']} users) · "
                   f"intent-to-treat {_lift(itt)} (p {format_p(itt['p_value_adjusted'])}, "
                   f"{itt['users']} users) — {r['why']}")
    return out


def _lift(row: dict[str, Any]) -> str:
    value = row.get("relative_lift")
    return "n/a" if value is None else f"{value:+.1%}"


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


def _table_cells(r: dict[str, Any], untrusted: bool = False) -> tuple[str, ...]:
    """One scorecard row's cells (:data:`SCORECARD_COLUMNS`): the metric (``↓`` when lower is
    better), the arm's mean and interval and, for a treatment arm, lift, relative lift,
    p-values and verdict (``—`` when none: set-level metrics)."""
    label = metric_name(r["metric"], r["k"]) + (f" {LOWER_MARK}" if r["direction"] == "lower"
                                                  else "")
    interval = "" if r["ci_low"] is None else f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
    cells = (label, r["arm"], str(r["users"]), _num(r["mean"]), interval)
    if r["control"]:
        return cells
    rel = shown_interval(r)
    if not rel and r.get("lift") is not None:  # a set-level difference: no interval, and a
        rel = f"{r['lift']:+.4g} abs."  # relative change of a near-0 base would mislead
    verdict = f"{r['verdict'] or '—'}{' *' if r['primary'] else ''}" + _guard_note(r)
    entry = catalog.CATALOG.get(r["metric"])
    if entry is not None and entry.zero_for_control:
        return (*cells, _num(r["lift"], "{:+.4f}"), "—", "", "—", "—",
                "descriptive (0 for control by definition)")
    if untrusted and r["verdict"] is not None:
        verdict = f"untrusted ({verdict})"
    removed = "—" if r["kind"] != "user" else f"{r.get('variance_reduction') or 0.0:.0%}"
    return (*cells, _num(r["lift"], "{:+.4f}"), removed, rel, format_p(r["p_value"]),
            format_p(r["p_value_adjusted"]), verdict)


def cuped_line(card: Scorecard) -> str:
    """Whether CUPED adjusted the comparisons, and how much variance it removed (the median
    over the primaries' rows, which ``var −`` shows row by row)."""
    if not card.cuped:
        return ("CUPED off: lifts unadjusted (`--cuped` and a rollup with the experiment's "
                "cuped_days > 0 adjust them for pre-exposure behaviour)")
    shares = sorted(r["variance_reduction"] for r in card.metrics
                    if r.get("primary") and r.get("variance_reduction") is not None)
    middle = f"; {shares[len(shares) // 2]:.0%} of the primaries' variance removed" \
        if shares else ""
    return ("CUPED on: lifts adjusted for each user's interactions and lists before first "
            f"exposure{middle} (var −: the share removed per row)")





def render_segments(found: SegmentReport, only: tuple[str, ...] | None = None) -> str:
    """One dimension's slices for a terminal (``only``: these metric names): what the
    slices are, the heterogeneity of each primary, then a block per slice (its users per
    arm and sample-ratio check, then its rows as the scorecard's table shows them)."""
    view = "cumulative through" if found.cumulative else "day"
    lines = [f"Experiment {found.experiment} by {found.segment} ({found.kind} dimension) — "
             + (f"{view} {found.as_of}" if found.as_of else
                "no rolled-up data yet (run `tracker rollup`)")]
    lines += found.notes
    lines += [f"{metric_name(h['metric'], h['k'])}, {h['arm']}: {h['text']}"
              for h in found.heterogeneity]
    srm = {row["slice"]: row for row in found.srm}
    for name in found.slices:
        check = srm.get(name, {})
        split = ", ".join(f"{arm} {n}" for arm, n in check.get("users", {}).items())
        flag = "SAMPLE RATIO MISMATCH (p adj " + format_p(check["p_value_adjusted"]) + ")" \
            if check.get("flagged") else "sample ratio ok"
        lines += ["", f"== {found.segment} = {name}: users {split}; {flag} =="]
        rows = [r for r in found.metrics if r["slice"] == name
                and (only is None or metric_name(r["metric"], r["k"]) in only)]
        cells = [_table_cells(r, untrusted=bool(check.get("flagged"))) for r in rows]
        lines += table_lines(SCORECARD_COLUMNS, cells, rule=True)
    return "\n".join(lines)
