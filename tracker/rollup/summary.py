"""What one run did for one experiment (:class:`RollupSummary`), and the progress callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date


@dataclass
class RollupSummary:
    """What one run did for one experiment."""

    experiment: str
    full: bool
    days_recomputed: list[date] = field(default_factory=list)
    users_recomputed: int = 0  # in days recomputed for some of their users only
    days_in_part: int = 0  # of the days recomputed, those recomputed for some users only
    days_final_as_stored: int = 0  # of them, those final since, published from their rows
    cumulative_from: date | None = None
    impressions_read: int = 0
    truth_pairs_read: int = 0
    new_impressions: int = 0
    new_interactions: int = 0
    ignored_impressions: int = 0  # outside the range the rollup takes (tracker.rollup.days)
    ignored_interactions: int = 0
    superseded: bool = False  # a catalog declared during the run: the next run recomputes
    taken_over: str | None = None  # why the run rebuilt the other source's experiment
    skipped: str | None = None  # why a run over every experiment left it to the other engine
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {
            "experiment": self.experiment, "full": self.full,
            "days_recomputed": [d.isoformat() for d in self.days_recomputed],
            "days_in_part": self.days_in_part, "users_recomputed": self.users_recomputed,
            "days_final_as_stored": self.days_final_as_stored,
            "cumulative_from": self.cumulative_from.isoformat() if self.cumulative_from
            else None,
            "impressions_read": self.impressions_read,
            "truth_pairs_read": self.truth_pairs_read,
            "new_impressions": self.new_impressions, "new_interactions": self.new_interactions,
            "ignored_impressions": self.ignored_impressions,
            "ignored_interactions": self.ignored_interactions,
            "superseded": self.superseded, "taken_over": self.taken_over,
            "skipped": self.skipped, "seconds": round(self.seconds, 3),
        }

    def describe(self) -> str:
        """One line for people."""
        if self.skipped is not None:
            return f"{self.experiment}: not rolled up: {self.skipped}"
        if self.days_recomputed:
            days = (f"{len(self.days_recomputed)} day(s) recomputed "
                    f"({self.days_recomputed[0]} .. {self.days_recomputed[-1]})")
            if self.days_in_part:
                days += (f", {self.days_in_part} of them for {self.users_recomputed} "
                         "user(s) only")
            if self.days_final_as_stored:
                days += (f", {self.days_final_as_stored} final since, from their stored "
                         "rows")
        else:
            days = "nothing new"
        return (f"{self.experiment}: {days}; {self.new_impressions} new impressions, "
                f"{self.new_interactions} new interactions; read {self.impressions_read} "
                f"impressions and {self.truth_pairs_read} attributed (impression, item) pairs "
                f"in {self.seconds:.2f} s" + self._ignored()
                + ("; a catalog was declared meanwhile: the next run recomputes every day"
                   if self.superseded else "")
                + (f"; taken over: {self.taken_over}" if self.taken_over else "")
                + (" [full rebuild]" if self.full else ""))

    def _ignored(self) -> str:
        if not (self.ignored_impressions or self.ignored_interactions):
            return ""
        return (f"; left out {self.ignored_impressions} impressions and "
                f"{self.ignored_interactions} interactions dated outside 0002-01-01 .. "
                "9998-01-01 UTC")


Progress = Callable[[str, int, int, date], None]
"""``progress(stage, done, total, day)``: stage "day" or "cumulative", after each day."""
