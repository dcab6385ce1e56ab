"""The collector's counters and latency histogram, rendered in the Prometheus text format.

A few dozen lines instead of ``prometheus_client``: the collector exposes a handful of
series, per process (with ``--workers N`` each worker counts its own requests; scrape them
separately or run one worker per container).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import Counter

from tracker.ingest.result import IngestResult

# request latency buckets, seconds
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
OUTCOMES = ("stored", "duplicate", "conflict", "rejected")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items()) + "}"


class Metrics:
    """Thread-safe counters of one collector process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: Counter[tuple[str, str, str]] = Counter()
        self._events: Counter[tuple[str, str]] = Counter()
        self._latency: dict[str, list[float]] = {}  # route -> bucket counts + [sum, count]
        self._unavailable = 0

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        with self._lock:
            self._requests[(route, method, str(status))] += 1
            series = self._latency.setdefault(route, [0.0] * (len(BUCKETS) + 2))
            index = bisect_left(BUCKETS, seconds)
            if index < len(BUCKETS):
                series[index] += 1
            series[-2] += seconds
            series[-1] += 1

    def count_events(self, result: IngestResult) -> None:
        kind = result.kind
        with self._lock:
            self._events[(kind, "stored")] += result.stored
            self._events[(kind, "duplicate")] += result.duplicates
            self._events[(kind, "conflict")] += result.conflicts
            self._events[(kind, "rejected")] += len(result.rejected)

    def count_unavailable(self) -> None:
        with self._lock:
            self._unavailable += 1

    def render(self) -> str:
        """The Prometheus text exposition (version 0.0.4)."""
        with self._lock:
            requests = sorted(self._requests.items())
            events = dict(self._events)
            latency = {route: list(series) for route, series in sorted(self._latency.items())}
            unavailable = self._unavailable
        lines = [
            "# HELP tracker_collector_requests_total HTTP requests by route, method and status.",
            "# TYPE tracker_collector_requests_total counter",
        ]
        lines += [f"tracker_collector_requests_total{_labels(route=r, method=m, status=s)} {n}"
                  for (r, m, s), n in requests]
        lines += [
            "# HELP tracker_collector_events_total Events received, by kind and outcome: stored "
            "(new), duplicate (already stored, same payload), conflict (already stored, "
            "different payload; not stored), rejected (invalid; its batch was not stored).",
            "# TYPE tracker_collector_events_total counter",
        ]
        for kind in ("impressions", "interactions"):
            lines += [f"tracker_collector_events_total{_labels(kind=kind, outcome=o)} "
                      f"{events.get((kind, o), 0)}" for o in OUTCOMES]
        lines += [
            "# HELP tracker_collector_database_unavailable_total Requests answered 503 because "
            "the database was unavailable.",
            "# TYPE tracker_collector_database_unavailable_total counter",
            f"tracker_collector_database_unavailable_total {unavailable}",
            "# HELP tracker_collector_request_duration_seconds Time from request to response.",
            "# TYPE tracker_collector_request_duration_seconds histogram",
        ]
        for route, series in latency.items():
            cumulative = 0.0
            for bound, n in zip(BUCKETS, series, strict=False):
                cumulative += n
                lines.append(f"tracker_collector_request_duration_seconds_bucket"
                             f"{_labels(route=route, le=repr(bound))} {cumulative:g}")
            lines.append(f"tracker_collector_request_duration_seconds_bucket"
                         f"{_labels(route=route, le='+Inf')} {series[-1]:g}")
            lines.append(f"tracker_collector_request_duration_seconds_sum{_labels(route=route)} "
                         f"{series[-2]:.6f}")
            lines.append(f"tracker_collector_request_duration_seconds_count"
                         f"{_labels(route=route)} {series[-1]:g}")
        return "\n".join(lines) + "\n"
