"""Load the simulated experiment through the public logging API, day by day."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from tracker.demo.history import pre_period, previous_spec
from tracker.demo.simulation import DemoConfig, experiment_spec, simulate
from tracker.errors import AlreadyExists, NotFound


@dataclass
class LoadSummary:
    """What loading the demo did: records sent, and the summed logging results."""

    days: int = 0
    impressions: int = 0
    interactions: int = 0
    stored: int = 0
    duplicates: int = 0
    conflicts: int = 0
    rejected: int = 0


def load(tracker, config: DemoConfig = DemoConfig(),
         after_day: Callable[[date], None] | None = None) -> LoadSummary:
    """Create the demo experiment (or reuse it), log the users' pre-period lists (in an
    earlier experiment, ``<key>-previous``) and interactions, then every simulated day with
    ``tracker.log_impressions`` then ``tracker.log_interactions``, calling ``after_day(day)``
    after each day (e.g. a rollup, as a nightly job would).

    ``tracker`` is a :class:`tracker.Tracker` (anything with its ``experiment``,
    ``create_experiment``, ``log_impressions`` and ``log_interactions`` will do). When the
    experiment exists already and ``config.start`` is None, the simulation starts where the
    stored experiment starts, so that loading again, even on a later day, sends the very same
    records and stores nothing new. An existing experiment of that key with other arms,
    control, window, relevance or time zone raises :class:`~tracker.errors.AlreadyExists`.
    """
    spec = experiment_spec(config)
    try:
        existing = tracker.experiment(config.key)
    except NotFound:
        existing = None
    if existing is None:
        config = dataclasses.replace(config, start=spec["starts_at"])  # one "today" throughout
        tracker.create_experiment(spec.pop("key"), **spec)
    else:
        _check_same_setup(existing, spec)
        if existing.roles is None:  # stored by a version that declared no roles
            tracker.update_experiment(config.key, primary=list(spec["primary"]),
                                      guardrails=spec["guardrails"])
        if config.start is None and existing.starts_at is not None:
            config = dataclasses.replace(config, start=existing.starts_at)
    summary = LoadSummary()
    _log_history(tracker, config, summary)
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


def _log_history(tracker, config: DemoConfig, summary: LoadSummary) -> None:
    """The users' lists and interactions before the experiment (:func:`pre_period`, in the
    experiment of :func:`previous_spec`, created if missing), logged first, as they would
    have been in production: CUPED's pre-exposure covariates."""
    lists, records = pre_period(config)
    if lists:
        spec = previous_spec(config)
        tracker.create_experiment(spec.pop("key"), exist_ok=True, **spec)
    for result in (tracker.log_impressions(lists), tracker.log_interactions(records)):
        summary.stored += result.stored
        summary.duplicates += result.duplicates
        summary.conflicts += result.conflicts
        summary.rejected += len(result.rejected)
    summary.impressions += len(lists)
    summary.interactions += len(records)


def _check_same_setup(existing, spec: dict) -> None:
    total = sum(spec["arms"].values())
    stored_total = sum(arm.weight for arm in existing.arms)
    differences = [
        name for name, same in (
            ("arms", {a.key: round(a.weight / stored_total, 9) for a in existing.arms}
             == {k: round(w / total, 9) for k, w in spec["arms"].items()}),
            ("control", existing.control == spec["control"]),
            ("attribution window", existing.attribution_window == spec["attribution_window"]),
            ("relevance", existing.relevance == spec["relevance"]),
            ("time zone", existing.timezone == spec["timezone"]),
        ) if not same
    ]
    if differences:
        raise AlreadyExists(
            f"experiment {spec['key']!r} already exists with another setup "
            f"({', '.join(differences)} differ): load the demo under another key "
            "(DemoConfig(key=...)) or into another database")
