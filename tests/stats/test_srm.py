"""Sample-ratio mismatch: chi-square and the sequential Dirichlet-multinomial test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from tracker.stats import Reason, log_bayes_factor, sequential_srm, srm_test
from tracker.stats.srm import exact_p_value


@pytest.mark.parametrize(
    ("users", "weights"),
    [
        pytest.param([5100, 4900], [0.5, 0.5], id="two-arms-even-split"),
        pytest.param([10_230, 9_770], [1, 1], id="unnormalised-weights"),
        pytest.param([2_010, 4_100, 3_890], [0.2, 0.4, 0.4], id="three-arms-uneven-split"),
        pytest.param([90_310, 9_690], [0.9, 0.1], id="ninety-ten-holdout"),
    ],
)
def test_chi_square_matches_scipy_chisquare(users, weights) -> None:
    r = srm_test(users, weights)
    w = np.asarray(weights, dtype=float)
    expected = sps.chisquare(users, f_exp=np.sum(users) * w / w.sum())
    assert r.statistic == pytest.approx(expected.statistic, rel=1e-12)
    assert r.p_value == pytest.approx(expected.pvalue, rel=1e-9)
    assert r.expected_share == pytest.approx(tuple(w / w.sum()))
    assert r.users == tuple(users) and not r.sequential


def test_hand_worked_example() -> None:
    # E = 5000 each; X^2 = (100^2 + 100^2) / 5000 = 4; P(chi2_1 >= 4) = 0.0455003
    r = srm_test([5100, 4900], [0.5, 0.5])
    assert r.statistic == pytest.approx(4.0)
    assert r.p_value == pytest.approx(0.0455003, rel=1e-5)
    assert r.max_deviation == pytest.approx(0.02)
    assert r.flagged is False


@pytest.mark.parametrize(
    ("users", "flagged"),
    [
        pytest.param([5_250, 4_750], True, id="large-mismatch-small-experiment-flags"),
        pytest.param([5_040, 4_960], False, id="not-significant-does-not-flag"),
        pytest.param([5_017_000, 4_983_000], True,
                     id="ten-million-users-losing-0.34-percent-flags-on-p-alone"),
        pytest.param([5_010_000, 4_990_000], True,
                     id="huge-experiment-small-deviation-flags-on-p-alone"),
    ],
)
def test_flag_is_decided_by_the_p_value_alone(users, flagged) -> None:
    r = srm_test(users, [1, 1])
    assert r.flagged is flagged
    assert r.flagged is (r.p_value < 0.001)


@pytest.mark.parametrize(
    "users",
    [pytest.param([5_017_000, 4_983_000], id="ten-million-users-0.34-percent"),
     pytest.param([5_010_000, 4_990_000], id="ten-million-users-0.2-percent")],
)
def test_sequential_srm_flags_a_large_experiment_on_p_alone(users) -> None:
    r = sequential_srm([[u // 2 for u in users], users], [1, 1])
    assert r.p_value < 0.001 and r.flagged
    assert r.max_deviation < 0.005  # below the old practical gate, which hid it


def test_ten_million_case_p_value_and_deviation_by_hand() -> None:
    # E = 5,000,000 each; X^2 = 2 * 17,000^2 / 5,000,000 = 115.6; chi2_1 tail = erfc(sqrt(57.8))
    r = srm_test([5_017_000, 4_983_000], [1, 1])
    assert r.statistic == pytest.approx(115.6, rel=1e-12)
    assert r.p_value == pytest.approx(math.erfc(math.sqrt(115.6 / 2)), rel=1e-9)
    assert r.p_value < 1e-26 and r.flagged
    assert r.deviation == pytest.approx((0.0034, -0.0034), rel=1e-9)
    assert r.describe(["treatment", "control"]) == (
        "control lost 0.34% of its expected users, treatment got 0.34% more than expected"
    )


@pytest.mark.parametrize(
    ("threshold", "flagged"),
    [pytest.param(0.05, True, id="looser-threshold-flags-p-0.0455"),
     pytest.param(0.01, False, id="default-like-threshold-does-not")],
)
def test_threshold_is_configurable(threshold, flagged) -> None:
    assert srm_test([5100, 4900], [1, 1], threshold=threshold).flagged is flagged


@pytest.mark.parametrize(
    ("users", "weights", "words"),
    [
        pytest.param([9_000, 1_000], [0.9, 0.1], "users split as declared", id="exact-split"),
        pytest.param([9_100, 900], [0.9, 0.1],
                     "holdout lost 10.00% of its expected users, main got 1.11% more than "
                     "expected", id="holdout-lost-a-tenth"),
    ],
)
def test_deviation_is_described_in_words(users, weights, words) -> None:
    assert srm_test(users, weights).describe(["main", "holdout"]) == words


def test_describing_needs_one_name_per_arm() -> None:
    with pytest.raises(ValueError, match="one name per arm"):
        srm_test([10, 10], [1, 1]).describe(["only-one"])


def test_huge_experiment_trivial_deviation_is_still_significant() -> None:
    r = srm_test([5_010_000, 4_990_000], [1, 1])
    assert r.p_value < 1e-3 and r.max_deviation == pytest.approx(0.002)


def test_log_bayes_factor_hand_worked() -> None:
    # c = 2, w = (1/2, 1/2): Dirichlet(1, 1) is uniform, P(A, A | H1) = 1/3, P(A, A | H0) = 1/4
    assert math.exp(log_bayes_factor([2, 0], [0.5, 0.5], concentration=2.0)) == pytest.approx(4 / 3)
    # (1, 1): P(A, B | H1) = 1/6 against 1/4
    assert math.exp(log_bayes_factor([1, 1], [0.5, 0.5], concentration=2.0)) == pytest.approx(2 / 3)
    # several looks at once: one value per look
    per_look = log_bayes_factor([[2, 0], [1, 1]], [0.5, 0.5], concentration=2.0)
    assert np.exp(per_look) == pytest.approx([4 / 3, 2 / 3])


def test_sequential_p_value_is_the_running_minimum_over_looks() -> None:
    looks = [[1_300, 700], [2_000, 2_000]]  # a strong early imbalance that later washed out
    early = sequential_srm(looks[:1], [1, 1])
    both = sequential_srm(looks, [1, 1])
    assert both.p_value == pytest.approx(early.p_value)
    assert both.p_value < 1e-3
    assert both.statistic < early.statistic  # the last look alone is unremarkable
    assert both.users == (2_000, 2_000) and both.sequential


def test_sequential_test_catches_a_clear_mismatch_and_passes_a_fair_split() -> None:
    rng = np.random.default_rng(4)
    fair = np.cumsum(rng.multinomial(7_000, [0.5, 0.5], size=14), axis=0)
    skewed = np.cumsum(rng.multinomial(7_000, [0.52, 0.48], size=14), axis=0)
    assert not sequential_srm(fair, [1, 1]).flagged
    assert sequential_srm(skewed, [1, 1]).flagged


def test_sequential_is_more_conservative_than_chi_square_for_one_look() -> None:
    # a single look: anytime validity costs power
    r_seq, r_chi = sequential_srm([[5_150, 4_850]], [1, 1]), srm_test([5_150, 4_850], [1, 1])
    assert r_chi.p_value < r_seq.p_value


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(lambda: srm_test([10, 10], [1, 1, 1]), "one weight per arm",
                     id="weights-length-mismatch"),
        pytest.param(lambda: srm_test([10], [1]), "at least two arms", id="single-arm"),
        pytest.param(lambda: srm_test([10, 10], [1, 0]), "weights must be finite and > 0",
                     id="zero-weight"),
        pytest.param(lambda: srm_test([10, -1], [1, 1]), "non-negative integers",
                     id="negative-count"),
        pytest.param(lambda: srm_test([10.5, 3], [1, 1]), "non-negative integers",
                     id="fractional-count"),
        pytest.param(lambda: srm_test([10, 10], [1, 1], threshold=0), "threshold",
                     id="zero-threshold"),
        pytest.param(lambda: sequential_srm([[10, 10], [9, 12]], [1, 1]), "must not decrease",
                     id="per-day-counts-instead-of-cumulative"),
        pytest.param(lambda: sequential_srm([[10, 10]], [1, 1], concentration=0),
                     "concentration", id="zero-concentration"),
    ],
)
def test_programming_errors_raise_clear_messages(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("test", [srm_test, sequential_srm], ids=["chi-square", "sequential"])
def test_no_users_yet_is_not_an_error(test) -> None:
    users = [0, 0] if test is srm_test else [[0, 0]]
    r = test(users, [1, 1])
    assert r.reason is Reason.NO_USERS and r.p_value is None and r.flagged is False


# ------------------------------------------------------------------------- exact p-values
def test_small_counts_get_the_exact_binomial_p_value():
    r = srm_test([7, 3], [0.95, 0.05])
    # 1 - 0.95^10 - 10 (0.05) 0.95^9 - 45 (0.05^2) 0.95^8 = 1 - 0.598737 - 0.315125 - 0.074635
    assert r.exact and r.p_value == pytest.approx(0.011504, abs=1e-6)
    assert r.p_value == pytest.approx(sps.binomtest(7, 10, 0.95).pvalue, rel=1e-12)
    assert not srm_test([5100, 4900], [1, 1]).exact  # large counts keep chi-square


def test_the_exact_test_never_flags_more_than_its_threshold_where_chi_square_does():
    """95/5 declared, 10 users: the probability, over every possible split, that the test
    flags at p < 0.001 (computed exactly, no simulation)."""
    n, share = 10, 0.05
    flagged_exact = flagged_chi2 = 0.0
    for small in range(n + 1):
        prob = sps.binom.pmf(small, n, share)
        counts = [n - small, small]
        flagged_exact += prob * srm_test(counts, [0.95, 0.05]).flagged
        expected = np.array([n * 0.95, n * share])
        chi2 = float(((np.array(counts) - expected) ** 2 / expected).sum())
        flagged_chi2 += prob * (sps.chi2.sf(chi2, 1) < 0.001)
    assert flagged_exact <= 0.001
    assert flagged_chi2 > 0.01  # the audit's 1.2 %


def test_three_arms_exact_multinomial_matches_brute_force():
    counts, weights = [2, 9, 1], [0.25, 0.5, 0.25]
    n = sum(counts)
    probs = {}
    for a in range(n + 1):
        for b in range(n + 1 - a):
            c = n - a - b
            probs[(a, b, c)] = sps.multinomial.pmf([a, b, c], n, weights)
    observed = probs[tuple(counts)]
    expected = sum(p for p in probs.values() if p <= observed * (1 + 1e-7))
    r = srm_test(counts, weights)
    assert r.exact and r.p_value == pytest.approx(expected, rel=1e-9)
    assert exact_p_value(counts, weights) == pytest.approx(expected, rel=1e-9)


def test_too_many_splits_to_enumerate_fall_back_to_chi_square():
    assert exact_p_value([3000, 3000, 1], [1, 1, 0.0001]) is None
    r = srm_test([3000, 3000, 1], [1, 1, 0.0001])
    assert not r.exact and r.p_value is not None


@settings(deadline=None)  # no timing in tests: the machine is shared
@given(st.lists(st.integers(0, 12), min_size=2, max_size=3))
def test_exact_p_values_are_probabilities_at_least_the_observed_splits(counts):
    weights = [1.0] * len(counts)
    p = exact_p_value(counts, weights)
    assert p is not None and 0 < p <= 1 + 1e-12
    if sum(counts):
        assert p >= sps.multinomial.pmf(counts, sum(counts), [1 / len(counts)] * len(counts)) \
            * (1 - 1e-9)
