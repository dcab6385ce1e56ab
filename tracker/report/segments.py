"""The results of one declared dimension: the scorecard's comparisons per slice (issue 33).

For the day and analysis the experiment's own scorecard reports (:func:`tracker.report.report`:
the same as-of day, level, interval mode, CUPED and roles), every metric and arm is
compared again within each slice of the dimension (``device``, ``surface``). Slices are
exploratory (:mod:`tracker.stats.slices`):

- a slice's ``p_value_adjusted`` and ``verdict`` read its p-value adjusted by
  Benjamini–Hochberg across the dimension's slices, per metric and treatment arm; no slice
  changes the experiment's decision, which the report leaves to the scorecard;
- the sample ratio is checked per slice against the experiment's split, Holm-adjusted
  across the slices;
- per primary metric and treatment arm, heterogeneity (Cochran's Q) says whether the lift
  differs across the slices of a user dimension; a list dimension's slices share users,
  so it gets no test, and the report says why.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pandas as pd

from tracker.errors import ValidationError
from tracker.report.card import Scorecard, filter_rows, report, roles_for
from tracker.report.rows import COLUMNS, LOWER_IS_BETTER, RowTest, metric_name, metric_rows
from tracker.stats import estimates
from tracker.stats.slices import (
    DimensionKind,
    describe_srm,
    heterogeneity,
    slice_srm,
    slice_verdicts,
)
from tracker.store.experiments import ExperimentInfo, Segment

SEGMENT_COLUMNS = ("segment", "slice", *COLUMNS)
"""The fields of a slice's metric row, in the order of the CSV."""

LAST = ("(other)", "(none)")
"""Slices listed after the levels, in this order."""


@dataclass(frozen=True)
class SegmentReport:
    """One dimension's slices: ``metrics`` (a row per metric × arm × slice, the
    scorecard's fields with ``segment`` and ``slice``), ``srm`` (a row per slice),
    ``heterogeneity`` (a row per primary metric × treatment arm) and ``notes`` (what the
    numbers mean, in sentences)."""

    experiment: str
    segment: str
    kind: str
    as_of: date | None
    cumulative: bool
    level: float
    intervals: str
    cuped: bool
    slices: tuple[str, ...] = ()
    metrics: list[dict[str, Any]] = field(default_factory=list)
    srm: list[dict[str, Any]] = field(default_factory=list)
    heterogeneity: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "segment": self.segment, "kind": self.kind,
                "as_of": self.as_of.isoformat() if self.as_of else None,
                "cumulative": self.cumulative, "level": self.level,
                "intervals": self.intervals, "cuped": self.cuped,
                "slices": list(self.slices), "notes": list(self.notes), "srm": self.srm,
                "heterogeneity": self.heterogeneity, "metrics": self.metrics}

    def to_frame(self, metrics: Iterable[str] = (), ks: Iterable[int] = ()) -> pd.DataFrame:
        """The metric rows (those of ``metrics`` and ``ks`` only, as
        :func:`~tracker.report.select` filters) as a DataFrame of :data:`SEGMENT_COLUMNS`."""
        return pd.DataFrame(filter_rows(self.metrics, metrics, ks), columns=SEGMENT_COLUMNS)

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, SEGMENT_COLUMNS, extrasaction="ignore",
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.metrics)
        return out.getvalue()


def segment_report(engine, experiment: str, segment: str, *, cumulative: bool = True,
                   **options) -> SegmentReport:
    """The slices of ``segment`` (a dimension ``experiment`` declares) as the scorecard of
    the same ``options`` (:func:`tracker.report.report`'s) reports the experiment."""
    from tracker.store import computed as read
    from tracker.store.db import transaction
    from tracker.store.experiments import get_experiment

    table = read.metric_table(engine, experiment, cumulative, segment=segment)  # declared?
    card = report(engine, experiment, cumulative=cumulative, **options)
    with transaction(engine) as conn:
        info = get_experiment(conn, experiment)
    dimension = next((s for s in info.segments if s.name == segment), None)
    if dimension is None:  # the crossover cells' rows are not a dimension's
        declared = ", ".join(s.name for s in info.segments) or "none"
        raise ValidationError(f"experiment {experiment!r} declares no dimension {segment!r} "
                              f"(declared: {declared})", field="segment")
    health = read.health_table(engine, experiment, True, segment=segment)
    covariates = read.covariate_table(engine, experiment, cumulative, day=card.as_of,
                                      segment=segment) if card.cuped else None
    day = table[table["day"] == card.as_of]  # none without an as-of day
    slices = _ordered(day)
    out = SegmentReport(info.key, segment, dimension.kind, card.as_of, cumulative,
                        card.level, card.intervals, card.cuped, tuple(slices),
                        notes=_notes(dimension, slices, day))
    if slices:
        tests = _compare(info, card, day, covariates, slices, out)
        _verdicts(out, tests, card.level)
        _sample_ratio(out, info, health[health["day"] == card.as_of], slices)
        _heterogeneity(out, info, card, tests)
    return out


def _ordered(day: pd.DataFrame) -> list[str]:
    """The slices with users, most users first (then by name); (other), (none) last."""
    users = day[day["kind"] == "user"].groupby("slice")["users"].max()
    users = users[users > 0]
    named = sorted((s for s in users.index if s not in LAST), key=lambda s: (-users[s], s))
    return named + [s for s in LAST if s in users.index]


def _compare(info: ExperimentInfo, card: Scorecard, day: pd.DataFrame,
             covariates: pd.DataFrame | None, slices: list[str], out: SegmentReport
             ) -> dict[tuple[str, int | None, str], dict[str, RowTest]]:
    """Each slice's metric rows (added to ``out``) and their tests by (metric, k, arm)."""
    roles = roles_for(info, card.primary, card.guardrails)
    by_key: dict[tuple[str, int | None, str], dict[str, RowTest]] = defaultdict(dict)
    for name in slices:
        tests: list[RowTest] = []
        mine = day[day["slice"] == name].drop(columns="slice")
        fits = None if covariates is None else \
            covariates[covariates["slice"] == name].drop(columns="slice")
        for row in metric_rows(info, mine, card.level, card.intervals, roles, tests, fits):
            row.update(segment=out.segment, slice=name, exploratory=True)
            out.metrics.append(row)
        for test in tests:
            by_key[(test.row["metric"], test.row["k"], test.row["arm"])][name] = test
    return by_key


def _verdicts(out: SegmentReport, tests: dict, level: float) -> None:
    """Each tested row's p-value adjusted across the slices, and its verdict."""
    for found in tests.values():
        adjusted = slice_verdicts({name: test.result for name, test in found.items()})
        for verdict in adjusted:
            row = found[verdict.slice].row
            row["p_value_adjusted"] = verdict.adjusted_p
            if row["direction"] is None:
                row["verdict"] = None
            elif not verdict.significant or row["lift"] is None:
                row["verdict"] = "inconclusive"
            else:
                better = (row["lift"] > 0) != (row["metric"] in LOWER_IS_BETTER)
                row["verdict"] = "better" if better else "worse"


def _sample_ratio(out: SegmentReport, info: ExperimentInfo, health: pd.DataFrame,
                  slices: list[str]) -> None:
    """The split of each slice's users against the experiment's weights."""
    arms = [a.key for a in info.arms]
    users = {name: [int(health[(health["slice"] == name) & (health["arm"] == arm)]
                        ["users"].sum()) for arm in arms] for name in slices}
    checks = slice_srm(users, [a.weight for a in info.arms])
    for check in checks:
        out.srm.append({"slice": check.slice, "users": dict(zip(arms, users[check.slice],
                                                                strict=True)),
                        "p_value": check.result.p_value, "p_value_adjusted": check.adjusted_p,
                        "flagged": check.flagged})
    said = describe_srm(checks, DimensionKind(out.kind))
    out.notes.append(said[:1].upper() + said[1:] + ".")


def _heterogeneity(out: SegmentReport, info: ExperimentInfo, card: Scorecard,
                   tests: dict) -> None:
    """Per primary metric and treatment arm, whether the lift differs across slices."""
    for (metric, k, arm), found in tests.items():
        if metric_name(metric, k) not in card.primary:
            continue
        arms = {name: test.adjusted or (estimates.moments(test.treatment),
                                        estimates.moments(test.control))
                for name, test in found.items()}
        result = heterogeneity(arms, kind=DimensionKind(out.kind))
        out.heterogeneity.append({
            "metric": metric, "k": k, "arm": arm, "differs": result.differs,
            "statistic": result.statistic, "df": result.df, "p_value": result.p_value,
            "i_squared": result.i_squared, "pooled_lift": result.pooled_lift,
            "slices": list(result.slices), "left_out": list(result.left_out),
            "reason": result.reason.value, "text": result.describe()})


def _notes(dimension: Segment, slices: list[str], day: pd.DataFrame) -> list[str]:
    """What the slices are, in sentences."""
    notes = ["Slices are exploratory: each verdict reads its p-value adjusted by "
             "Benjamini-Hochberg across this dimension's slices (per metric and arm), and "
             "no slice changes the experiment's decision."]
    if dimension.kind == "list":
        notes.append(f"{dimension.name} is a list dimension: a user counts in every slice "
                     "they were served in, with their mean over that slice's lists, and the "
                     "treatment itself can move users between slices.")
    elif dimension.name == "activity":
        notes.append("activity is a user dimension: the terciles of the users' interactions "
                     "in the experiment's cuped_days before their first exposure, each slice "
                     "named by the counts it holds; slices partition the users.")
    elif dimension.name == "cohort":
        notes.append("cohort is a user dimension: a user is new when no interaction of "
                     "theirs occurred in the experiment's cuped_days before their first "
                     "exposure, else returning; slices partition the users.")
    else:
        notes.append(f"{dimension.name} is a user dimension: each user is in the slice of "
                     "their first exposure's value, with all their lists; slices partition "
                     "the users.")
    if dimension.name not in ("cohort", "activity") or dimension.kind == "list":
        notes.append(f"Values beyond the {dimension.max_levels} most frequent fold into "
                     "(other); lists without the key are (none).")
    if day.empty:
        notes.append(f"No slice of {dimension.name} has results for this day: the rollup "
                     "slices a dimension from its first run after the declaration.")
    elif slices == ["(none)"]:
        notes.append(f"No list carries the context key {dimension.name!r}: every list is "
                     "in (none).")
    return notes
