"""The rollup job over experiments, the same for both engines: which experiments a run takes,
each under its rollup lock, one failing never stopping the others, and the summaries and
alerts published at the end.

An engine supplies only how one experiment is rolled up (``run_one``: the default engine's
:class:`tracker.rollup.engine._Run`, or Spark's over a lake) and how its freshness is found
(:class:`Done`: the rows the run took from the database, or how to find the newest event
times in the lake's logs). A run that names its experiment raises that experiment's error;
a run over every experiment goes on past a failing one and raises
:class:`~tracker.errors.RollupIncomplete` at the end, with the others' summaries (an
unreachable database still stops it at once: no other experiment would roll up). An
experiment the run leaves to the other engine (``RollupSummary.skipped``,
:mod:`tracker.rollup.sources`) gets no summary published by it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from tracker.config import Settings
from tracker.errors import Busy, NotFound, RollupIncomplete, StoreUnavailable, TrackerError
from tracker.rollup.lock import HeldLock, rollup_lock
from tracker.rollup.summary import RollupSummary
from tracker.store import lifecycle, results
from tracker.store.db import require_current_schema, transaction
from tracker.store.experiments import ExperimentInfo, get_experiment

log = logging.getLogger("tracker.rollup")

Find = Callable[[results.NewestEvents], results.NewestEvents]


@dataclass(frozen=True)
class Done:
    """One experiment rolled up: its summary, and how its freshness is found: ``seen``, the
    rows it took from the database, or ``find``, how to find the newest event times in logs
    outside it (the lake's)."""

    summary: RollupSummary
    seen: results.Seen | None = None
    find: Find | None = None


def targets(engine: sa.Engine, experiment: str | None) -> list[ExperimentInfo]:
    """The experiments a run takes: the one named (:class:`~tracker.errors.NotFound` when
    there is none), or every one that may have work (archived ones only with work left)."""
    require_current_schema(engine)
    with transaction(engine) as conn:
        found = [get_experiment(conn, experiment)] if experiment is not None \
            else lifecycle.rollup_targets(conn)
    if experiment is not None and not found:
        raise NotFound(f"no experiment {experiment!r}")
    return found


def run_each(engine: sa.Engine, settings: Settings, experiments: list[ExperimentInfo], *,
             named: bool, now: datetime | None,
             run_one: Callable[[ExperimentInfo, HeldLock], Done]) -> list[RollupSummary]:
    """``run_one`` for each experiment under its rollup lock, then the summaries published
    (``now``: the run's clock, None: the wall clock). ``named``: the run names its one
    experiment, whose failure is raised as it is."""
    summaries, failures = [], []
    seen: dict[str, results.Seen] = {}
    find: dict[str, Find] = {}
    for info in experiments:
        try:
            with rollup_lock(engine, info.id, info.key) as lock:
                done = run_one(info, lock)
        except StoreUnavailable:
            raise  # the database cannot be reached: no other experiment would roll up
        except Exception as error:  # noqa: BLE001 — one experiment must not stop the others
            if named:
                raise
            if not isinstance(error, Busy):
                log.error("rollup of %s failed; the other experiments go on", info.key,
                          exc_info=not isinstance(error, TrackerError))
            failures.append((info.key, error))
            continue
        summaries.append(done.summary)
        if done.summary.skipped is None:
            if done.seen is not None:
                seen[info.key] = done.seen
            if done.find is not None:
                find[info.key] = done.find
    published = [s.experiment for s in summaries if s.skipped is None]
    publish_summaries(engine, settings, published, now, seen=seen, find=find)
    if failures:
        raise RollupIncomplete(summaries, failures)
    return summaries


def publish_summaries(engine: sa.Engine, settings: Settings, keys: list[str],
                      now: datetime | None, *, seen: dict[str, results.Seen] | None = None,
                      find: dict[str, Find] | None = None) -> None:
    """The run's last step, on either engine: each experiment's stored summary and the
    alerts it raises (:func:`tracker.publish.after_rollup`; by experiment, ``seen``: the
    rows each run took into account, or ``find``: how to find their newest event times in
    logs outside the database, the Spark engine's); it never fails the run."""
    try:
        from tracker.publish import after_rollup

        after_rollup(engine, settings, keys, now, seen=seen, find=find)
    except Exception:  # noqa: BLE001 — results are stored; a summary must not fail the run
        log.warning("summaries of %s not published", ", ".join(keys), exc_info=True)
