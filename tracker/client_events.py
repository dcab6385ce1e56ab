"""The events a :class:`tracker.client.TrackerClient` queues, checked by the SDK's record
rules (:mod:`tracker.ingest.validate`) and encoded as the collector's JSON once, when queued:
no queued event can make its batch unsendable."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from tracker.ingest.validate import (
    EVENT_TYPE_LENGTH,
    IMPRESSION_FIELDS,
    INTERACTION_FIELDS,
    Limits,
    Reject,
    check_context,
    check_fields,
    check_id,
    check_instant,
    check_items,
    check_optional_id,
    check_scores,
    check_value,
)
from tracker.store.types import from_micros


def _now_us() -> int:
    return time.time_ns() // 1000


def _iso(micros: int) -> str:
    """An instant as ISO 8601 in UTC to the microsecond: the collector reads back exactly it."""
    return from_micros(micros).isoformat()


def _own_id(value: Any, field: str, limits: Limits) -> str:
    """The event's client id, made here (uuid4) when absent so a resent batch is stored once."""
    return uuid.uuid4().hex if value is None else check_id(value, field, limits.max_id_length)


def _key(value: Any, field: str, limits: Limits) -> str:
    """An experiment or arm key: a string by the id rules (whether it exists, the collector
    says)."""
    if value is not None and not isinstance(value, str):
        raise Reject(field, f"must be a string, got {type(value).__name__}")
    return check_id(value, field, limits.max_id_length)


def _impression_event(record: Mapping[str, Any], limits: Limits, now_us: int) -> dict[str, Any]:
    """The impression as the collector takes it, by the SDK's record rules
    (:mod:`tracker.ingest.validate`): ids as text (whole numbers, numpy ones too, as their
    decimal text), scores as finite floats (numpy, ``Decimal``), the time as ISO 8601 UTC (a
    naive ``datetime`` or pandas ``Timestamp`` is UTC), ``context`` in canonical JSON form.
    Raises :class:`Reject` naming the field; whether the experiment and arm exist is left to
    the collector."""
    check_fields(record, IMPRESSION_FIELDS)
    get = record.get
    event = {"impression_id": _own_id(get("impression_id"), "impression_id", limits),
             "experiment": _key(get("experiment"), "experiment", limits),
             "arm": _key(get("arm"), "arm", limits),
             "user_id": check_id(get("user_id"), "user_id", limits.max_id_length),
             "served_at": _iso(check_instant(get("served_at"), "served_at", now_us, limits))}
    event["items"] = check_items(get("items"), "items", limits)
    optional = {"scores": check_scores(get("scores"), len(event["items"])),
                "baseline_items": (None if get("baseline_items") is None else
                                   check_items(get("baseline_items"), "baseline_items", limits)),
                "context": check_context(get("context"))}
    event.update((name, value) for name, value in optional.items() if value is not None)
    return event


def _interaction_event(record: Mapping[str, Any], limits: Limits, now_us: int
                       ) -> dict[str, Any]:
    """The interaction as the collector takes it, by the SDK's record rules (see
    :func:`_impression_event`; ``value`` a finite float, NaN meaning none). Whether the event
    type is in a relevance mapping is left to the collector."""
    check_fields(record, INTERACTION_FIELDS)
    get = record.get
    event = {"event_id": _own_id(get("event_id"), "event_id", limits),
             "user_id": check_id(get("user_id"), "user_id", limits.max_id_length),
             "item_id": check_id(get("item_id"), "item_id", limits.max_id_length),
             "event": check_id(get("event"), "event", EVENT_TYPE_LENGTH)}
    value = check_value(get("value"))
    if value is not None:
        event["value"] = value
    event["occurred_at"] = _iso(check_instant(get("occurred_at"), "occurred_at", now_us,
                                              limits))
    impression_id = check_optional_id(get("impression_id"), "impression_id",
                                      limits.max_id_length)
    if impression_id is not None:
        event["impression_id"] = impression_id
    return event


_EVENTS = {"impressions": ("impression_id", _impression_event),
           "interactions": ("event_id", _interaction_event)}


@dataclass(frozen=True)
class _Wire:
    """One checked event, encoded once when queued: its id and its JSON text."""

    id: str
    body: bytes


def _wire(kind: str, record: Mapping[str, Any], limits: Limits, now_us: int) -> _Wire:
    """The record checked, normalised and encoded as JSON; raises :class:`Reject`.

    Encoding here, not in the sender, means no queued event can make a batch unsendable."""
    id_field, normalise = _EVENTS[kind]
    event = normalise(record, limits, now_us)
    try:
        body = orjson.dumps(event)
    except orjson.JSONEncodeError as error:  # e.g. text holding a lone surrogate
        raise Reject(None, f"cannot be sent as JSON: {error}") from None
    return _Wire(event[id_field], body)


def _batch_body(part: Sequence[_Wire]) -> bytes:
    """The JSON array of the encoded events."""
    return b"[" + b",".join(wire.body for wire in part) + b"]"
