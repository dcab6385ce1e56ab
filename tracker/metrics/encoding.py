"""Ids to integer codes: the project's one id encoder.

**The code contract**, shared by everything that encodes ids (this module for the metric
functions, :mod:`tracker.rollup.codes` for the rollup's Arrow columns): codes are int64
>= 0; ``-1`` is a missing id (a null) or padding after a list's last item (:func:`pad`);
several streams encoded together share one code space (equal ids, one code); a vocabulary
maps code ``c`` back to its id; "sorted" codes follow the order of the ids. Every step after
the hashing is a numpy routine of this module: :func:`factorize` / :func:`dense_codes`,
:func:`distinct`, :func:`split_codes`, :func:`renumber`, :func:`remap`, :func:`pad`.

Only the hashing differs by input, for speed: Python ids of any hashable kind are hashed
here (numpy and the standard library only, as ``tracker.metrics`` imports nothing else);
the rollup's string columns come from the database as Arrow arrays and are hashed by
Arrow's C hash tables, about 5x faster than any Python-level pass (2M string ids, 200k
distinct: 0.26 s CPU against 1.3 s for :func:`factorize` on the same ids as Python
strings, 1.8 s for ``np.unique`` on a fixed-width string array), and then handed to the
routines here. ``tracker.rollup.codes`` is that Arrow adapter and nothing more.

From Python lists of item ids to :class:`~tracker.metrics.batch.EncodedLists`, in one
pass over the ids, never a loop per list:

- a list of lists of Python ints in the int32 range (the common shape) is serialised by
  ``marshal`` in C and its fixed-size records read by numpy (:func:`_int32_lists`);
- other integer ids (Python ints, numpy integers, or a 2-D integer array) are read
  straight into an int64 array (``np.fromiter``; a non-integer such as ``3.5`` is never
  truncated, it sends the batch to the general path instead);
- any other hashable ids (strings, tuples, UUIDs...) get codes from one shared dict in
  C-level ``map`` (about 0.5 us per id); ids equal in Python (``1 == 1.0``) share a code.

Callers that already hold integer codes skip this module: see ``EncodedLists``.
"""

from __future__ import annotations

import marshal
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, count, repeat
from typing import Any

import numpy as np

from tracker.metrics.batch import EncodedLists, Judged, check_grades, pad, score_encoded

# One stream of ids: a factory (so the stream can be read twice) and its length.
_Ids = tuple[Callable[[], Iterable[Any]] | np.ndarray, int]


def encode(
    recommended: Any, relevant: Any, *, depth: int | None = None
) -> EncodedLists:
    """Encode ranked lists of ids and their relevance for the batch kernel.

    ``recommended[i]`` is the ranked list served to list ``i``; ``relevant[i]`` is either
    a collection of relevant ids (binary relevance) or a mapping id -> grade (graded,
    grades >= 0). ``depth`` keeps only the first ``depth`` ranks.

    >>> lists = encode([["a", "b", "c"], ["d"]], [{"b"}, {"d": 2.0, "z": 1.0}])
    >>> lists.items.shape, lists.truth_grade.tolist()
    ((2, 3), [1.0, 2.0, 1.0])
    """
    recommended = _as_sequence(recommended, "recommended")
    relevant = _as_sequence(relevant, "relevant")
    if len(recommended) != len(relevant):
        raise ValueError(
            f"recommended has {len(recommended)} lists but relevant has {len(relevant)} "
            "entries: pass one relevance entry per list, in the same order"
        )
    served, served_lengths = _flatten(recommended, "recommended")
    truth, truth_lengths, grades = _flatten_relevance(relevant)
    served_codes, truth_codes = factorize([served, truth])
    truth_row = np.repeat(np.arange(len(recommended), dtype=np.int64), truth_lengths)
    # Valid by construction (codes >= 0, rows in range, grades checked): no re-validation.
    items = pad(served_codes, served_lengths, depth)
    lengths = np.minimum(served_lengths, items.shape[1])
    return EncodedLists._trusted(items, truth_row, truth_codes, grades, lengths)


def score_lists(
    recommended: Any, relevant: Any, kernel: Callable[[Judged], np.ndarray], depth: int | None
) -> np.ndarray:
    """One value per list: ``kernel`` over the lists encoded and judged to ``depth``, block
    by block (:func:`~tracker.metrics.batch.score_blocks`). Every per-list metric function
    is this call with its kernel."""
    lists = encode(recommended, relevant, depth=depth)
    return score_encoded(lists, {"value": kernel}, depth)["value"]


def encode_against_lists(recommended: Any, baseline: Any, k: int) -> EncodedLists:
    """Encode ``recommended`` cut at ``k`` with the first ``k`` ids of ``baseline[i]``
    as the (binary) relevant set of list ``i``."""
    recommended = _as_sequence(recommended, "recommended")
    baseline = _as_sequence(baseline, "baseline")
    if len(recommended) != len(baseline):
        raise ValueError(
            f"recommended has {len(recommended)} lists but baseline has {len(baseline)}: "
            "pass one baseline list per list, in the same order"
        )
    served, served_lengths = _flatten(recommended, "recommended")
    base, base_lengths = _flatten(baseline, "baseline")
    served_codes, base_codes = factorize([served, base])
    starts = np.cumsum(base_lengths) - base_lengths
    rank = np.arange(base_codes.size, dtype=np.int64) - np.repeat(starts, base_lengths)
    base_row = np.repeat(np.arange(len(baseline), dtype=np.int64), base_lengths)
    keep = rank < k
    return EncodedLists.from_flat(
        served_codes, served_lengths, base_row[keep], base_codes[keep], depth=k
    )


def encode_served(
    recommended: Any, k: int, others: list[_Ids] | None = None
) -> tuple[np.ndarray, list[np.ndarray], int]:
    """Dense codes for the first ``k`` ids of every list (a -1-padded matrix) and for
    some other streams of ids in the same code space; also the number of codes."""
    recommended = _as_sequence(recommended, "recommended")
    served, lengths = _flatten(recommended, "recommended")
    codes, n_codes = dense_codes([served, *(others or [])])
    return pad(codes[0], lengths, k), codes[1:], n_codes


def ids_of(values: Iterable[Any]) -> _Ids:
    """A stream of ids from any collection (read into a list once)."""
    values = list(values)
    return (lambda: iter(values)), len(values)


def factorize(streams: list[_Ids]) -> list[np.ndarray]:
    """Integer codes >= 0 for several streams of ids, equal ids sharing one code.

    >>> [c.tolist() for c in factorize([(lambda: iter(["x", "y", "x"]), 3),
    ...                                 (lambda: iter(["y"]), 1)])]
    [[0, 1, 0], [1]]
    >>> [c.tolist() for c in factorize([(lambda: iter([-5, 7]), 2)])]
    [[0, 12]]
    """
    integers = [_as_int64(ids, size) for ids, size in streams]
    if all(codes is not None for codes in integers):
        return _shift_non_negative(integers)  # type: ignore[arg-type]
    vocabulary: dict[Any, int] = {}
    next_code = count()  # codes are first-seen positions: unique, not necessarily dense
    return [
        np.fromiter(
            map(vocabulary.setdefault, _iterate(ids), next_code), dtype=np.int64, count=size
        )
        for ids, size in streams
    ]


def dense_codes(streams: list[_Ids]) -> tuple[list[np.ndarray], int]:
    """Like :func:`factorize` but codes are ``0..n_distinct-1``; returns the count too."""
    codes = factorize(streams)
    if not codes:
        return [], 0
    vocabulary, inverse = np.unique(np.concatenate(codes), return_inverse=True)
    return split_codes(inverse.astype(np.int64), [c.size for c in codes]), vocabulary.size


def distinct(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort: several times faster than ``np.unique``'s hashing
    on millions of int64 keys).

    >>> distinct(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    keys = np.sort(keys)
    return keys[np.r_[True, keys[1:] != keys[:-1]]] if keys.size else keys


def split_codes(codes: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """The codes of several streams encoded back to back, one array per stream.

    >>> [c.tolist() for c in split_codes(np.array([0, 1, 0, 2]), [3, 0, 1])]
    [[0, 1, 0], [], [2]]
    """
    if sum(sizes) != codes.size:
        raise ValueError(f"stream sizes add up to {sum(sizes)}, but {codes.size} codes given")
    return np.split(codes, np.cumsum(sizes)[:-1]) if len(sizes) else []


def renumber(codes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Codes renumbered in the order of their ids: ``order`` lists a vocabulary's codes
    sorted by id (an argsort of the vocabulary); code ``order[r]`` becomes ``r``. Missing
    codes (-1) stay -1.

    >>> renumber(np.array([0, 1, 2, -1, 0]), order=np.array([2, 0, 1])).tolist()
    [1, 2, 0, -1, 1]
    """
    rank = np.empty(order.size + 1, dtype=np.int64)
    rank[order] = np.arange(order.size, dtype=np.int64)
    rank[-1] = -1  # code -1 indexes the last slot
    return rank[codes]


def remap(codes: np.ndarray, mapping: np.ndarray) -> np.ndarray:
    """Codes of one vocabulary in another's code space: code ``c`` becomes ``mapping[c]``;
    missing codes (-1) stay -1.

    >>> remap(np.array([1, -1, 0]), mapping=np.array([7, 4])).tolist()
    [4, -1, 7]
    """
    return np.append(mapping.astype(np.int64, copy=False), -1)[codes]


def _shift_non_negative(arrays: list[np.ndarray]) -> list[np.ndarray]:
    low = min((int(a.min()) for a in arrays if a.size), default=0)
    if low >= 0:
        return arrays
    high = max(int(a.max()) for a in arrays if a.size)
    if high - low < 2**62:
        return [a - low for a in arrays]
    _, inverse = np.unique(np.concatenate(arrays), return_inverse=True)
    return split_codes(inverse.astype(np.int64), [a.size for a in arrays])


def _as_int64(ids: Callable[[], Iterable[Any]] | np.ndarray, size: int) -> np.ndarray | None:
    """The ids as int64 if every one is an integer (bools count as 0/1), else None."""
    if isinstance(ids, np.ndarray):
        if ids.dtype.kind in "ib" or (ids.dtype.kind == "u" and ids.itemsize < 8):
            return ids.astype(np.int64, copy=False)
        if ids.dtype.kind == "u" and (ids.size == 0 or ids.max() < 2**63):
            return ids.astype(np.int64)
        return None
    try:
        # operator.index refuses 3.5 (fromiter alone would truncate it to 3).
        return np.fromiter(map(operator.index, ids()), dtype=np.int64, count=size)
    except (TypeError, ValueError, OverflowError):
        return None


def _iterate(ids: Callable[[], Iterable[Any]] | np.ndarray) -> Iterable[Any]:
    return ids.tolist() if isinstance(ids, np.ndarray) else ids()


def _as_sequence(values: Any, name: str) -> Any:
    if isinstance(values, Mapping):
        raise ValueError(
            f"{name} must be a sequence with one entry per list, not a mapping; "
            f"e.g. [{name}_by_user[u] for u in users]"
        )
    if isinstance(values, str | bytes):
        raise ValueError(f"{name} must be a sequence of lists, not a string")
    if isinstance(values, np.ndarray):
        return values
    return values if hasattr(values, "__len__") else list(values)


def _flatten(
    lists: Any, name: str, kinds: set[type] | None = None
) -> tuple[_Ids, np.ndarray]:
    """The ids of all lists back to back, and the length of each list."""
    if isinstance(lists, np.ndarray) and lists.ndim == 2 and lists.dtype != object:
        lengths = np.full(lists.shape[0], lists.shape[1], dtype=np.int64)
        return (lists.reshape(-1), lists.size), lengths
    packed = _int32_lists(lists)
    if packed is not None:
        ids, lengths = packed
        return (ids, ids.size), lengths
    _refuse_strings(lists, name, kinds)
    try:
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    except TypeError:
        bad = next(i for i, entry in enumerate(lists) if not hasattr(entry, "__len__"))
        raise ValueError(
            f"{name}[{bad}] is {lists[bad]!r}: each entry must be a list of item ids"
        ) from None
    return (lambda: chain.from_iterable(lists), int(lengths.sum())), lengths


# marshal's record types (format version 2: no back-references, 32-bit sizes).
_MARSHAL_LIST = ord("[")
_MARSHAL_INT = ord("i")
_MARSHAL_RECORD = 5  # a type byte and an int32 (a list's length, or an int's value)


def _int32_lists(lists: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(the ids back to back as int64, each list's length) when ``lists`` is a list of
    lists of Python ints in the int32 range; ``None`` otherwise.

    The standard library's C serialiser (``marshal``, format version 2) writes such a
    list as 5-byte records: ``[`` and the length for the outer list and each inner one,
    ``i`` and the value (little-endian int32) for each int; numpy reads the records as
    arrays. That is about 1.6x faster than iterating the ids (10M ids: ~0.2 s against
    ~0.32 s), and the length and type checks come with it. The layout is checked whole:
    the outer header, then each list's header followed by exactly its length in ints.
    Anything else (a bool, a larger int, a float, a string, a tuple, a nested list)
    writes another record type or breaks the layout, and the caller takes the general
    path: the result is exact or ``None``.

    >>> ids, lengths = _int32_lists([[5, -1, 7], [], [2**31 - 1]])
    >>> ids.tolist(), lengths.tolist()
    ([5, -1, 7, 2147483647], [3, 0, 1])
    >>> _int32_lists([[1, 2.0]]) is None, _int32_lists([[2**31]]) is None
    (True, True)
    """
    if type(lists) is not list or not lists or type(lists[0]) is not list:
        return None
    if lists[0] and type(lists[0][0]) is not int:
        return None  # another kind of id: not worth serialising to find out
    try:
        raw = marshal.dumps(lists, 2)
    except ValueError:  # an object marshal cannot write (a numpy int, a custom id)
        return None
    n_records, rest = divmod(len(raw), _MARSHAL_RECORD)
    if rest:
        return None
    kind = np.frombuffer(raw, dtype=np.uint8)[::_MARSHAL_RECORD]
    value = np.ndarray(
        (n_records,), dtype="<i4", buffer=raw, offset=1, strides=(_MARSHAL_RECORD,)
    )
    is_id = kind == _MARSHAL_INT
    headers = np.flatnonzero(~is_id)
    if headers.size != len(lists) + 1 or np.any(kind[headers] != _MARSHAL_LIST):
        return None
    starts = headers[1:]
    lengths = value[starts].astype(np.int64)
    ends = starts + 1 + lengths
    if starts[0] != 1 or ends[-1] != n_records or np.any(starts[1:] != ends[:-1]):
        return None
    return value[is_id].astype(np.int64), lengths


def _flatten_relevance(relevant: Any) -> tuple[_Ids, np.ndarray, np.ndarray | None]:
    """Relevant ids back to back, counts per list, and grades (None if all binary)."""
    if isinstance(relevant, np.ndarray) and relevant.ndim == 2 and relevant.dtype != object:
        ids, lengths = _flatten(relevant, "relevant")
        return ids, lengths, None
    kinds = set(map(type, relevant))
    ids, lengths = _flatten(relevant, "relevant", kinds)
    graded = {kind for kind in kinds if issubclass(kind, Mapping)}
    if not graded:
        return ids, lengths, None
    if graded == kinds:
        values = chain.from_iterable(map(operator.methodcaller("values"), relevant))
    else:
        values = chain.from_iterable(
            entry.values() if isinstance(entry, Mapping) else repeat(1.0, len(entry))
            for entry in relevant
        )
    total = int(lengths.sum())
    try:
        grades = np.fromiter(values, dtype=np.float64, count=total)
    except (TypeError, ValueError):
        raise ValueError("relevant: grades must be numbers >= 0 (0 = not relevant)") from None
    try:
        check_grades(grades, "grades")
    except ValueError:
        _raise_bad_grade(relevant, grades, lengths)
    return ids, lengths, grades


def _raise_bad_grade(relevant: Any, grades: np.ndarray, lengths: np.ndarray) -> None:
    index = int(np.flatnonzero(~(np.isfinite(grades) & (grades >= 0)))[0])
    row = int(np.searchsorted(np.cumsum(lengths), index, side="right"))
    offset = index - int(lengths[:row].sum())
    entry = relevant[row]
    item = list(entry)[offset]
    grade = entry[item] if isinstance(entry, Mapping) else float(grades[index])
    raise ValueError(
        f"relevant[{row}] gives item {item!r} the grade {grade!r}; grades must be "
        "finite and >= 0 (0 = not relevant)"
    )


def _refuse_strings(lists: Any, name: str, kinds: set[type] | None = None) -> None:
    kinds = set(map(type, lists)) if kinds is None else kinds
    for kind in kinds:
        if issubclass(kind, str | bytes) or kind is type(None):
            bad = next(i for i, entry in enumerate(lists) if type(entry) is kind)
            raise ValueError(
                f"{name}[{bad}] is {lists[bad]!r}: each entry must be a collection of item "
                f"ids (e.g. [{lists[bad]!r}] for a single id, [] for none)"
            )
