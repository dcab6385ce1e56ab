"""average_precision and its four denominators: known answers worked by hand."""

from __future__ import annotations

import pytest

from tracker import metrics

NORMALIZATIONS = ("min_k_relevant", "relevant", "hits", "k")

# R,N,R,R,N,N,R,N,N,N: hits at ranks 1, 3, 4, 7 with precisions 1/1, 2/3, 3/4, 4/7
PATTERN = "RNRRNNRNNN"
SERVED = [f"d{i}" for i in range(10)]
TRUTH = {SERVED[i] for i, c in enumerate(PATTERN) if c == "R"}
PRECISION_SUM = 1 / 1 + 2 / 3 + 3 / 4 + 4 / 7  # = 2.98809...


def ap(served, truth, k, normalization="min_k_relevant") -> float:
    return float(metrics.average_precision([served], [truth], k, normalization=normalization)[0])


def test_r_n_r_r_n_n_r_n_n_n_over_its_4_relevant_items():
    expected = PRECISION_SUM / 4
    assert expected == pytest.approx(0.747, abs=5e-4)  # 0.74702...
    # |G| = 4 hits = 4 <= k: three of the denominators agree
    for normalization in ("min_k_relevant", "relevant", "hits"):
        assert ap(SERVED, TRUTH, 10, normalization) == pytest.approx(expected, rel=1e-12)
    assert ap(SERVED, TRUTH, 10, "k") == pytest.approx(PRECISION_SUM / 10, rel=1e-12)


def test_the_same_list_cut_at_k_3():
    # R_3 = R,N,R: precisions 1/1 and 2/3 at the hits, sum 5/3; |G| = 4, hits = 2
    expected = {"min_k_relevant": (5 / 3) / 3, "relevant": (5 / 3) / 4, "hits": (5 / 3) / 2,
                "k": (5 / 3) / 3}
    got = {n: ap(SERVED, TRUTH, 3, n) for n in NORMALIZATIONS}
    assert got == pytest.approx(expected, rel=1e-12)


def test_denominators_differ_when_g_is_larger_than_k():
    # R_2 = [a, x], G = {a, b, c}: the one hit at rank 1 gives a sum of 1
    got = {n: ap(["a", "x"], {"a", "b", "c"}, 2, n) for n in NORMALIZATIONS}
    assert got == pytest.approx({"min_k_relevant": 1 / 2, "relevant": 1 / 3, "hits": 1.0,
                                 "k": 1 / 2})


@pytest.mark.parametrize(("actual", "predicted", "k", "expected"), [
    pytest.param(range(1, 6), [6, 4, 7, 1, 2], 2, 0.25, id="hit-at-rank-2-over-min(2,5)"),
    pytest.param(range(1, 6), [1, 1, 1, 1, 1], 5, 0.2, id="repeats-count-once"),
    pytest.param(range(1, 21), [*range(1, 21), *range(200, 600)], 20, 1.0,
                 id="perfect-top-20"),
])
def test_kaggle_apk_examples(actual, predicted, k, expected):
    # the unit tests of Kaggle's ml_metrics apk, the default normalization's origin:
    # [6, 4] holds 4 at rank 2: (1/2) / min(2, 5); [1, 1, 1, 1, 1]: only the first 1
    # counts: (1/1) / min(5, 5)
    assert ap(predicted, set(actual), k) == pytest.approx(expected)


def test_graded_relevance_is_binary_for_average_precision():
    graded = {"d0": 3, "d2": 1, "d3": 2.5, "d6": 1, "d9": 0}  # d9 has grade 0
    assert ap(SERVED, graded, 10) == pytest.approx(PRECISION_SUM / 4, rel=1e-12)


def test_k_beyond_the_list_uses_the_requested_k_in_the_denominator():
    # both served items relevant, |G| = 5: min(k, |G|) = 5 at k = 10, not the length 2
    assert ap(["a", "b"], {"a", "b", "c", "d", "e"}, 10) == pytest.approx(2 / 5)
    assert ap(["a", "b"], {"a", "b", "c", "d", "e"}, 10, "k") == pytest.approx(2 / 10)


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_empty_truth_no_hit_or_empty_list_scores_0(normalization):
    assert ap(["a", "b"], set(), 2, normalization) == 0.0
    assert ap(["a", "b"], {"z"}, 2, normalization) == 0.0  # "hits": D = 0
    assert ap([], {"a"}, 2, normalization) == 0.0


def test_unknown_normalization_or_k_below_1_is_refused():
    with pytest.raises(ValueError, match="normalization"):
        ap(["a"], {"a"}, 1, "mean")
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        ap(["a"], {"a"}, 0)


def test_long_lists_and_a_huge_k():
    # hits at ranks 1, 100 and 1000 of a 1000-item list: (1/1 + 2/100 + 3/1000) / 3
    served = list(range(1000))
    expected = (1 + 2 / 100 + 3 / 1000) / 3
    assert ap(served, {0, 99, 999}, 10**9) == pytest.approx(expected, rel=1e-12)
    assert ap(served, {0, 99, 999}, 1000, "relevant") == pytest.approx(expected, rel=1e-12)
