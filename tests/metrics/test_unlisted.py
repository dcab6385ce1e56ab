"""ServedPositions.unlisted: a list's ground truth cut to what the metrics read (the served
relevant items and the highest-graded unserved ones, the rest only counted) scores exactly
as the whole ground truth, for every metric of the catalogue."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker import metrics
from tracker.metrics.average_precision import average_precision_kernel
from tracker.metrics.ndcg import GAINS, ndcg_kernel

NORMALIZATIONS = ("min_k_relevant", "relevant", "hits", "k")
WHOLE_LIST = ["r_precision", "song_clicks"]


def names_at(cutoffs):
    at_k = [m for m in metrics.METRICS if m not in WHOLE_LIST]
    return [f"{m}@{k}" for k in cutoffs for m in at_k] + WHOLE_LIST


@st.composite
def batches(draw, graded: bool):
    """Lists over a small catalog (the relevant sets often far larger than the lists), each
    relevant item once per list with its grade and its first served rank (0: unserved)."""
    n = draw(st.integers(1, 6))
    lengths, rows, positions, grades = [], [], [], []
    for r in range(n):
        served = draw(st.lists(st.integers(0, 30), max_size=8, unique=True))
        relevant = draw(st.dictionaries(
            st.integers(0, 30), st.sampled_from([1.0, 2.0, 3.0, 0.5]) if graded
            else st.just(1.0), max_size=30))
        lengths.append(len(served))
        for item, grade in sorted(relevant.items()):
            rows.append(r)
            positions.append(served.index(item) + 1 if item in served else 0)
            grades.append(grade)
    return (np.array(lengths, dtype=np.int64), np.array(rows, dtype=np.int64),
            np.array(positions, dtype=np.int64), np.array(grades))


def compacted(lengths, rows, positions, grades, keep: int):
    """Every served relevant item, and per list the ``keep`` highest-graded unserved ones
    (ties: the earlier listed); the others counted in ``unlisted``. Plain Python, written
    apart from the rollup's own compaction."""
    kept, unlisted = [], np.zeros(lengths.size, dtype=np.int64)
    for r in range(lengths.size):
        mine = [j for j in range(rows.size) if rows[j] == r]
        unserved = sorted((j for j in mine if positions[j] == 0), key=lambda j: -grades[j])
        kept += [j for j in mine if positions[j] > 0] + unserved[:keep]
        unlisted[r] = max(len(unserved) - keep, 0)
    kept = np.array(sorted(kept), dtype=np.int64)
    return kept, unlisted


def assert_same(full, compact, judged_full, judged_compact, cutoffs):
    names = names_at(cutoffs)
    want = metrics.evaluate_encoded(full, names, workers=1)
    got = metrics.evaluate_encoded(compact, names, workers=1)
    for name in names:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    for k in cutoffs:  # the kernels' other conventions, which the registry does not name
        for gain in GAINS:
            np.testing.assert_array_equal(ndcg_kernel(judged_compact, k, gain=gain),
                                          ndcg_kernel(judged_full, k, gain=gain))
        for normalization in NORMALIZATIONS:
            kernel = partial(average_precision_kernel, k=k, normalization=normalization)
            np.testing.assert_array_equal(kernel(judged_compact), kernel(judged_full))


@pytest.mark.parametrize("graded", [True, False], ids=["graded", "binary"])
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_a_compacted_truth_scores_exactly_as_the_whole_one(graded, data):
    lengths, rows, positions, grades = data.draw(batches(graded))
    cutoffs = sorted(data.draw(st.sets(st.integers(1, 12), min_size=1, max_size=3)))
    keep = data.draw(st.integers(max(cutoffs), max(cutoffs) + 3))
    kept, unlisted = compacted(lengths, rows, positions, grades, keep)
    grade_of = (lambda g: g) if graded else (lambda g: None)
    full = metrics.ServedPositions(lengths, rows, positions, grade_of(grades))
    compact = metrics.ServedPositions(lengths, rows[kept], positions[kept],
                                      grade_of(grades[kept]), unlisted=unlisted)
    np.testing.assert_array_equal(compact.judged().n_relevant, full.judged().n_relevant)
    assert_same(full, compact, full.judged(), compact.judged(), cutoffs)


def test_a_known_compaction():
    # one list serving items at ranks 1..3; relevant: the item at rank 2 (grade 1) and
    # five unserved ones graded 3, 2, 2, 1, 1: two listed (3 and 2), three counted
    lengths = np.array([3])
    rows = np.zeros(3, dtype=np.int64)
    compact = metrics.ServedPositions(lengths, rows, np.array([2, 0, 0]),
                                      np.array([1.0, 3.0, 2.0]), unlisted=np.array([3]))
    got = metrics.evaluate_encoded(compact, ["recall@3", "ndcg@2", "r_precision"])
    assert got["recall@3"].tolist() == [1 / 6]  # one hit of |G| = 6
    assert got["r_precision"].tolist() == [1 / 6]  # one hit in the top 6 (3 served)
    # DCG@2 = 1/log2(3); the ideal DCG@2 = 3 + 2/log2(3)
    np.testing.assert_allclose(got["ndcg@2"], [(1 / np.log2(3)) / (3 + 2 / np.log2(3))],
                               rtol=1e-15)


def test_graded_ndcg_past_the_listed_unserved_items_raises():
    compact = metrics.ServedPositions(np.array([3]), np.array([0, 0]), np.array([2, 0]),
                                      np.array([1.0, 3.0]), unlisted=np.array([4]))
    metrics.evaluate_encoded(compact, ["ndcg@1"])  # the one listed unserved item suffices
    with pytest.raises(RuntimeError, match="highest unserved grades"):
        metrics.evaluate_encoded(compact, ["ndcg@2"])


def test_binary_ndcg_needs_no_listed_unserved_items():
    # binary grades are all 1: the count alone gives the ideal DCG
    compact = metrics.ServedPositions(np.array([3]), np.array([0]), np.array([2]),
                                      unlisted=np.array([4]))
    got = metrics.evaluate_encoded(compact, ["ndcg@3"])
    ideal = 1 + 1 / np.log2(3) + 1 / np.log2(4)
    np.testing.assert_allclose(got["ndcg@3"], [(1 / np.log2(3)) / ideal], rtol=1e-15)


@pytest.mark.parametrize(("unlisted", "match"), [
    pytest.param(np.array([1]), "one count per list", id="one-count-per-list"),
    pytest.param(np.array([1, -1]), ">= 0", id="negative-count"),
    pytest.param(np.array([1.5, 0]), "integers", id="fractional-count"),
])
def test_unlisted_counts_are_validated(unlisted, match):
    with pytest.raises(ValueError, match=match):
        metrics.ServedPositions(np.array([3, 1]), np.array([0]), np.array([1]),
                                unlisted=unlisted)
