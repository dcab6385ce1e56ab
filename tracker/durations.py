"""Durations as people write them (``24h``, ``7d``, ``30m``): how the CLI and the dashboard
show an attribution window (``tracker.cli.common.parse_duration`` reads them back)."""

from __future__ import annotations

from datetime import timedelta

_UNITS = (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000), ("s", 1_000_000))


def format_duration(duration: timedelta) -> str:
    """A duration as ``parse_duration`` reads it back: the largest unit that holds it a
    whole number of times, days from two days on (``24h`` is how a day is usually given);
    ``1.5s`` when not a whole number of seconds (exact: it reads back as the same duration).

    >>> [format_duration(timedelta(seconds=s)) for s in (86_400, 604_800, 1_800, 90, 5_400, 1.5)]
    ['24h', '7d', '30m', '90s', '90m', '1.5s']
    """
    micros = duration // timedelta(microseconds=1)
    for unit, size in _UNITS:
        if micros and micros % size == 0 and (unit != "d" or micros > size):
            return f"{micros // size}{unit}"
    seconds, fraction = divmod(micros, 1_000_000)
    return f"{seconds}.{fraction:06d}".rstrip("0") + "s"  # exact to the microsecond
