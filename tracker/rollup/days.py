"""Reporting days: calendar days in the experiment's time zone, as UTC microsecond bounds.

Day boundaries are computed here, in Python, with the IANA database (``zoneinfo``), and the
SQL only compares integers (``served_at`` is microseconds since the epoch). So a day is the
same on SQLite and PostgreSQL, and a day around a daylight-saving change has its true length
(23 or 25 hours):

>>> day = date(2026, 3, 29)                      # clocks go forward in Paris that night
>>> start, end = day_bounds(day, "Europe/Paris")
>>> (end - start) / 3_600_000_000
23.0
>>> day_of(start, "Europe/Paris"), day_of(end - 1, "Europe/Paris"), day_of(end, "Europe/Paris")
(datetime.date(2026, 3, 29), datetime.date(2026, 3, 29), datetime.date(2026, 3, 30))

**The range the rollup takes.** A stored time is any BIGINT of microseconds (rows written
before ingest validated times may hold year 1, year 9999 or ±2**62), but calendar arithmetic
only exists for years 1 to 9999. The rollup takes the instants of :data:`FIRST_INSTANT` ..
:data:`END_INSTANT` (0002-01-01 to 9998-01-01 UTC, excluded): every day of that range, in
every time zone, has a representable day before and after it, a 28-day popularity period
and an attribution window of up to a year. Rows outside are left out (never clamped: a
clamped year-1 click would land on a real day and answer impressions it never saw) and
counted in the run's summary.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = 1_000_000
HOUR = 3_600 * _US
DAY = 24 * HOUR


def _micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * _US + delta.microseconds


FIRST_INSTANT = _micros(datetime(2, 1, 1, tzinfo=UTC))
"""The first instant the rollup takes (UTC microseconds since the epoch)."""
END_INSTANT = _micros(datetime(9998, 1, 1, tzinfo=UTC))
"""The first instant past the range the rollup takes."""


def in_range(micros: int) -> int:
    """``micros`` moved into the range the rollup takes, for the ends of windows computed
    from an instant inside it (a window reaching past year 9998 stops at its end).

    >>> in_range(2**62) == END_INSTANT - 1, in_range(-2**62) == FIRST_INSTANT, in_range(0)
    (True, True, 0)
    """
    return min(max(int(micros), FIRST_INSTANT), END_INSTANT - 1)


def day_start(day: date, zone: str) -> int:
    """The first microsecond of ``day`` in ``zone``, as microseconds since the epoch (UTC)."""
    return _micros(datetime.combine(day, time(0), tzinfo=ZoneInfo(zone)))


def day_bounds(day: date, zone: str) -> tuple[int, int]:
    """``[start, end)`` of ``day`` in ``zone``, as UTC microseconds since the epoch."""
    return day_start(day, zone), day_start(day + timedelta(days=1), zone)


def day_of(micros: int, zone: str) -> date:
    """The calendar day in ``zone`` of an instant given in UTC microseconds since the epoch."""
    moment = _EPOCH + timedelta(microseconds=int(micros))
    return moment.astimezone(ZoneInfo(zone)).date()


def days_of_hours(hours: Iterable[int], zone: str) -> set[date]:
    """The days in ``zone`` that the UTC hours starting at ``hours`` (microseconds, each a
    multiple of an hour) overlap: the days that hold rows counted by hour, whatever the
    calendar span between them. An hour overlaps two days where the zone's offset is not
    whole hours (India, Nepal) or the zone changes its offset.

    >>> sorted(days_of_hours([0, 7 * 24 * HOUR], "UTC"))
    [datetime.date(1970, 1, 1), datetime.date(1970, 1, 8)]
    >>> sorted(days_of_hours([18 * HOUR], "Asia/Kolkata"))     # 23:30 to 00:30 there
    [datetime.date(1970, 1, 1), datetime.date(1970, 1, 2)]
    """
    return {day for hour in hours for day in (day_of(hour, zone), day_of(hour + HOUR - 1, zone))}


def days_between(first: date, last: date) -> list[date]:
    """Every day from ``first`` to ``last`` included.

    >>> days_between(date(2026, 1, 30), date(2026, 2, 1))
    [datetime.date(2026, 1, 30), datetime.date(2026, 1, 31), datetime.date(2026, 2, 1)]
    """
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]
