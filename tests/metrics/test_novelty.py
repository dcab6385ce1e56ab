"""surprisal and novelty (self-information of the served items), worked by hand."""

from __future__ import annotations

from math import log2

import numpy as np
import pytest

from tracker import metrics

# N = 4 users: "a" seen by all 4 (0 bits), "b" by 1 (2 bits), "c" by 2 (1 bit)
USERS = {"a": 4, "b": 1, "c": 2}


def test_surprisal_normalises_self_information_by_log2_n():
    # -log2(u/N) / log2(N): a -> 0/2, b -> 2/2, c -> 1/2; "z" never interacted: 1 user
    got = metrics.surprisal([["a", "b"], ["c"], ["z", "a"]], 2, USERS, 4)
    np.testing.assert_allclose(got, [(0 + 1) / 2, 1 / 2, (1 + 0) / 2])


def test_surprisal_replay_documented_example():
    # RePlay's Surprisal docstring: the train log of 3 users, and their top 2
    train = {1: [5, 6, 8, 9, 2], 2: [5, 8, 11, 1, 3], 3: [4, 9, 2]}
    counts: dict[int, int] = {}
    for items in train.values():
        for item in set(items):
            counts[item] = counts.get(item, 0) + 1
    assert counts == {5: 2, 6: 1, 8: 2, 9: 2, 2: 2, 11: 1, 1: 1, 3: 1, 4: 1}
    # an item two of the 3 users touched: -log2(2/3) / log2(3) = 1 - 1/log2(3); one
    # user, or never (7): 1
    two_of_three = 1 - 1 / log2(3)
    got = metrics.surprisal([[3, 7], [5, 8], [4, 9]], 2, counts, 3)
    np.testing.assert_allclose(got, [1.0, two_of_three, (1 + two_of_three) / 2])
    # RePlay's per-user values and their mean
    np.testing.assert_allclose(got, [1.0, 0.3690702464285426, 0.6845351232142713])
    assert got.mean() == pytest.approx(0.6845351232142715)


def test_novelty_is_unnormalised_bits():
    got = metrics.novelty([["a", "b"], ["c", "c"]], 2, USERS, 4)
    np.testing.assert_allclose(got, [(0 + 2) / 2, (1 + 1) / 2])  # repeats count


def test_items_with_0_users_count_as_one_user():
    assert metrics.novelty([["x"]], 1, {"x": 0}, 8).tolist() == [3.0]  # -log2(1/8)


def test_only_the_top_k_counts_and_a_short_list_is_averaged_over_its_items():
    assert metrics.surprisal([["b", "a"]], 1, USERS, 4).tolist() == [1.0]
    # one served item at k = 5: its own value, not divided by 5 (RePlay divides by k)
    assert metrics.surprisal([["b"]], 5, USERS, 4).tolist() == [1.0]


def test_an_empty_list_scores_0():
    assert metrics.surprisal([[]], 3, USERS, 4).tolist() == [0.0]
    assert metrics.novelty([[]], 3, USERS, 4).tolist() == [0.0]


@pytest.mark.parametrize(("users", "n_users", "match"), [
    pytest.param({"a": 5}, 4, "must lie in", id="more-users-than-the-log"),
    pytest.param({"a": -1}, 4, "must lie in", id="negative-count"),
    pytest.param({"a": 1}, 1, "n_users >= 2", id="one-user-has-no-surprise"),
    pytest.param({"a": 1}, 0, "n_users must be an integer >= 1", id="no-users"),
    pytest.param([("a", 1)], 4, "mapping", id="not-a-mapping"),
])
def test_bad_counts_are_refused(users, n_users, match):
    with pytest.raises(ValueError, match=match):
        metrics.surprisal([["a"]], 1, users, n_users)
