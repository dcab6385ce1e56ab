"""coverage, Gini index and entropy of item exposure over all lists, worked by hand."""

from __future__ import annotations

import math

import pytest

from tracker import metrics


def test_coverage_counts_distinct_catalog_items_in_the_top_k():
    served = [["a", "z"], ["a", "c", "b"]]
    # k = 2: {a, z, c}; z is not in the catalog {a, b, c, d} -> 2 / 4
    assert metrics.coverage(served, 2, {"a", "b", "c", "d"}) == 0.5
    # k = 3 with a catalog size: {a, z, c, b} -> 4 / 10
    assert metrics.coverage(served, 3, 10) == 0.4
    assert metrics.coverage([], 3, 10) == 0.0


def test_gini_index_by_hand():
    # exposures a: 3, b: 1 in a catalog of 4 -> sorted 0, 0, 1, 3; weights 2i - m - 1 =
    # -3, -1, 1, 3: (1 + 9) / (4 * 4)
    assert metrics.gini_index([["a", "b"], ["a"], ["a"]], 2, ["a", "b", "c", "d"]) == 0.625
    assert metrics.gini_index([["a", "b"], ["a"], ["a"]], 2, 4) == 0.625
    # without a catalog only the shown items compare: 1, 3 -> (-1 + 3) / (2 * 4)
    assert metrics.gini_index([["a", "b"], ["a"], ["a"]], 2) == 0.25


def test_gini_extremes():
    assert metrics.gini_index([["a", "b"], ["b", "a"]], 2) == 0.0  # equal exposure
    # one of m = 5 items takes everything: (m - 1) / m
    assert metrics.gini_index([["a"], ["a"]], 1, 5) == pytest.approx(4 / 5)
    assert metrics.gini_index([[], []], 3, 5) == 0.0  # nothing shown


def test_entropy_in_bits_and_nats():
    assert metrics.entropy([["a", "b"], ["b", "a"]], 2) == 1.0
    assert metrics.entropy([["a", "b", "c", "d"]], 4) == 2.0
    assert metrics.entropy([["a"], ["a"]], 1) == 0.0
    # shares 1/2, 1/4, 1/4: 1/2 + 2/4 + 2/4 = 1.5 bits
    assert metrics.entropy([["a", "b"], ["a", "c"]], 2) == pytest.approx(1.5)
    assert metrics.entropy([["a", "b"]], 2, base=math.e) == pytest.approx(math.log(2))
    assert metrics.entropy([], 2) == 0.0


@pytest.mark.parametrize(("call", "match"), [
    pytest.param(lambda: metrics.coverage([["a"]], 1, set()), "empty", id="empty-catalog"),
    pytest.param(lambda: metrics.coverage([["a"]], 1, 0), ">= 1", id="catalog-size-0"),
    pytest.param(lambda: metrics.coverage([["a"]], 1, None), "catalog", id="no-catalog"),
    pytest.param(lambda: metrics.coverage([["a"]], 1, "abc"), "collection", id="string"),
    pytest.param(lambda: metrics.gini_index([["a", "b"]], 2, 1), "smaller than",
                 id="catalog-smaller-than-what-was-shown"),
    pytest.param(lambda: metrics.entropy([["a"]], 1, base=1), "base", id="base-1"),
    pytest.param(lambda: metrics.coverage([["a"]], 0, 3), "k must be", id="k-0"),
])
def test_bad_arguments_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
