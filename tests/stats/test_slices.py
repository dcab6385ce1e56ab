"""Results per slice of a segment dimension: verdicts corrected across slices (BH), the
sample-ratio check per slice (Holm), and the heterogeneity test (Cochran's Q on log ratios)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from tracker.stats import MeanStats, Reason, compare, compare_sequential, moments
from tracker.stats.estimates import Moments
from tracker.stats.slices import (
    DimensionKind,
    HeterogeneityReason,
    describe_srm,
    heterogeneity,
    slice_srm,
    slice_verdicts,
)


def _binary(n: int, ones: int) -> MeanStats:
    """n users with a 0/1 outcome, ``ones`` of them 1."""
    return MeanStats(n, float(ones), float(ones))


def test_slice_verdicts_correct_the_tested_slices_as_one_family_by_bh() -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    comparisons = {
        "ios": compare(_binary(500, 290), _binary(500, 250)),
        "web": compare(_binary(500, 252), _binary(500, 250)),
        "tv": compare(_binary(1, 1), _binary(1, 0)),  # one user an arm: no p-value
        "android": compare(_binary(800, 440), _binary(800, 400)),  # p 0.045, BH 0.068
    }
    found = slice_verdicts(comparisons)
    assert [v.slice for v in found] == ["ios", "web", "tv", "android"]
    tested = ["ios", "web", "android"]
    _, expected, _, _ = multitest.multipletests(
        [comparisons[s].p_value for s in tested], method="fdr_bh")
    by_slice = {v.slice: v for v in found}
    assert [by_slice[s].adjusted_p for s in tested] == pytest.approx(expected, rel=1e-12)
    assert by_slice["tv"].adjusted_p is None and not by_slice["tv"].significant
    for v in found:
        assert v.significant == (v.adjusted_p is not None and v.adjusted_p < 0.05)
    # the correction is what makes a slice that passes alone fail in the family
    assert comparisons["android"].p_value < 0.05 <= by_slice["android"].adjusted_p


def test_slice_verdicts_refuse_comparisons_at_different_levels() -> None:
    with pytest.raises(ValueError, match="one level"):
        slice_verdicts({"a": compare(_binary(50, 20), _binary(50, 25), level=0.95),
                        "b": compare(_binary(50, 20), _binary(50, 25), level=0.9)})


def test_slice_verdicts_refuse_fixed_horizon_and_sequential_comparisons_in_one_family() -> None:
    with pytest.raises(ValueError, match="one interval kind"):
        slice_verdicts({"a": compare(_binary(500, 200), _binary(500, 250)),
                        "b": compare_sequential(_binary(500, 200), _binary(500, 250))})


def test_slice_srm_adjusts_by_holm_across_the_slices_with_users() -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    users = {"ios": [5_000, 5_050], "web": [1_000, 1_180], "tv": [0, 0], "mac": [700, 760]}
    checks = slice_srm(users, [1, 1])
    raw = [sps.chisquare(users[s]).pvalue for s in ("ios", "web", "mac")]
    _, expected, _, _ = multitest.multipletests(raw, method="holm")
    by_slice = {c.slice: c for c in checks}
    assert [by_slice[s].adjusted_p for s in ("ios", "web", "mac")] == \
        pytest.approx(expected, rel=1e-9)
    assert by_slice["tv"].adjusted_p is None and by_slice["tv"].result.reason is \
        Reason.NO_USERS
    assert [c.slice for c in checks if c.flagged] == ["web"]  # raw p 1.2e-4, Holm 3.6e-4
    text = describe_srm(checks, DimensionKind.USER)
    assert "checked in 3 slices" in text and "Holm" in text and "mismatch in web" in text
    assert "move users" in describe_srm(checks, DimensionKind.LIST)
    assert "move users" in describe_srm(checks, "list")  # a Segment's kind is text


def test_slice_srm_uses_the_experiments_own_split() -> None:
    # 2:1 declared: 2,000 against 1,000 is as declared, 1,500 against 1,500 is not
    checks = {c.slice: c for c in slice_srm({"a": [2_000, 1_000], "b": [1_500, 1_500]},
                                            [2, 1])}
    assert not checks["a"].flagged and checks["b"].flagged


def _ratio_case(rng: np.random.Generator, lifts: list[float], baselines: list[float],
                n: int) -> dict[str, tuple[Moments, Moments]]:
    arms = {}
    for j, (lift, base) in enumerate(zip(lifts, baselines, strict=True)):
        control = rng.binomial(n, base)
        treatment = rng.binomial(n, base * (1 + lift))
        arms[f"s{j}"] = (moments(_binary(n, treatment)), moments(_binary(n, control)))
    return arms


def test_heterogeneity_matches_statsmodels_combine_effects() -> None:
    meta = pytest.importorskip("statsmodels.stats.meta_analysis")
    arms = _ratio_case(np.random.default_rng(3), [0.0, 0.1, 0.3, 0.05],
                       [0.1, 0.3, 0.2, 0.5], 4_000)
    found = heterogeneity(arms)
    y = [math.log(t.estimate / c.estimate) for t, c in arms.values()]
    v = [t.variance / t.estimate ** 2 + c.variance / c.estimate ** 2 for t, c in arms.values()]
    theirs = meta.combine_effects(np.array(y), np.array(v))
    homogeneity = theirs.test_homogeneity()
    assert found.reason is HeterogeneityReason.OK and found.slices == ("s0", "s1", "s2", "s3")
    assert found.statistic == pytest.approx(theirs.q, rel=1e-12)
    assert found.df == homogeneity.df == 3
    assert found.p_value == pytest.approx(homogeneity.pvalue, rel=1e-10)
    assert found.i_squared == pytest.approx(max(0.0, theirs.i2), rel=1e-12)
    assert found.pooled_lift == pytest.approx(math.expm1(theirs.mean_effect_fe), rel=1e-12)
    assert found.differs == (found.p_value < 0.05)


def test_a_constant_lift_on_different_baselines_is_not_heterogeneous() -> None:
    # +10% on baselines 0.1 and 0.5 exactly: differences 0.01 against 0.05, lifts equal
    arms = {"a": (moments(_binary(10_000, 1_100)), moments(_binary(10_000, 1_000))),
            "b": (moments(_binary(10_000, 5_500)), moments(_binary(10_000, 5_000)))}
    found = heterogeneity(arms)
    assert found.statistic == pytest.approx(0.0, abs=1e-12) and found.p_value == \
        pytest.approx(1.0) and not found.differs and found.i_squared == 0.0
    assert found.pooled_lift == pytest.approx(0.1, rel=1e-12)


@pytest.mark.parametrize("n", [400, 4_000])
def test_heterogeneity_false_alarms_stay_at_alpha_under_a_constant_lift(n) -> None:
    """4 slices of different baselines, the same +5% lift in each: the share of runs that
    flag heterogeneity lies in the 99% binomial band around α = 0.05."""
    rng = np.random.default_rng(20261130 + n)
    runs = 2_000
    flagged = sum(heterogeneity(_ratio_case(rng, [0.05] * 4, [0.1, 0.2, 0.3, 0.5], n)).differs
                  for _ in range(runs))
    low, high = sps.binom.ppf([0.005, 0.995], runs, 0.05)
    assert low <= flagged <= high, f"{flagged} of {runs} flagged"


def test_heterogeneity_finds_a_lift_confined_to_one_slice() -> None:
    rng = np.random.default_rng(11)
    runs = 300
    flagged = sum(heterogeneity(_ratio_case(rng, [0.0, 0.0, 0.2], [0.2, 0.2, 0.2],
                                            8_000)).differs for _ in range(runs))
    assert flagged / runs > 0.9


def test_a_list_dimension_gets_no_heterogeneity_test_and_says_why() -> None:
    arms = _ratio_case(np.random.default_rng(1), [0.0, 0.3], [0.2, 0.2], 1_000)
    found = heterogeneity(arms, kind=DimensionKind.LIST)
    assert found.reason is HeterogeneityReason.SHARED_USERS and found.p_value is None
    assert not found.differs and "share users" in found.describe()
    assert heterogeneity(arms, kind="list") == found  # a Segment's kind is text
    with pytest.raises(ValueError, match="bogus"):
        heterogeneity(arms, kind="bogus")


def test_slices_without_a_usable_log_ratio_are_left_out() -> None:
    good = (moments(_binary(1_000, 300)), moments(_binary(1_000, 250)))
    zero = (moments(_binary(1_000, 10)), moments(_binary(1_000, 0)))  # control mean 0
    one_user = (moments(_binary(1, 1)), moments(_binary(1, 1)))  # no variance
    infinite = (Moments(5, math.inf, 1.0, Reason.OK), moments(_binary(1_000, 250)))
    found = heterogeneity({"a": good, "b": zero, "c": one_user, "d": good, "e": infinite})
    assert found.slices == ("a", "d") and found.left_out == ("b", "c", "e") and found.df == 1
    assert math.isfinite(found.statistic)
    alone = heterogeneity({"a": good, "b": zero})
    assert alone.reason is HeterogeneityReason.TOO_FEW_SLICES and alone.statistic is None
    assert alone.left_out == ("b",) and "fewer than two" in alone.describe()


def test_heterogeneity_refuses_an_alpha_outside_0_1() -> None:
    with pytest.raises(ValueError, match="alpha"):
        heterogeneity({}, alpha=1.5)


_slice = st.tuples(st.integers(2, 5_000), st.floats(0.01, 0.99), st.floats(0.01, 0.99))


@settings(max_examples=200, deadline=None)
@given(st.lists(_slice, min_size=2, max_size=8), st.randoms(use_true_random=False))
def test_heterogeneity_does_not_depend_on_the_slices_order(cases, random) -> None:
    arms = {f"s{j}": (moments(_binary(n, round(n * pt))), moments(_binary(n, round(n * pc))))
            for j, (n, pt, pc) in enumerate(cases)}
    names = list(arms)
    random.shuffle(names)
    one, other = heterogeneity(arms), heterogeneity({k: arms[k] for k in names})
    assert set(one.slices) == set(other.slices) and one.reason is other.reason
    if one.reason is HeterogeneityReason.OK:
        assert one.statistic == pytest.approx(other.statistic, rel=1e-9, abs=1e-12)
        assert one.statistic >= 0 and 0 <= one.p_value <= 1 and 0 <= one.i_squared < 1
