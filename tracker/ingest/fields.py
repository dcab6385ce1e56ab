"""The rules for single fields of a record: ids, keys, instants, served lists, numbers, context.

Each ``check_*`` function returns the value as stored or raises :class:`Reject` naming the
field and the reason (limits come from :class:`tracker.config.Settings` via :class:`Limits`):

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
- a record is a mapping holding only known fields (:func:`check_fields`).

A rejection never echoes a whole value: ids and values in reasons are cut to a bounded prefix
(:func:`shown`, :func:`shown_id`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from tracker.config import Settings
from tracker.errors import shorten
from tracker.store.models import ID_LENGTH

EVENT_TYPE_LENGTH = 64  # the interaction.event_type column

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


