"""Power of the two-sided two-sample test, for planning and for checking the simulation.

Normal approximation (e.g. Chow, Shao & Wang, *Sample Size Calculations in
Clinical Research*, 2nd ed., ch. 3): with SE = √(σ_T²/n_T + σ_C²/n_C) and
z = z_{1−α/2},

    power(δ) = Φ(δ/SE − z) + Φ(−δ/SE − z).

Welch's t with hundreds of users per arm is indistinguishable from this.
"""

from __future__ import annotations

import math

from scipy import stats as sps


def power_two_sample(
    difference: float,
    std_treatment: float,
    std_control: float,
    n_treatment: int,
    n_control: int,
    *,
    alpha: float = 0.05,
) -> float:
    """Probability that the fixed-horizon test at ``alpha`` detects ``difference``.

    ``std_*`` are user-level standard deviations, ``n_*`` users per arm.

    Worked example: δ = 0.1, σ = 1 in both arms, 1,570 users each: SE = √(2/1570)
    ≈ 0.03569, δ/SE ≈ 2.802, power ≈ Φ(2.802 − 1.960) ≈ 0.80.

    >>> round(power_two_sample(0.1, 1.0, 1.0, 1570, 1570), 3)
    0.8
    >>> round(power_two_sample(0.0, 1.0, 1.0, 100, 100), 3)
    0.05
    """
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    if min(n_treatment, n_control) < 1:
        raise ValueError(f"need at least one user per arm, got {n_treatment} and {n_control}")
    if min(std_treatment, std_control) < 0 or not math.isfinite(difference):
        raise ValueError("standard deviations must be >= 0 and the difference finite")
    se = math.sqrt(std_treatment**2 / n_treatment + std_control**2 / n_control)
    if se == 0.0:
        return 1.0 if difference != 0 else alpha
    z = float(sps.norm.ppf(1 - alpha / 2))
    shift = abs(difference) / se
    return float(sps.norm.cdf(shift - z) + sps.norm.cdf(-shift - z))
