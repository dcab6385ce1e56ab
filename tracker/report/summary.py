"""One experiment in a line, as the experiments list shows it and as alerts compare it: the
scorecard under the experiment's analysis plan reduced to its users, latest complete day,
how fresh its data is (the newest event times the rollup saw), health, decision per treatment
arm, guardrail states and headline lift.

:func:`summarise` is pure (a scorecard and the day table in, a plain document out); the
rollup stores the document at the end of each run (:mod:`tracker.publish`,
:mod:`tracker.store.summaries`) and the dashboard's list page reads it back with
:meth:`ExperimentSummary.from_dict`, so the list never rebuilds a scorecard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import pandas as pd

from tracker.report.card import Scorecard
from tracker.report.render import guardrail_state
from tracker.report.rows import metric_name


@dataclass(frozen=True)
class ExperimentSummary:
    """``decisions``: treatment arm -> outcome; ``guardrails``: ``"arm metric@k"`` -> holds /
    fails / not shown yet; ``headline_lift``: treatment arm -> the first primary's relative
    lift. ``health_status`` is None before any rollup; a failing one makes every lift
    untrusted (the list then shows none). ``newest_served_at`` / ``newest_interaction_at``:
    the newest event times among the logs the run saw (when the newest list was served, when
    the newest interaction answering a list occurred): what "data through" reads, stored so
    that neither page scans raw logs (which retention may have expired) to say it."""

    users: int = 0
    latest_final_day: date | None = None
    health_status: str | None = None
    health_note: str | None = None
    decisions: dict[str, str] = field(default_factory=dict)
    guardrails: dict[str, str] = field(default_factory=dict)
    headline: str | None = None
    headline_lift: dict[str, float | None] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)
    newest_served_at: datetime | None = None
    newest_interaction_at: datetime | None = None

    @property
    def trusted(self) -> bool:
        return self.health_status not in (None, "fail")

    @property
    def newest_event(self) -> datetime | None:
        """The newest event time of either kind (None before any event)."""
        known = [at for at in (self.newest_served_at, self.newest_interaction_at)
                 if at is not None]
        return max(known) if known else None

    def to_dict(self) -> dict[str, Any]:
        return {"users": self.users,
                "latest_final_day": self.latest_final_day.isoformat()
                if self.latest_final_day else None,
                "health_status": self.health_status, "health_note": self.health_note,
                "decisions": dict(self.decisions), "guardrails": dict(self.guardrails),
                "headline": self.headline, "headline_lift": dict(self.headline_lift),
                "plan": dict(self.plan),
                "newest_served_at": _instant_text(self.newest_served_at),
                "newest_interaction_at": _instant_text(self.newest_interaction_at)}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> ExperimentSummary:
        day = document.get("latest_final_day")
        return cls(int(document.get("users", 0)), date.fromisoformat(day) if day else None,
                   document.get("health_status"), document.get("health_note"),
                   dict(document.get("decisions", {})), dict(document.get("guardrails", {})),
                   document.get("headline"), dict(document.get("headline_lift", {})),
                   dict(document.get("plan", {})),
                   _instant(document.get("newest_served_at")),
                   _instant(document.get("newest_interaction_at")))


def _instant_text(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _instant(text: str | None) -> datetime | None:
    """An instant stored by :func:`_instant_text` (absent in summaries written before
    freshness was stored: None until the next run)."""
    return None if text is None else datetime.fromisoformat(text)


def _worst_item(checklist: list[dict]) -> str | None:
    """The sentence of the most severe failing or warning item (None when all pass)."""
    for status in ("fail", "warn"):
        for item in checklist:
            if item["status"] == status:
                return f"{item['check']}: {item['message']}"
    return None


def summarise(card: Scorecard, days: pd.DataFrame, newest_served_at: datetime | None = None,
              newest_interaction_at: datetime | None = None) -> ExperimentSummary:
    """The summary of ``card`` (cumulative, under the plan) with ``days`` the experiment's
    day table (:func:`tracker.store.computed.day_table`) and the newest event times
    (:func:`tracker.store.results.newest_events`)."""
    newest = {"newest_served_at": newest_served_at,
              "newest_interaction_at": newest_interaction_at}
    if days.empty or card.as_of is None:
        return ExperimentSummary(plan=dict(card.plan), **newest)
    final = days[~days["provisional"]]["day"]
    headline = card.primary[0] if card.primary else None
    lifts = {r["arm"]: r.get("relative_lift") for r in card.metrics
             if headline and metric_name(r["metric"], r["k"]) == headline and not r["control"]}
    guards = {f"{r['arm']} {metric_name(r['metric'], r['k'])}": guardrail_state(r)
              for r in card.metrics if not r["control"] and guardrail_state(r) is not None}
    return ExperimentSummary(
        users=int(sum(card.health.get("users", {}).values())),
        latest_final_day=max(final) if len(final) else None,
        health_status=card.health.get("status"),
        health_note=_worst_item(card.health.get("checklist", [])),
        decisions={d["arm"]: d["outcome"] for d in card.decisions},
        guardrails=guards, headline=headline, headline_lift=lifts, plan=dict(card.plan),
        **newest)
