"""``tracker rollup --every``: run a job at a fixed interval until SIGTERM or SIGINT.

A failed run (the database restarting, a dropped connection, a bug) never ends the loop: it
is reported, and the next try comes after a backoff that doubles from
:data:`FIRST_RETRY_SECONDS` and never waits longer than the interval. A run is safe to
interrupt (it commits its results in one last transaction), so a signal ends it at once:
the loop returns the signal's name and the command exits 0, which is what ``docker stop``
and ``restart: unless-stopped`` expect.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

FIRST_RETRY_SECONDS = 5.0


class Stopped(BaseException):
    """A stop signal arrived (a BaseException: a job's ``except Exception`` lets it by)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@dataclass(frozen=True)
class Backoff:
    """Seconds to wait before the next run: the interval after a success; after the n-th
    failure in a row, ``first * 2**(n-1)`` but never more than the interval.

    >>> [Backoff(60.0).wait(n) for n in range(5)]
    [60.0, 5.0, 10.0, 20.0, 40.0]
    >>> Backoff(1.0).wait(3)
    1.0
    """

    interval: float
    first: float = FIRST_RETRY_SECONDS

    def wait(self, failures: int) -> float:
        if failures == 0:
            return self.interval
        return min(self.interval, self.first * 2 ** (failures - 1))


def _stop(signum: int, _frame) -> None:
    raise Stopped(signal.Signals(signum).name)


def run_every(job: Callable[[], None], interval: float,
              on_failure: Callable[[Exception, float], None]) -> str:
    """Run ``job`` now and then every ``interval`` seconds until SIGTERM or SIGINT; returns
    the name of the signal. A job that raises is reported through ``on_failure(error,
    seconds until the next try)`` and tried again after :class:`Backoff`."""
    backoff = Backoff(interval)
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    failures = 0
    try:
        while True:
            try:
                job()
                failures = 0
            except Exception as error:  # noqa: BLE001 - any failure: report, retry later
                failures += 1
                on_failure(error, backoff.wait(failures))
            time.sleep(backoff.wait(failures))
    except Stopped as stopped:
        return stopped.name
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
