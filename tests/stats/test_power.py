"""Power formula of the two-sample test."""

from __future__ import annotations

import math

import pytest
from scipy import stats as sps

from tracker.stats import power_two_sample
from tracker.stats.power import mde_multiplier


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


@pytest.mark.parametrize("critical", [None, 0.9, 2.0, 3.0, 10.0])
@pytest.mark.parametrize("alpha, power", [(0.001, 0.5), (0.05, 0.8), (0.05, 0.9), (0.1, 0.99),
                                          (0.3, 0.31)])
def test_the_mde_multiplier_is_brents_root_of_the_power_equation(alpha, power, critical):
    from scipy import optimize

    from tracker.stats import distributions as dist

    z = float(dist.norm_ppf(1 - alpha / 2)) if critical is None else critical

    def shortfall(m):
        return float(dist.norm_cdf(m - z) + dist.norm_cdf(-m - z)) - power

    guess = z + float(dist.norm_ppf(power))
    low, high = max(guess - 1.0, 0.0), guess + 1.0
    if shortfall(low) > 0:  # no root in the bracket: refused alike
        with pytest.raises(ValueError, match="different signs"):
            optimize.brentq(shortfall, low, high)
        with pytest.raises(ValueError, match="different signs"):
            mde_multiplier(alpha=alpha, power=power, critical=critical)
        return
    brent = optimize.brentq(shortfall, low, high, xtol=1e-15)
    ours = mde_multiplier(alpha=alpha, power=power, critical=critical)
    assert ours == pytest.approx(brent, rel=1e-14, abs=1e-14)
    assert abs(shortfall(ours)) <= 2 * math.ulp(1.0)  # as close to the root as a double gets


def test_the_mde_multiplier_needs_no_scipy_optimize():
    import subprocess
    import sys

    code = ("import sys; from tracker.stats.power import mde_multiplier; "
            "mde_multiplier(); mde_multiplier(critical=3.0); "
            "print('scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False"]
