"""mrr and song_clicks (the rank of the first relevant item): known answers and edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from tracker import metrics


@pytest.mark.parametrize(("served", "truth", "k", "expected"), [
    pytest.param(["a", "b", "c"], {"a"}, 3, 1.0, id="first-rank-is-1-not-1-over-0"),
    pytest.param(["a", "b", "c"], {"c"}, 3, 1 / 3, id="rank-3-is-1-over-3-not-1-over-2"),
    pytest.param(["a", "b", "c"], {"b", "c"}, 3, 1 / 2, id="only-the-first-hit-counts"),
    pytest.param(["a", "b", "c", "d"], {"d"}, 3, 0.0, id="hit-beyond-k-scores-0"),
    pytest.param(["b", "b", "a"], {"a"}, 3, 1 / 3, id="a-repeat-still-takes-a-rank"),
    pytest.param(["a"], {"a"}, 10, 1.0, id="k-beyond-the-list"),
    pytest.param(["a", "b"], set(), 2, 0.0, id="empty-ground-truth"),
    pytest.param([], {"a"}, 2, 0.0, id="empty-list"),
    pytest.param(["a", "b"], {"a": 0, "b": 5}, 2, 1 / 2, id="grade-0-is-not-relevant"),
])
def test_mrr_by_hand(served, truth, k, expected):
    assert metrics.mrr([served], [truth], k).tolist() == [pytest.approx(expected)]


def test_mrr_refuses_k_below_1():
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        metrics.mrr([["a"]], [{"a"}], 0)


@pytest.mark.parametrize(("target", "clicks"), [
    pytest.param(0, 0, id="rank-1-costs-no-click"),
    pytest.param(1, 0, id="rank-2-is-still-on-the-first-page"),
    pytest.param(9, 0, id="rank-10-is-the-last-of-page-1"),
    pytest.param(10, 1, id="rank-11-needs-one-refresh"),
    pytest.param(499, 49, id="rank-500-needs-49-refreshes"),
    pytest.param(500, 51, id="not-found-is-500-over-10-plus-1"),
])
def test_song_clicks_recsys_2018_formula(target, clicks):
    # the list 0..499; clicks = floor((rank - 1) / 10), ranks from 1 (a notebook that
    # counts pages from 1 gets 1 and 50 for targets 1 and 499)
    assert metrics.song_clicks([list(range(500))], [{target}]).tolist() == [clicks]


def test_song_clicks_caps_the_list_at_max_items():
    served = [list(range(1000))]
    assert metrics.song_clicks(served, [{600}]).tolist() == [51]  # rank 601 > 500
    assert metrics.song_clicks(served, [{600, 42}]).tolist() == [4]  # rank 43: (43-1)//10


def test_song_clicks_with_other_pages_and_caps():
    served = [list(range(200))] * 3
    # pages of 20, 100 items: rank 41 -> (41 - 1) // 20 = 2; rank 101 is past the cap,
    # so missing: 100 / 20 + 1 = 6
    got = metrics.song_clicks(served, [{40}, {100}, {99}], page_size=20, max_items=100)
    assert got.tolist() == [2, 6, 4]
    # a cap that is not a multiple of the page: the miss value counts the pages needed
    # to show max_items (ceil(45 / 10) = 5), plus one
    assert metrics.song_clicks([[1]], [{2}], page_size=10, max_items=45).tolist() == [6]


def test_song_clicks_empty_truth_or_list_is_the_miss_value():
    got = metrics.song_clicks([["a"], [], []], [set(), {"a"}, set()])
    assert got.tolist() == [51, 51, 51]
    assert got.dtype == np.float64


def test_song_clicks_a_repeated_item_counts_at_its_first_position():
    served = [["x"] * 10 + ["a"]]  # 10 copies of "x" then "a" at rank 11
    assert metrics.song_clicks(served, [{"a"}]).tolist() == [1]
    assert metrics.song_clicks(served, [{"x"}]).tolist() == [0]


@pytest.mark.parametrize("kwargs", [{"page_size": 0}, {"max_items": 0}, {"page_size": -10}],
                         ids=["page-0", "cap-0", "negative-page"])
def test_song_clicks_refuses_pages_or_caps_below_1(kwargs):
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        metrics.song_clicks([[1]], [{1}], **kwargs)
