"""Power formula of the two-sample test."""

from __future__ import annotations

import math

import pytest
from scipy import stats as sps

from tracker.stats import power_two_sample


def test_hand_worked_example() -> None:
    # SE = sqrt(2 / 1570) = 0.0356915; 0.1 / SE = 2.80179; Phi(2.80179 - 1.95996) = 0.79999
    shift = 0.1 / math.sqrt(2 / 1570)
    expected = sps.norm.cdf(shift - 1.959964) + sps.norm.cdf(-shift - 1.959964)
    assert power_two_sample(0.1, 1.0, 1.0, 1570, 1570) == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx(0.80, abs=0.001)


@pytest.mark.parametrize(
    ("effect", "n", "ratio"),
    [
        pytest.param(0.2, 400, 1.0, id="balanced"),
        pytest.param(0.05, 3000, 2.0, id="twice-as-many-control-users"),
        pytest.param(-0.1, 800, 0.5, id="negative-effect-small-control"),
    ],
)
def test_matches_statsmodels_normal_power(effect: float, n: int, ratio: float) -> None:
    power = pytest.importorskip("statsmodels.stats.power")
    expected = power.NormalIndPower().power(effect, nobs1=n, alpha=0.05, ratio=ratio)
    ours = power_two_sample(effect, 1.0, 1.0, n, int(n * ratio), alpha=0.05)
    assert ours == pytest.approx(expected, rel=1e-6)


def test_no_effect_has_power_alpha() -> None:
    assert power_two_sample(0.0, 2.0, 3.0, 100, 200, alpha=0.1) == pytest.approx(0.1)
