"""How many new users will an experiment still get? A model of arrivals for "days to target".

An experiment's daily new users decline as the pool of eligible users is exhausted: the users
who come often arrive in the first days, the rarer ones later, and users already exposed
never arrive again. Extrapolating the last week's rate linearly over-promises, the more so
the further it looks (12 days predicted where 27 are needed, 23 where 127 are, in the audit of
issue 30). The model here is the geometric decay of the daily new users,

    a_t = a_0 · r^t,  0 < r ≤ 1,

the discrete form of an exponential saturation of cumulative reach, N(t) = N_∞ (1 − r^t)
(a finite pool of users, each still unexposed one arriving with the same daily
probability 1 − r). (a_0, r) is the Poisson
maximum-likelihood fit of a log-linear rate to the observed daily counts (a generalised
linear model, McCullagh & Nelder 1989, ch. 6; solved by Newton's method on two parameters).
A fitted r > 1 (traffic still growing) is not extrapolated: r is set to 1 and the rate held
at the fitted last day's, so the forecast never counts on growth it has not seen persist.

From the last observed day t the users of the next h days are a_t · r (1 − r^h) / (1 − r)
(a_t · h when r = 1) and the pool left is a_t · r / (1 − r): a target beyond it is not
reachable at the current traffic, however long the experiment runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Days the forecast looks ahead at most: "about 856 more days" is never an answer.
MAX_HORIZON_DAYS = 365


@dataclass(frozen=True, slots=True)
class Arrivals:
    """The fitted arrival model: ``rate`` the new users a day on the last observed day (a_t),
    ``decay`` r (1: no decline), ``pool`` the new users still to come (inf when r = 1),
    ``days`` the observed days it was fitted to."""

    rate: float
    decay: float
    pool: float
    days: int

    def users_within(self, horizon: int) -> float:
        """Expected new users over the next ``horizon`` days.

        >>> Arrivals(100.0, 0.5, 100.0, 7).users_within(2)   # 50 + 25
        75.0
        """
        if horizon <= 0:
            return 0.0
        if self.decay >= 1.0:
            return self.rate * horizon
        return self.rate * self.decay * (1.0 - self.decay**horizon) / (1.0 - self.decay)

    def days_to(self, users: float, horizon: int = MAX_HORIZON_DAYS) -> int | None:
        """The fewest days until ``users`` more users have arrived; None when that takes
        longer than ``horizon`` days (or exceeds the pool).

        >>> halving = Arrivals(100.0, 0.5, 100.0, 7)   # 50, 25, 12.5, ... of a pool of 100
        >>> halving.days_to(75.0), halving.days_to(100.0)
        (2, None)
        >>> Arrivals(200.0, 1.0, math.inf, 7).days_to(13_208)
        67
        """
        if users <= 0:
            return 0
        if self.rate <= 0 or users >= self.pool:
            return None
        if self.decay >= 1.0:
            days = math.ceil(users / self.rate - 1e-9)
        else:
            left = 1.0 - users * (1.0 - self.decay) / (self.rate * self.decay)
            days = math.ceil(math.log(left) / math.log(self.decay) - 1e-9)
        days = max(1, days)
        return days if days <= horizon else None


def constant_arrivals(rate: float) -> Arrivals:
    """A constant rate of new users a day (no decline known): the model without a series."""
    return Arrivals(float(rate), 1.0, math.inf if rate > 0 else 0.0, 0)


def fit_arrivals(daily_new_users: Sequence[float]) -> Arrivals | None:
    """Fit a_t = a_0 r^t to the new users of each observed day (oldest first) by Poisson
    maximum likelihood; None without at least one day.

    One or two days cannot show a decline: the rate is their mean, held constant. Worked
    example: 400, 200, 100, 50 new users a day halve every day; the fit is exact (r = 0.5),
    the last day's rate 50, and the pool left 50 · 0.5 / 0.5 = 50 users.

    >>> a = fit_arrivals([400, 200, 100, 50])
    >>> round(a.decay, 6), round(a.rate, 3), round(a.pool, 3)
    (0.5, 50.0, 50.0)
    >>> fit_arrivals([100, 100]).decay, fit_arrivals([100, 100]).rate
    (1.0, 100.0)
    """
    y = np.asarray(daily_new_users, dtype=float)
    if y.ndim != 1 or np.any(~np.isfinite(y)) or np.any(y < 0):
        raise ValueError(f"daily_new_users must be counts >= 0, got {list(daily_new_users)}")
    if y.size == 0:
        return None
    if y.size < 3 or y.sum() == 0:
        return constant_arrivals(float(y.mean()))
    t = np.arange(y.size, dtype=float)
    fitted = _poisson_log_linear(t, y)
    if fitted is None:  # no finite maximum (e.g. only the last day has users): hold the mean
        return constant_arrivals(float(y[-7:].mean()))
    intercept, slope = fitted
    if slope > -1e-9:  # growing or flat: hold the fitted last day's rate, never extrapolate growth
        return constant_arrivals(float(math.exp(intercept + slope * t[-1])))
    decay = math.exp(slope)
    rate = math.exp(intercept + slope * t[-1])
    return Arrivals(rate, decay, rate * decay / (1.0 - decay), int(y.size))


def _poisson_log_linear(t: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """Poisson MLE of log E[y] = β₀ + β₁ t by Newton-Raphson (IRLS), from the log-linear
    least-squares start; the log-likelihood is concave, so it converges from there when a
    finite maximum exists. None when it does not (the slope runs off to ±inf: all users on
    the first or the last day)."""
    beta = np.polyfit(t, np.log(y + 0.5), 1)[::-1]
    design = np.column_stack([np.ones_like(t), t])
    for _ in range(100):
        mu = np.exp(np.clip(design @ beta, -700, 700))
        gradient = design.T @ (y - mu)
        hessian = design.T @ (design * mu[:, None])
        try:
            step = np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError:
            return None
        beta = beta + step
        if not np.all(np.isfinite(beta)) or abs(beta[1]) > 20:
            return None
        if np.max(np.abs(step)) < 1e-10:
            return float(beta[0]), float(beta[1])
    return None
