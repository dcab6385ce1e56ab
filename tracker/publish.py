"""What a rollup run publishes when it ends: each rolled-up experiment's summary under its
analysis plan (the experiments list reads it: :mod:`tracker.store.summaries`), and the alerts
the change since the previous summary raises (:mod:`tracker.alerts`).

:func:`after_rollup` is the one call at the end of a rollup job (:mod:`tracker.rollup.job`).
It never fails the run: an experiment whose scorecard cannot be built is logged and skipped,
and alerts are sent from a background thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime

import sqlalchemy as sa

from tracker import alerts
from tracker.config import Settings
from tracker.report.card import report
from tracker.report.summary import ExperimentSummary, summarise
from tracker.store import computed, results
from tracker.store.db import transaction
from tracker.store.experiments import ExperimentInfo, get_experiment
from tracker.store.summaries import read_summaries, write_summary

log = logging.getLogger(__name__)


Find = Callable[[results.NewestEvents], results.NewestEvents]
"""The newest event times a run saw in logs outside the database, given the previous
summary's (the Spark engine's, in the lake: :func:`tracker.spark.freshness.newest_in_lake`)."""


def publish_summary(engine: sa.Engine, key: str, now: datetime | None = None, *,
                    seen: results.Seen | None = None, find: Find | None = None
                    ) -> tuple[ExperimentSummary | None, ExperimentSummary]:
    """Build experiment ``key``'s summary from its scorecard under the plan, with the newest
    event times among the logs the run saw (its freshness), store it, and return (the
    previous one or None, the new one). ``now``: the clock of the freshness check and of
    ``written_at``.

    The newest event times are read among the rows of ``seen`` (the run's:
    :class:`~tracker.store.results.Seen`; default: up to the stored watermarks) in at most
    two index walks (:func:`tracker.store.results.newest_events`), or by ``find`` (a run
    over logs outside the database); either way they never move back
    (:meth:`~tracker.store.results.NewestEvents.or_before` the previous summary's)."""
    now = now or datetime.now(UTC)
    with transaction(engine) as conn:
        info = get_experiment(conn, key)
        stored = read_summaries(conn, [key]).get(key)
        previous = None if stored is None else ExperimentSummary.from_dict(stored[1])
        before = results.NewestEvents() if previous is None else \
            results.NewestEvents(previous.newest_served_at, previous.newest_interaction_at)
        newest = None if find is not None else _in_database(conn, info, seen, before)
    if newest is None:  # outside the transaction: it may take a while (a Spark job)
        newest = find(before).or_before(before)
    card = report(engine, key, newest_event=newest.newest, now=now)
    summary = summarise(card, computed.day_table(engine, key), newest.served, newest.interaction)
    with transaction(engine, write=True) as conn:
        write_summary(conn, info.id, summary.to_dict(), now)
    return previous, summary


def _in_database(conn: sa.Connection, info: ExperimentInfo, seen: results.Seen | None,
                 before: results.NewestEvents) -> results.NewestEvents:
    """The newest event times among the rows of ``seen`` (default: those up to the stored
    watermarks, every row without)."""
    if seen is None:
        state = results.load_state(conn, info.id)
        watermarks = None if state is None else state.watermarks
        seen = None if watermarks is None else results.Seen(*watermarks)
    return results.newest_events(conn, info.id, info.attribution_window, seen, before)


def after_rollup(engine: sa.Engine, settings: Settings, keys: Iterable[str],
                 now: datetime | None = None, *,
                 seen: Mapping[str, results.Seen] | None = None,
                 find: Mapping[str, Find] | None = None) -> threading.Thread | None:
    """Publish the summary of each experiment of ``keys`` and send the alerts they raise to
    ``settings.alert_url`` (none when it is unset); returns the alerts' sending thread (None
    when nothing is sent). ``seen`` / ``find``: by experiment key, the rows the run took
    into account / how to find their newest event times (:func:`publish_summary`)."""
    texts = []
    for key in keys:
        try:
            before, after = publish_summary(engine, key, now, seen=(seen or {}).get(key),
                                            find=(find or {}).get(key))
        except Exception:  # noqa: BLE001 — a summary must never fail the rollup
            log.warning("summary of %s not published", key, exc_info=True)
            continue
        texts += alerts.alert_texts(key, before, after)
    if not texts or settings.alert_url is None:
        return None
    return alerts.send_later(settings.alert_url, texts)
