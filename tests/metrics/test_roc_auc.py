"""roc_auc within the top k: RePlay's documented example and pairs counted by hand."""

from __future__ import annotations

import pytest

from tracker import metrics


def test_replay_documented_example_is_0_75():
    # RePlay's RocAuc docstring: truth {4, 5, 6}; predictions scored 1: .5, 2: .1, 3: .25,
    # 4: .6, 5: .2, 6: .3, 7: 0, i.e. the ranking [4, 1, 6, 3, 5, 2, 7] = R,N,R,N,R,N,N.
    # Non-relevant items and the relevant ones above them: 1 <- 1, 3 <- 2, 2 <- 3, 7 <- 3,
    # so 9 of the 3 x 4 = 12 pairs are ordered relevant-first.
    assert metrics.roc_auc([[4, 1, 6, 3, 5, 2, 7]], [{4, 5, 6}], 7).tolist() == [0.75]


@pytest.mark.parametrize(("served", "truth", "k", "expected"), [
    pytest.param("axby", "ab", 4, 3 / 4, id="R-N-R-N: 3 of 4 pairs"),
    pytest.param("xayb", "ab", 4, 1 / 4, id="N-R-N-R: 1 of 4 pairs"),
    pytest.param("axby", "ab", 3, 1 / 2, id="cut-at-k-3: R-N-R: 1 of 2 pairs"),
    pytest.param("xaby", "ab", 3, 0 / 2, id="N-R-R: no pair in order"),
    pytest.param("abx", "ab", 2, 1.0, id="no-non-relevant-in-top-k-is-1"),
    pytest.param("xya", "a", 2, 0.0, id="no-relevant-in-top-k-is-0"),
    pytest.param("ax", "abc", 2, 1.0, id="unserved-relevant-items-form-no-pairs"),
    pytest.param("aax", "a", 3, 2 / 2, id="a-repeat-is-a-non-relevant-item-after-the-hit"),
    pytest.param("xaa", "a", 3, 1 / 2, id="x-before-a-and-the-copy-after-it"),
    pytest.param("ab", "ab", 10, 1.0, id="k-beyond-the-list"),
])
def test_roc_auc_pairs_by_hand(served, truth, k, expected):
    assert metrics.roc_auc([list(served)], [set(truth)], k).tolist() == [pytest.approx(expected)]


def test_empty_truth_or_list_scores_0():
    assert metrics.roc_auc([["a", "b"], []], [set(), {"a"}], 2).tolist() == [0.0, 0.0]


def test_graded_relevance_is_binary_for_roc_auc():
    served = [[4, 1, 6, 3, 5, 2, 7]]
    assert metrics.roc_auc(served, [{4: 3, 5: 1, 6: 2, 1: 0}], 7).tolist() == [0.75]


def test_k_below_1_is_refused():
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        metrics.roc_auc([["a"]], [{"a"}], 0)
