"""Known answers, worked by hand here (the arithmetic is written out, not taken from the code)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracker import metrics

LOG3 = math.log2(3)

# the relevance list [3,2,3,0,0,1,2,2,3,0]: items r0..r9 with those grades
GRADED_ITEMS = [f"r{i}" for i in range(10)]
GRADES = dict(zip(GRADED_ITEMS, [3, 2, 3, 0, 0, 1, 2, 2, 3, 0], strict=True))
GRADED_TRUTH = {item: g for item, g in GRADES.items() if g > 0}


def one(fn, *args, **kwargs) -> float:
    values = fn(*args, **kwargs)
    assert values.shape == (1,)
    return float(values[0])


def test_dcg_of_the_classic_graded_list():
    # DCG@1 = 3; DCG@2 (linear) = 3 + 2/log2(3) = 4.2619...
    # ideal order of all grades: 3,3,3,2,2,2,1 -> IDCG@1 = 3, IDCG@2 = 3 + 3/log2(3)
    assert one(metrics.ndcg, [GRADED_ITEMS], [GRADED_TRUTH], 1) == pytest.approx(3 / 3)
    dcg2 = 3 + 2 / LOG3
    assert dcg2 == pytest.approx(4.2619, abs=1e-4)
    assert one(metrics.ndcg, [GRADED_ITEMS], [GRADED_TRUTH], 2) == pytest.approx(
        dcg2 / (3 + 3 / LOG3), rel=1e-12)
    # exponential gain 2^rel - 1: DCG@2 = 7 + 3/log2(3), IDCG@2 = 7 + 7/log2(3)
    assert one(metrics.ndcg, [GRADED_ITEMS], [GRADED_TRUTH], 2, gain="exponential") == \
        pytest.approx((7 + 3 / LOG3) / (7 + 7 / LOG3), rel=1e-12)


def test_ndcg_ideal_list_uses_relevant_items_that_were_not_served():
    # served [a, x]; G = {a: 1, b: 1}: DCG@2 = 1, IDCG@2 = 1 + 1/log2(3)
    assert one(metrics.ndcg, [["a", "x"]], [{"a": 1, "b": 1}], 2) == pytest.approx(
        1 / (1 + 1 / LOG3))


def test_average_precision_of_r_n_r_r_n_n_r_n_n_n():
    pattern = "RNRRNNRNNN"
    items = [f"d{i}" for i in range(10)]
    truth = {items[i] for i, c in enumerate(pattern) if c == "R"}
    # hits at ranks 1, 3, 4, 7: precisions 1/1, 2/3, 3/4, 4/7, over |G| = 4
    expected = (1 + 2 / 3 + 3 / 4 + 4 / 7) / 4
    assert expected == pytest.approx(0.747, abs=5e-4)
    for normalization in ("relevant", "min_k_relevant", "hits"):  # all 4 here
        assert one(metrics.average_precision, [items], [truth], 10,
                   normalization=normalization) == pytest.approx(expected, rel=1e-12)
    assert one(metrics.average_precision, [items], [truth], 10, normalization="k") == \
        pytest.approx((1 + 2 / 3 + 3 / 4 + 4 / 7) / 10)


def test_average_precision_normalizations_differ_when_g_exceeds_k():
    # R_2 = [a, x], G = {a, b, c}: sum of P@i at hits = 1
    values = {n: one(metrics.average_precision, [["a", "x"]], [{"a", "b", "c"}], 2,
                     normalization=n) for n in ("min_k_relevant", "relevant", "hits", "k")}
    assert values == pytest.approx({"min_k_relevant": 1 / 2, "relevant": 1 / 3, "hits": 1.0,
                                    "k": 1 / 2})


def test_r_precision_recsys_2018_example():
    truth = {"1", "2", "3", "5", "8", "99"}
    # R_|G| = R_6 = the 4 items served; hits 5, 8, 3 -> 3 / 6
    assert one(metrics.r_precision, [["5", "8", "13", "3"]], [truth]) == 0.5


@pytest.mark.parametrize(("target", "clicks"), [
    pytest.param(1, 0, id="rank-2-is-on-the-first-page"),
    pytest.param(499, 49, id="rank-500-needs-49-refreshes"),
    pytest.param(500, 51, id="missing-is-max-items-over-page-size-plus-one"),
])
def test_song_clicks_official_formula(target, clicks):
    assert one(metrics.song_clicks, [list(range(500))], [{target}]) == clicks


def test_roc_auc_counts_ordered_pairs_within_the_top_k():
    # [R, N, R, N]: pairs (R1,N2) (R1,N4) (R3,N4) ordered, (R3,N2) not -> 3/4
    assert one(metrics.roc_auc, [["a", "x", "b", "y"]], [{"a", "b"}], 4) == 0.75
    # [N, R, N, R]: only (R2, N3) -> 1/4
    assert one(metrics.roc_auc, [["x", "a", "y", "b"]], [{"a", "b"}], 4) == 0.25
    # no non-relevant item in R_k -> 1; no relevant one -> 0
    assert one(metrics.roc_auc, [["a", "b", "x"]], [{"a", "b"}], 2) == 1.0
    assert one(metrics.roc_auc, [["x", "y", "a"]], [{"a"}], 2) == 0.0


def test_unexpectedness_against_the_baseline_list():
    # R_2 = {1, 2}, B_2 = {1, 5}: one shared -> 1 - 1/2
    assert one(metrics.unexpectedness, [[1, 2, 3, 4]], [[1, 5, 6, 2]], 2) == 0.5
    # k = 4: shared {1, 2} -> 1 - 2/4
    assert one(metrics.unexpectedness, [[1, 2, 3, 4]], [[1, 5, 6, 2]], 4) == 0.5


def test_hit_precision_recall_mrr_by_hand():
    recommended, truth = [["a", "b", "c", "d"]], [{"c", "z"}]
    assert one(metrics.hit_rate, recommended, truth, 2) == 0.0
    assert one(metrics.hit_rate, recommended, truth, 3) == 1.0
    assert one(metrics.precision, recommended, truth, 3) == pytest.approx(1 / 3)
    assert one(metrics.recall, recommended, truth, 3) == 0.5
    assert one(metrics.mrr, recommended, truth, 4) == pytest.approx(1 / 3)  # rank 3, not 2


def test_precision_divides_by_k_even_for_a_short_list():
    assert one(metrics.precision, [["a", "b"]], [{"a", "b"}], 10) == pytest.approx(2 / 10)


def test_an_item_repeated_in_a_list_counts_only_at_its_first_position():
    recommended, truth = [["a", "a", "b"]], [{"a"}]
    assert one(metrics.precision, recommended, truth, 3) == pytest.approx(1 / 3)
    assert one(metrics.recall, recommended, truth, 3) == 1.0
    assert one(metrics.ndcg, [["x", "a", "a"]], [{"a"}], 3) == pytest.approx(1 / LOG3)


def test_empty_ground_truth_is_zero_not_nan():
    recommended, truth = [["a", "b"]], [set()]
    for fn in (metrics.hit_rate, metrics.precision, metrics.recall, metrics.mrr,
               metrics.average_precision, metrics.ndcg, metrics.roc_auc):
        assert one(fn, recommended, truth, 2) == 0.0, fn.__name__
    assert one(metrics.r_precision, recommended, truth) == 0.0
    assert one(metrics.song_clicks, recommended, truth) == 51


def test_k_beyond_the_list_means_the_whole_list_and_k_below_1_is_refused():
    assert one(metrics.recall, [["a", "b"]], [{"b"}], 50) == 1.0
    for fn in (metrics.hit_rate, metrics.precision, metrics.ndcg):
        with pytest.raises(ValueError, match="k"):
            fn([["a"]], [{"a"}], 0)


def test_surprisal_and_coverage_and_exposure():
    # N = 4 users; a seen by 4 (0 bits), b by 1 (2 bits), c never (counts 1: 2 bits)
    values = metrics.surprisal([["a", "b"], ["c"]], 2, {"a": 4, "b": 1}, 4)
    assert values == pytest.approx(np.array([(0 + 1) / 2, 1.0]))
    assert metrics.coverage([["a", "b"], ["a", "c"]], 1, {"a", "b", "c", "d"}) == 0.25
    # exposures a:3, b:1 over a catalog of 4 -> 0,0,1,3: (-3*0 - 1*0 + 1*1 + 3*3)/(4*4)
    assert metrics.gini_index([["a", "b"], ["a"], ["a"]], 2, ["a", "b", "c", "d"]) == 0.625
    assert metrics.entropy([["a", "b"], ["b", "a"]], 2) == 1.0


def test_evaluate_parses_names_through_the_registry():
    result = metrics.evaluate([["a", "b"], ["c", "d"]], [{"b"}, {"x"}],
                              ["ndcg@2", "hit_rate@1", "r_precision", "map@2"])
    assert result["hit_rate@1"] == 0.0
    assert result["ndcg@2"] == pytest.approx((1 / LOG3) / 2)
    assert result["map@2"] == pytest.approx(0.25)
    with pytest.raises(ValueError):
        metrics.evaluate([["a"]], [{"a"}], ["ndcg"])  # ndcg needs @k
    with pytest.raises(ValueError):
        metrics.evaluate([["a"]], [{"a"}], ["bogus@3"])
