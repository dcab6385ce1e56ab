"""hit_rate, precision, recall, r_precision: known answers worked by hand, and edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from tracker import metrics

AT_K = [metrics.hit_rate, metrics.precision, metrics.recall]


def test_counts_by_hand_on_one_list():
    served, truth = [["a", "b", "c", "d"]], [{"c", "z"}]  # the only hit is "c", at rank 3
    assert metrics.hit_rate(served, truth, 2).tolist() == [0.0]
    assert metrics.hit_rate(served, truth, 3).tolist() == [1.0]
    assert metrics.precision(served, truth, 3).tolist() == [pytest.approx(1 / 3)]
    assert metrics.precision(served, truth, 4).tolist() == [pytest.approx(1 / 4)]
    assert metrics.recall(served, truth, 2).tolist() == [0.0]
    assert metrics.recall(served, truth, 3).tolist() == [0.5]  # 1 of |G| = 2


def test_one_value_per_list_in_order():
    served = [["a", "b"], ["c", "d"], ["e", "f"]]
    truth = [{"b"}, {"x"}, {"e", "f", "g", "h"}]
    np.testing.assert_allclose(metrics.hit_rate(served, truth, 2), [1, 0, 1])
    np.testing.assert_allclose(metrics.precision(served, truth, 2), [1 / 2, 0, 2 / 2])
    np.testing.assert_allclose(metrics.recall(served, truth, 2), [1 / 1, 0, 2 / 4])
    assert metrics.recall(served, truth, 2).dtype == np.float64


def test_precision_divides_by_k_even_when_the_list_is_shorter():
    # trec_eval's convention: 2 hits in a 2-item list at k = 10 is 2/10, not 2/2
    assert metrics.precision([["a", "b"]], [{"a", "b"}], 10).tolist() == [0.2]


@pytest.mark.parametrize(("served", "truth", "k", "expected"), [
    pytest.param(["a", "a", "b"], {"a"}, 3, (1.0, 1 / 3, 1.0), id="repeat-of-a-hit-is-not-a-hit"),
    pytest.param(["a", "a", "b"], {"a", "b"}, 2, (1.0, 1 / 2, 1 / 2), id="repeat-takes-a-slot"),
    pytest.param(["a", "a", "b"], {"a", "b"}, 3, (1.0, 2 / 3, 2 / 2), id="later-item-still-hits"),
    pytest.param(["x", "x"], {"x"}, 2, (1.0, 1 / 2, 1.0), id="only-the-first-copy-counts"),
])
def test_an_item_repeated_in_a_list_counts_only_at_its_first_position(served, truth, k,
                                                                      expected):
    got = tuple(float(fn([served], [truth], k)[0]) for fn in AT_K)
    assert got == pytest.approx(expected)


def test_graded_relevance_counts_every_positive_grade_and_ignores_grade_0():
    served = [["a", "b", "c"]]
    truth = [{"a": 0, "b": 2.5, "c": 1, "z": 3}]  # G = {b, c, z}: "a" has grade 0
    assert metrics.hit_rate(served, truth, 1).tolist() == [0.0]
    assert metrics.precision(served, truth, 3).tolist() == [pytest.approx(2 / 3)]
    assert metrics.recall(served, truth, 3).tolist() == [pytest.approx(2 / 3)]
    assert metrics.r_precision(served, truth).tolist() == [pytest.approx(2 / 3)]


def test_r_precision_recsys_challenge_2018_example():
    # G = {1, 2, 3, 5, 8, 99}, |G| = 6; the 4 served items [5, 8, 13, 3] are R_6,
    # of which 5, 8 and 3 are relevant: 3 / 6
    truth = [["1", "2", "3", "5", "8", "99"]]
    assert metrics.r_precision([["5", "8", "13", "3"]], truth).tolist() == [0.5]


@pytest.mark.parametrize(("served", "truth", "expected"), [
    pytest.param(["x", "a", "b"], {"a", "b"}, 1 / 2, id="cut-at-|G|-not-at-the-list-end"),
    pytest.param(["a", "b", "x"], {"a", "b"}, 1.0, id="perfect-top-|G|"),
    pytest.param(["a", "a", "b"], {"a", "b"}, 1 / 2, id="over-unique-items"),
    pytest.param(["b"], {"a", "b", "c"}, 1 / 3, id="short-list-keeps-|G|-as-denominator"),
])
def test_r_precision_by_hand(served, truth, expected):
    assert metrics.r_precision([served], [truth]).tolist() == [pytest.approx(expected)]


@pytest.mark.parametrize("truth", [set(), [], {}, {"a": 0, "b": 0}],
                         ids=["empty-set", "empty-list", "empty-mapping", "only-grade-0"])
def test_empty_ground_truth_scores_0_not_nan(truth):
    served = [["a", "b", "c"]]
    for fn in AT_K:
        assert fn(served, [truth], 3).tolist() == [0.0], fn.__name__
    assert metrics.r_precision(served, [truth]).tolist() == [0.0]


def test_an_empty_list_scores_0():
    for fn in AT_K:
        assert fn([[], ["a"]], [{"a"}, {"a"}], 5).tolist() == [0.0, fn([["a"]], [{"a"}], 5)[0]]
    assert metrics.r_precision([[]], [{"a"}]).tolist() == [0.0]


def test_k_beyond_the_list_scores_the_whole_list():
    served, truth = [["a", "b"]], [{"b", "c"}]
    assert metrics.hit_rate(served, truth, 50).tolist() == [1.0]
    assert metrics.recall(served, truth, 50).tolist() == [0.5]
    assert metrics.precision(served, truth, 50).tolist() == [pytest.approx(1 / 50)]


@pytest.mark.parametrize("k", [0, -1, 2.0, 1.5, "3", None, True],
                         ids=["zero", "negative", "float", "fraction", "string", "none", "bool"])
@pytest.mark.parametrize("fn", AT_K, ids=lambda fn: fn.__name__)
def test_k_below_1_or_not_an_integer_is_refused(fn, k):
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        fn([["a"]], [{"a"}], k)


def test_numpy_integer_k_is_accepted():
    assert metrics.precision([["a", "b"]], [{"a"}], np.int64(2)).tolist() == [0.5]
