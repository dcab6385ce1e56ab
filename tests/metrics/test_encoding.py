"""Item ids of any hashable kind give the same values; malformed input is refused clearly."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker import metrics
from tracker.metrics import encoding

SERVED = [[1, 2, 3, 4], [5, 6], [7, 1, 7]]
TRUTH = [{3: 2, 9: 1}, {5: 1}, {7: 3, 1: 0}]


def relabel(fn):
    served = [[fn(i) for i in row] for row in SERVED]
    truth = [{fn(i): g for i, g in row.items()} for row in TRUTH]
    return served, truth


KINDS = {
    "str": str,
    "tuple": lambda i: ("item", i),
    "uuid": lambda i: uuid.UUID(int=i),
    "negative-int": lambda i: -i,
    "huge-int": lambda i: 2**62 + i,
    "beyond-int64": lambda i: 2**70 + i,
    "numpy-int": np.int64,
    "float": lambda i: i + 0.5,
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_values_do_not_depend_on_the_kind_of_id(kind):
    expected = metrics.evaluate_encoded(
        metrics.encode(SERVED, TRUTH), ["ndcg@3", "map@3", "mrr@3", "recall@2", "roc_auc@3"]
    )
    served, truth = relabel(KINDS[kind])
    got = metrics.evaluate_encoded(metrics.encode(served, truth), list(expected))
    for name, values in expected.items():
        np.testing.assert_array_equal(got[name], values, err_msg=name)


def test_ids_equal_in_python_are_one_item_and_3_5_is_not_3():
    assert metrics.hit_rate([[1.0]], [{1}], 1).tolist() == [1.0]  # 1 == 1.0
    assert metrics.hit_rate([[3.5]], [{3}], 1).tolist() == [0.0]  # never truncated
    assert metrics.hit_rate([[np.int32(4)]], [{4}], 1).tolist() == [1.0]


def test_numpy_arrays_and_generators_are_accepted():
    served = np.array([[1, 2, 3], [4, 5, 6]])
    truth = np.array([[3, 9], [4, 9]])  # binary relevance, one row per list
    np.testing.assert_allclose(metrics.mrr(served, truth, 3), [1 / 3, 1])
    np.testing.assert_allclose(
        metrics.mrr((row for row in served.tolist()), (set(r) for r in truth.tolist()), 3),
        [1 / 3, 1])


def test_sets_and_mappings_can_be_mixed_across_lists():
    got = metrics.ndcg([["a", "b"], ["c", "d"]], [{"b"}, {"c": 2, "d": 0}], 2)
    np.testing.assert_allclose(got, [1 / np.log2(3), 1.0])


def test_encode_lays_out_codes_and_grades():
    lists = metrics.encode([["a", "b", "c"], ["d"]], [{"b"}, {"d": 2.0, "z": 1.0}], depth=2)
    assert lists.items.shape == (2, 2)
    assert lists.items[1, 1] == -1  # padding after the 1-item list
    assert lists.truth_row.tolist() == [0, 1, 1]
    assert lists.truth_grade.tolist() == [1.0, 2.0, 1.0]


@pytest.mark.parametrize(("served", "truth", "match"), [
    pytest.param([["a"], ["b"]], [{"a"}], "2 lists but relevant has 1",
                 id="one-relevance-entry-per-list"),
    pytest.param([["a"]], ["a"], r"relevant\[0\] is 'a'", id="a-bare-string-is-not-a-set"),
    pytest.param(["ab"], [{"a"}], r"recommended\[0\] is 'ab'", id="a-string-is-not-a-list"),
    pytest.param([["a"]], [None], r"relevant\[0\] is None", id="none-is-not-a-set"),
    pytest.param([["a"]], [5], r"relevant\[0\] is 5", id="an-int-is-not-a-set"),
    pytest.param({"u1": ["a"]}, [{"a"}], "not a mapping", id="lists-keyed-by-user"),
    pytest.param("abc", [{"a"}], "not a string", id="a-string-of-lists"),
    pytest.param([["a"]], [{"a": -1}], r"relevant\[0\] gives item 'a' the grade -1",
                 id="negative-grade"),
    pytest.param([["a"]], [{"a": float("nan")}], "finite", id="nan-grade"),
    pytest.param([["a"]], [{"a": "high"}], "grades must be numbers", id="text-grade"),
])
def test_malformed_input_is_refused_with_a_clear_message(served, truth, match):
    with pytest.raises(ValueError, match=match):
        metrics.precision(served, truth, 1)


def test_no_lists_gives_empty_arrays():
    assert metrics.ndcg([], [], 5).shape == (0,)
    assert metrics.song_clicks([], []).shape == (0,)


# ------------------------------------------------ lists of small ints, read through marshal

def flatten_by_hand(lists):
    return [i for row in lists for i in row], [len(row) for row in lists]


@pytest.mark.parametrize("lists", [
    pytest.param([[5, -1, 7], [], [2**31 - 1, -(2**31)]], id="int32-range-and-an-empty-list"),
    pytest.param([[]], id="one-empty-list"),
    pytest.param([list(range(1000))] * 3, id="the-same-list-object-three-times"),
])
def test_lists_of_small_ints_are_read_exactly(lists):
    ids, lengths = encoding._int32_lists(lists)
    assert (ids.tolist(), lengths.tolist()) == flatten_by_hand(lists)
    assert ids.dtype == np.int64


@pytest.mark.parametrize("lists", [
    pytest.param([[1, 2**31]], id="beyond-int32"),
    pytest.param([[1, True]], id="a-bool"),
    pytest.param([[1, 2.0]], id="a-float-equal-to-an-int"),
    pytest.param([[1, "2"]], id="a-digit-string"),
    pytest.param([[1, np.int64(2)]], id="a-numpy-int"),
    pytest.param([[1], (2, 3)], id="a-tuple-among-lists"),
    pytest.param([[1, [2]]], id="a-nested-list"),
    pytest.param([[1], 3, [[1]]], id="an-int-and-a-nested-list-that-balance-the-count"),
    pytest.param([["a", "b"]], id="string-ids"),
    pytest.param([], id="no-lists"),
])
def test_anything_but_lists_of_small_ints_takes_the_general_path(lists):
    assert encoding._int32_lists(lists) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(
    st.integers(-(2**31), 2**31 - 1), st.integers(-(2**40), 2**40), st.booleans(),
    st.floats(allow_nan=False), st.text(max_size=2)), max_size=6), min_size=1, max_size=8))
def test_the_marshal_reader_is_exact_or_declines(lists):
    packed = encoding._int32_lists(lists)
    plain = all(type(i) is int and -(2**31) <= i < 2**31 for row in lists for i in row)
    assert (packed is not None) == plain
    if packed is not None:
        assert (packed[0].tolist(), packed[1].tolist()) == flatten_by_hand(lists)


def test_int_lists_read_through_marshal_score_as_the_general_path_does():
    rng = np.random.default_rng(5)
    served = rng.integers(0, 50, size=(300, 12)).tolist()
    served[7] = served[7][:3]  # ragged
    truth = [set(rng.integers(0, 50, size=int(rng.integers(0, 8))).tolist()) for _ in served]
    names = ["ndcg@10", "map@5", "mrr@12", "recall@3", "roc_auc@10", "r_precision"]
    fast = metrics.evaluate(served, truth, names)
    general = metrics.evaluate([tuple(row) for row in served], truth, names)  # tuples: no marshal
    assert encoding._int32_lists([tuple(row) for row in served]) is None
    for name in names:
        assert fast[name] == pytest.approx(general[name], abs=1e-12), name


# ------------------------------------------ the numpy steps every encoder shares (codes)

codes_of = st.lists(st.integers(-1, 5), max_size=40).map(lambda c: np.array(c, dtype=np.int64))


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.integers(-(2**62), 2**62), max_size=50))
def test_distinct_is_the_sorted_set_of_the_keys(keys):
    assert encoding.distinct(np.array(keys, dtype=np.int64)).tolist() == sorted(set(keys))


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(0, 5), max_size=6))
def test_split_codes_gives_each_stream_its_codes(sizes):
    streams = [np.arange(n, dtype=np.int64) + 10 * i for i, n in enumerate(sizes)]
    joined = np.concatenate(streams) if streams else np.zeros(0, dtype=np.int64)
    got = encoding.split_codes(joined, sizes)
    assert [g.tolist() for g in got] == [s.tolist() for s in streams]


def test_split_codes_refuses_sizes_that_do_not_add_up():
    with pytest.raises(ValueError, match="stream sizes add up to 2, but 3 codes given"):
        encoding.split_codes(np.array([0, 1, 2]), [1, 1])


@settings(max_examples=100, deadline=None)
@given(vocabulary=st.lists(st.text(max_size=3), min_size=6, max_size=6, unique=True),
       codes=codes_of)
def test_renumbered_codes_compare_as_their_ids_do(vocabulary, codes):
    order = np.array(sorted(range(6), key=vocabulary.__getitem__))
    new = encoding.renumber(codes, order)
    assert np.array_equal(new < 0, codes < 0)  # missing stays missing
    ids = [vocabulary[c] for c in codes.tolist() if c >= 0]
    assert [sorted(vocabulary)[c] for c in new.tolist() if c >= 0] == ids


@settings(max_examples=100, deadline=None)
@given(codes=codes_of, mapping=st.lists(st.integers(0, 99), min_size=6, max_size=6))
def test_remap_moves_codes_into_another_vocabulary_and_keeps_missing(codes, mapping):
    got = encoding.remap(codes, np.array(mapping))
    assert got.tolist() == [mapping[c] if c >= 0 else -1 for c in codes.tolist()]
