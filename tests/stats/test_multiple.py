"""Multiple comparisons: Holm and Benjamini-Hochberg, primary metrics only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.stats import Correction, adjust_by_role, adjust_primary, benjamini_hochberg, holm

P_VALUE_SETS = [
    pytest.param([0.01, 0.04, 0.03], id="three-tests"),
    pytest.param([0.001, 0.01, 0.01, 0.2, 0.049, 0.8], id="ties-and-large-values"),
    pytest.param(list(np.random.default_rng(8).uniform(0, 0.1, 25)), id="twenty-five-small"),
    pytest.param([0.5], id="single-test"),
    pytest.param([1.0, 0.0, 0.3], id="extremes"),
]


@pytest.mark.parametrize("p_values", P_VALUE_SETS)
@pytest.mark.parametrize(
    ("ours", "theirs"), [(holm, "holm"), (benjamini_hochberg, "fdr_bh")], ids=["holm", "bh"]
)
def test_matches_statsmodels_multipletests(p_values, ours, theirs) -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    _, expected, _, _ = multitest.multipletests(p_values, method=theirs)
    assert ours(p_values) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_hand_worked_examples() -> None:
    # sorted 0.01, 0.03, 0.04; Holm x3, x2, x1 -> 0.03, 0.06, 0.04 -> running max
    assert holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])
    # BH x3/1, x3/2, x3/3 -> 0.03, 0.045, 0.04 -> running min from the largest
    assert benjamini_hochberg([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.04, 0.04])


def test_empty_family() -> None:
    assert holm([]).size == 0 and benjamini_hochberg([]).size == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30))
def test_adjusted_values_bound_the_raw_ones_and_holm_is_stricter(p_values) -> None:
    p = np.asarray(p_values)
    h, b = holm(p), benjamini_hochberg(p)
    assert np.all(p <= b + 1e-15) and np.all(b <= h + 1e-15) and np.all(h <= 1.0)


def test_only_primary_metrics_are_corrected() -> None:
    # tests: primary 0.01, primary 0.04, guardrail 0.03, primary 0.02
    adjusted = adjust_primary([0.01, 0.04, 0.03, 0.02], [True, True, False, True])
    # primary family (0.01, 0.04, 0.02) under Holm: 0.03, 0.04, 0.04; guardrail unchanged
    assert adjusted == pytest.approx((0.03, 0.04, 0.03, 0.04))


def test_missing_p_values_stay_missing_and_leave_the_family() -> None:
    adjusted = adjust_primary([0.01, None, 0.04], [True, True, True], method=Correction.HOLM)
    assert adjusted[1] is None
    assert adjusted[0] == pytest.approx(0.02) and adjusted[2] == pytest.approx(0.04)


def test_method_can_be_named_by_string() -> None:
    assert adjust_primary([0.01, 0.04, 0.03], [True] * 3, method="bh") == pytest.approx(
        (0.03, 0.04, 0.04)
    )


@pytest.mark.parametrize(
    ("call", "error"),
    [
        pytest.param(lambda: holm([0.1, 1.2]), ValueError, id="p-value-above-one"),
        pytest.param(lambda: benjamini_hochberg([np.nan]), ValueError, id="nan-p-value"),
        pytest.param(lambda: adjust_primary([0.1], [True, False]), ValueError,
                     id="flags-length-mismatch"),
        pytest.param(lambda: adjust_primary([0.1, -0.1], [True, False]), ValueError,
                     id="invalid-guardrail-p-value"),
        pytest.param(lambda: adjust_primary([0.1], [True], method="bonferroni"), ValueError,
                     id="unknown-method"),
    ],
)
def test_programming_errors(call, error) -> None:
    with pytest.raises(error):
        call()


def test_secondaries_are_their_own_benjamini_hochberg_family_as_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    p = [0.004, 0.03, 0.01, 0.02, 0.04, 0.2, None, 0.001]
    roles = ["primary", "primary", "secondary", "secondary", "secondary", "guardrail",
             "secondary", "secondary"]
    adjusted = adjust_by_role(p, roles, method="holm")
    primary = multitest.multipletests([0.004, 0.03], method="holm")[1]
    secondary = multitest.multipletests([0.01, 0.02, 0.04, 0.001], method="fdr_bh")[1]
    assert [adjusted[0], adjusted[1]] == pytest.approx(list(primary), rel=1e-12)
    assert [adjusted[i] for i in (2, 3, 4, 7)] == pytest.approx(list(secondary), rel=1e-12)
    assert adjusted[5] == 0.2 and adjusted[6] is None
