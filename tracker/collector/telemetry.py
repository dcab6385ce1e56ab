"""The collector's Prometheus series (``GET /metrics``), through ``prometheus_client``.

Series: ``tracker_collector_requests_total`` (route, method, status),
``tracker_collector_events_total`` (kind, outcome: stored, duplicate, conflict, rejected),
``tracker_collector_database_unavailable_total`` and the
``tracker_collector_request_duration_seconds`` histogram (route).

**Several worker processes** (``tracker serve --workers N``) count as one server: in
``prometheus_client``'s multiprocess mode each process writes its values to memory-mapped files
in the folder ``PROMETHEUS_MULTIPROC_DIR`` names, and ``/metrics``, whichever worker answers
it, adds up the files of all of them. The variable must be set before the workers start and
the folder must start empty: :func:`multiprocess_dir` (what ``tracker serve`` runs inside)
makes a temporary folder per server start when it is unset and removes it at exit, and empties
a folder given in the variable of the files of an earlier run. With one process and no
variable, the series live in memory (one registry per app: several apps in one process, as in
tests, count apart).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from tracker.errors import TrackerError
from tracker.ingest.result import IngestResult

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's variable: the folder of the multiprocess mode's files."""

# request latency buckets, seconds
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
KINDS = ("impressions", "interactions")
OUTCOMES = ("stored", "duplicate", "conflict", "rejected")


class Telemetry:
    """The series of one collector app: in memory, or in the multiprocess folder when
    ``PROMETHEUS_MULTIPROC_DIR`` is set (then every process of the server shares them)."""

    def __init__(self) -> None:
        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        # multiprocess: the values live in files, a registry is built per scrape (render)
        self._registry = None if self.multiprocess else CollectorRegistry()
        registry = self._registry
        self._requests = Counter(
            "tracker_collector_requests", "HTTP requests by route, method and status.",
            ["route", "method", "status"], registry=registry)
        self._events = Counter(
            "tracker_collector_events", "Events received, by kind and outcome: stored (new), "
            "duplicate (already stored, same payload), conflict (already stored, different "
            "payload; not stored), rejected (invalid; its batch was not stored).",
            ["kind", "outcome"], registry=registry)
        self._unavailable = Counter(
            "tracker_collector_database_unavailable",
            "Requests answered 503 because the database was unavailable.", registry=registry)
        self._latency = Histogram(
            "tracker_collector_request_duration_seconds", "Time from request to response.",
            ["route"], buckets=BUCKETS, registry=registry)
        for kind in KINDS:  # every (kind, outcome) shown from the start, at 0
            for outcome in OUTCOMES:
                self._events.labels(kind, outcome)

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self._requests.labels(route, method, str(status)).inc()
        self._latency.labels(route).observe(seconds)

    def count_events(self, result: IngestResult) -> None:
        for outcome, n in (("stored", result.stored), ("duplicate", result.duplicates),
                           ("conflict", result.conflicts), ("rejected", len(result.rejected))):
            if n:
                self._events.labels(result.kind, outcome).inc(n)

    def count_unavailable(self) -> None:
        self._unavailable.inc()

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition of every process of the server, and its media type."""
        registry = self._registry
        if registry is None:
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST


_STALE = ("counter_*.db", "gauge_*.db", "histogram_*.db", "summary_*.db")
"""The files prometheus_client writes in the multiprocess folder (one per kind and process)."""


@contextmanager
def multiprocess_dir(workers: int) -> Iterator[Path | None]:
    """Make ``PROMETHEUS_MULTIPROC_DIR`` ready for a server of ``workers`` processes, for the
    time of the ``with`` block; yields the folder (None: one process, series in memory).

    - Set: that folder, emptied of an earlier run's files (counters restart at zero, as they
      do when a server restarts). It must exist.
    - Unset, several workers: a new temporary folder, set in the environment the workers
      inherit, removed with its files at exit.
    - Unset, one worker: nothing to share; the series stay in memory.
    """
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        folder = Path(given)
        if not folder.is_dir():
            raise TrackerError(f"{MULTIPROC_ENV}={given!r} is not a folder: create it, or "
                               "unset the variable to let tracker serve make a temporary one")
        for pattern in _STALE:
            for stale in folder.glob(pattern):
                stale.unlink()
        yield folder
        return
    if workers <= 1:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="tracker-prometheus-") as made:
        os.environ[MULTIPROC_ENV] = made
        try:
            yield Path(made)
        finally:
            os.environ.pop(MULTIPROC_ENV, None)
