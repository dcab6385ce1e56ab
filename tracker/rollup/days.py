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
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = 1_000_000


def _micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * _US + delta.microseconds


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


def days_between(first: date, last: date) -> list[date]:
    """Every day from ``first`` to ``last`` included.

    >>> days_between(date(2026, 1, 30), date(2026, 2, 1))
    [datetime.date(2026, 1, 30), datetime.date(2026, 1, 31), datetime.date(2026, 2, 1)]
    """
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]
