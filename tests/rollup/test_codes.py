"""The day's shared codes (Vocabulary), chunk totals added up by code, and the interactions
of a chunk's users: the pieces that let a day's chunks be scored apart and added up."""

from __future__ import annotations

import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.rollup.aggregate import (
    CodedSums,
    CodedTotals,
    UnitTotals,
    totals_of_coded,
    totals_of_parts,
)
from tracker.rollup.codes import Vocabulary, encode, sorted_codes
from tracker.rollup.columnar import Interactions
from tracker.rollup.exposure import Exposure

ids = st.lists(st.sampled_from(["a", "b", "é", "", "a b", "🎵", "x\x1fy"]), max_size=30)


@settings(max_examples=100, deadline=None)
@given(batches=st.lists(ids, max_size=6))
def test_vocabulary_codes_mean_the_same_ids_across_batches(batches):
    vocabulary = Vocabulary()
    for batch in batches:
        (codes,) = vocabulary.encode([pa.array(batch, type=pa.string())])
        assert vocabulary.ids.take(pa.array(codes, type=pa.int64())).to_pylist() == batch
    seen = [i for batch in batches for i in batch]
    assert sorted(vocabulary.ids.to_pylist()) == sorted(set(seen))  # each id once


def test_vocabulary_shared_by_threads_gives_one_code_per_id():
    rng = np.random.default_rng(3)
    batches = [pa.array([f"u{n}" for n in rng.integers(0, 500, 2_000)]) for _ in range(24)]
    vocabulary = Vocabulary()
    with ThreadPoolExecutor(4) as pool:
        coded = list(pool.map(lambda b: vocabulary.encode([b])[0], batches))
    assert len(vocabulary) == len(set(vocabulary.ids.to_pylist()))
    for batch, codes in zip(batches, coded, strict=True):
        assert vocabulary.ids.take(pa.array(codes)).to_pylist() == batch.to_pylist()


def test_vocabulary_looks_known_ids_up_and_codes_new_ones_in_order_of_arrival():
    vocabulary = Vocabulary()
    assert [c.tolist() for c in vocabulary.encode([pa.array(["a", "b"])])] == [[0, 1]]
    codes = vocabulary.encode([pa.array(["c", "a", None, "d"]),
                               pa.chunked_array([["d", None], ["e", "b"]])])
    assert [c.tolist() for c in codes] == [[2, 0, -1, 3], [3, -1, 4, 1]]
    assert vocabulary.ids.to_pylist() == ["a", "b", "c", "d", "e"]
    assert [c.tolist() for c in vocabulary.encode([pa.array(["e", "a"])])] == [[4, 0]]


def test_encode_keeps_nulls_apart():
    (codes,), dictionary = encode([pa.array(["x", None, "x"])])
    assert codes.tolist() == [0, -1, 0] and dictionary.to_pylist() == ["x"]


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n_parts=st.integers(1, 4))
def test_totals_added_by_code_equal_totals_added_by_id(data, n_parts):
    names = [f"user-{n}" for n in range(7)] + ["é", "Z", ""]
    vocabulary = Vocabulary()
    parts, by_id = [], []
    for _ in range(n_parts):
        rows = data.draw(st.integers(0, 6))
        users = data.draw(st.lists(st.sampled_from(names), min_size=rows, max_size=rows))
        arms = np.array(data.draw(st.lists(st.sampled_from([3, 5]), min_size=rows,
                                           max_size=rows)), dtype=np.int64)
        sums = np.array(data.draw(st.lists(st.floats(0, 5), min_size=2 * rows,
                                           max_size=2 * rows))).reshape(rows, 2)
        counts = np.ones((rows, 2))
        impressions = np.ones(rows, dtype=np.int64)
        (codes,) = vocabulary.encode([pa.array(users, type=pa.string())])
        parts.append(CodedTotals(codes, arms, impressions, np.asfortranarray(sums),
                                 np.asfortranarray(counts)))
        by_id.append(UnitTotals(pa.array(users, pa.string()), arms, impressions, sums,
                                counts))
    got = totals_of_parts(parts, vocabulary.ids, 2)
    want = UnitTotals.concat(by_id, 2).reduce()
    assert got.users.tolist() == want.users.tolist()
    assert got.cells.tolist() == want.cells.tolist()
    assert got.impressions.tolist() == want.impressions.tolist()
    np.testing.assert_allclose(got.sums, want.sums, rtol=1e-12)
    np.testing.assert_allclose(got.counts, want.counts, rtol=1e-12)
    assert got.users.tolist() == sorted(got.users.tolist(), key=lambda u: u.encode())


def _chunk_totals(rng: np.random.Generator, users: int, rows: int) -> CodedTotals:
    """One chunk's totals: each (user code, arm) once, values of many magnitudes."""
    keys = rng.choice(users * 3, size=min(rows, users * 3), replace=False)
    sums = rng.standard_normal((keys.size, 3)) * 10.0 ** rng.integers(-8, 8, (keys.size, 3))
    counts = rng.integers(0, 4, (keys.size, 3)).astype(float)
    return CodedTotals(keys // 3, np.array([7, 2, 11])[keys % 3],
                       rng.integers(1, 9, keys.size), np.asfortranarray(sums),
                       np.asfortranarray(counts))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), chunks=st.integers(1, 9), users=st.integers(1, 40))
def test_sums_added_in_place_equal_the_merge_of_the_chunks_to_the_bit(seed, chunks, users):
    rng = np.random.default_rng(seed)
    parts = [_chunk_totals(rng, users, int(rng.integers(0, 60))) for _ in range(chunks)]
    in_place = CodedSums(3)
    for part in parts:
        in_place.add(part)
    names = pa.array([f"u{n}" for n in range(users)])
    if not in_place.size:
        assert all(p.users.size == 0 for p in parts)
        return
    got = totals_of_coded(in_place.totals(), names)
    want = totals_of_parts(parts, names, 3)
    assert got.users.equals(want.users)
    assert got.cells.tolist() == want.cells.tolist()
    assert got.impressions.tolist() == want.impressions.tolist()
    assert np.array_equal(got.sums, want.sums) and np.array_equal(got.counts, want.counts)


def test_what_is_derived_from_totals_is_computed_once_and_not_pickled():
    totals = UnitTotals(pa.array(["a", "b"]), np.array([1, 1]), np.array([1, 2]),
                        np.ones((2, 1)), np.ones((2, 1)))
    calls = []
    for _ in range(2):
        assert totals.derived(("x",), lambda: calls.append(1) or memoryview(b"v")) == b"v"
    assert calls == [1]
    copy = pickle.loads(pickle.dumps(totals))  # a memoryview does not pickle
    assert copy.users.equals(totals.users) and copy.sums.tolist() == totals.sums.tolist()
    assert copy.derived(("x",), lambda: "again") == "again"


def test_another_key_is_derived_while_one_is_being_computed_and_a_key_only_once():
    totals = UnitTotals(pa.array(["a"]), np.array([1]), np.array([1]), np.ones((1, 1)),
                        np.ones((1, 1)))
    started, other_done = threading.Event(), threading.Event()
    calls = []

    def slow():  # waits, holding its key, until the other key was derived
        calls.append("slow")
        started.set()
        return other_done.wait(timeout=10)

    with ThreadPoolExecutor(max_workers=3) as pool:
        first = pool.submit(totals.derived, ("slow",), slow)
        started.wait(timeout=10)
        again = pool.submit(totals.derived, ("slow",), slow)  # waits for the first
        assert totals.derived(("fast",), lambda: "fast") == "fast"  # not blocked
        other_done.set()
        assert first.result(timeout=10) is True and again.result(timeout=10) is True
    assert calls == ["slow"]


def test_sorted_codes_sort_ids_as_utf8_bytes():
    uniques, codes = sorted_codes(pa.array(["b", "é", "a", "b", "Z"]))
    assert uniques.to_pylist() == ["Z", "a", "b", "é"] and codes.tolist() == [2, 3, 1, 2, 0]


_ITEM = st.text(alphabet=st.sampled_from("aZé😀b"), max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(_ITEM, st.integers(0, 5)), max_size=8), min_size=1,
                max_size=4))
def test_exposures_merged_in_any_order_count_each_item_once_in_byte_order(days):
    """An exposure is its items' counts summed, its items sorted as UTF-8 bytes, whichever
    order the days are added in (a cumulative view adds them as they come)."""
    exposures = [Exposure.of([item for item, _ in day],
                             np.array([n for _, n in day], dtype=np.int64).reshape(-1, 1))
                 for day in days]
    expected: dict[str, int] = {}
    for day in days:
        for item, n in day:
            expected[item] = expected.get(item, 0) + n
    order = sorted(expected, key=lambda item: item.encode())
    for merged in (sum(exposures[1:], exposures[0]), sum(exposures[-2::-1], exposures[-1])):
        assert merged.items.to_pylist() == order
        assert merged.counts[:, 0].tolist() == [expected[item] for item in order]


def test_interactions_keep_positive_grades_and_select_a_chunks_users():
    users = Vocabulary()
    table = pa.table({"user": ["u1", "u2", "u1", "u3"], "item": ["a", "b", "c", "d"],
                      "event": ["click", "view", "save", "click"],
                      "at": pa.array([1, 2, 3, 4], type=pa.int64())})
    interactions = Interactions.of(table, {"click": 1, "save": 2, "view": 0}, users)
    assert interactions.items.to_pylist() == ["a", "c", "d"]  # the view has grade 0
    assert interactions.grades.tolist() == [1.0, 2.0, 1.0]
    present = np.zeros(len(users) + 2, dtype=bool)  # longer: users of later chunks
    present[users.encode([pa.array(["u1"])])[0]] = True
    mine = interactions.of_users(present)
    assert mine.items.to_pylist() == ["a", "c"] and mine.at.tolist() == [1, 3]
    short = np.zeros(1, dtype=bool)  # a user coded after the array was sized is not in it
    assert interactions.of_users(short).items.to_pylist() == []


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(0, 40), max_size=4))
def test_totals_added_without_stacking_equal_rows_added_one_by_one_to_the_bit(seed, sizes):
    """``UnitTotals.added`` (the cumulative pass adds the running totals and a day's this
    way) and ``reduce``: per (user, arm), from 0 and in the order of the rows, as a plain
    Python loop adds them (``bincount``'s order), values of many magnitudes."""
    rng = np.random.default_rng(seed)
    parts = []
    for rows in sizes:
        sums = rng.standard_normal((rows, 3)) * 10.0 ** rng.integers(-8, 8, (rows, 3))
        counts = rng.integers(0, 4, (rows, 3)).astype(float)
        parts.append(UnitTotals(pa.array([f"u{u}" for u in rng.integers(0, 12, rows)],
                                         pa.string()),
                                rng.choice([4, 2, 9], rows).astype(np.int64),
                                rng.integers(1, 9, rows), np.asfortranarray(sums),
                                np.asfortranarray(counts)))
    want: dict[tuple[bytes, int], list] = {}
    for part in parts:
        for i, user in enumerate(part.users.to_pylist()):
            row = want.setdefault((user.encode(), int(part.cells[i])), [0, [0.0] * 3, [0.0] * 3])
            row[0] += int(part.impressions[i])
            for j in range(3):
                row[1][j] += float(part.sums[i, j])
                row[2][j] += float(part.counts[i, j])
    expected = sorted(want.items())
    for got in (UnitTotals.added(parts, 3), UnitTotals.concat(parts, 3).reduce()):
        assert [(u.encode(), a) for u, a in zip(got.users.to_pylist(), got.cells.tolist(),
                                                 strict=True)] == [k for k, _ in expected]
        assert got.impressions.tolist() == [v[0] for _, v in expected]
        assert got.sums.tolist() == [v[1] for _, v in expected]
        assert got.counts.tolist() == [v[2] for _, v in expected]
        assert got.sums.flags.f_contiguous and got.counts.flags.f_contiguous
