"""The batch kernel: EncodedLists, judge (both ways of sorting), blocks, evaluate_encoded."""

from __future__ import annotations

from math import log2

import numpy as np
import pytest

from tracker import metrics
from tracker.metrics import batch
from tracker.metrics.batch import judging, scoring

NAMES = ["ndcg@3", "map@3", "mrr@3", "hit_rate@2", "precision@3", "recall@3", "roc_auc@3",
         "r_precision", "song_clicks"]


@pytest.fixture(params=["by-row", "global-sort"])
def judge_path(request, monkeypatch):
    """Run a test once with each way judge sorts keys."""
    monkeypatch.setattr(judging, "ROW_SORT_WASTE", 10**9 if request.param == "by-row" else 0)
    return request.param


def random_encoded(seed: int, n: int = 200, width: int = 8, codes: int = 30, graded=True):
    rng = np.random.default_rng(seed)
    items = rng.integers(0, codes, size=(n, width))  # repeats within a list happen
    lengths = rng.integers(0, width + 1, size=n)
    items[np.arange(width)[None, :] >= lengths[:, None]] = -1
    pairs = int(rng.integers(0, 5 * n))
    row, item = rng.integers(0, n, pairs), rng.integers(0, codes, pairs)  # duplicates too
    grade = rng.integers(0, 4, pairs).astype(float) if graded else None
    return metrics.EncodedLists(items, row, item, grade)


def test_encoded_lists_derives_lengths_and_builds_from_ragged_lists():
    lists = metrics.EncodedLists.from_flat(
        item_codes=np.array([7, 3, 9, 4]), lengths=np.array([3, 0, 1]),
        truth_row=np.array([0, 2]), truth_item=np.array([3, 4]))
    assert lists.items.tolist() == [[7, 3, 9], [-1, -1, -1], [4, -1, -1]]
    assert lists.lengths.tolist() == [3, 0, 1]
    assert lists.n_lists == 3


@pytest.mark.parametrize(("kwargs", "match"), [
    pytest.param({"items": np.array([1, 2])}, "2-D", id="one-dimensional-items"),
    pytest.param({"items": np.array([[1, -2]])}, ">= 0, with -1 only as padding",
                 id="negative-code"),
    pytest.param({"items": np.array([[1, -1, 2]])}, "row 0 has an item after -1 padding",
                 id="padding-inside-a-list"),
    pytest.param({"items": np.array([[1.5]])}, "must hold integers", id="float-codes"),
    pytest.param({"truth_row": np.array([0, 5])}, r"lie in \[0, 2\)", id="row-out-of-range"),
    pytest.param({"truth_row": np.array([0])}, "same length", id="row-item-mismatch"),
    pytest.param({"truth_item": np.array([1, -3])}, ">= 0", id="negative-truth-item"),
    pytest.param({"truth_grade": np.array([1.0])}, "one grade per judgement",
                 id="grade-count-mismatch"),
    pytest.param({"truth_grade": np.array([1.0, -2.0])}, "finite and >= 0",
                 id="negative-grade"),
    pytest.param({"truth_grade": np.array([1.0, np.inf])}, "finite and >= 0",
                 id="infinite-grade"),
])
def test_encoded_lists_refuses_malformed_arrays(kwargs, match):
    fields = {"items": np.array([[1, 2], [3, -1]]), "truth_row": np.array([0, 1]),
              "truth_item": np.array([2, 3]), "truth_grade": None} | kwargs
    with pytest.raises(ValueError, match=match):
        metrics.EncodedLists(**fields)


def test_from_flat_refuses_lengths_that_do_not_add_up():
    with pytest.raises(ValueError, match="lengths add up to 3 but item_codes holds 2"):
        metrics.EncodedLists.from_flat(np.array([1, 2]), np.array([3]), np.array([]),
                                       np.array([]))


def test_judge_marks_first_copies_and_counts_distinct_relevant_items(judge_path):
    lists = metrics.EncodedLists(
        items=np.array([[7, 3, 3, 5], [4, 4, -1, -1], [-1, -1, -1, -1]]),
        truth_row=np.array([0, 0, 0, 1, 1, 2]),
        truth_item=np.array([3, 3, 8, 4, 4, 1]),  # 3 and 4 judged twice
    )
    judged = batch.judge(lists)
    assert judged.hit.tolist() == [[False, True, False, False], [True, False, False, False],
                                   [False, False, False, False]]
    assert judged.n_relevant.tolist() == [2, 1, 1]
    assert judged.lengths.tolist() == [4, 2, 0]


def test_a_pair_judged_twice_keeps_its_largest_grade(judge_path):
    # list 0 serves [5, 6]; 5 judged with grades 1 and 3, 6 with 2 and 0 (0 = not relevant)
    lists = metrics.EncodedLists(
        items=np.array([[5, 6]]), truth_row=np.array([0, 0, 0, 0]),
        truth_item=np.array([5, 6, 5, 6]), truth_grade=np.array([1.0, 2.0, 3.0, 0.0]))
    judged = batch.judge(lists)
    assert judged.hit_grade.tolist() == [[3.0, 2.0]]
    assert judged.n_relevant.tolist() == [2]
    # the ideal list is 3, 2: the served order is ideal
    assert metrics.evaluate_encoded(lists, ["ndcg@2"])["ndcg@2"].tolist() == [1.0]
    lists = metrics.EncodedLists(
        items=np.array([[6, 5]]), truth_row=np.array([0, 0, 0]),
        truth_item=np.array([5, 5, 6]), truth_grade=np.array([3.0, 1.0, 2.0]))
    expected = (2 + 3 / log2(3)) / (3 + 2 / log2(3))
    assert metrics.evaluate_encoded(lists, ["ndcg@2"])["ndcg@2"] == pytest.approx([expected])


@pytest.mark.parametrize("graded", [True, False], ids=["graded", "binary"])
@pytest.mark.parametrize("seed", range(4))
def test_both_ways_of_sorting_agree(seed, graded, monkeypatch):
    lists = random_encoded(seed, graded=graded)
    monkeypatch.setattr(judging, "ROW_SORT_WASTE", 10**9)
    by_row = metrics.evaluate_encoded(lists, NAMES)
    monkeypatch.setattr(judging, "ROW_SORT_WASTE", 0)
    by_sort = metrics.evaluate_encoded(lists, NAMES)
    for name in NAMES:
        np.testing.assert_allclose(by_row[name], by_sort[name], rtol=0, atol=1e-12,
                                   err_msg=name)


def test_huge_codes_are_renumbered_not_overflowed(judge_path):
    small = random_encoded(7)
    shift = 2**62  # row * n_codes would overflow int64: the kernel renumbers the codes
    big = metrics.EncodedLists(np.where(small.items >= 0, small.items + shift, -1),
                               small.truth_row, small.truth_item + shift, small.truth_grade)
    expected = metrics.evaluate_encoded(small, NAMES)
    got = metrics.evaluate_encoded(big, NAMES)
    for name in NAMES:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_blocks_cover_the_lists_in_order_whatever_the_order_of_judgements(monkeypatch):
    lists = random_encoded(3, n=500)
    shuffled = np.random.default_rng(0).permutation(lists.truth_row.size)
    unsorted = metrics.EncodedLists(lists.items, lists.truth_row[shuffled],
                                    lists.truth_item[shuffled], lists.truth_grade[shuffled])
    expected = metrics.evaluate_encoded(lists, NAMES)
    monkeypatch.setattr(scoring, "BLOCK_RANKS", 1)  # blocks of 64 lists
    assert len(list(unsorted.blocks(batch.block_rows(8)))) == 8
    got = metrics.evaluate_encoded(unsorted, NAMES)
    for name in NAMES:
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=1e-12,
                                   err_msg=name)


def test_evaluate_encoded_returns_one_float_per_list_and_matches_evaluate():
    served = [["a", "b", "c"], ["d", "e"], []]
    truth = [{"c": 2, "z": 1}, {"d"}, {"q"}]
    per_list = metrics.evaluate_encoded(metrics.encode(served, truth), NAMES)
    means = metrics.evaluate(served, truth, NAMES)
    for name in NAMES:
        assert per_list[name].dtype == np.float64 and per_list[name].shape == (3,)
        assert means[name] == pytest.approx(per_list[name].mean())
    np.testing.assert_allclose(per_list["mrr@3"], [1 / 3, 1, 0])
    np.testing.assert_allclose(per_list["song_clicks"], [0, 0, 51])


def test_evaluate_encoded_reads_lists_wider_than_any_cutoff():
    lists = metrics.EncodedLists(items=np.arange(12).reshape(2, 6), truth_row=np.array([0, 1]),
                                 truth_item=np.array([5, 6]))
    got = metrics.evaluate_encoded(lists, ["hit_rate@2", "mrr@6", "r_precision"])
    assert got["hit_rate@2"].tolist() == [0.0, 1.0]
    np.testing.assert_allclose(got["mrr@6"], [1 / 6, 1.0])
    assert got["r_precision"].tolist() == [0.0, 1.0]


def test_evaluate_encoded_takes_only_encoded_lists():
    with pytest.raises(ValueError, match="EncodedLists"):
        metrics.evaluate_encoded([[1, 2]], ["ndcg@2"])


# ------------------------------------------------------------------ ServedPositions

def positions_of(lists: metrics.EncodedLists) -> metrics.ServedPositions:
    """The same lists as ServedPositions, located by brute force: per (list, item) the
    largest grade, grade-0 pairs dropped, the rank of the item's first copy (0: not
    served)."""
    best: dict[tuple[int, int], float] = {}
    grades = (np.ones(lists.truth_row.size) if lists.truth_grade is None
              else lists.truth_grade)
    for r, i, g in zip(lists.truth_row.tolist(), lists.truth_item.tolist(), grades.tolist(),
                       strict=True):
        best[(r, i)] = max(best.get((r, i), 0.0), g)
    pairs = sorted((r, i, g) for (r, i), g in best.items() if g > 0)
    served = [row[row >= 0].tolist() for row in lists.items]
    rows = [r for r, _, _ in pairs]
    position = [served[r].index(i) + 1 if i in served[r] else 0 for r, i, _ in pairs]
    grade = None if lists.truth_grade is None else [g for _, _, g in pairs]
    return metrics.ServedPositions(lists.lengths, np.array(rows, dtype=np.int64),
                                   np.array(position, dtype=np.int64),
                                   None if grade is None else np.array(grade))


@pytest.mark.parametrize("graded", [True, False], ids=["graded", "binary"])
@pytest.mark.parametrize("seed", range(6))
def test_served_positions_judge_exactly_as_encoded_lists(seed, graded, judge_path):
    lists = random_encoded(seed, graded=graded)
    located = positions_of(lists)
    for depth in (None, 1, 3, 8, 20):
        want, got = batch.judge(lists, depth), located.judged(depth)
        np.testing.assert_array_equal(got.hit, want.hit)
        if want.hit_grade is None:
            assert got.hit_grade is None
        else:
            np.testing.assert_array_equal(got.hit_grade, want.hit_grade)
        np.testing.assert_array_equal(got.lengths, want.lengths)
        np.testing.assert_array_equal(got.n_relevant, want.n_relevant)
        if want.truth_grade is None:  # the positive judgements, in any order
            assert got.truth_grade is None
            assert sorted(got.truth_row.tolist()) == sorted(want.truth_row.tolist())
        else:
            got_pairs = zip(got.truth_row.tolist(), got.truth_grade.tolist(), strict=True)
            want_pairs = zip(want.truth_row.tolist(), want.truth_grade.tolist(), strict=True)
            assert sorted(got_pairs) == sorted(want_pairs)
        assert got.complete == want.complete
    expected = metrics.evaluate_encoded(lists, NAMES)
    actual = metrics.evaluate_encoded(located, NAMES)
    for name in NAMES:
        np.testing.assert_allclose(actual[name], expected[name], rtol=0, atol=1e-12,
                                   err_msg=name)


def test_served_positions_in_small_blocks_and_any_order(monkeypatch):
    lists = random_encoded(11, n=500)
    located = positions_of(lists)
    expected = metrics.evaluate_encoded(lists, NAMES)
    shuffled = np.random.default_rng(1).permutation(located.truth_row.size)
    unsorted = metrics.ServedPositions(located.lengths, located.truth_row[shuffled],
                                       located.truth_position[shuffled],
                                       located.truth_grade[shuffled])
    monkeypatch.setattr(scoring, "BLOCK_RANKS", 1)  # blocks of 64 lists
    got = metrics.evaluate_encoded(unsorted, NAMES)
    for name in NAMES:
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=1e-12,
                                   err_msg=name)


@pytest.mark.parametrize(("kwargs", "match"), [
    pytest.param({"truth_row": np.array([0, 3])}, r"lie in \[0, 2\)", id="row-out-of-range"),
    pytest.param({"truth_position": np.array([1])}, "same length", id="row-position-mismatch"),
    pytest.param({"truth_position": np.array([4, 0])}, r"\[0, length of its list\]",
                 id="position-past-the-list"),
    pytest.param({"truth_position": np.array([-1, 0])}, r"\[0, length of its list\]",
                 id="negative-position"),
    pytest.param({"truth_row": np.array([0, 0]), "truth_position": np.array([2, 2])},
                 "same rank", id="two-items-at-one-rank"),
    pytest.param({"truth_grade": np.array([1.0, 0.0])}, "grades > 0", id="grade-zero-listed"),
    pytest.param({"truth_grade": np.array([1.0, np.nan])}, "finite and >= 0", id="nan-grade"),
    pytest.param({"lengths": np.array([3, -1])}, ">= 0", id="negative-length"),
])
def test_served_positions_refuse_malformed_arrays(kwargs, match):
    arrays = {"lengths": np.array([3, 1]), "truth_row": np.array([0, 1]),
              "truth_position": np.array([2, 0]), "truth_grade": None}
    arrays.update(kwargs)
    with pytest.raises(ValueError, match=match):
        metrics.ServedPositions(**arrays)


# ------------------------------------------------------- bit patterns and worker threads

@pytest.mark.parametrize("seed", range(6))
def test_hit_patterns_give_exactly_what_the_hit_matrix_gives(seed, monkeypatch):
    # binary lists with repeated items and judgements listed twice, widths 1..16
    lists = random_encoded(seed, width=int(np.random.default_rng(seed).integers(1, 17)),
                           graded=False)
    width = lists.width
    patterned = batch.judge(lists)
    assert patterned.hit_bits is not None and patterned.dense_hit is None
    pattern_values = metrics.evaluate_encoded(lists, NAMES)
    monkeypatch.setattr(judging, "PATTERN_WIDTH", 0)  # every list judged as a matrix
    dense = batch.judge(lists)
    assert dense.hit_bits is None
    np.testing.assert_array_equal(patterned.hit, dense.hit)
    np.testing.assert_array_equal(patterned.n_relevant, dense.n_relevant)
    for k in range(1, width + 2):
        np.testing.assert_array_equal(patterned.hit_count(k), dense.hit_count(k))
        np.testing.assert_array_equal(patterned.first_hit(k)[1], dense.first_hit(k)[1])
    dense_values = metrics.evaluate_encoded(lists, NAMES)
    for name in NAMES:
        np.testing.assert_allclose(pattern_values[name], dense_values[name], rtol=0,
                                   atol=1e-12, err_msg=name)


def test_a_judged_batch_holds_hits_one_way():
    common = dict(width=2, hit_grade=None, lengths=np.array([2]), n_relevant=np.array([1]),
                  truth_row=np.array([0]), truth_grade=None, complete=True)
    with pytest.raises(ValueError, match="exactly one of hit_bits and dense_hit"):
        batch.Judged(**common)
    with pytest.raises(ValueError, match="exactly one of hit_bits and dense_hit"):
        batch.Judged(**common, hit_bits=np.array([1]), dense_hit=np.array([[True, False]]))
    judged = batch.Judged(**common, hit_bits=np.array([2]))  # bit 1: a hit at rank 2
    assert judged.hit.tolist() == [[False, True]]


@pytest.mark.parametrize("graded", [True, False], ids=["graded", "binary"])
def test_worker_threads_give_the_values_of_one_thread(graded, monkeypatch):
    lists = random_encoded(11, n=3000, graded=graded)
    monkeypatch.setattr(scoring, "BLOCK_RANKS", 1)  # blocks of 64 lists: many per thread
    one = metrics.evaluate_encoded(lists, NAMES, workers=1)
    for workers in (2, 3):
        many = metrics.evaluate_encoded(lists, NAMES, workers=workers)
        for name in NAMES:
            np.testing.assert_array_equal(many[name], one[name], err_msg=name)


def test_workers_must_be_a_positive_integer():
    lists = random_encoded(0, n=10)
    with pytest.raises(ValueError, match="workers must be an integer >= 1, got 0"):
        metrics.evaluate_encoded(lists, NAMES, workers=0)


def test_large_batches_use_threads_and_small_ones_do_not(monkeypatch):
    monkeypatch.setattr(scoring.os, "cpu_count", lambda: 8)
    assert batch.default_workers(batch.PARALLEL_LISTS - 1) == 1
    assert batch.default_workers(batch.PARALLEL_LISTS) == batch.MAX_WORKERS
    monkeypatch.setattr(scoring.os, "cpu_count", lambda: None)
    assert batch.default_workers(10**7) == 1
