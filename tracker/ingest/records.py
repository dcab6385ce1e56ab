"""Impression and interaction records to store rows, or rejections.

A record is a mapping of known fields (:data:`IMPRESSION_FIELDS`, :data:`INTERACTION_FIELDS`),
each checked by the field rules of :mod:`tracker.ingest.fields`; then

- the experiment and arm must exist; an event type that the governing experiment's relevance
  mapping does not name is rejected when its policy is ``reject`` (the default) and stored
  (grade 0 at rollup) when it is ``zero``. The governing experiment is the one of the impression
  the event names; for an event that names none, every draft or running experiment with a
  mapping is consulted: the event is accepted when one of them knows it or none of them rejects;
- anything that is not a mapping (``None``, a list, an unreadable line: :class:`Unreadable`)
  is one rejection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.errors import ValidationError
from tracker.ingest.fields import (
    EVENT_TYPE_LENGTH,
    Limits,
    Reject,
    check_context,
    check_fields,
    check_id,
    check_instant,
    check_items,
    check_key,
    check_optional_id,
    check_scores,
    check_value,
    shown,
    shown_id,
)
from tracker.store.experiments import ExperimentInfo

IMPRESSION_FIELDS = frozenset({"impression_id", "experiment", "arm", "user_id", "items", "scores",
                               "served_at", "baseline_items", "context"})
INTERACTION_FIELDS = frozenset({"event_id", "user_id", "item_id", "event", "value",
                                "occurred_at", "impression_id"})

# Column order of the rows handed to the store; the payload (what a retry must repeat
# exactly) is every column but the key and received_at.
IMPRESSION_COLUMNS = ("impression_key", "experiment_id", "arm_id", "user_id", "served_at",
                      "received_at", "items", "scores", "baseline_items", "context")
INTERACTION_COLUMNS = ("event_key", "user_id", "item_id", "event_type", "value", "occurred_at",
                       "received_at", "impression_key")


class Unreadable:
    """Stands in for a record that could not even be read (e.g. a line of bad JSON)."""

    def __init__(self, reason: str):
        self.reason = reason


def _client_id(record: Mapping[str, Any], field: str, required: bool, limits: Limits) -> str:
    """The record's client id, or a new random one when it may be left out."""
    key = record.get(field)
    if key is None and not required:
        from uuid import uuid4
        key = uuid4().hex
    return check_id(key, field, limits.max_id_length)


CLOSED_STATUSES = ("stopped", "archived")
"""Experiment statuses that take no new impressions (interactions still come in: they may
answer impressions served before the stop, until the attribution windows close)."""


class ImpressionNormalizer:
    """Turns impression records into store rows, or rejections."""

    def __init__(self, experiments: list[ExperimentInfo], limits: Limits, now_us: int,
                 require_id: bool):
        # stopped and archived experiments take no impressions: their arms are not offered,
        # so the columnar path sends their records to this one, which says why
        self.arms = {(e.key, a.key): (e.id, a.id) for e in experiments
                     if e.status not in CLOSED_STATUSES for a in e.arms}
        self.experiments = {e.key: e for e in experiments}
        self.limits = limits
        self.now_us = now_us
        self.require_id = require_id

    def __call__(self, record: Mapping[str, Any], micros_ok: bool = False) -> tuple:
        limits = self.limits
        check_fields(record, IMPRESSION_FIELDS)
        key = _client_id(record, "impression_id", self.require_id, limits)
        experiment = check_key(record.get("experiment"), "experiment")
        arm = check_key(record.get("arm"), "arm")
        ids = self.arms.get((experiment, arm))
        if ids is None:
            if experiment not in self.experiments:
                raise Reject("experiment", f"unknown experiment {shown(experiment)}")
            status = self.experiments[experiment].status
            if status in CLOSED_STATUSES:
                raise Reject("experiment", f"experiment {shown(experiment)} is {status}: it "
                                           "takes no new impressions")
            known = ", ".join(a.key for a in self.experiments[experiment].arms)
            raise Reject("arm", f"experiment {shown(experiment)} has no arm {shown(arm)} "
                                f"(arms: {known})")
        user_id = check_id(record.get("user_id"), "user_id", limits.max_id_length)
        served_at = check_instant(record.get("served_at"), "served_at", self.now_us, limits,
                                  micros_ok)
        items = check_items(record.get("items"), "items", limits)
        scores = check_scores(record.get("scores"), len(items))
        baseline = record.get("baseline_items")
        if baseline is not None:
            baseline = check_items(baseline, "baseline_items", limits)
        context = check_context(record.get("context"), limits)
        return (key, ids[0], ids[1], user_id, served_at, self.now_us, items, scores, baseline,
                context)



class InteractionNormalizer:
    """Turns interaction records into store rows, or rejections."""

    def __init__(self, experiments: list[ExperimentInfo], limits: Limits, now_us: int,
                 require_id: bool, impression_experiments: dict[str, int]):
        self.limits = limits
        self.now_us = now_us
        self.require_id = require_id
        self.by_id = {e.id: e for e in experiments}
        self.impression_experiments = impression_experiments
        active = [e for e in experiments
                  if e.relevance is not None and e.status in ("draft", "running", "stopped")]
        self.known_events = set().union(*(e.relevance.keys() for e in active))
        self.reject_unknown = any(e.unknown_events == "reject" for e in active)

    def _check_event(self, event: str, impression_key: str | None) -> None:
        governing = None
        if impression_key is not None:
            experiment_id = self.impression_experiments.get(impression_key)
            governing = self.by_id.get(experiment_id) if experiment_id is not None else None
        if governing is not None:
            if (governing.relevance is not None and event not in governing.relevance
                    and governing.unknown_events == "reject"):
                raise Reject("event", f"event type {event!r} is not in experiment "
                                      f"{governing.key!r}'s relevance mapping "
                                      f"({', '.join(sorted(governing.relevance))})")
        elif self.reject_unknown and event not in self.known_events:
            raise Reject("event", f"event type {event!r} is not declared by any running "
                                  f"experiment ({', '.join(sorted(self.known_events))})")

    def __call__(self, record: Mapping[str, Any], micros_ok: bool = False) -> tuple:
        limits = self.limits
        check_fields(record, INTERACTION_FIELDS)
        key = _client_id(record, "event_id", self.require_id, limits)
        user_id = check_id(record.get("user_id"), "user_id", limits.max_id_length)
        item_id = check_id(record.get("item_id"), "item_id", limits.max_id_length)
        event = check_id(record.get("event"), "event", EVENT_TYPE_LENGTH)
        value = check_value(record.get("value"))
        occurred_at = check_instant(record.get("occurred_at"), "occurred_at", self.now_us,
                                    limits, micros_ok)
        impression_key = check_optional_id(record.get("impression_id"), "impression_id",
                                           limits.max_id_length)
        self._check_event(event, impression_key)
        return (key, user_id, item_id, event, value, occurred_at, self.now_us, impression_key)


def raise_for(reject: Reject, record_id: Any = None) -> None:
    raise ValidationError(reject.reason, field=reject.field, record_id=shown_id(record_id))


