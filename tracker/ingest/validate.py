"""Validation and normalisation of experiments, impressions and interactions.

Every record is checked before anything is written; a record that breaks a rule is rejected
with the field and the reason. Rules (limits come from :class:`tracker.config.Settings`):

- text (ids, items, event types, experiment and arm keys, context keys and values) is valid
  Unicode (no lone surrogate) without NUL characters (PostgreSQL text cannot hold them);
- ids (impression, event, user, item) are non-empty strings of at most ``max_id_length``
  characters; whole numbers (Python or numpy ints, not bools) are accepted and stored as their
  decimal text; a float, bool, list, mapping, set or bytes is rejected; ``experiment`` and
  ``arm`` are strings;
- a served list (a list or tuple, not a set) holds 1 to ``max_items`` items, with no item
  twice; ``scores``, when given, has one number per item and ``value`` is a number: finite and
  representable as a 64-bit float (an int of 10**400 is rejected; numeric text, as CSV files
  hold it, is read as a number; a bool is not a number); ``baseline_items`` (the list the
  control model would have served for the same request) follows the item rules;
- instants are ``datetime`` objects or ISO 8601 strings; a naive one is taken to be **UTC**;
  ``None``, ``NaT`` and NaN are missing, and a time is required (a default of "now" would make
  a retried record differ from the first one); it must lie within
  ``[TRACKER_MIN_EVENT_TIME, now + TRACKER_MAX_FUTURE_SECONDS]`` (a time whose conversion to
  UTC overflows is outside it too);
- ``context`` is a mapping with string keys holding JSON values (None, bool, int, float, str,
  lists, mappings), nested at most ``MAX_CONTEXT_DEPTH`` (8) levels and at most
  ``MAX_CONTEXT_BYTES`` (64 KiB) as canonical JSON;
- a record is a mapping; anything else (``None``, a list, an unreadable line) is one rejection.

A rejection never echoes a whole value: ids and values in reasons are cut to a bounded prefix
(:func:`shown`, :func:`shown_id`).
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
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from tracker.config import Settings
from tracker.errors import ValidationError, shorten
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

EVENT_TYPE_LENGTH = 64  # the interaction.event_type column
_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")

MAX_CONTEXT_DEPTH = 8
MAX_CONTEXT_BYTES = 64 * 1024
SHOWN_CHARACTERS = 64
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_NAIVE = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)
_NUMBER_TYPES = (int, float, np.integer, np.floating, Decimal, Fraction)


def shown(value: Any) -> str:
    """A value as a reason quotes it: ``repr`` of a string cut by :func:`~tracker.errors.shorten`
    to ``SHOWN_CHARACTERS`` characters + "…" (a reason never echoes a whole 300 MB value;
    ``repr`` escapes NUL and lone surrogates), of a number when it is short, else its type."""
    if isinstance(value, str):
        return repr(shorten(value, SHOWN_CHARACTERS, say_length=False))
    if isinstance(value, (bool, float, np.bool_, np.floating)) or (
            isinstance(value, (int, np.integer)) and abs(int(value)) < 10**SHOWN_CHARACTERS):
        return repr(value)
    return f"a {type(value).__name__}"


def shown_id(value: Any) -> str | None:
    """A record's id as a rejection reports it: its text (whole numbers as decimal text), cut
    by :func:`~tracker.errors.shorten` to ``SHOWN_CHARACTERS`` characters + "…", lone surrogates
    escaped so any response can carry it; None when the record has no id of a usable type."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        value = str(value) if abs(int(value)) < 10**SHOWN_CHARACTERS else None
    if not isinstance(value, str):
        return None
    value = shorten(value, SHOWN_CHARACTERS, say_length=False)
    if not value.isascii():
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def is_clean_text(value: str) -> bool:
    """Whether a string is valid Unicode (no lone surrogate) without NUL characters."""
    if "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_text(value: str, field: str | None) -> str:
    """The string itself, when it is valid Unicode without NUL (see :func:`is_clean_text`)."""
    if "\x00" in value:
        raise Reject(field, "must not contain NUL (\\u0000) characters")
    if not is_clean_text(value):
        raise Reject(field, "is not valid Unicode (it holds a lone surrogate code point)")
    return value


def instant_micros(value: datetime) -> int | None:
    """Microseconds since the epoch of a datetime (naive = UTC), or None when the datetime
    cannot be placed on the UTC time line (an offset without a value, a broken tzinfo).

    Computed by subtraction, which never overflows (``astimezone`` does for year 1 or 9999 with
    an offset); the range rule then rejects such times with the accepted range.
    """
    try:
        if value.tzinfo is None or value.utcoffset() is None:
            return (value.replace(tzinfo=None) - _EPOCH_NAIVE) // _MICROSECOND
        return (value - _EPOCH) // _MICROSECOND
    except (OverflowError, ValueError, TypeError, ArithmeticError):
        return None


def _is_missing(value: Any) -> bool:
    """None, NaT (pandas or numpy) or a float NaN: a value that is not there."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    if isinstance(value, np.datetime64):
        return bool(np.isnat(value))
    return isinstance(value, datetime) and value != value  # pandas.NaT


def _iso(micros: int) -> str:
    try:
        return (_EPOCH + micros * _MICROSECOND).isoformat().replace("+00:00", "Z")
    except OverflowError:
        return f"{micros} µs after 1970"


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


_MIN_EVENT_US = 946_684_800_000_000  # 2000-01-01T00:00:00Z, the TRACKER_MIN_EVENT_TIME default


@dataclass(frozen=True)
class Limits:
    """The bounds the rules apply (from :class:`~tracker.config.Settings`)."""

    max_items: int
    max_id_length: int
    max_future_us: int
    min_event_us: int = _MIN_EVENT_US
    max_context_depth: int = MAX_CONTEXT_DEPTH
    max_context_bytes: int = MAX_CONTEXT_BYTES

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        earliest = instant_micros(settings.min_event_time)
        return cls(settings.max_items, min(settings.max_id_length, ID_LENGTH),
                   int(settings.max_future_seconds * 1_000_000),
                   _MIN_EVENT_US if earliest is None else earliest)

    @property
    def accepted_times(self) -> str:
        """The accepted range of event times, as a reason states it."""
        return (f"accepted: {_iso(self.min_event_us)} (TRACKER_MIN_EVENT_TIME) to "
                f"{self.max_future_us / 1e6:.0f} s past the server clock "
                "(TRACKER_MAX_FUTURE_SECONDS)")


def check_id(value: Any, field: str, limit: int) -> str:
    """An id as stored: a non-empty clean string of at most ``limit`` characters; a whole
    number (Python or numpy int, not a bool) becomes its decimal text."""
    if type(value) is not str:
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            if abs(int(value)) >= 10**limit:
                raise Reject(field, f"is a whole number of more than {limit} digits "
                                    "(TRACKER_MAX_ID_LENGTH)")
            value = str(int(value))
        elif isinstance(value, str):
            value = str(value)
        elif _is_missing(value):
            raise Reject(field, "is required")
        else:
            raise Reject(field, f"must be a string or a whole number, got "
                                f"{type(value).__name__}")
    if not value:
        raise Reject(field, "must not be empty")
    if len(value) > limit:
        raise Reject(field, f"is {len(value)} characters long, the limit is {limit} "
                            "(TRACKER_MAX_ID_LENGTH)")
    return check_text(value, field)



def check_optional_id(value: Any, field: str, limit: int) -> str | None:
    """An optional id: None when missing (None, or NaN/NaT as a DataFrame column holds a
    missing value), else :func:`check_id`."""
    return None if _is_missing(value) else check_id(value, field, limit)

def check_key(value: Any, field: str) -> str:
    """An experiment or arm key as a record names it: a clean string."""
    if value is None:
        raise Reject(field, "is required")
    if not isinstance(value, str):
        raise Reject(field, f"must be a string, got {type(value).__name__}")
    return check_text(value, field)


def check_instant(value: Any, field: str, now_us: int, limits: Limits,
                  micros_ok: bool = False) -> int:
    """Microseconds since the epoch of a datetime / ISO 8601 string (naive = UTC), within
    ``[limits.min_event_us, now + limits.max_future_us]``; None, NaT and NaN are missing."""
    if _is_missing(value):
        missing = ("" if value is None else " (NaN)" if isinstance(value, (float, np.floating))
                   else " (NaT)")
        raise Reject(field, f"is required{missing} (a retry must repeat it, so it is never "
                            "defaulted)")
    if isinstance(value, datetime):
        micros = instant_micros(value)
    elif micros_ok and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        micros = int(value)
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise Reject(field, f"{shown(value)} is not an ISO 8601 date-time") from None
        micros = instant_micros(parsed)
    elif isinstance(value, np.datetime64):
        micros = instant_micros_of_datetime64(value)
    else:
        raise Reject(field, f"must be a datetime or an ISO 8601 string, got "
                            f"{type(value).__name__}")
    if micros is None:
        raise Reject(field, "cannot be converted to UTC; " + limits.accepted_times)
    if micros < limits.min_event_us:
        raise Reject(field, f"lies before {_iso(limits.min_event_us)}; "
                            + limits.accepted_times)
    if micros > now_us + limits.max_future_us:
        ahead = (micros - now_us) / 1e6
        raise Reject(field, f"lies {ahead:.0f} s in the future; at most "
                            f"{limits.max_future_us / 1e6:.0f} s of clock skew is accepted "
                            "(TRACKER_MAX_FUTURE_SECONDS)")
    return micros


def instant_micros_of_datetime64(value: np.datetime64) -> int | None:
    """Microseconds since the epoch of a numpy datetime64 (any unit), None when it overflows."""
    unit, _ = np.datetime_data(value.dtype)
    if unit in ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "generic"):
        try:
            return instant_micros(value.astype("datetime64[us]").astype(datetime))
        except (OverflowError, ValueError, TypeError, AttributeError):
            return None
    return int(value.astype("datetime64[us]").astype(np.int64))  # ns and finer: in range


def check_list(value: Any, field: str, what: str) -> list:
    """An ordered sequence as a list (a list, tuple or array; not text, a mapping or a set)."""
    if type(value) is list or type(value) is tuple:  # the common case, fast
        return list(value)
    if value is None:
        raise Reject(field, "is required")
    if (isinstance(value, (str, bytes, bytearray, Mapping, set, frozenset))
            or not hasattr(value, "__len__") or not hasattr(value, "__iter__")):
        raise Reject(field, f"must be a list of {what}, got {type(value).__name__}")
    return list(value)


def check_items(value: Any, field: str, limits: Limits) -> list[str]:
    """A served list: 1 to ``max_items`` distinct ids (see :func:`check_id`)."""
    items = check_list(value, field, "item ids")
    if not items:
        raise Reject(field, "must not be empty")
    if len(items) > limits.max_items:
        raise Reject(field, f"has {len(items)} items, the limit is {limits.max_items} "
                            "(TRACKER_MAX_ITEMS)")
    if not (all(type(item) is str for item in items) and all(items)  # the common case, fast
            and max(map(len, items)) <= limits.max_id_length and is_clean_text("".join(items))):
        items = [check_id(item, f"{field}[{i}]", limits.max_id_length)
                 for i, item in enumerate(items)]
    if len(set(items)) != len(items):
        seen: set[str] = set()
        for i, item in enumerate(items):
            if item in seen:
                raise Reject(field, f"item {shown(item)} appears twice (again at position {i})")
            seen.add(item)
    return items


def check_number(value: Any, field: str) -> float:
    """A number as a finite 64-bit float: ints, floats, numpy numbers, Decimal, Fraction or
    numeric text (as CSV files hold numbers); never a bool; never NaN, infinity, or a value
    too large for a float (an int of 10**400)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (*_NUMBER_TYPES, str)):
        raise Reject(field, f"must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        raise Reject(field, "is too large for a 64-bit float (at most about 1.8e308)") from None
    except (TypeError, ValueError, ArithmeticError):
        raise Reject(field, f"must be a number, got {shown(value)}") from None
    if not math.isfinite(number):
        raise Reject(field, "must be finite (no NaN or infinity)")
    return number


def check_scores(value: Any, n_items: int) -> list[float] | None:
    """One finite number per served item (see :func:`check_number`), or None."""
    if value is None:
        return None
    scores = check_list(value, "scores", "numbers")
    if len(scores) != n_items:
        raise Reject("scores", f"has {len(scores)} values for {n_items} items")
    if all(type(s) is float for s in scores) and all(map(math.isfinite, scores)):
        return scores  # the common case, fast
    try:
        return [check_number(s, "scores") for s in scores]
    except Reject as reject:
        if "must be a number" in reject.reason:
            raise Reject("scores", "must hold numbers only") from None
        raise


def check_value(value: Any) -> float | None:
    """An interaction's optional number (see :func:`check_number`); None or NaN (a missing
    value in a DataFrame column) is no value."""
    if value is None or _is_missing(value):
        return None
    return check_number(value, "value")


def check_context(value: Any, limits: Limits | None = None) -> dict[str, Any] | None:
    """The context in its canonical JSON form (so a retry compares equal to what is stored):
    a mapping with string keys, values JSON scalars, lists and mappings, all text clean,
    nested at most ``max_context_depth`` levels, at most ``max_context_bytes`` of JSON."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise Reject("context", f"must be a mapping, got {type(value).__name__}")
    depth = limits.max_context_depth if limits else MAX_CONTEXT_DEPTH
    size = limits.max_context_bytes if limits else MAX_CONTEXT_BYTES
    _walk_context(value, depth, size)
    try:
        text = json.dumps(dict(value), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise Reject("context", f"must be JSON-serialisable: {str(exc)[:200]}") from None
    if len(text.encode("utf-8")) > size:
        raise Reject("context", f"is over {size} bytes as JSON")
    return json.loads(text)


def _walk_context(value: Mapping, max_depth: int, max_bytes: int) -> None:
    """Check keys, text and depth without recursion (a deep value never overflows the stack)
    and stop early once the text alone is over the size limit."""
    budget = max_bytes
    stack: list[tuple[Any, int, str]] = [(value, 1, "context")]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, Mapping):
            children = []
            for key, child in node.items():
                if not isinstance(key, str):
                    raise Reject("context", f"keys must be strings; {path} has a "
                                            f"{type(key).__name__} key")
                check_text(key, "context")
                budget -= len(key)
                children.append((child, f"{path}.{key[:SHOWN_CHARACTERS]}"))
        elif isinstance(node, (list, tuple)):
            children = [(child, f"{path}[{i}]") for i, child in enumerate(node)]
        else:
            if isinstance(node, str):
                check_text(node, "context")
                budget -= len(node)
            elif isinstance(node, float) and not math.isfinite(node):
                raise Reject("context", f"{path} must be finite (no NaN or infinity)")
            elif not (node is None or isinstance(node, (bool, int, float))):
                raise Reject("context", f"{path} must be JSON-serialisable (null, boolean, "
                                        f"number, string, list or mapping), got "
                                        f"{type(node).__name__}")
            if budget < 0:
                raise Reject("context", f"is over {max_bytes} bytes as JSON")
            continue
        if depth >= max_depth and any(isinstance(c, (Mapping, list, tuple))
                                      for c, _ in children):
            raise Reject("context", f"is nested more than {max_depth} levels deep")
        budget -= len(children)
        if budget < 0:
            raise Reject("context", f"is over {max_bytes} bytes as JSON")
        stack.extend((child, depth + 1, p) for child, p in children)


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
        key = record.get("impression_id")
        if key is None and not self.require_id:
            from uuid import uuid4
            key = uuid4().hex
        key = check_id(key, "impression_id", limits.max_id_length)
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


def check_fields(record: Any, known: frozenset[str]) -> None:
    """A record is a mapping holding only ``known`` fields."""
    if type(record) is not dict and not isinstance(record, Mapping):
        raise Reject(None, f"a record must be a mapping (a JSON object), got "
                           f"{type(record).__name__}")
    extra = record.keys() - known
    if extra:
        names = sorted(shown_id(name) or shown(name) for name in extra)
        listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise Reject(None, f"unknown field(s) {listed}; expected {', '.join(sorted(known))}")


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
        key = record.get("event_id")
        if key is None and not self.require_id:
            from uuid import uuid4
            key = uuid4().hex
        key = check_id(key, "event_id", limits.max_id_length)
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
