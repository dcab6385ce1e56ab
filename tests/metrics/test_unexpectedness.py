"""unexpectedness against a baseline list: RePlay's examples and edge cases, by hand."""

from __future__ import annotations

import pytest

from tracker import metrics

# RePlay's Unexpectedness docstring: recommendations by score, and the base
# recommendations by score (user 1's base list is 2 (.7), then 3 and 7 (.5 each)).
SERVED = [[3, 7, 10, 11, 2], [5, 8, 11, 1, 3], [4, 9, 2]]
BASE = [[2, 3, 7], [5, 8, 3], [4, 9]]


def test_replay_documented_example():
    # k = 2: {3, 7} vs {2, 3} share 1 -> 1 - 1/2; {5, 8} vs {5, 8} -> 0; {4, 9} -> 0
    at_2 = metrics.unexpectedness(SERVED, BASE, 2)
    assert at_2.tolist() == [0.5, 0.0, 0.0]
    assert at_2.mean() == pytest.approx(1 / 6)  # RePlay's Unexpectedness@2 = 0.1666...
    # k = 4: {3, 7, 10, 11} vs {2, 3, 7} share 2 -> 1 - 2/4; {5, 8, 11, 1} vs {5, 8, 3}
    # share 2 -> 1/2; {4, 9, 2} vs {4, 9} share 2 -> 1 - 2/4 (divided by k, not by 3)
    assert metrics.unexpectedness(SERVED, BASE, 4).tolist() == [0.5, 0.5, 0.5]


def test_replay_example_with_a_repeated_item():
    # RePlay's earlier docstring: recs [0, 0, 1] against the log's [1, 2, 3] at k = 3:
    # sets {0, 1} and {1, 2, 3} share 1 -> 1 - 1/3 = 0.67
    assert metrics.unexpectedness([[0, 0, 1]], [[1, 2, 3]], 3).tolist() == [
        pytest.approx(2 / 3)]


@pytest.mark.parametrize(("served", "base", "k", "expected"), [
    pytest.param([1, 2], [3, 1], 1, 1.0, id="baseline-cut-at-k-too"),
    pytest.param([1, 2], [3, 1], 2, 1 / 2, id="order-inside-the-top-k-does-not-matter"),
    pytest.param([1], [1], 5, 1 - 1 / 5, id="k-beyond-the-list-divides-by-k"),
    pytest.param([1, 2], [1, 2], 2, 0.0, id="the-same-list-is-not-unexpected"),
    pytest.param(["a", "b"], ["c", "d"], 2, 1.0, id="disjoint-lists"),
    pytest.param([], [1, 2], 2, 0.0, id="empty-list-serves-nothing-unexpected"),
    pytest.param([1, 2], [], 2, 1.0, id="empty-baseline-every-item-is-unexpected"),
])
def test_unexpectedness_by_hand(served, base, k, expected):
    assert metrics.unexpectedness([served], [base], k).tolist() == [pytest.approx(expected)]


def test_mismatched_lengths_or_k_below_1_are_refused():
    with pytest.raises(ValueError, match="one baseline list per list"):
        metrics.unexpectedness([[1], [2]], [[1]], 1)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        metrics.unexpectedness([[1]], [[1]], 0)
