"""The adversarial corpus: bad (and odd but valid) values in every field of a record, and
records that are not records. Each case says what the rules must do with it: store it, or
reject it naming a field. Shared by the per-path tests in ``test_adversarial.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

STORED = "stored"
RECORD = "record"  # the record as a whole is rejected (Rejection.field is None)

PLUS_14 = timezone(timedelta(hours=14))
MINUS_14 = timezone(timedelta(hours=-14))
NOW = datetime.now(UTC)
LONG = "x" * 1_000_000  # a rejection must never echo it whole


def nested(depth: int) -> dict:
    """A context mapping nested ``depth`` levels deep (the context itself is level 1)."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


@dataclass(frozen=True)
class Case:
    """One adversarial record: ``field`` set to ``value`` in a valid record (``field`` None:
    ``value`` is the whole record); ``expect`` is STORED, RECORD or the rejected field (a
    prefix: ``items`` covers ``items[3]``)."""

    id: str
    kind: str
    field: str | None
    value: Any
    expect: str

    @property
    def whole_record(self) -> bool:
        return self.field is None


def _id_cases(kind: str, field: str, required: bool = True) -> list[Case]:
    values = [
        ("list", ["a"], field), ("dict", {"a": 1}, field), ("set", {"a"}, field),
        ("bytes", b"a", field), ("float", 1.5, field), ("bool", True, field),
        ("decimal", Decimal("1"), field), ("object", object(), field),
        ("int", 5, STORED), ("numpy-int", np.int64(7), STORED),
        ("int-of-400-digits", 10**400, field), ("int-of-5000-digits", 10**5000, field),
        ("lone-surrogate", "a\ud800b", field), ("nul", "a\x00b", field),
        ("over-long", "x" * 300, field), ("a-megabyte-long", LONG, field),
        ("empty", "", field), ("unicode", "é🙂\u202e", STORED),
        ("sql-looking", "'; DROP TABLE impression; --", STORED),
        ("nan", math.nan, field if required else STORED),
    ]
    if required:
        values.append(("none", None, field))
    return [Case(f"{kind[:-1]}-{field}-{name}", kind, field, value, expect)
            for name, value, expect in values]


def _key_cases(field: str) -> list[Case]:
    values = [("list", ["home"]), ("dict", {"home": 1}), ("set", {"home"}), ("bytes", b"home"),
              ("int", 5), ("bool", True), ("none", None), ("nul", "home\x00"),
              ("lone-surrogate", "\udcff"), ("a-megabyte-long", LONG), ("float-nan", math.nan)]
    return [Case(f"impression-{field}-{name}", "impressions", field, value, field)
            for name, value in values]


def _time_cases(kind: str, field: str) -> list[Case]:
    values = [
        ("none", None, field), ("pandas-nat", pd.NaT, field),
        ("numpy-nat", np.datetime64("NaT"), field), ("nan", math.nan, field),
        ("year-1-plus-14h-text", "0001-01-01T00:00:00+14:00", field),
        ("year-9999-minus-14h-text", "9999-12-31T23:59:59-14:00", field),
        ("year-1-plus-14h", datetime(1, 1, 1, tzinfo=PLUS_14), field),
        ("year-9999-minus-14h", datetime(9999, 12, 31, 23, 59, tzinfo=MINUS_14), field),
        ("year-1-naive", datetime(1, 1, 1), field),
        ("epoch-1970", datetime(1970, 1, 1, tzinfo=UTC), field),
        ("before-the-minimum", "1999-12-31T23:59:59Z", field),
        ("far-future", NOW + timedelta(days=3), field),
        ("not-a-time", "yesterday", field), ("nul-text", "2026-11-01\x00", field),
        ("surrogate-text", "2026-11-01\ud800", field), ("a-megabyte-of-text", LONG, field),
        ("int", 1_700_000_000, field), ("bool", True, field), ("list", ["2026-11-01"], field),
        ("dict", {"t": 1}, field),
        ("text-with-offset", "2026-11-01T12:00:00+05:30", STORED),
        ("pandas-timestamp", pd.Timestamp("2026-11-01T12:00:00.123456789Z"), STORED),
        ("numpy-datetime64", np.datetime64("2026-11-01T12:00:00"), STORED),
        ("numpy-datetime64-year-1", np.datetime64("0001-01-01"), field),
    ]
    return [Case(f"{kind[:-1]}-{field}-{name}", kind, field, value, expect)
            for name, value, expect in values]


def _list_cases(field: str, required: bool) -> list[Case]:
    values = [
        ("set", {"a", "b"}, field), ("dict", {"a": 1}, field), ("text", "abc", field),
        ("bytes", b"ab", field), ("int", 5, field), ("empty", [], field),
        ("none-item", ["a", None], field), ("list-item", ["a", ["b"]], field),
        ("dict-item", ["a", {"b": 1}], field), ("float-item", ["a", 1.5], field),
        ("bool-item", ["a", True], field), ("surrogate-item", ["a", "\ud83d"], field),
        ("nul-item", ["a", "b\x00"], field), ("huge-int-item", ["a", 10**400], field),
        ("repeated-item", ["a", "a"], field), ("too-many", [f"i{n}" for n in range(1001)], field),
        ("megabyte-item", ["a", LONG], field),
        ("tuple", ("a", "b"), STORED), ("numpy-int-items", [np.int64(1), np.int64(2)], STORED),
        ("numpy-array", np.array(["a", "b"]), STORED),
    ]
    if required:
        values.append(("none", None, field))
    return [Case(f"impression-{field}-{name}", "impressions", field, value, expect)
            for name, value, expect in values]


def _number_cases(kind: str, field: str, many: bool) -> list[Case]:
    def wrap(value):
        return [value] * 5 if many else value

    values = [
        ("int-of-400-digits", wrap(10**400), field), ("infinite", wrap(math.inf), field),
        ("text", wrap("x"), field), ("bool", wrap(True), field), ("list", wrap([1]), field),
        ("dict", wrap({"a": 1}), field), ("decimal-nan", wrap(Decimal("NaN")), field),
        ("text-1e999", wrap("1e999"), field),
        ("decimal", wrap(Decimal("2.5")), STORED), ("numpy-float32", wrap(np.float32(1)), STORED),
        ("numpy-int", wrap(np.int64(3)), STORED), ("numeric-text", wrap("3.5"), STORED),
        ("negative-zero", wrap(-0.0), STORED), ("big-but-finite", wrap(1e308), STORED),
    ]
    values.append(("nan", wrap(math.nan), field if many else STORED))  # a missing value
    if many:
        values += [("wrong-length", [1.0, 2.0], field), ("set", {1.0}, field),
                   ("text-not-list", "1,2,3,4,5", field), ("none-inside", [1.0, None, 1, 1, 1],
                                                             field)]
    return [Case(f"{kind[:-1]}-{field}-{name}", kind, field, value, expect)
            for name, value, expect in values]


def _context_cases() -> list[Case]:
    values = [
        ("list", ["home"], "context"), ("text", "home", "context"), ("int", 5, "context"),
        ("int-key", {1: "a"}, "context"), ("tuple-key", {("a",): 1}, "context"),
        ("surrogate-value", {"a": "\ud800"}, "context"),
        ("surrogate-key", {"\udc80": 1}, "context"), ("nul-key", {"a\x00": 1}, "context"),
        ("nul-in-nested-list", {"a": [["\x00"]]}, "context"),
        ("nan", {"a": math.nan}, "context"), ("infinity", {"a": [math.inf]}, "context"),
        ("object", {"a": object()}, "context"), ("numpy-int", {"a": np.int64(1)}, "context"),
        ("decimal", {"a": Decimal("1")}, "context"), ("set", {"a": {1}}, "context"),
        ("bytes", {"a": b"x"}, "context"),
        ("nested-9-levels", nested(9), "context"),
        ("nested-100000-levels", nested(100_000), "context"),
        ("over-64-KiB", {"a": "x" * 70_000}, "context"),
        ("a-megabyte-key", {LONG: 1}, "context"),
        ("many-small-keys-over-64-KiB", {f"k{n}": n for n in range(10_000)}, "context"),
        ("nested-8-levels", nested(8), STORED), ("tuple-value", {"a": (1, 2)}, STORED),
        ("unicode", {"surface": "é🙂", "ab": {"x": [1, 2.5, None, True]}}, STORED),
        ("int-of-400-digits", {"a": 10**400}, STORED),
    ]
    return [Case(f"impression-context-{name}", "impressions", "context", value, expect)
            for name, value, expect in values]


def _event_cases() -> list[Case]:
    values = [("list", ["click"]), ("int", 5), ("none", None), ("nul", "click\x00"),
              ("surrogate", "\ud800"), ("65-characters", "c" * 65), ("unknown", "shrug"),
              ("bool", True), ("megabyte", LONG)]
    return [Case(f"interaction-event-{name}", "interactions", "event", value, "event")
            for name, value in values]


def _record_cases(kind: str) -> list[Case]:
    values = [("none", None), ("int", 5), ("text", "a record"), ("list", ["a", "b"]),
              ("empty-dict", {}), ("tuple-of-pairs", (("user_id", "u"),))]
    cases = [Case(f"{kind[:-1]}-record-{name}", kind, None, value, RECORD if name != "empty-dict"
                  else ("impression_id" if kind == "impressions" else "event_id"))
             for name, value in values]
    return cases + [
        Case(f"{kind[:-1]}-unknown-field", kind, "colour", "red", RECORD),
        Case(f"{kind[:-1]}-unknown-megabyte-field-name", kind, LONG, 1, RECORD),
        Case(f"{kind[:-1]}-unknown-int-field-name", kind, 7, 1, RECORD),
        Case(f"{kind[:-1]}-unknown-surrogate-field-name", kind, "\ud800", 1, RECORD),
    ]


IMPRESSION_CASES = [
    *_id_cases("impressions", "impression_id"), *_id_cases("impressions", "user_id"),
    *_key_cases("experiment"), *_key_cases("arm"),
    *_time_cases("impressions", "served_at"),
    *_list_cases("items", required=True), *_list_cases("baseline_items", required=False),
    *_number_cases("impressions", "scores", many=True), *_context_cases(),
    *_record_cases("impressions"),
]
INTERACTION_CASES = [
    *_id_cases("interactions", "event_id"), *_id_cases("interactions", "user_id"),
    *_id_cases("interactions", "item_id"),
    *_id_cases("interactions", "impression_id", required=False),
    *_event_cases(), *_time_cases("interactions", "occurred_at"),
    *_number_cases("interactions", "value", many=False), *_record_cases("interactions"),
]
CASES = IMPRESSION_CASES + INTERACTION_CASES
