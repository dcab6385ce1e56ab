"""Item ids of any hashable kind give the same values; malformed input is refused clearly."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from tracker import metrics

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
