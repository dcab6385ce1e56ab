"""Load the simulated experiment through the public logging API, day by day."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from tracker.demo.simulation import DemoConfig, experiment_spec, simulate


@dataclass
class LoadSummary:
    days: int = 0
    impressions: int = 0
    interactions: int = 0
    stored: int = 0
    duplicates: int = 0
    conflicts: int = 0
    rejected: int = 0


def load(tracker, config: DemoConfig = DemoConfig(),
         after_day: Callable[[date], None] | None = None) -> LoadSummary:
    """Create the demo experiment (or reuse it) and log every simulated day with
    ``tracker.log_impressions`` / ``log_interactions``, calling ``after_day(day)`` after each
    day (e.g. a rollup, as a nightly job would). Loading twice stores nothing new."""
    from tracker.errors import NotFound

    spec = experiment_spec(config)
    try:
        tracker.experiment(config.key)
    except NotFound:
        key = spec.pop("key")
        tracker.create_experiment(key, **spec)
    summary = LoadSummary()
    for batch in simulate(config):
        for result in (tracker.log_impressions(batch.impressions),
                       tracker.log_interactions(batch.interactions)):
            summary.stored += result.stored
            summary.duplicates += result.duplicates
            summary.conflicts += result.conflicts
            summary.rejected += len(result.rejected)
        summary.days += 1
        summary.impressions += len(batch.impressions)
        summary.interactions += len(batch.interactions)
        if after_day is not None:
            after_day(batch.day)
    return summary
