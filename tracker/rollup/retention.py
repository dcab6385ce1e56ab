"""The retention horizon: the days the rollup may still recompute once raw logs expired.

``tracker logs expire`` deletes raw impressions and interactions dated before a cutoff T
(:mod:`tracker.store.lifecycle`). A day is recomputed from the raw logs: its impressions and
the interactions that answer them (later than the impressions); surprisal's item popularity
is stored once per experiment (:mod:`tracker.rollup.popularity`) and kept when the logs of
its reference period expire. So a day D can be recomputed exactly only when every instant
of D lies at or after T:

    first recomputable day R = the first day starting at or after T

(in the experiment's time zone). Days before R keep the results computed while their logs
were whole; the rollup never touches them again (:func:`recomputable`), and a rebuild that
would have to forget them (``tracker rollup --full``, or the reset after a catalog
declaration) is refused with :class:`~tracker.errors.ExpiredLogs`, leaving every stored
result as it was.

>>> from datetime import UTC, datetime
>>> from tracker.store.types import to_micros
>>> first_recomputable_day(to_micros(datetime(2026, 9, 1, tzinfo=UTC)), "UTC")
datetime.date(2026, 9, 1)
>>> first_recomputable_day(to_micros(datetime(2026, 9, 1, 0, 0, 1, tzinfo=UTC)), "UTC")
datetime.date(2026, 9, 2)
"""

from __future__ import annotations

from datetime import date, timedelta

import sqlalchemy as sa

from tracker.errors import ExpiredLogs
from tracker.rollup.days import day_of, day_start
from tracker.store import lifecycle
from tracker.store.experiments import ExperimentInfo
from tracker.store.types import from_micros


def first_recomputable_day(expired_before_us: int, zone: str) -> date:
    """The first day whose own logs all lie at or after the cutoff."""
    first_whole = day_of(expired_before_us, zone)
    if day_start(first_whole, zone) < expired_before_us:
        first_whole += timedelta(days=1)
    return first_whole


def recomputable(conn: sa.Connection, info: ExperimentInfo, touched: set[date], *,
                 rebuild: bool,
                 because: str = "a full rebuild (`rollup --full`, or the one a catalog "
                                "declaration or a migration asks for)") -> set[date]:
    """The days of ``touched`` the rollup may recompute: all of them while logs never
    expired, else those from :func:`first_recomputable_day` on. A ``rebuild`` (which
    forgets every stored result of the experiment) of an experiment that has results
    before that day raises :class:`ExpiredLogs`: they could not be computed again
    (``because``: what asks for the rebuild, for the message). Settings whose change needs
    a rebuild (a catalog, ``cuped_days``) call it before they are stored, so a refused
    change never leaves the experiment's rollup failing on every run."""
    cutoff = lifecycle.expired_before(conn)
    if cutoff is None:
        return touched
    first = first_recomputable_day(cutoff, info.timezone)
    if rebuild and not rebuildable(conn, info):
        raise ExpiredLogs(
            f"experiment {info.key!r}: raw logs before {from_micros(cutoff).isoformat()} "
            f"were expired (tracker logs expire), so its days before {first} cannot be "
            f"recomputed, and {because} would lose their results: refused, every stored "
            "result and setting is unchanged")
    return {day for day in touched if day >= first}


def rebuildable(conn: sa.Connection, info: ExperimentInfo) -> bool:
    """Whether a rebuild could compute every day the experiment has results of again: no
    raw logs expired, or none of a day it has results of."""
    cutoff = lifecycle.expired_before(conn)
    if cutoff is None:
        return True
    stored = lifecycle.first_rolled_up_day(conn, info.id)
    return stored is None or stored >= first_recomputable_day(cutoff, info.timezone)
