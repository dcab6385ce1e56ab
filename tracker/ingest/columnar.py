"""Column-at-a-time validation of impression batches: the bulk path's fast lane.

A batch is read as columns (one list per field). The common, clean shapes are checked a whole
column at a time (types, lengths, list sizes, repeated items, finite scores, times in range)
and turned into store rows without a Python call per field and row. Every row that is not
plainly clean — a wrong type, a bad value, an unknown field, a whole number as an id, an
ISO 8601 string as a time — is left to :class:`~tracker.ingest.validate.ImpressionNormalizer`,
the per-record rules, which either normalises it or rejects it with its reason. So the fast
lane only ever accepts rows that the per-record path accepts, with the same stored values
(tests/ingest/test_columnar.py compares the two on good and bad input).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from itertools import chain, repeat
from typing import Any

from tracker.ingest.validate import (
    ImpressionNormalizer,
    Reject,
    check_context,
    check_instant,
    instant_micros,
    is_clean_text,
)


class ColumnChunk:
    """A batch of records as columns.

    ``columns`` maps each known field to its values (``None`` where the record lacks it);
    ``suspect`` holds the positions of records that only the per-record path may judge (not a
    plain dict, an unknown field...); ``record(i)`` gives record ``i`` as the per-record path
    sees it.
    """

    def __init__(self, size: int, columns: Mapping[str, list], suspect: set[int],
                 record: Callable[[int], Any]):
        self.size = size
        self.columns = columns
        self.suspect = suspect
        self.record = record

    def __len__(self) -> int:
        return self.size

    @classmethod
    def from_records(cls, records: Sequence[Any], fields: frozenset[str]) -> ColumnChunk:
        """Columns of a list of records (dicts, usually)."""
        suspect = {i for i, r in enumerate(records)
                   if type(r) is not dict or not r.keys() <= fields}
        plain = [{} if i in suspect else r for i, r in enumerate(records)] if suspect else records
        columns = {name: [r.get(name) for r in plain] for name in fields}
        return cls(len(records), columns, suspect, records.__getitem__)


def _all_clean(texts: list[str]) -> bool:
    """Whether every string is valid Unicode without NUL, judged on their concatenation (a
    lone surrogate stays one when joined, so the verdict is the same as one string at a time)."""
    return is_clean_text("".join(texts))


def _ids_ok(values: list, limit: int) -> list[bool] | None:
    """None when every value is a plain non-empty clean string of at most ``limit`` characters,
    else which are."""
    if set(map(type, values)) == {str}:
        lengths = list(map(len, values))
        if min(lengths) > 0 and max(lengths) <= limit and _all_clean(values):
            return None
    return [type(v) is str and 0 < len(v) <= limit and is_clean_text(v) for v in values]


def _lists_ok(values: list, max_items: int, max_id_length: int) -> list[bool] | None:
    """None when every value is a plain list of 1..max_items distinct plain strings of
    1..max_id_length characters, else which are (None values count as not ok)."""
    if set(map(type, values)) == {list}:
        sizes = list(map(len, values))
        if min(sizes) > 0 and max(sizes) <= max_items:
            flat = list(chain.from_iterable(values))
            if (set(map(type, flat)) == {str} and "" not in flat
                    and max(map(len, flat)) <= max_id_length
                    and list(map(len, map(set, values))) == sizes and _all_clean(flat)):
                return None
    return [_list_ok(v, max_items, max_id_length) for v in values]


def _list_ok(value: Any, max_items: int, max_id_length: int) -> bool:
    return (type(value) is list and 0 < len(value) <= max_items
            and all(type(item) is str and 0 < len(item) <= max_id_length
                    and is_clean_text(item) for item in value)
            and len(set(value)) == len(value))


def _scores_ok(values: list, sizes: list[int]) -> list[bool] | None:
    """None when every value is None or a plain list of finite plain floats, as long as its
    served list, else which are."""
    present = [i for i, v in enumerate(values) if v is not None]
    if not present:
        return None
    lists = [values[i] for i in present] if len(present) < len(values) else values
    if set(map(type, lists)) == {list} and all(len(values[i]) == sizes[i] for i in present):
        flat = list(chain.from_iterable(lists))
        if set(map(type, flat)) <= {float} and math.isfinite(sum(flat)):
            return None
    return [v is None or (type(v) is list and len(v) == n
                          and all(type(s) is float and math.isfinite(s) for s in v))
            for v, n in zip(values, sizes, strict=True)]


def _micros(value: Any) -> int | None:
    """Microseconds of a plain datetime (naive = UTC), as the per-record rules compute them."""
    return instant_micros(value) if type(value) is datetime else None


def _instants(values: list, field: str, normalizer: ImpressionNormalizer,
              micros_ok: bool) -> list[int | None]:
    """Epoch microseconds of each value, None where the per-record path must judge it (outside
    ``[min_event_us, now + max_future_us]`` included)."""
    limits, now = normalizer.limits, normalizer.now_us
    earliest, latest = limits.min_event_us, now + limits.max_future_us
    if micros_ok and set(map(type, values)) == {int}:
        micros = list(values)
    else:
        micros = list(map(_micros, values))
        if None in micros:
            for i, (value, us) in enumerate(zip(values, micros, strict=True)):
                if us is None and value is not None and (
                        type(value) is str or (micros_ok and type(value) is int)):
                    with contextlib.suppress(Reject):  # the per-record path reports it
                        micros[i] = check_instant(value, field, now, limits, micros_ok)
    known = [us for us in micros if us is not None]
    if known and (max(known) > latest or min(known) < earliest):
        micros = [None if us is not None and not earliest <= us <= latest else us
                  for us in micros]
    return micros


def impression_rows(chunk: ColumnChunk, normalizer: ImpressionNormalizer,
                    micros_ok: bool) -> list[tuple | None]:
    """Store rows (as :class:`ImpressionNormalizer` makes them) of the rows that are plainly
    valid; None for every row the per-record path must judge."""
    n = len(chunk)
    cols = chunk.columns
    limits = normalizer.limits
    bad = set(chunk.suspect)

    def mark(ok: list[bool] | None) -> None:
        if ok is not None:
            bad.update(i for i, good in enumerate(ok) if not good)

    keys, users, items = cols["impression_id"], cols["user_id"], cols["items"]
    mark(_ids_ok(keys, limits.max_id_length))
    mark(_ids_ok(users, limits.max_id_length))
    mark(_lists_ok(items, limits.max_items, limits.max_id_length))
    sizes = [len(v) if type(v) is list else 0 for v in items]
    scores = cols["scores"]
    mark(_scores_ok(scores, sizes))

    get = normalizer.arms.get
    try:
        arms = list(map(get, zip(cols["experiment"], cols["arm"], strict=True)))
    except TypeError:  # an unhashable experiment or arm: the per-record path reports it
        arms = [get(p) if all(map(_hashable, p)) else None
                for p in zip(cols["experiment"], cols["arm"], strict=True)]
    if None in arms:
        bad.update(i for i, ids in enumerate(arms) if ids is None)

    served = _instants(cols["served_at"], "served_at", normalizer, micros_ok)
    if None in served:
        bad.update(i for i, us in enumerate(served) if us is None)

    baseline = cols["baseline_items"]
    if not _all_none(baseline):
        at = [i for i, v in enumerate(baseline) if v is not None]
        ok = _lists_ok([baseline[i] for i in at], limits.max_items, limits.max_id_length)
        if ok is not None:
            bad.update(i for i, good in zip(at, ok, strict=True) if not good)

    contexts = cols["context"]
    if not _all_none(contexts):
        contexts = list(contexts)
        for i, value in enumerate(contexts):
            if value is not None and i not in bad:
                try:
                    contexts[i] = check_context(value, limits)
                except Reject:
                    bad.add(i)

    if bad:
        arms = [(None, None) if ids is None else ids for ids in arms]
    experiment_ids, arm_ids = zip(*arms, strict=True)
    rows: list[tuple | None] = list(zip(keys, experiment_ids, arm_ids, users, served,
                                        repeat(normalizer.now_us, n), items, scores, baseline,
                                        contexts, strict=True))
    for i in bad:
        rows[i] = None
    return rows


def _all_none(values: list) -> bool:
    """Whether every value is None (by type: ``list.count(None)`` would compare arrays)."""
    return list(map(type, values)).count(type(None)) == len(values)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True

