"""Crossover health: users exposed to more than one arm of the same experiment.

A user who saw both the control and a treatment list carries both effects, and
her outcome belongs to neither arm; many of them dilute every lift towards 0
and hint at broken assignment (changing user ids, cache keys, a flag flipping).
GrowthBook reports the same count as "multiple exposures". Defaults: warn at
1 %, alert at 10 %; both are parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from numbers import Integral

from tracker.stats.results import Reason

DEFAULT_WARN_AT = 0.01
DEFAULT_ALERT_AT = 0.10


class Health(StrEnum):
    """Traffic-light status of a health check."""

    OK = "ok"
    WARN = "warn"
    ALERT = "alert"


@dataclass(frozen=True, slots=True)
class CrossoverHealth:
    """Share of the experiment's users who were exposed to more than one arm.

    ``status`` is ``ALERT`` when ``share >= alert_at``, ``WARN`` when
    ``share >= warn_at``, else ``OK``; ``share`` and ``status`` are ``None``
    with ``reason=NO_USERS`` when the experiment has no users yet.
    """

    users: int
    crossover_users: int
    share: float | None
    status: Health | None
    warn_at: float
    alert_at: float
    reason: Reason


def crossover_health(
    users: int,
    crossover_users: int,
    *,
    warn_at: float = DEFAULT_WARN_AT,
    alert_at: float = DEFAULT_ALERT_AT,
) -> CrossoverHealth:
    """Crossover share and its status.

    ``users`` counts distinct users exposed to the experiment (crossed ones
    included, each once); ``crossover_users`` those exposed to two arms or more.

    >>> crossover_health(10_000, 50).status
    <Health.OK: 'ok'>
    >>> r = crossover_health(10_000, 250)
    >>> r.share, r.status
    (0.025, <Health.WARN: 'warn'>)
    >>> crossover_health(0, 0).reason
    <Reason.NO_USERS: 'no_users'>
    """
    for name, value in (("users", users), ("crossover_users", crossover_users)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer count, got {value!r}")
    if crossover_users > users:
        raise ValueError(
            f"crossover_users ({crossover_users}) cannot exceed users ({users}): users must "
            "count every distinct exposed user, crossed ones included"
        )
    if not (math.isfinite(warn_at) and math.isfinite(alert_at) and 0 < warn_at <= alert_at <= 1):
        raise ValueError(
            f"need 0 < warn_at <= alert_at <= 1, got warn_at={warn_at!r}, alert_at={alert_at!r}"
        )
    users, crossover_users = int(users), int(crossover_users)
    if users == 0:
        return CrossoverHealth(0, 0, None, None, warn_at, alert_at, Reason.NO_USERS)
    share = crossover_users / users
    if share >= alert_at:
        status = Health.ALERT
    elif share >= warn_at:
        status = Health.WARN
    else:
        status = Health.OK
    return CrossoverHealth(users, crossover_users, share, status, warn_at, alert_at, Reason.OK)
