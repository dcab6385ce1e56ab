"""One health model: the checklist the report and both dashboard pages show.

Each check reads plain values (counts, instants) and returns a :class:`HealthItem` with a
:class:`CheckStatus` and one sentence. The checklist's overall status is its worst item; ``info``
items say something worth knowing that is normal (provisional days while an experiment runs)
and never make the status worse. A failing item, or too few users, blocks a ``ship``
decision (:attr:`HealthChecklist.blocks_ship`).

The checks, after the health tabs of GrowthBook, Statsig Pulse and Eppo's diagnostics:

- ``srm``: sample-ratio mismatch on the test's p-value (:func:`tracker.stats.srm.srm_test`,
  and :func:`~tracker.stats.srm.sequential_srm` over daily looks when given): ``fail`` when
  flagged; the deviation is reported as its size, never as a gate.
- ``crossover``: the share of users exposed to two arms or more
  (:func:`tracker.stats.crossover.crossover_health`): ``warn`` at 1 %, ``fail`` at 10 %.
- ``freshness``: "data through" the newest *event time* the rollup has seen (the newest list
  served, or the newest interaction of its users that can answer one), and ``data_lag_hours``
  = now − that instant, never negative (an event "after now" is clock skew between the
  servers: the lag is clamped to 0 and the message says so). Event time, not arrival time:
  logs that arrive late carry old event times and must not make the data look fresher than
  what happened, and an import of old logs must not read "lag 0 h". ``warn`` past
  ``stale_after_hours`` (36 h: a whole reporting day, the experiment's calendar day, has
  passed with no event, whatever the hour it is read), saying logging looks stopped past
  ``dead_after_hours`` (7 days), while the experiment runs; ``info`` once it has stopped (old
  data is then expected). Never ``fail``: old data is old, not wrong. Its lifts and intervals
  hold for the users seen through that instant, so staleness is said loudly but greys no
  number and blocks no decision (a failing item would do both).
- ``rollup``: ``warn`` when events were logged but no rollup ever ran, or the last one is
  older than ``stale_after_hours`` while the experiment runs.
- ``provisional``: days whose attribution windows are still open, as ``info``: normal while
  an experiment runs, since late interactions can still change them.
- ``sample``: ``warn`` when an arm has fewer than ``min_users`` users: too few for the
  intervals' normal approximation, and a decision cannot be ``ship``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from tracker.stats.crossover import Health, crossover_health
from tracker.stats.results import Reason
from tracker.stats.srm import SrmResult, sequential_srm, srm_test

DEFAULT_STALE_AFTER_HOURS = 36.0
DEFAULT_DEAD_AFTER_HOURS = 168.0
DEFAULT_MIN_USERS = 100


class CheckStatus(StrEnum):
    """Status of one health item, and of the checklist (its worst item)."""

    PASS = "pass"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"


_SEVERITY = {CheckStatus.INFO: 0, CheckStatus.PASS: 0, CheckStatus.WARN: 1, CheckStatus.FAIL: 2}


@dataclass(frozen=True, slots=True)
class HealthItem:
    """One line of the checklist: which ``check``, its ``status`` and a sentence saying why.
    ``blocks_ship``: this item alone forbids a ``ship`` decision."""

    check: str
    status: CheckStatus
    message: str
    blocks_ship: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status.value, "message": self.message,
                "blocks_ship": self.blocks_ship}


@dataclass(frozen=True, slots=True)
class HealthChecklist:
    """The checklist: its items in display order, the overall ``status`` (the worst item;
    ``info`` counts as ``pass``) and ``data_lag_hours`` (since the newest event; None before
    any)."""

    items: tuple[HealthItem, ...]
    status: CheckStatus
    data_lag_hours: float | None

    @property
    def blocks_ship(self) -> bool:
        """True when some item fails or forbids ``ship`` on its own (too few users)."""
        return any(i.status is CheckStatus.FAIL or i.blocks_ship for i in self.items)

    def item(self, check: str) -> HealthItem:
        for item in self.items:
            if item.check == check:
                return item
        raise KeyError(f"no health check {check!r}; checks: "
                       f"{', '.join(i.check for i in self.items)}")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "data_lag_hours": self.data_lag_hours,
                "blocks_ship": self.blocks_ship, "items": [i.to_dict() for i in self.items]}


def overall_status(items: Sequence[HealthItem]) -> CheckStatus:
    """The worst status among ``items``; ``info`` never worsens it; no items: ``pass``."""
    worst = max((_SEVERITY[i.status] for i in items), default=0)
    return {0: CheckStatus.PASS, 1: CheckStatus.WARN, 2: CheckStatus.FAIL}[worst]


def _deviation_text(users: Mapping[str, int], weights: Mapping[str, float]) -> str:
    """The arm furthest from its declared share, as a size: "control got 0.34% fewer users
    than its declared share"."""
    total_users = sum(users.values())
    total_weight = sum(weights[a] for a in users)
    gaps = {a: users[a] / (total_users * weights[a] / total_weight) - 1 for a in users}
    arm = max(gaps, key=lambda a: abs(gaps[a]))
    more = "more" if gaps[arm] > 0 else "fewer"
    return f"{arm} got {abs(gaps[arm]):.2%} {more} users than its declared share"


def _p_text(p: float) -> str:
    """A p-value as printed: ``= 0.0455``, ``= 2.3e-17``; below 1e-16 (double precision's
    floor, where 0 would be printed) ``< 1e-16``."""
    return "< 1e-16" if p < 1e-16 else f"= {p:.3g}"


def srm_item(users: Mapping[str, int], weights: Mapping[str, float], *,
             looks: Sequence[Sequence[int]] | None = None,
             threshold: float | None = None) -> HealthItem:
    """SRM of ``users`` per arm against the declared ``weights`` (same arm keys);
    ``looks``: cumulative users per arm per day (arms in ``users``' order) for the
    anytime-valid test too. ``fail`` when either test is flagged."""
    arms = list(users)
    options = {} if threshold is None else {"threshold": threshold}
    counts = [int(users[a]) for a in arms]
    shares = [float(weights[a]) for a in arms]
    results: list[SrmResult] = [srm_test(counts, shares, **options)]
    if looks is not None and len(looks) and sum(looks[-1]):
        results.append(sequential_srm(looks, shares, **options))
    if results[0].reason is Reason.NO_USERS:
        return HealthItem("srm", CheckStatus.INFO, "SRM: no users yet")
    p_text = ", ".join(f"{'sequential ' if r.sequential else ''}p {_p_text(r.p_value)}"
                       for r in results)
    size = _deviation_text(users, weights)
    if any(r.flagged for r in results):
        return HealthItem("srm", CheckStatus.FAIL,
                          f"sample-ratio mismatch ({p_text}): {size}; users were lost "
                          "unevenly, do not trust the lifts until this is explained")
    return HealthItem("srm", CheckStatus.PASS, f"split as declared ({p_text}; {size})")


def crossover_item(users: int, crossover_users: int) -> HealthItem:
    """Users exposed to more than one arm: ``warn`` at 1 %, ``fail`` at 10 % of ``users``."""
    result = crossover_health(users, crossover_users)
    if result.status is None:
        return HealthItem("crossover", CheckStatus.INFO, "crossover: no users yet")
    text = f"{crossover_users} of {users} users saw more than one arm ({result.share:.2%})"
    status = {Health.OK: CheckStatus.PASS, Health.WARN: CheckStatus.WARN,
              Health.ALERT: CheckStatus.FAIL}[result.status]
    if status is CheckStatus.FAIL:
        text += ": assignment looks broken, lifts are diluted"
    return HealthItem("crossover", status, text)


def data_lag_hours(newest_event: datetime | None, now: datetime) -> float | None:
    """now − ``newest_event`` in hours, clamped at 0 (None without events). Both instants
    must be timezone-aware.

    >>> from datetime import UTC
    >>> data_lag_hours(datetime(2026, 1, 2, 6, tzinfo=UTC), datetime(2026, 1, 2, 9, tzinfo=UTC))
    3.0
    >>> data_lag_hours(datetime(2026, 1, 2, 9, 30, tzinfo=UTC),
    ...                datetime(2026, 1, 2, 9, tzinfo=UTC))
    0.0
    """
    if newest_event is None:
        return None
    _check_aware(newest_event, "newest_event")
    _check_aware(now, "now")
    return max(0.0, (now - newest_event).total_seconds() / 3600)


def _check_aware(value: datetime, name: str) -> None:
    if value.tzinfo is None:
        raise ValueError(f"{name} must be a timezone-aware datetime (e.g. tzinfo=UTC), "
                         f"got the naive {value.isoformat()}")


def ago(hours: float) -> str:
    """A lag as a reader takes it in: hours up to two days, days beyond.

    >>> ago(2.04), ago(47.9), ago(578.0)
    ('2.0 h ago', '47.9 h ago', '24.1 days ago')
    """
    return f"{hours:.1f} h ago" if hours < 48 else f"{hours / 24:.1f} days ago"


def freshness_item(newest_event: datetime | None, now: datetime, *, running: bool = True,
                   stale_after_hours: float = DEFAULT_STALE_AFTER_HOURS,
                   dead_after_hours: float = DEFAULT_DEAD_AFTER_HOURS) -> HealthItem:
    """How fresh the data is: through the newest event time, and how long ago that was (see
    the module docstring for the rule).

    >>> from datetime import UTC
    >>> freshness_item(datetime(2026, 11, 3, 14, 20, tzinfo=UTC),
    ...                datetime(2026, 11, 3, 16, 20, tzinfo=UTC)).message
    'data through 2026-11-03 14:20 UTC (newest event 2.0 h ago)'
    """
    if not 0 < stale_after_hours <= dead_after_hours:
        raise ValueError(f"need 0 < stale_after_hours <= dead_after_hours, got "
                         f"{stale_after_hours!r} and {dead_after_hours!r}")
    lag = data_lag_hours(newest_event, now)
    if lag is None:
        return HealthItem("freshness", CheckStatus.INFO, "no event rolled up yet")
    through = f"data through {newest_event.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    ahead = (newest_event - now).total_seconds() / 3600
    if ahead > 0:
        return HealthItem("freshness", CheckStatus.PASS,
                          f"{through} (newest event {ahead:.1f} h after this clock's now: "
                          "clock skew between servers, shown as a lag of 0 h)")
    text = f"{through} (newest event {ago(lag)})"
    if not running:
        return HealthItem("freshness", CheckStatus.INFO, f"{text}; the experiment has stopped")
    if lag > dead_after_hours:
        return HealthItem("freshness", CheckStatus.WARN,
                          f"{text}: stale, no event for over {dead_after_hours:g} h, logging "
                          "looks stopped")
    if lag > stale_after_hours:
        return HealthItem("freshness", CheckStatus.WARN,
                          f"{text}: stale, no event for over {stale_after_hours:g} h (a "
                          "whole reporting day without data)")
    return HealthItem("freshness", CheckStatus.PASS, text)


def rollup_item(last_rollup: datetime | None, logged: bool, now: datetime, *,
                running: bool = True,
                stale_after_hours: float = DEFAULT_STALE_AFTER_HOURS) -> HealthItem:
    """When the rollup last ran: ``warn`` when events (``logged``) wait for a first rollup,
    or the last run is older than ``stale_after_hours`` while the experiment runs."""
    if last_rollup is None:
        if not logged:
            return HealthItem("rollup", CheckStatus.INFO, "never rolled up (no events yet)")
        return HealthItem("rollup", CheckStatus.WARN,
                          "events are waiting but no rollup has run: `tracker rollup`")
    age = data_lag_hours(last_rollup, now)
    text = f"last rollup {last_rollup.isoformat(timespec='minutes')} ({age:.1f} h ago)"
    if running and age > stale_after_hours:
        return HealthItem("rollup", CheckStatus.WARN,
                          f"{text}: older than {stale_after_hours:g} h, is the nightly job "
                          "running?")
    return HealthItem("rollup", CheckStatus.PASS, text)


def provisional_item(provisional_days: int) -> HealthItem:
    """Days whose attribution windows are still open: information, never a warning."""
    if provisional_days < 0:
        raise ValueError(f"provisional_days must be >= 0, got {provisional_days!r}")
    if provisional_days == 0:
        return HealthItem("provisional", CheckStatus.INFO, "every reported day is final")
    return HealthItem("provisional", CheckStatus.INFO,
                      f"{provisional_days} provisional day(s): their attribution windows are "
                      "still open, so late interactions can still change them (normal while "
                      "the experiment runs)")


def sample_item(users: Mapping[str, int], *, min_users: int = DEFAULT_MIN_USERS) -> HealthItem:
    """``warn`` (and no ``ship``) when an arm has fewer than ``min_users`` users."""
    small = {a: n for a, n in users.items() if n < min_users}
    if small:
        listed = ", ".join(f"{a} {n}" for a, n in small.items())
        return HealthItem("sample", CheckStatus.WARN,
                          f"fewer than {min_users} users in {listed}: too few to decide "
                          "(no ship)", blocks_ship=True)
    return HealthItem("sample", CheckStatus.PASS,
                      f"at least {min_users} users per arm (smallest {min(users.values())})")


def health_checklist(
    *,
    users: Mapping[str, int],
    weights: Mapping[str, float],
    now: datetime,
    newest_event: datetime | None,
    last_rollup: datetime | None = None,
    logged: bool | None = None,
    total_users: int | None = None,
    crossover_users: int | None = None,
    provisional_days: int = 0,
    srm_looks: Sequence[Sequence[int]] | None = None,
    running: bool = True,
    stale_after_hours: float = DEFAULT_STALE_AFTER_HOURS,
    dead_after_hours: float = DEFAULT_DEAD_AFTER_HOURS,
    min_users: int = DEFAULT_MIN_USERS,
    srm_threshold: float | None = None,
) -> HealthChecklist:
    """The health checklist of one experiment as of ``now``.

    ``users``: users per arm on the reported day (cumulative view), ``weights`` the declared
    weights by arm; ``total_users`` / ``crossover_users``: distinct users of the experiment and
    those exposed to two arms or more (omit both when not measured); ``newest_event``: the
    newest event time rolled up (list served or interaction); ``logged``: whether any event
    was logged, rolled up or not (default: ``newest_event`` is known); ``running``: the
    experiment has not stopped (``draft`` / ``running``). Items in display order: srm,
    sample, crossover, freshness, rollup, provisional.
    """
    if set(users) != set(weights):
        raise ValueError(f"users and weights must name the same arms, got {sorted(users)} "
                         f"and {sorted(weights)}")
    items = [srm_item(users, weights, looks=srm_looks, threshold=srm_threshold),
             sample_item(users, min_users=min_users)]
    if total_users is not None and crossover_users is not None:
        items.append(crossover_item(total_users, crossover_users))
    items.append(freshness_item(newest_event, now, running=running,
                                stale_after_hours=stale_after_hours,
                                dead_after_hours=dead_after_hours))
    logged = newest_event is not None if logged is None else logged
    items.append(rollup_item(last_rollup, logged, now, running=running,
                             stale_after_hours=stale_after_hours))
    items.append(provisional_item(provisional_days))
    lag = data_lag_hours(newest_event, now)
    return HealthChecklist(tuple(items), overall_status(items),
                           None if lag is None else round(lag, 1))
