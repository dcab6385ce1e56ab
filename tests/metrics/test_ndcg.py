"""ndcg: DCG of the classic graded list worked by hand, ideal lists, gains, edge cases."""

from __future__ import annotations

import importlib
from math import log2

import numpy as np
import pytest

from tests.metrics import reference
from tracker import metrics

ndcg_module = importlib.import_module("tracker.metrics.ndcg")  # the package's ndcg is the function

# the relevance list [3, 2, 3, 0, 0, 1, 2, 2, 3, 0]: items r0..r9 served in that order
GRADES = [3, 2, 3, 0, 0, 1, 2, 2, 3, 0]
SERVED = [f"r{i}" for i in range(10)]
TRUTH = {item: g for item, g in zip(SERVED, GRADES, strict=True) if g > 0}

# DCG@k = sum over ranks i <= k of rel_i / log2(i + 1), written out rank by rank
DCG = {
    1: 3 / log2(2),
    2: 3 / log2(2) + 2 / log2(3),
    3: 3 / log2(2) + 2 / log2(3) + 3 / log2(4),
    6: 3 / log2(2) + 2 / log2(3) + 3 / log2(4) + 1 / log2(7),
    10: 3 / log2(2) + 2 / log2(3) + 3 / log2(4) + 1 / log2(7) + 2 / log2(8) + 2 / log2(9)
    + 3 / log2(10),
}
# the ideal order of all grades in G: 3, 3, 3, 2, 2, 2, 1
IDCG = {
    1: 3 / log2(2),
    2: 3 / log2(2) + 3 / log2(3),
    3: 3 / log2(2) + 3 / log2(3) + 3 / log2(4),
    6: 3 / log2(2) + 3 / log2(3) + 3 / log2(4) + 2 / log2(5) + 2 / log2(6) + 2 / log2(7),
    10: 3 / log2(2) + 3 / log2(3) + 3 / log2(4) + 2 / log2(5) + 2 / log2(6) + 2 / log2(7)
    + 1 / log2(8),
}


def one(served, truth, k, gain="linear") -> float:
    return float(metrics.ndcg([served], [truth], k, gain=gain)[0])


def test_the_worked_dcg_values():
    assert DCG[1] == 3
    assert DCG[2] == pytest.approx(4.2619, abs=1e-4)  # 3 + 1.26186
    assert DCG[3] == pytest.approx(5.7619, abs=1e-4)
    assert DCG[6] == pytest.approx(6.1181, abs=1e-4)
    assert DCG[10] == pytest.approx(8.3188, abs=1e-4)
    assert IDCG[10] == pytest.approx(9.0736, abs=1e-4)


@pytest.mark.parametrize("k", sorted(DCG))
def test_ndcg_of_the_classic_graded_list(k):
    assert one(SERVED, TRUTH, k) == pytest.approx(DCG[k] / IDCG[k], rel=1e-12)


def test_ndcg_at_1_and_2():
    assert one(SERVED, TRUTH, 1) == 1.0  # 3 / 3
    assert one(SERVED, TRUTH, 2) == pytest.approx(0.8710, abs=1e-4)  # 4.2619 / 4.8928


def test_exponential_gain():
    # gains 2^rel - 1 = 7, 3, 7, 0, 0, 1, 3, 3, 7, 0; ideal 7, 7, 7, 3, 3, 3, 1
    dcg3 = 7 / log2(2) + 3 / log2(3) + 7 / log2(4)
    idcg3 = 7 / log2(2) + 7 / log2(3) + 7 / log2(4)
    assert one(SERVED, TRUTH, 3, "exponential") == pytest.approx(dcg3 / idcg3, rel=1e-12)


def test_the_ideal_list_holds_relevant_items_that_were_not_served():
    # served [a, x], G = {a, b}: DCG@2 = 1; IDCG@2 = 1 + 1/log2(3), not 1
    assert one(["a", "x"], {"a", "b"}, 2) == pytest.approx(1 / (1 + 1 / log2(3)))
    # graded: the unserved b (grade 3) leads the ideal list
    assert one(["a", "x"], {"a": 1, "b": 3}, 2) == pytest.approx(1 / (3 + 1 / log2(3)))


def test_binary_relevance_is_grade_1_under_both_gains():
    # [x, a], G = {a}: DCG = 1/log2(3), IDCG = 1
    for gain in ("linear", "exponential"):
        assert one(["x", "a"], {"a"}, 2, gain) == pytest.approx(1 / log2(3))
        assert one(["x", "a"], {"a": 1}, 2, gain) == pytest.approx(1 / log2(3))


def test_a_repeated_item_gains_only_at_its_first_position():
    # [x, a, a], G = {a}: DCG@3 = 1/log2(3) (the copy at rank 3 gains 0), IDCG@3 = 1
    assert one(["x", "a", "a"], {"a"}, 3) == pytest.approx(1 / log2(3))
    assert one(["a", "a"], {"a": 2, "b": 1}, 2) == pytest.approx(2 / (2 + 1 / log2(3)))


def test_k_beyond_the_list_scores_the_list_against_the_ideal_cut_at_k():
    # [a], G = {a, b}, k = 5: DCG = 1, IDCG@5 = 1 + 1/log2(3)
    assert one(["a"], {"a", "b"}, 5) == pytest.approx(1 / (1 + 1 / log2(3)))


@pytest.mark.parametrize("truth", [set(), {"a": 0}], ids=["empty", "only-grade-0"])
def test_empty_ground_truth_scores_0_not_nan(truth):
    assert one(["a", "b"], truth, 2) == 0.0
    assert one(["a", "b"], truth, 2, "exponential") == 0.0


def test_empty_list_scores_0():
    assert one([], {"a"}, 3) == 0.0


def test_unknown_gain_or_k_below_1_is_refused():
    with pytest.raises(ValueError, match="gain"):
        one(["a"], {"a"}, 1, "log")
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        one(["a"], {"a"}, 0)


@pytest.mark.parametrize("waste", [0, 10**9], ids=["one-global-sort", "sorted-rows"])
def test_both_ways_of_sorting_the_ideal_grades_agree_with_the_reference(waste, monkeypatch):
    monkeypatch.setattr(ndcg_module, "IDEAL_MATRIX_WASTE", waste)
    rng = np.random.default_rng(5)
    served = [list(rng.integers(0, 20, rng.integers(0, 8))) for _ in range(60)]
    truth = [dict(zip(rng.integers(0, 20, 6).tolist(), rng.integers(0, 4, 6).tolist(),
                      strict=True)) for _ in range(60)]
    truth[0] = {i: 1 + i % 3 for i in range(20)}  # one list with many grades
    for gain in ("linear", "exponential"):
        for k in (1, 4, 30):
            expected = [reference.ndcg(r, t, k, gain) for r, t in zip(served, truth, strict=True)]
            np.testing.assert_allclose(metrics.ndcg(served, truth, k, gain=gain), expected,
                                       rtol=0, atol=1e-12)


def test_a_huge_k_costs_no_more_than_the_lists():
    # [x, a], G = {a, b}: DCG = 1/log2(3), IDCG = 1 + 1/log2(3) at any k >= 2
    expected = (1 / log2(3)) / (1 + 1 / log2(3))
    assert one(["x", "a"], {"a", "b"}, 10**12) == pytest.approx(expected)
    assert one(["x", "a"], {"a": 1, "b": 1, "c": 0}, 10**12, "exponential") == \
        pytest.approx(expected)
    # graded, G = {a: 2, b: 1}: DCG = 2/log2(3), IDCG = 2 + 1/log2(3)
    assert one(["x", "a"], {"a": 2, "b": 1}, 10**12) == pytest.approx(
        (2 / log2(3)) / (2 + 1 / log2(3)))
