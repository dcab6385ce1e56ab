"""Logs with every edge the lake must carry, written through the logging API: the expected
rows of an export are these records, as logged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 10, 1, 23, 59, 59, 999_999, tzinfo=UTC)  # the last µs of a UTC day

IMPRESSIONS = [
    # unicode everywhere, scores and a context with nested values
    {"experiment": "exp-a", "arm": "control", "user_id": "üser-1", "impression_id": "imp-1",
     "served_at": T0, "items": ["é", "雪", "a\"b", "c,d"], "scores": [0.1 + 0.2, 1 / 3, -0.0,
                                                                    1e-300],
     "baseline_items": ["x", "y"], "context": {"page": "home", "ünï": [1, 2.5, None]}},
    # no scores, no baseline, no context; the next µs is the next UTC day
    {"experiment": "exp-a", "arm": "treatment", "user_id": "u2", "impression_id": "imp-2",
     "served_at": T0 + timedelta(microseconds=1), "items": ["i1"], "scores": None,
     "baseline_items": None, "context": None},
    # an empty context; three lists served at the same instant (ties across batches). (The
    # database takes no empty list: items, scores and baselines have at least one.)
    *({"experiment": "exp-a", "arm": "treatment", "user_id": f"u{n}", "impression_id": f"imp-t{n}",
       "served_at": T0 + timedelta(hours=5), "items": ["i1", "i2"], "scores": [2.0, 1.0],
       "baseline_items": ["i9"], "context": {}} for n in range(3)),
    # another experiment, same users and day
    {"experiment": "exp-b", "arm": "b1", "user_id": "üser-1", "impression_id": "imp-b",
     "served_at": T0, "items": ["z"], "scores": None, "baseline_items": None, "context": None},
]

INTERACTIONS = [
    {"event_id": "ev-1", "user_id": "üser-1", "item_id": "雪", "event": "click", "value": None,
     "occurred_at": T0, "impression_id": None},
    {"event_id": "ev-2", "user_id": "üser-1", "item_id": "é", "event": "purchase",
     "value": 0.1 + 0.2, "occurred_at": T0 + timedelta(seconds=1), "impression_id": "imp-1"},
    *({"event_id": f"ev-t{n}", "user_id": "u2", "item_id": "i1", "event": "play",
       "value": float(n) / 7, "occurred_at": T0 + timedelta(days=3), "impression_id": None}
      for n in range(3)),
    {"event_id": "ev-tiny", "user_id": "u2", "item_id": "i1", "event": "play", "value": 5e-324,
     "occurred_at": T0 + timedelta(days=3, microseconds=1), "impression_id": "imp-2"},
]


def load(tracker) -> None:
    """Create the two experiments and log every record above."""
    tracker.create_experiment("exp-a", {"control": 1, "treatment": 1}, cutoffs=(1,),
                              relevance={"click": 1, "purchase": 2, "play": 1})
    tracker.create_experiment("exp-b", {"b1": 1, "b2": 1}, cutoffs=(1,))
    for record in IMPRESSIONS:
        tracker.log_impression(**record)
    for record in INTERACTIONS:
        tracker.log_interaction(**record)
