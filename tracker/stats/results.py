"""Result vocabulary shared by every statistic: reason codes, interval kinds, effects.

A statistic that cannot be computed from its inputs does not raise and does not
return NaN: it returns its result with the fields it cannot fill set to ``None``
and a :class:`Reason` saying why. Fields that *can* still be filled are filled
(a one-user arm still has a mean; a zero-variance difference still has a point
estimate). Exceptions are kept for programming errors: negative counts, a level
outside (0, 1), arrays of mismatched length.

The enums are ``StrEnum`` so that they serialise as their value (``"one_user"``)
in JSON and CSV without a custom encoder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from numbers import Real


class Reason(StrEnum):
    """Why a result is (partly) missing; ``OK`` when everything was computed.

    >>> Reason.ZERO_VARIANCE == "zero_variance"
    True
    """

    OK = "ok"
    #: An arm (or the whole experiment) has no users: nothing to estimate.
    NO_USERS = "no_users"
    #: An arm has exactly one user: the mean exists, its variance does not (n - 1 = 0).
    ONE_USER = "one_user"
    #: Every user has the same value (or the combined standard error is 0):
    #: the point estimate exists but no interval or p-value does.
    ZERO_VARIANCE = "zero_variance"
    #: A ratio metric whose denominator sum (impressions) is 0.
    ZERO_DENOMINATOR = "zero_denominator"
    #: Relative lift is undefined because the control mean is 0.
    CONTROL_MEAN_ZERO = "control_mean_zero"
    #: A relative guardrail needs a control mean > 0 (a loss relative to a negative mean
    #: has no agreed direction).
    NON_POSITIVE_MEAN = "non_positive_mean"
    #: The control mean is not distinguishable from 0 at this level, so the ratio's
    #: (Fieller) interval is unbounded: the lift has a point estimate but no interval.
    UNBOUNDED_RATIO = "unbounded_ratio"
    #: A trend over days needs at least three days (two for the line, one for its error).
    TOO_FEW_DAYS = "too_few_days"


class Decided(StrEnum):
    """Which effect's interval stands beside a comparison's verdict.

    The p-value is always Welch's test of T = C, and both intervals invert it
    (see :mod:`tracker.stats.compare`). ``RELATIVE_LIFT``: Fieller's interval of
    the lift, the default; ``DIFFERENCE``: the difference's interval, when the
    lift's is unbounded or undefined (control mean 0 or indistinguishable from 0).
    """

    RELATIVE_LIFT = "relative_lift"
    DIFFERENCE = "difference"


class IntervalKind(StrEnum):
    """Which guarantee an interval (and its p-value) carries.

    ``FIXED_HORIZON``: valid if looked at once, at a sample size fixed in advance.
    ``SEQUENTIAL``: an always-valid confidence sequence, valid however often it is
    looked at (daily peeking included), at the cost of being wider.
    """

    FIXED_HORIZON = "fixed_horizon"
    SEQUENTIAL = "sequential"


@dataclass(frozen=True, slots=True)
class Effect:
    """An effect of treatment against control: point estimate and two-sided interval.

    ``ci_low``/``ci_high`` are the interval's ends (never a half-width). When
    ``reason`` is not ``Reason.OK`` the interval is ``None``; ``estimate`` and
    ``std_error`` are still set when they exist (e.g. ``ZERO_VARIANCE``: the
    difference is known, its interval is not).
    """

    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    std_error: float | None
    reason: Reason

    @property
    def ok(self) -> bool:
        return self.reason is Reason.OK


def check_level(level: float) -> float:
    """Validate a confidence level: a finite number strictly between 0 and 1.

    >>> check_level(0.95)
    0.95
    >>> check_level(95)
    Traceback (most recent call last):
    ...
    ValueError: level must be strictly between 0 and 1 (e.g. 0.95), got 95
    """
    if isinstance(level, bool) or not isinstance(level, Real):
        raise TypeError(f"level must be a number such as 0.95, got {type(level).__name__}")
    if not (math.isfinite(level) and 0.0 < level < 1.0):
        raise ValueError(f"level must be strictly between 0 and 1 (e.g. 0.95), got {level!r}")
    return float(level)
