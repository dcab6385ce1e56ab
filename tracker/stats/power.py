"""Power of the two-sided two-sample test, for planning and for checking the simulation.

Normal approximation (e.g. Chow, Shao & Wang, *Sample Size Calculations in
Clinical Research*, 2nd ed., ch. 3): with SE = √(σ_T²/n_T + σ_C²/n_C) and
z = z_{1−α/2},

    power(δ) = Φ(δ/SE − z) + Φ(−δ/SE − z).

Welch's t with hundreds of users per arm is indistinguishable from this.

The minimum detectable effect (MDE) inverts it: the δ whose power is the target (0.8 by
custom), ≈ (z_{1−α/2} + z_{power}) · SE; here solved exactly, both tails included, so
``power_two_sample(minimum_detectable_effect(...)) == power``. Because power depends on δ
only through δ/SE, the MDE shrinks as 1/√N, which gives the users (and days) needed to
detect a target effect.
"""

from __future__ import annotations

import math

from tracker.stats import distributions as dist


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
    z = float(dist.norm_ppf(1 - alpha / 2))
    shift = abs(difference) / se
    return float(dist.norm_cdf(shift - z) + dist.norm_cdf(-shift - z))


def _check_alpha_power(alpha: float, power: float) -> None:
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    if not (alpha < power < 1.0):
        raise ValueError(f"power must lie between alpha ({alpha!r}) and 1, got {power!r}")


def mde_multiplier(*, alpha: float = 0.05, power: float = 0.8,
                   critical: float | None = None) -> float:
    """The minimum detectable effect in standard errors: the m with
    Φ(m − z) + Φ(−m − z) = ``power``, z = z_{1−α/2} (exact; ≈ z + z_{power}).

    ``critical`` replaces z: the test rejects when |estimate| / SE exceeds it, e.g. the
    boundary of an always-valid confidence sequence at today's users
    (:func:`tracker.stats.sequential.sequential_critical`), so that the MDE is the effect
    that test detects with probability ``power`` at a single look.

    >>> round(mde_multiplier(alpha=0.05, power=0.8), 4)
    2.8016
    >>> round(mde_multiplier(power=0.8, critical=3.0), 4)   # ≈ 3.0 + 0.8416
    3.8416
    """
    _check_alpha_power(alpha, power)
    if critical is not None and not (math.isfinite(critical) and critical > 0):
        raise ValueError(f"critical must be a positive number, got {critical!r}")
    z = float(dist.norm_ppf(1 - alpha / 2)) if critical is None else float(critical)

    def shortfall(m: float) -> float:
        return float(dist.norm_cdf(m - z) + dist.norm_cdf(-m - z)) - power

    def slope(m: float) -> float:  # φ(m − z) − φ(m + z) > 0 for m > 0
        return (math.exp(-(m - z) ** 2 / 2) - math.exp(-(m + z) ** 2 / 2)) / _SQRT_2PI

    guess = z + float(dist.norm_ppf(power))
    return _newton_in(shortfall, slope, max(guess - 1.0, 0.0), guess + 1.0, guess)


_SQRT_2PI = math.sqrt(2 * math.pi)


def _newton_in(f, slope, low: float, high: float, start: float) -> float:
    """The root of the increasing ``f`` in [``low``, ``high``]: Newton's steps from ``start``,
    a bisection wherever a step would leave the bracket, to the last bit (ValueError when
    ``f`` has one sign at both ends). Not ``scipy.optimize.brentq``: importing
    ``scipy.optimize`` costs 0.35 s in every process that builds a report (the nightly
    rollup's summary, the dashboard), for a root of one smooth monotone function."""
    f_low, f_high = f(low), f(high)
    if f_low > 0 or f_high < 0:
        raise ValueError(f"no root in [{low!r}, {high!r}]: f(a) and f(b) must have "
                         "different signs")
    if f_low == 0 or f_high == 0:
        return low if f_low == 0 else high
    x = min(max(start, low), high)
    for _ in range(200):
        value = f(x)
        if value == 0:
            return x
        low, high = (x, high) if value < 0 else (low, x)
        rate = slope(x)
        step = x - value / rate if rate > 0 else math.nan
        if not low < step < high:  # NaN too
            step = low + (high - low) / 2
            if not low < step < high:  # the bracket is two adjacent doubles
                return step
        if step == x:
            return step
        x = step
    return x


def minimum_detectable_effect(
    std_treatment: float,
    std_control: float,
    n_treatment: int,
    n_control: int,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """Smallest difference in means the two-sided test at ``alpha`` detects with probability
    ``power``, with ``n_*`` users per arm and user-level standard deviations ``std_*``:
    MDE = m · √(σ_T²/n_T + σ_C²/n_C), m from :func:`mde_multiplier`.

    Worked example: σ = 1 in both arms, 1,570 users each: SE ≈ 0.035692, m ≈ 2.8016,
    MDE ≈ 0.1000 (the example of :func:`power_two_sample`, read backwards).

    >>> round(minimum_detectable_effect(1.0, 1.0, 1570, 1570), 4)
    0.1
    """
    if min(n_treatment, n_control) < 1:
        raise ValueError(f"need at least one user per arm, got {n_treatment} and {n_control}")
    if not (math.isfinite(std_treatment) and math.isfinite(std_control)) or min(
            std_treatment, std_control) < 0:
        raise ValueError(f"standard deviations must be finite and >= 0, got {std_treatment!r} "
                         f"and {std_control!r}")
    se = math.sqrt(std_treatment**2 / n_treatment + std_control**2 / n_control)
    return mde_multiplier(alpha=alpha, power=power) * se


def users_for_effect(
    difference: float,
    std_treatment: float,
    std_control: float,
    share_treatment: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """Users in the two arms together at which ``difference`` becomes the MDE, the arms
    splitting them ``share_treatment`` : 1 − ``share_treatment``:
    N = m² (σ_T²/p + σ_C²/(1 − p)) / δ² (fractional; round up to plan).

    >>> round(users_for_effect(0.1, 1.0, 1.0, 0.5))
    3140
    """
    if not (0.0 < share_treatment < 1.0):
        raise ValueError(f"share_treatment must be strictly between 0 and 1, got "
                         f"{share_treatment!r}")
    if not (math.isfinite(difference) and difference != 0):
        raise ValueError(f"difference must be finite and non-zero, got {difference!r}")
    spread = std_treatment**2 / share_treatment + std_control**2 / (1 - share_treatment)
    return mde_multiplier(alpha=alpha, power=power) ** 2 * spread / difference**2


def power_non_inferiority(margin: float, std_error: float, *, alpha: float = 0.05) -> float:
    """Power of the one-sided non-inferiority test at ``alpha`` (see
    :func:`tracker.stats.compare.non_inferiority`) when the true effect is 0:
    Φ(margin / SE − z_{1−α}) (normal approximation of Welch's t).

    Worked example: a 5 % margin, SE 2 %: Φ(2.5 − 1.6449) = Φ(0.8551) ≈ 0.804.

    >>> round(power_non_inferiority(0.05, 0.02), 3)
    0.804
    """
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    if not (math.isfinite(margin) and margin >= 0 and math.isfinite(std_error)
            and std_error >= 0):
        raise ValueError(f"margin and std_error must be finite and >= 0, got {margin!r} and "
                         f"{std_error!r}")
    if std_error == 0:
        return 1.0 if margin > 0 else alpha
    return float(dist.norm_cdf(margin / std_error - dist.norm_ppf(1 - alpha)))
