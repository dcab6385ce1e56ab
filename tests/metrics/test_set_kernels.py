"""The set-level and per-item kernels the rollup calls (tracker.metrics.exposure's
histogram kernels, surprisal from summed log users, unexpectedness from an overlap, and the
one padding routine), worked by hand and checked against the textbook formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.metrics.batch import pad
from tracker.metrics.exposure import (
    coverage_of_histogram,
    entropy_of_histogram,
    gini_of_histogram,
    histogram,
)
from tracker.metrics.novelty import surprisal, surprisal_of_log_users
from tracker.metrics.unexpectedness import unexpectedness_of_overlap


@pytest.mark.parametrize("exposure, catalog, coverage, gini, entropy", [
    # sorted 0, 0, 1, 3: weights -3, -1, 1, 3 -> (1 + 9) / (4 * 4); shares 1/4, 3/4
    pytest.param([1, 3], 4, 0.5, 0.625, -(0.25 * math.log2(0.25) + 0.75 * math.log2(0.75)),
                 id="two-items-shown-in-a-catalog-of-four"),
    # 2, 2, 2 over 3 items: perfectly equal, log2 3 bits
    pytest.param([2, 2, 2], 3, 1.0, 0.0, math.log2(3), id="equal-exposure-is-gini-0"),
    # one item takes all of a catalog of 5: (2·5 - 5 - 1)·4 / (5·4) = 0.8, 0 bits
    pytest.param([4], 5, 0.2, 0.8, 0.0, id="one-item-takes-all"),
    # sorted 0, 1, 1, 2: weights -3, -1, 1, 3 -> (-1 + 1 + 6) / (4 * 4); shares 1/4 1/4 1/2
    pytest.param([1, 2, 1], 4, 0.75, 0.375, 1.5, id="repeated-exposure-values-group"),
    pytest.param([], 4, 0.0, 0.0, 0.0, id="nothing-shown-is-all-zeros"),
])
def test_histogram_kernels_by_hand(exposure, catalog, coverage, gini, entropy):
    hist = histogram(np.array(exposure, dtype=np.int64))
    assert coverage_of_histogram(hist, catalog) == pytest.approx(coverage)
    assert gini_of_histogram(hist, catalog) == pytest.approx(gini, abs=1e-12)
    assert entropy_of_histogram(hist) == pytest.approx(entropy, abs=1e-12)


def test_the_histogram_groups_items_by_exposure_and_drops_zeros():
    assert histogram(np.array([0, 2, 5, 2, 0])).tolist() == [[2, 2], [5, 1]]


def test_entropy_in_another_base():
    hist = histogram(np.array([1, 1]))
    assert entropy_of_histogram(hist, base=math.e) == pytest.approx(math.log(2))


def _gini_by_sorting(exposure: np.ndarray, catalog: int) -> float:
    x = np.sort(np.concatenate((exposure[exposure > 0],
                                np.zeros(catalog - np.count_nonzero(exposure)))))
    if x.sum() == 0:
        return 0.0
    weights = 2.0 * np.arange(1, catalog + 1) - catalog - 1
    return float(weights @ x / (catalog * x.sum()))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=40), st.integers(0, 20))
def test_gini_of_the_histogram_equals_the_sorted_formula(values, unseen):
    exposure = np.array(values, dtype=np.int64)
    catalog = int(np.count_nonzero(exposure)) + unseen
    if catalog == 0:
        return
    assert gini_of_histogram(histogram(exposure), catalog) == pytest.approx(
        _gini_by_sorting(exposure, catalog), abs=1e-12)
    assert 0.0 <= gini_of_histogram(histogram(exposure), catalog) < 1.0


def test_surprisal_from_log_users_by_hand():
    # N = 4: items seen by 4 and 1 users -> (0 + 1) / 2; an empty list scores 0
    values = surprisal_of_log_users(np.array([math.log(4), 0.0]), np.array([2, 0]), 4)
    assert values.tolist() == pytest.approx([0.5, 0.0])


def test_surprisal_from_log_users_equals_the_public_function():
    counts = {5: 2, 6: 1, 8: 2, 9: 2, 2: 2, 11: 1, 1: 1, 3: 1, 4: 1}
    lists = [[3, 7], [5, 8], [4, 9]]
    logs = np.array([sum(math.log(max(counts.get(i, 1), 1)) for i in lst) for lst in lists])
    np.testing.assert_allclose(surprisal_of_log_users(logs, np.array([2, 2, 2]), 3),
                               surprisal(lists, 2, counts, 3))


def test_surprisal_from_log_users_refuses_fewer_than_two_users():
    with pytest.raises(ValueError, match="n_users >= 2"):
        surprisal_of_log_users(np.zeros(1), np.ones(1), 1)


@pytest.mark.parametrize("overlap, length, k, expected", [
    pytest.param(1, 5, 4, 0.75, id="one-shared-item-of-four"),
    pytest.param(0, 2, 4, 1.0, id="nothing-shared-is-1-even-for-a-short-list"),
    pytest.param(0, 0, 4, 0.0, id="an-empty-list-scores-0"),
])
def test_unexpectedness_of_overlap_by_hand(overlap, length, k, expected):
    assert unexpectedness_of_overlap(np.array([overlap]), np.array([length]), k).tolist() == [
        expected]


@pytest.mark.parametrize("lengths, depth, fill, min_width, expected", [
    pytest.param([2, 1], None, -1, 0, [[1, 2], [3, -1]], id="ragged-pads-with-fill"),
    pytest.param([2, 1], 1, -2, 0, [[1], [3]], id="depth-cuts"),
    pytest.param([0, 0], None, -2, 1, [[-2], [-2]], id="empty-lists-keep-the-minimum-width"),
    pytest.param([1, 1, 1], 5, -1, 0, [[1], [2], [3]], id="rectangular-depth-past-the-end"),
])
def test_pad_lays_ragged_lists_out(lengths, depth, fill, min_width, expected):
    codes = np.arange(1, sum(lengths) + 1, dtype=np.int64)
    got = pad(codes, np.array(lengths, dtype=np.int64), depth, fill=fill, min_width=min_width)
    assert got.tolist() == expected
