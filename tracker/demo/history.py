"""The demo's history before the experiment (what CUPED adjusts for and what the cohort
reads): the lists its users were served on the home page of the time, logged as an A/A
experiment of the popularity lists (:func:`previous_spec`), and their interactions
(:func:`pre_period`), from :mod:`tracker.demo.simulation`'s world and draws."""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from tracker.demo.simulation import (
    RELEVANCE,
    DemoConfig,
    _instant,
    _past,
    _PastDay,
    _World,
    assign_arm,
)

PREVIOUS_ARMS = (("control", 0.5), ("control-copy", 0.5))
"""The arms of the experiment before the demo's (:func:`previous_spec`): an A/A test."""


def previous_spec(config: DemoConfig) -> dict:
    """Keyword arguments for ``Tracker.create_experiment`` (``key`` included) of the
    experiment the pre-period lists were logged in (:func:`pre_period`): ``<key>-previous``,
    an A/A test of the popularity lists over the ``history_days`` before the demo."""
    first = config.first_day()
    return {
        "key": f"{config.key}-previous", "name": "Home page popularity lists (simulated, A/A)",
        "description": "tracker demo: the home page before the demo's experiment, both arms "
                       "serving the popularity baseline (the users' pre-period lists)",
        "arms": dict(PREVIOUS_ARMS), "control": PREVIOUS_ARMS[0][0],
        "attribution_window": timedelta(hours=24), "relevance": dict(RELEVANCE),
        "timezone": "UTC", "cutoffs": (5, 10, 20),
        "starts_at": first - timedelta(days=config.history_days), "ends_at": first,
    }


def pre_period(config: DemoConfig = DemoConfig()) -> tuple[list[dict], list[dict]]:
    """The ``config.history_days`` days before the experiment: the lists the same users were
    served on the home page of the time (the popularity lists of control, logged as
    impressions of :func:`previous_spec`'s experiment) and their interactions, clicking with
    the same relevance and engagement (a click may lead to a play or a save), so that a
    user's hit rate before the experiment predicts theirs in it. Deterministic for a seed;
    ready for ``Tracker.log_impressions`` / ``log_interactions``, to be logged before the
    experiment's first day."""
    world = _World(config, np.random.default_rng(config.seed))
    key, weights = f"{config.key}-previous", tuple(w for _, w in PREVIOUS_ARMS)
    arms = [PREVIOUS_ARMS[assign_arm(key, u, weights)][0] for u in world.user_ids]
    impressions: list[dict] = []
    records: list[dict] = []
    for back, day in _past(world):
        impressions += _previous_lists(world, arms, day.user, day.served, day.items, back)
        records += _history_records(world, day, back)
    records.sort(key=lambda r: (r["occurred_at"], r["event_id"]))
    return impressions, records


def history(config: DemoConfig = DemoConfig()) -> list[dict]:
    """The interactions of :func:`pre_period`."""
    return pre_period(config)[1]


def _history_records(world: _World, day: _PastDay, back: int) -> list[dict]:
    """The interactions of one day before the experiment (``back`` days before its start)."""
    names = world.item_ids[day.items[day.row, day.col]].tolist()
    users = day.user[day.row].tolist()
    records = []
    for i, when in enumerate(day.click_us.astype(np.int64).tolist()):
        follow = ("play",) if day.then[i] < 0.6 else ("save",) if day.then[i] < 0.8 else ()
        for n, event in enumerate(("click", *follow)):
            records.append({"event_id": f"{world.config.key}-pre{back:02d}-{i:07d}-{event}",
                            "user_id": world.user_ids[users[i]], "item_id": names[i],
                            "event": event,
                            "occurred_at": _instant(when + n * 30_000_000)})
    return records


def _previous_lists(world: _World, arms: list[str], user: np.ndarray, served: np.ndarray,
                    items: np.ndarray, back: int) -> list[dict]:
    """The day's lists as impressions of the previous experiment (its arms by the same
    stable hash as the demo's; no context: the demo's lists carry it)."""
    key = f"{world.config.key}-previous"
    names = world.item_ids[items].tolist()
    return [{"impression_id": f"{key}-imp-{back:02d}-{i:07d}", "experiment": key,
             "arm": arms[u], "user_id": world.user_ids[u], "items": names[i],
             "served_at": _instant(at)}
            for i, (u, at) in enumerate(zip(user.tolist(), served.tolist(), strict=True))]
