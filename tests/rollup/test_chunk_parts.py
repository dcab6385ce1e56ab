"""A provisional day's chunk parts are read back into the arrays that were written, value
for value and dtype for dtype, whatever the chunks' sizes; and the kept day's lists are
matched to new interactions as :func:`~tracker.rollup.columnar.attribute` matches them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.errors import StaleState
from tracker.rollup.chunk_parts import decode_chunks
from tracker.rollup.columnar import PAIR_LIMIT, EncodedLists, attribute
from tracker.rollup.popularity import Popularity
from tracker.rollup.provisional import ProvisionalDay
from tracker.rollup.truth import Truth

CUTOFFS = [2, 5]


def _chunk(rng: np.random.Generator, size: int, items: int, users: int,
           overlap_high: int) -> EncodedLists:
    """``size`` random lists of 0-6 items with a ground truth of 0-3 pairs each (sorted
    by row, one pair per (row, item))."""
    lengths = rng.integers(0, 7, size)
    rows, codes, grades = [], [], []
    for row in range(size):
        picked = np.sort(rng.choice(items, size=int(rng.integers(0, min(3, items) + 1)),
                                    replace=False))
        rows += [row] * picked.size
        codes += picked.tolist()
        grades += rng.integers(1, 4, picked.size).astype(float).tolist()
    return EncodedLists(
        rng.integers(0, 10**9, size), rng.integers(0, users, size), rng.integers(1, 4, size),
        rng.integers(0, 10**12, size), rng.integers(0, items, int(lengths.sum())), lengths,
        rng.integers(0, overlap_high, (size, len(CUTOFFS))).astype(float),
        rng.random(size) < 0.5,
        Truth(np.array(rows, np.int64), np.array(codes, np.int64), np.array(grades)))


def _day(sizes: list[int], seed: int, overlap_high: int = 3) -> ProvisionalDay:
    rng = np.random.default_rng(seed)
    users = pa.array([f"u{i}" for i in range(7)])
    items = pa.array([f"i{i}" for i in range(9)])
    popularity = Popularity(pa.array(["i1", "i4"]), np.array([2, 5]), 9)
    return ProvisionalDay.of([_chunk(rng, n, len(items), len(users), overlap_high)
                              for n in sizes], users, items, popularity)


def _stored_sizes(sizes: list[int]) -> list[int]:
    """The chunk sizes a day's state stores (its parts end with its last non-empty chunk)."""
    while sizes and not sizes[-1]:
        sizes = sizes[:-1]
    return sizes


def _chunk_parts(day: ProvisionalDay) -> list[tuple[bytes, bytes]]:
    data = day.encode(CUTOFFS).data
    count = int(day.chunks.max(initial=-1)) + 1
    return [(bytes(data[2 + 2 * c]), bytes(data[3 + 2 * c])) for c in range(count)]


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 30), min_size=1, max_size=5), seed=st.integers(0, 999),
       wide=st.booleans())
def test_the_chunks_read_back_are_the_arrays_written(sizes, seed, wide):
    day = _day(sizes, seed, overlap_high=200 if wide else 3)  # past 127: int16 overlaps
    lists, counts = decode_chunks(_chunk_parts(day), CUTOFFS)
    written = day.lists
    assert counts.tolist() == _stored_sizes(sizes)
    for name in ("ids", "users", "cells", "served_at", "items", "lengths", "overlap",
                 "has_baseline"):
        got, want = getattr(lists, name), getattr(written, name)
        assert got.dtype == want.dtype, name
        assert np.array_equal(got, want), name
    for name in ("rows", "items", "grades"):
        got, want = getattr(lists.truth, name), getattr(written.truth, name)
        assert got.dtype == want.dtype, name
        assert np.array_equal(got, want), name


@pytest.mark.parametrize("sizes", [[3, 0, 4], [0]], ids=["an-empty-chunk-between-two",
                                                         "no-list-at-all"])
def test_empty_chunks_read_back_empty(sizes):
    day = _day(sizes, seed=1)
    lists, counts = decode_chunks(_chunk_parts(day), CUTOFFS)
    assert counts.tolist() == _stored_sizes(sizes)
    assert lists.size == sum(sizes) and lists.overlap.shape == (sum(sizes), len(CUTOFFS))
    assert lists.truth.rows.size == day.lists.truth.rows.size


def test_truth_rows_that_do_not_match_their_lists_ask_for_a_full_rollup():
    one, other = _chunk_parts(_day([3], seed=2)), _chunk_parts(_day([4], seed=2))
    with pytest.raises(StaleState, match="holds 4 rows for 3 lists"):
        decode_chunks([(one[0][0], other[0][1])], CUTOFFS)


@settings(max_examples=80, deadline=None)
@given(sizes=st.lists(st.integers(1, 25), min_size=1, max_size=3), seed=st.integers(0, 999),
       window=st.one_of(st.integers(0, 10**12), st.sampled_from([2**61, 2**62 + 3])),
       tied=st.booleans())
def test_a_kept_day_matches_new_interactions_as_attribute_does(sizes, seed, window, tied):
    """Windows past 2**60 pack no (user, time) key in an int64: the search falls back."""
    day = _day(sizes, seed)
    rng = np.random.default_rng(seed + 1)
    n = int(rng.integers(0, 40))
    users = [f"u{i}" for i in rng.integers(0, 9, n)]  # u7, u8: users the day never served
    # tied: each interaction at a serving time of the day, or one window after it
    at = rng.choice(np.r_[day.lists.served_at, day.lists.served_at + window], n) if tied \
        else rng.integers(0, 2 * 10**12, n)
    timed = pa.table({"user": pa.array(users, pa.string()), "at": pa.array(at, pa.int64())})
    rows, it = day.pairs(timed, window, limit=PAIR_LIMIT)
    codes = {u: c for c, u in enumerate(day.users.to_pylist())}
    known = np.array([u in codes for u in users], dtype=bool)
    where = np.flatnonzero(known)
    ref_rows, ref_it = attribute(day.lists.users.astype(np.int64), day.lists.served_at,
                                 np.array([codes[u] for u in np.array(users)[known]],
                                          np.int64).reshape(-1), at[known], window)
    assert sorted(zip(rows.tolist(), it.tolist(), strict=True)) == \
        sorted(zip(ref_rows.tolist(), where[ref_it].tolist(), strict=True))
