"""Validation and normalisation of experiments, impressions and interactions.

Every record is checked before anything is written; a record that breaks a rule is rejected
with the field and the reason. Rules (limits come from :class:`tracker.config.Settings`):

- ids (impression, event, user, item) are non-empty strings of at most ``max_id_length``
  characters; whole numbers are accepted and stored as their decimal text;
- a served list holds 1 to ``max_items`` items, with no item twice; ``scores``, when given,
  has one finite number per item; ``baseline_items`` (the list the control model would have
  served for the same request) follows the item rules;
- instants are ``datetime`` objects or ISO 8601 strings; a naive one is taken to be **UTC**;
  one lying more than ``max_future_seconds`` past the server clock is rejected; it is required
  (a default of "now" would make a retried record differ from the first one);
- the experiment and arm must exist; an event type that the governing experiment's relevance
  mapping does not name is rejected when its policy is ``reject`` (the default) and stored
  (grade 0 at rollup) when it is ``zero``. The governing experiment is the one of the impression
  the event names; for an event that names none, every draft or running experiment with a
  mapping is consulted: the event is accepted when one of them knows it or none of them rejects.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from tracker.config import Settings
from tracker.errors import ValidationError
from tracker.metrics.registry import parse_metric
from tracker.store.experiments import ExperimentInfo, Roles
from tracker.store.models import (
    EXPERIMENT_STATUSES,
    ID_LENGTH,
    KEY_LENGTH,
    UNKNOWN_EVENT_POLICIES,
)
from tracker.store.types import to_micros

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

_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


class Reject(Exception):
    """Raised inside normalisation; becomes a Rejection or a ValidationError."""

    def __init__(self, field: str | None, reason: str):
        super().__init__(reason)
        self.field = field
        self.reason = reason


class Unreadable:
    """Stands in for a record that could not even be read (e.g. a line of bad JSON)."""

    def __init__(self, reason: str):
        self.reason = reason


@dataclass(frozen=True)
class Limits:
    max_items: int
    max_id_length: int
    max_future_us: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(settings.max_items, min(settings.max_id_length, ID_LENGTH),
                   int(settings.max_future_seconds * 1_000_000))


def check_id(value: Any, field: str, limit: int) -> str:
    if type(value) is not str:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            value = str(int(value))
        elif isinstance(value, str):
            value = str(value)
        elif value is None:
            raise Reject(field, "is required")
        else:
            raise Reject(field, f"must be a string, got {type(value).__name__}")
    if not value:
        raise Reject(field, "must not be empty")
    if len(value) > limit:
        raise Reject(field, f"is {len(value)} characters long, the limit is {limit} "
                            "(TRACKER_MAX_ID_LENGTH)")
    return value


def check_instant(value: Any, field: str, now_us: int, limits: Limits,
                  micros_ok: bool = False) -> int:
    """Microseconds since the epoch of a datetime / ISO 8601 string (naive = UTC)."""
    if value is None:
        raise Reject(field, "is required (a retry must repeat it, so it is never defaulted)")
    if isinstance(value, datetime):
        micros = to_micros(value)
    elif micros_ok and isinstance(value, (int, np.integer)):
        micros = int(value)
    elif isinstance(value, str):
        try:
            micros = to_micros(datetime.fromisoformat(value))
        except ValueError:
            raise Reject(field, f"{value!r} is not an ISO 8601 date-time") from None
    elif isinstance(value, np.datetime64):
        if np.isnat(value):
            raise Reject(field, "is missing (NaT)")
        micros = int(value.astype("datetime64[us]").astype(np.int64))
    else:
        raise Reject(field, f"must be a datetime or an ISO 8601 string, got "
                            f"{type(value).__name__}")
    if micros > now_us + limits.max_future_us:
        ahead = (micros - now_us) / 1e6
        raise Reject(field, f"lies {ahead:.0f} s in the future; at most "
                            f"{limits.max_future_us / 1e6:.0f} s of clock skew is accepted "
                            "(TRACKER_MAX_FUTURE_SECONDS)")
    return micros


def check_items(value: Any, field: str, limits: Limits) -> list[str]:
    if value is None:
        raise Reject(field, "is required")
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
        raise Reject(field, f"must be a list of item ids, got {type(value).__name__}")
    items = list(value)
    if not items:
        raise Reject(field, "must not be empty")
    if len(items) > limits.max_items:
        raise Reject(field, f"has {len(items)} items, the limit is {limits.max_items} "
                            "(TRACKER_MAX_ITEMS)")
    if not all(type(item) is str for item in items):
        items = [check_id(item, f"{field}[{i}]", limits.max_id_length)
                 for i, item in enumerate(items)]
    if not all(items) or max(map(len, items)) > limits.max_id_length:
        for i, item in enumerate(items):
            check_id(item, f"{field}[{i}]", limits.max_id_length)
    if len(set(items)) != len(items):
        seen: set[str] = set()
        for i, item in enumerate(items):
            if item in seen:
                raise Reject(field, f"item {item!r} appears twice (again at position {i})")
            seen.add(item)
    return items


def check_scores(value: Any, n_items: int) -> list[float] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
        raise Reject("scores", f"must be a list of numbers, got {type(value).__name__}")
    if len(value) != n_items:
        raise Reject("scores", f"has {len(value)} values for {n_items} items")
    try:
        scores = [float(s) for s in value]
    except (TypeError, ValueError):
        raise Reject("scores", "must hold numbers only") from None
    if not all(map(math.isfinite, scores)):
        raise Reject("scores", "must be finite (no NaN or infinity)")
    return scores


def check_context(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise Reject("context", f"must be a mapping, got {type(value).__name__}")
    try:
        # canonical JSON form, so a retry compares equal to what is stored
        return json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise Reject("context", f"must be JSON-serialisable: {exc}") from None


class ImpressionNormalizer:
    """Turns impression records into store rows, or rejections."""

    def __init__(self, experiments: list[ExperimentInfo], limits: Limits, now_us: int,
                 require_id: bool):
        self.arms = {(e.key, a.key): (e.id, a.id) for e in experiments for a in e.arms}
        self.experiments = {e.key: e for e in experiments}
        self.limits = limits
        self.now_us = now_us
        self.require_id = require_id

    def __call__(self, record: Mapping[str, Any], micros_ok: bool = False) -> tuple:
        limits = self.limits
        extra = record.keys() - IMPRESSION_FIELDS
        if extra:
            raise Reject(None, f"unknown field(s) {', '.join(sorted(map(str, extra)))}; "
                               f"expected {', '.join(sorted(IMPRESSION_FIELDS))}")
        key = record.get("impression_id")
        if key is None and not self.require_id:
            from uuid import uuid4
            key = uuid4().hex
        key = check_id(key, "impression_id", limits.max_id_length)
        experiment = record.get("experiment")
        arm = record.get("arm")
        ids = self.arms.get((experiment, arm))
        if ids is None:
            if experiment is None:
                raise Reject("experiment", "is required")
            if experiment not in self.experiments:
                raise Reject("experiment", f"unknown experiment {experiment!r}")
            known = ", ".join(a.key for a in self.experiments[experiment].arms)
            raise Reject("arm", f"experiment {experiment!r} has no arm {arm!r} (arms: {known})")
        user_id = check_id(record.get("user_id"), "user_id", limits.max_id_length)
        served_at = check_instant(record.get("served_at"), "served_at", self.now_us, limits,
                                  micros_ok)
        items = check_items(record.get("items"), "items", limits)
        scores = check_scores(record.get("scores"), len(items))
        baseline = record.get("baseline_items")
        if baseline is not None:
            baseline = check_items(baseline, "baseline_items", limits)
        context = check_context(record.get("context"))
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
                  if e.relevance is not None and e.status in ("draft", "running")]
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
        extra = record.keys() - INTERACTION_FIELDS
        if extra:
            raise Reject(None, f"unknown field(s) {', '.join(sorted(map(str, extra)))}; "
                               f"expected {', '.join(sorted(INTERACTION_FIELDS))}")
        key = record.get("event_id")
        if key is None and not self.require_id:
            from uuid import uuid4
            key = uuid4().hex
        key = check_id(key, "event_id", limits.max_id_length)
        user_id = check_id(record.get("user_id"), "user_id", limits.max_id_length)
        item_id = check_id(record.get("item_id"), "item_id", limits.max_id_length)
        event = check_id(record.get("event"), "event", 64)
        value = record.get("value")
        if value is not None:
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise Reject("value", f"must be a number, got {type(value).__name__}") from None
            if math.isnan(value):  # a missing value in a DataFrame column
                value = None
            elif not math.isfinite(value):
                raise Reject("value", "must be finite")
        occurred_at = check_instant(record.get("occurred_at"), "occurred_at", self.now_us,
                                    limits, micros_ok)
        impression_key = record.get("impression_id")
        if impression_key is not None:
            impression_key = check_id(impression_key, "impression_id", limits.max_id_length)
        self._check_event(event, impression_key)
        return (key, user_id, item_id, event, value, occurred_at, self.now_us, impression_key)


def raise_for(reject: Reject, record_id: Any = None) -> None:
    raise ValidationError(reject.reason, field=reject.field,
                          record_id=record_id if isinstance(record_id, str) else None)


# ---------------------------------------------------------------------------- experiments

def experiment_fields(*, key: str, arms: Mapping[str, float], control: str | None,
                      attribution_window: timedelta | float | int,
                      relevance: Mapping[str, float] | None, name: str | None,
                      description: str, status: str, starts_at: datetime | None,
                      ends_at: datetime | None, timezone: str, cutoffs: Any,
                      unknown_events: str, max_items: int, now_us: int) -> dict[str, Any]:
    """Checked column values for a new experiment; raises ValidationError naming the field."""

    def fail(field: str, reason: str):
        raise ValidationError(reason, field=field)

    if not isinstance(key, str) or not _KEY_RE.match(key) or len(key) > KEY_LENGTH:
        fail("key", f"{key!r} is not a valid experiment key: 1-{KEY_LENGTH} characters of "
                    "letters, digits, '.', '_', ':', '-', starting with a letter or digit")
    if not isinstance(arms, Mapping) or len(arms) < 2:
        fail("arms", "an experiment needs at least two arms, e.g. {'control': 0.5, 'new': 0.5}")
    for arm, weight in arms.items():
        if not isinstance(arm, str) or not _KEY_RE.match(arm) or len(arm) > KEY_LENGTH:
            fail("arms", f"{arm!r} is not a valid arm key (letters, digits, '.', '_', ':', '-')")
        if (isinstance(weight, bool) or not isinstance(weight, (int, float))
                or not math.isfinite(weight) or weight <= 0):
            fail("arms", f"arm {arm!r} has weight {weight!r}; weights must be numbers > 0")
    if control is None:
        control = next(iter(arms))
    if control not in arms:
        fail("control", f"control arm {control!r} is not one of the arms ({', '.join(arms)})")
    if isinstance(attribution_window, timedelta):
        window_us = attribution_window // timedelta(microseconds=1)
    elif isinstance(attribution_window, (int, float)) and not isinstance(attribution_window, bool):
        window_us = int(attribution_window * 1_000_000)
    else:
        fail("attribution_window", "must be a timedelta or a number of seconds")
    if window_us <= 0:
        fail("attribution_window", "must be positive")
    if relevance is not None:
        if not isinstance(relevance, Mapping) or not relevance:
            fail("relevance", "must map event types to grades, e.g. {'click': 1, 'save': 2}")
        relevance = dict(relevance)
        for event, grade in relevance.items():
            if not isinstance(event, str) or not event or len(event) > 64:
                fail("relevance", f"event type {event!r} must be a string of 1-64 characters")
            if (isinstance(grade, bool) or not isinstance(grade, (int, float))
                    or not math.isfinite(grade) or grade < 0):
                fail("relevance", f"grade of {event!r} is {grade!r}; grades are numbers >= 0")
    if status not in EXPERIMENT_STATUSES:
        fail("status", f"{status!r} is not one of {', '.join(EXPERIMENT_STATUSES)}")
    if unknown_events not in UNKNOWN_EVENT_POLICIES:
        fail("unknown_events", f"{unknown_events!r} is not one of "
                               f"{', '.join(UNKNOWN_EVENT_POLICIES)}")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        fail("timezone", f"{timezone!r} is not an IANA time zone name (e.g. 'Europe/Berlin')")
    try:
        cutoff_list = sorted({int(k) for k in cutoffs})
    except (TypeError, ValueError):
        fail("cutoffs", "must be a list of whole numbers, e.g. [5, 10, 20]")
    if not cutoff_list or cutoff_list[0] < 1 or cutoff_list[-1] > max_items:
        fail("cutoffs", f"need at least one cutoff, each between 1 and {max_items}")
    start_us = to_micros(starts_at) if starts_at is not None else None
    end_us = to_micros(ends_at) if ends_at is not None else None
    if start_us is not None and end_us is not None and end_us <= start_us:
        fail("ends_at", "must be after starts_at")
    if name is not None and (not isinstance(name, str) or len(name) > KEY_LENGTH):
        fail("name", f"must be a string of at most {KEY_LENGTH} characters")
    return {
        "key": key, "name": name or key, "description": description or "", "status": status,
        "starts_at": start_us, "ends_at": end_us, "control_arm": control,
        "attribution_window_us": window_us, "relevance": relevance,
        "unknown_events": unknown_events, "timezone": timezone, "cutoffs": cutoff_list,
        "created_at": now_us, "arms": {a: float(w) for a, w in arms.items()},
    }


# ---------------------------------------------------------------------------- roles

def check_role_metric(name: Any, field: str, cutoffs: Sequence[int]) -> str:
    """The canonical name of a metric given a role: a metric of the registry
    (:func:`tracker.metrics.registry.parse_metric`), written ``METRIC@K`` for those with a
    cutoff and ``METRIC`` for the others, whose k is one of the experiment's ``cutoffs``."""
    try:
        parsed = parse_metric(name)
    except ValueError as exc:
        raise ValidationError(f"{exc}; this experiment's cutoffs: "
                              f"{', '.join(map(str, cutoffs))}", field=field) from None
    if parsed.k is not None and parsed.k not in cutoffs:
        shown = ", ".join(f"{parsed.metric}@{k}" for k in cutoffs)
        raise ValidationError(f"{name!r}: k = {parsed.k} is not one of the experiment's "
                              f"cutoffs; accepted: {shown}", field=field)
    return str(parsed)


def check_loss(name: str, loss: Any) -> float:
    """A guardrail's tolerated relative loss: a number in [0, 1) (0.05 tolerates a 5 % loss;
    0 tolerates none)."""
    if (isinstance(loss, bool) or not isinstance(loss, (int, float, np.floating))
            or not math.isfinite(loss) or not 0 <= loss < 1):
        raise ValidationError(f"guardrail {name!r} tolerates a loss of {loss!r}; a loss is a "
                              "relative share in [0, 1), e.g. 0.05 for 5 %", field="guardrails")
    return float(loss)


def check_roles(*, primary: Iterable[str], guardrails: Mapping[str, Any],
                cutoffs: Sequence[int]) -> Roles | None:
    """Checked metric roles of an experiment with ``cutoffs``; None when both are empty (no
    roles: the report's defaults apply). Names are canonicalised and a primary named twice is
    kept once; a metric is never both primary and guardrail. Raises ValidationError naming
    the bad value and what is accepted."""
    if isinstance(primary, (str, bytes, Mapping)):
        raise ValidationError(f"primary metrics must be a list of names such as "
                              f"['ndcg@10'], got {primary!r}", field="primary")
    if not isinstance(guardrails, Mapping):
        raise ValidationError(f"guardrails must map metric names to tolerated losses, e.g. "
                              f"{{'song_clicks': 0.05}}, got {guardrails!r}", field="guardrails")
    names = tuple(dict.fromkeys(check_role_metric(n, "primary", cutoffs) for n in primary))
    guards: dict[str, float] = {}
    for name, loss in guardrails.items():
        canonical = check_role_metric(name, "guardrails", cutoffs)
        if canonical in guards:
            raise ValidationError(f"guardrail {canonical!r} is given twice", field="guardrails")
        guards[canonical] = check_loss(canonical, loss)
    both = [n for n in names if n in guards]
    if both:
        raise ValidationError(f"{', '.join(map(repr, both))} cannot be both primary and "
                              "guardrail: choose one role per metric", field="guardrails")
    if not names and not guards:
        return None
    return Roles(names, guards)


def experiment_update_fields(info: ExperimentInfo, *, primary: Iterable[str] | None,
                             guardrails: Mapping[str, Any] | None, name: str | None,
                             description: str | None,
                             ends_at: datetime | str | None) -> dict[str, Any]:
    """Checked column values that change experiment ``info``; None leaves a setting as it
    is. ``primary`` and ``guardrails`` each replace that role's list (``[]`` / ``{}`` empties
    it; both empty: no roles). Arms, window, relevance, cutoffs and time zone are not
    offered: changing them would change what the stored results mean."""
    values: dict[str, Any] = {}
    if primary is not None or guardrails is not None:
        current = info.roles or Roles()
        roles = check_roles(
            primary=current.primary if primary is None else primary,
            guardrails=current.guardrails if guardrails is None else guardrails,
            cutoffs=info.cutoffs)
        values["roles"] = roles.to_dict() if roles is not None else None
    if name is not None:
        if not isinstance(name, str) or not name or len(name) > KEY_LENGTH:
            raise ValidationError(f"{name!r}: a name is a string of 1-{KEY_LENGTH} characters",
                                  field="name")
        values["name"] = name
    if description is not None:
        if not isinstance(description, str):
            raise ValidationError(f"must be text, got {type(description).__name__}",
                                  field="description")
        values["description"] = description
    if ends_at is not None:
        values["ends_at"] = _check_end(info, ends_at)
    return values


def _check_end(info: ExperimentInfo, ends_at: datetime | str) -> int:
    """Microseconds of a new end instant (naive = UTC), after the experiment's start."""
    if isinstance(ends_at, str):
        try:
            ends_at = datetime.fromisoformat(ends_at)
        except ValueError:
            raise ValidationError(f"{ends_at!r} is not an ISO 8601 date-time, e.g. "
                                  "2026-12-01T00:00:00Z", field="ends_at") from None
    if not isinstance(ends_at, datetime):
        raise ValidationError(f"must be a datetime or an ISO 8601 string, got "
                              f"{type(ends_at).__name__}", field="ends_at")
    end_us = to_micros(ends_at)
    if info.starts_at is not None and end_us <= to_micros(info.starts_at):
        raise ValidationError(f"{ends_at.isoformat()} must be after the experiment's start "
                              f"({info.starts_at.isoformat()})", field="ends_at")
    return end_us
