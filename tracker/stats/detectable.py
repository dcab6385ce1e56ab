"""What a primary metric can detect, and when: the minimum detectable effect at today's users
in the analysis' interval mode, and the days until it reaches the target effect.

Fixed horizon: MDE = m · SE with m solving Φ(m − z) + Φ(−m − z) = power, z = z_{1−α/2}
(:func:`tracker.stats.power.mde_multiplier`). Sequential (always-valid): the same with the
confidence sequence's boundary at today's users in place of z
(:func:`tracker.stats.sequential.sequential_critical`; Waudby-Smith et al. 2023), which grows
like √(log N), so the users needed are solved numerically. The days to get them come from
the model of arrivals (:mod:`tracker.stats.arrivals`), capped at the planned end or
:data:`~tracker.stats.arrivals.MAX_HORIZON_DAYS`; beyond it the note says the target is not
reachable at the current traffic and which effect is detectable by then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracker.stats.arrivals import (
    MAX_HORIZON_DAYS,
    Arrivals,
    constant_arrivals,
    fit_arrivals,
)
from tracker.stats.estimates import moments
from tracker.stats.power import mde_multiplier
from tracker.stats.results import IntervalKind
from tracker.stats.sequential import DEFAULT_TUNING_N, sequential_critical
from tracker.stats.sufficient import ArmStats


@dataclass(frozen=True, slots=True)
class ArmSample:
    """What judging power needs for one metric: users per arm today, the user-level
    variance per arm and the control mean (the rollup's sufficient statistics), and
    ``users_per_day``, new users per day in the two arms together, e.g. (users today − users
    a week ago) / 7 in the cumulative view (None: unknown), a constant rate; or better
    ``daily_new_users``, the new users of each day so far in the two arms together (oldest
    first), to which the arrival model is fitted (:func:`tracker.stats.arrivals.fit_arrivals`).
    """

    users_treatment: int
    users_control: int
    variance_treatment: float | None
    variance_control: float | None
    mean_control: float | None
    users_per_day: float | None = None
    daily_new_users: tuple[float, ...] | None = None

    @classmethod
    def from_stats(cls, treatment: ArmStats, control: ArmStats,
                   users_per_day: float | None = None,
                   daily_new_users: Sequence[float] | None = None) -> ArmSample:
        """From the two arms' sufficient statistics: the user-level variance is n times the
        variance of the arm's estimate (for a ratio metric, its delta-method equivalent)."""
        t, c = moments(treatment), moments(control)
        return cls(t.n, c.n, None if t.variance is None else t.variance * t.n,
                   None if c.variance is None else c.variance * c.n, c.estimate, users_per_day,
                   None if daily_new_users is None else tuple(map(float, daily_new_users)))

    def arrivals(self) -> Arrivals | None:
        """The arrival model: fitted to ``daily_new_users`` when given, else the constant
        ``users_per_day``; None when neither is known."""
        if self.daily_new_users:
            return fit_arrivals(self.daily_new_users)
        if self.users_per_day is None:
            return None
        return constant_arrivals(max(0.0, self.users_per_day))


@dataclass(frozen=True, slots=True)
class PrimaryPower:
    """Power of one primary at today's users. ``mde``: the relative minimum detectable
    effect (``mde_absolute`` in the metric's units) at α / m and ``power`` (of the interval
    mode's test: ``interval_kind``); ``powered``: ``mde <= target``; ``days_to_target``: days
    of new users until the MDE reaches the target (0 when powered; None when it cannot be
    said or is beyond ``horizon_days``, ``note`` says why). ``reachable``: the target is
    reached within ``horizon_days`` (the planned end, or a year) at the forecast traffic
    (None: unknown); ``mde_at_horizon``: the relative MDE at the users forecast for then."""

    metric: str
    mde: float | None
    mde_absolute: float | None
    target: float
    powered: bool
    days_to_target: int | None
    note: str
    reachable: bool | None = None
    horizon_days: int | None = None
    mde_at_horizon: float | None = None
    interval_kind: IntervalKind = IntervalKind.FIXED_HORIZON

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "mde": self.mde, "mde_absolute": self.mde_absolute,
                "target": self.target, "powered": self.powered,
                "days_to_target": self.days_to_target, "note": self.note,
                "reachable": self.reachable, "horizon_days": self.horizon_days,
                "mde_at_horizon": self.mde_at_horizon,
                "interval_kind": self.interval_kind.value}


@dataclass(frozen=True, slots=True)
class _Detectable:
    """The MDE of one primary as a function of the users of both arms (same split as today):
    ``multiplier(n)`` the MDE in standard errors (its critical value depends on n when the
    analysis is sequential) and ``spread`` = σ_T² / p + σ_C² / (1 − p)."""

    alpha: float
    power: float
    spread: float
    sequential: bool
    tuning_alpha: float
    tuning_n: float

    def multiplier(self, n: float) -> float:
        if not self.sequential:
            return mde_multiplier(alpha=self.alpha, power=self.power)
        critical = sequential_critical(n, self.alpha, tuning_alpha=self.tuning_alpha,
                                       tuning_n=self.tuning_n)
        return mde_multiplier(alpha=self.alpha, power=self.power, critical=critical)

    def mde(self, n: float) -> float:
        """The absolute MDE with ``n`` users in the two arms together."""
        return self.multiplier(n) * math.sqrt(self.spread / n)

    def users_for(self, effect: float, start: float) -> float:
        """Users (both arms) at which ``effect`` becomes the MDE; at least ``start``."""
        if self.mde(start) <= effect:
            return start
        if not self.sequential:  # closed form: N = m² · spread / δ²
            return self.multiplier(start) ** 2 * self.spread / effect**2
        high = start * 2
        while self.mde(high) > effect:
            high *= 2
            if high > 1e15:
                return math.inf
        from scipy import optimize  # here: its import takes 0.35 s (tracker.stats.distributions)

        return float(optimize.brentq(lambda n: self.mde(n) - effect, start, high, rtol=1e-10))


def primary_power(metric: str, s: ArmSample | None, *, alpha: float, power: float,
                  target: float, interval_kind: IntervalKind = IntervalKind.FIXED_HORIZON,
                  tuning_alpha: float = 0.05, tuning_n: float = DEFAULT_TUNING_N,
                  days_left: int | None = None) -> PrimaryPower:
    """MDE of ``metric`` with the sample ``s`` at today's users (two-sided test at ``alpha``,
    already divided by the family size; always-valid when ``interval_kind`` is sequential)
    and the days until it reaches ``target`` at the forecast arrivals, within ``days_left``
    (the days to the planned end) or :data:`~tracker.stats.arrivals.MAX_HORIZON_DAYS`."""
    def unknown(note: str) -> PrimaryPower:
        return PrimaryPower(metric, None, None, target, False, None, f"{metric}: {note}",
                            interval_kind=interval_kind)

    if s is None or s.variance_treatment is None or s.variance_control is None:
        return unknown("power cannot be judged yet (no variance: too few users)")
    if min(s.users_treatment, s.users_control) < 2:
        return unknown("power cannot be judged with fewer than 2 users per arm")
    if not s.mean_control:
        return unknown("the control mean is 0, a relative MDE is undefined")
    users = s.users_treatment + s.users_control
    share = s.users_treatment / users
    detectable = _Detectable(alpha, power, s.variance_treatment / share
                             + s.variance_control / (1 - share),
                             interval_kind is IntervalKind.SEQUENTIAL, tuning_alpha, tuning_n)
    scale = abs(s.mean_control)
    absolute = detectable.mde(users)
    relative = absolute / scale
    always_valid = " (always-valid)" if detectable.sequential else ""
    head = (f"{metric}: MDE{always_valid} {relative:.1%} at today's {s.users_treatment:,} + "
            f"{s.users_control:,} users (target {target:.1%})")
    horizon = MAX_HORIZON_DAYS if days_left is None else max(0, min(days_left,
                                                                    MAX_HORIZON_DAYS))
    done = {"interval_kind": interval_kind, "horizon_days": horizon}
    if relative <= target:
        return PrimaryPower(metric, relative, absolute, target, True, 0, f"{head}: powered",
                            reachable=True, mde_at_horizon=relative, **done)
    arrivals = s.arrivals()
    if arrivals is None:
        return PrimaryPower(metric, relative, absolute, target, False, None,
                            f"{head}; new users per day unknown", **done)
    needed = detectable.users_for(target * scale, users)
    days = arrivals.days_to(needed - users, horizon)
    if days is not None:
        return PrimaryPower(metric, relative, absolute, target, False, days,
                            f"{head}; about {days} more day(s) at {_traffic(arrivals)}",
                            reachable=True, **done)
    return _not_reachable(metric, relative, absolute, target, head, detectable,
                          users + arrivals.users_within(horizon), scale, arrivals, days_left,
                          done)


def _not_reachable(metric: str, relative: float, absolute: float, target: float, head: str,
                   detectable: _Detectable, by_then: float, scale: float, arrivals: Arrivals,
                   days_left: int | None, done: dict[str, Any]) -> PrimaryPower:
    """The target beyond the horizon: said plainly, with the effect detectable by then."""
    at_horizon = detectable.mde(by_then) / scale
    when = "within a year"
    if days_left is not None and days_left <= 0:
        when = "by the planned end (today or passed)"
    elif days_left is not None and days_left <= MAX_HORIZON_DAYS:
        when = f"by the planned end ({days_left} day(s) left)"
    traffic = "no new users per day" if arrivals.rate <= 0 else _traffic(arrivals)
    return PrimaryPower(
        metric, relative, absolute, target, False, None,
        f"{head}; the target is not reachable at the current traffic ({traffic}): "
        f"{when} about {by_then:,.0f} users, and the detectable effect then is "
        f"{at_horizon:.1%}", reachable=False, mde_at_horizon=at_horizon, **done)


def _traffic(arrivals: Arrivals) -> str:
    """The forecast traffic in words: "200 new users a day" or "... a day now, declining"."""
    if arrivals.decay >= 1.0:
        return f"{arrivals.rate:,.0f} new users a day"
    return (f"{arrivals.rate:,.0f} new users a day now, {1 - arrivals.decay:.0%} fewer each "
            "day")
