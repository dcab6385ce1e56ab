"""Log to a remote collector without ever slowing the caller down: ``TrackerClient``.

::

    client = TrackerClient("http://collector:8000", api_key)
    client.log_impression(experiment="home", arm="b", user_id="u1", items=["a", "b"],
                          served_at=now)      # returns the impression id (made when absent)
    client.close()                            # also runs at interpreter exit

The logging calls are those of the in-process :class:`tracker.Tracker`, but they only put
the event on a bounded in-memory queue and return its id; a background thread sends batches
(``batch_size`` events, or whatever is queued after ``flush_interval`` seconds) to the
collector's ``/v1/impressions`` and ``/v1/interactions``.

- **Checked when queued**: each event goes through the SDK's record rules
  (:mod:`tracker.ingest.validate`, limits from ``settings`` or the ``TRACKER_*`` environment)
  and is encoded as JSON at the call, so a queued event can never make its batch unsendable:
  numpy ints and whole-number ids become their decimal text, numpy floats and ``Decimal``
  become floats, ``datetime``, pandas ``Timestamp``, ``numpy.datetime64`` and ISO strings
  become ISO 8601 UTC (naive means UTC). A record that breaks a rule raises
  :class:`~tracker.errors.ValidationError` naming the field and nothing is queued (counted
  ``invalid``); bulk calls queue the valid records and return the others (:class:`Queued`).
  What only the collector knows (which experiments, arms and event types exist) it checks.
- **Queue full**: ``on_full="drop"`` (default) drops the new event and counts it in
  ``counters().dropped``; ``on_full="block"`` waits up to ``block_timeout`` seconds for room,
  then drops and counts.
- **Retries** (:mod:`tenacity`): connection errors, timeouts, 5xx, 429 and 503 are retried
  with exponential backoff and jitter (``retry_base`` doubling up to ``retry_max`` seconds,
  each delay drawn from [½, 1] of that), waiting at least the server's ``Retry-After``;
  other 4xx are not retried. Every event carries its id (made here with :func:`uuid.uuid4`
  when absent), so a resent batch is stored once: the collector answers ``duplicates``.
- **Invalid events** (422): the collector refuses the whole batch and lists the invalid
  events by index; the client counts those as ``rejected`` and resends the rest. A 422 that
  lists none is answered by splitting the batch in halves until each invalid event is alone
  (then ``rejected``), so the valid ones still get through. A 413 splits the batch in two.
  A 403 that lists records (impressions of experiments outside an API key limited to some:
  ``tracker keys create --experiment``) counts those ``rejected``; the collector took the
  rest. 400/401/404 and any other 403 give the batch up (``failed``) and keep ``last_error``.
- **flush(timeout)** waits until everything queued before it is settled (stored, duplicate,
  conflicting, rejected or failed); **close(timeout)** flushes, then stops the thread; it also
  runs at interpreter exit. What is still unsent when the timeout expires counts as ``failed``.

Afterwards ``enqueued == stored + duplicates + conflicts + rejected + failed`` (``invalid``
and ``dropped`` events were never enqueued).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import tenacity

from tracker.client_events import _EVENTS, _batch_body, _now_us, _Wire, _wire  # noqa: F401
from tracker.config import Settings
from tracker.errors import ValidationError, shorten
from tracker.ingest.result import Rejection
from tracker.ingest.validate import (
    Limits,
    Reject,
    raise_for,
    shown_id,
)
from tracker.ingest.write import ON_INVALID

log = logging.getLogger("tracker.client")

_PATHS = {"impressions": "/v1/impressions", "interactions": "/v1/interactions"}
_RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class ClientCounters:
    """What happened to the events given to a client so far (a snapshot)."""

    enqueued: int = 0      # accepted onto the queue
    invalid: int = 0       # refused at the call: broke a rule (never enqueued)
    dropped: int = 0       # refused because the queue was full (never sent)
    stored: int = 0        # stored by the collector (new)
    duplicates: int = 0    # already stored with the same payload (e.g. a retried batch)
    conflicts: int = 0     # already stored with a different payload; not stored
    rejected: int = 0      # invalid, refused by the collector
    failed: int = 0        # given up: non-retryable error, or unsent when close timed out
    batches: int = 0       # requests the collector answered 200
    retries: int = 0       # requests repeated after a retryable failure
    pending: int = 0       # enqueued and not settled yet

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class Queued:
    """What a bulk logging call did with its records.

    ``ids[i]`` is the id of record ``i`` (made here when absent), or None when the record broke
    a rule; ``rejected`` lists those records (index, id, field, reason), none of them queued.
    A record with an id was queued, or counted ``dropped`` when the queue was full.
    """

    ids: tuple[str | None, ...]
    rejected: tuple[Rejection, ...]


def _rejected_indexes(body: dict, n: int) -> set[int]:
    """Positions the collector's 422 body names as rejected (``{"rejected": [{"index": i,
    ...}]}``, see :meth:`tracker.ingest.result.IngestResult.to_dict`), within ``0..n-1``."""
    listed = body.get("rejected")
    if not isinstance(listed, list):
        return set()
    return {r["index"] for r in listed
            if isinstance(r, dict) and type(r.get("index")) is int and 0 <= r["index"] < n}


def _retry_after(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class _Giveup(Exception):
    """close()'s deadline came: the batch is given up (counted ``failed``)."""


class _Retryable(Exception):
    """A connection error or a retryable status; ``retry_after``: the server's wait, if any."""

    def __init__(self, retry_after: float | None):
        super().__init__(retry_after)
        self.retry_after = retry_after


class TrackerClient:
    """A non-blocking logging client of the tracker collector (see the module doc).

    ``settings`` gives the limits the record rules check at the call (``max_items``,
    ``max_id_length``, ``max_future_seconds``; default: the ``TRACKER_*`` environment, as the
    SDK reads them): keep them those of the collector, or the collector rejects what the
    client let through (counted ``rejected``), or the client refuses what it would store."""

    def __init__(self, endpoint: str, api_key: str, *, batch_size: int = 500,
                 flush_interval: float = 1.0, queue_size: int = 100_000,
                 on_full: str = "drop", block_timeout: float = 1.0,
                 retry_base: float = 0.2, retry_max: float = 30.0,
                 request_timeout: float = 10.0, close_timeout: float = 10.0,
                 transport: httpx.BaseTransport | None = None,
                 settings: Settings | None = None):
        if on_full not in ("drop", "block"):
            raise ValueError(f"on_full must be 'drop' or 'block', got {on_full!r}")
        if batch_size < 1 or queue_size < 1:
            raise ValueError("batch_size and queue_size must be >= 1")
        self.endpoint = endpoint.rstrip("/")
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.on_full = on_full
        self.block_timeout = block_timeout
        self.retry_base = retry_base
        self.retry_max = retry_max
        half_base, half_max = retry_base / 2, retry_max / 2
        self._backoff = (tenacity.wait_exponential(multiplier=half_base, max=half_max)
                         + tenacity.wait_random_exponential(multiplier=half_base, max=half_max))
        self._retrying = tenacity.Retrying(retry=tenacity.retry_if_exception_type(_Retryable),
                                           wait=self._wait, sleep=self._sleep, reraise=True)
        self.close_timeout = close_timeout
        self.last_error: str | None = None
        self.limits = Limits.from_settings(settings or Settings.from_env())
        self._queue: queue.Queue[tuple[str, _Wire]] = queue.Queue(maxsize=queue_size)
        self._http = httpx.Client(
            timeout=request_timeout, transport=transport,
            headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"})
        self._lock = threading.Lock()
        self._settled_cv = threading.Condition(self._lock)
        self._counts = {f.name: 0 for f in fields(ClientCounters) if f.name != "pending"}
        self._settled = 0
        self._wake = threading.Event()      # flush requested: send without waiting
        self._stopping = threading.Event()  # close(): finish and stop
        self._deadline: float | None = None  # close(): give up retrying after this
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="tracker-client", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    # ------------------------------------------------------------------ logging calls
    def log_impression(self, *, experiment: str, arm: str, user_id: str, items: Sequence[str],
                       served_at: datetime | str, scores: Sequence[float] | None = None,
                       impression_id: str | None = None,
                       baseline_items: Sequence[str] | None = None,
                       context: Mapping[str, Any] | None = None) -> str:
        """Queue one served list; returns its impression id (made here when absent).

        Raises :class:`~tracker.errors.ValidationError` naming the field when the record breaks
        a rule of the SDK (nothing is queued)."""
        record = {"experiment": experiment, "arm": arm, "user_id": user_id, "items": items,
                  "served_at": served_at, "scores": scores, "impression_id": impression_id,
                  "baseline_items": baseline_items, "context": context}
        return self._put("impressions", self._checked("impressions", record))

    def log_interaction(self, *, user_id: str, item_id: str, event: str,
                        occurred_at: datetime | str, event_id: str | None = None,
                        impression_id: str | None = None, value: float | None = None) -> str:
        """Queue one interaction; returns its event id (made here when absent).

        Raises :class:`~tracker.errors.ValidationError` as :meth:`log_impression` does."""
        record = {"user_id": user_id, "item_id": item_id, "event": event,
                  "occurred_at": occurred_at, "event_id": event_id,
                  "impression_id": impression_id, "value": value}
        return self._put("interactions", self._checked("interactions", record))

    def log_impressions(self, records: Iterable[Mapping[str, Any]], *,
                        on_invalid: str = "skip") -> Queued:
        """Queue impression records (mappings with the fields of :meth:`log_impression`).

        Each record is an event of its own, as in Segment's or RudderStack's SDKs: a record that
        breaks a rule must not cost its valid neighbours, so with ``on_invalid="skip"`` (the
        default, like :meth:`tracker.Tracker.log_impressions`) the valid records are queued and
        the others come back in :attr:`Queued.rejected`; nothing is raised for them. With
        ``on_invalid="all_or_nothing"`` the first invalid record raises ``ValidationError`` and
        none is queued."""
        return self._put_many("impressions", records, on_invalid)

    def log_interactions(self, records: Iterable[Mapping[str, Any]], *,
                         on_invalid: str = "skip") -> Queued:
        """Queue interaction records (mappings with the fields of :meth:`log_interaction`),
        as :meth:`log_impressions` does."""
        return self._put_many("interactions", records, on_invalid)

    def _checked(self, kind: str, record: Mapping[str, Any]) -> _Wire:
        """The record as a checked, encoded event; raises ValidationError (counted invalid)."""
        try:
            return _wire(kind, record, self.limits, _now_us())
        except Reject as reject:
            self._count(invalid=1)
            raise_for(reject, record.get(_EVENTS[kind][0]))
            raise  # unreachable: raise_for raises

    def _put_many(self, kind: str, records: Iterable[Mapping[str, Any]],
                  on_invalid: str) -> Queued:
        if on_invalid not in ON_INVALID:
            raise ValueError(f"on_invalid must be one of {ON_INVALID}, got {on_invalid!r}")
        if isinstance(records, Mapping):
            raise ValidationError("expected many records (an iterable of mappings), got one "
                                  f"mapping: use log_{kind[:-1]} for one")
        id_field = _EVENTS[kind][0]
        events: list[_Wire | None] = []
        rejected: list[Rejection] = []
        for index, record in enumerate(records):
            try:
                if not isinstance(record, Mapping):
                    raise Reject(None, f"a record must be a mapping, got {type(record).__name__}")
                events.append(_wire(kind, record, self.limits, _now_us()))
            except Reject as reject:
                raw_id = record.get(id_field) if isinstance(record, Mapping) else None
                rejection = Rejection(index, shown_id(raw_id), reject.field, reject.reason)
                if on_invalid == "all_or_nothing":
                    self._count(invalid=1)
                    raise ValidationError(f"{reject.reason} (record {index}; none was queued)",
                                          field=reject.field, record_id=rejection.id) from None
                events.append(None)
                rejected.append(rejection)
        self._count(invalid=len(rejected))
        ids = tuple(None if event is None else self._put(kind, event) for event in events)
        return Queued(ids, tuple(rejected))

    def _put(self, kind: str, event: _Wire) -> str:
        """Queue a checked event (or count it dropped); returns its id."""
        if self._closed:
            self._count(dropped=1)
            return event.id
        try:
            if self.on_full == "block":
                self._queue.put((kind, event), timeout=self.block_timeout)
            else:
                self._queue.put_nowait((kind, event))
        except queue.Full:
            self._count(dropped=1)
        else:
            self._count(enqueued=1)
        return event.id

    # ------------------------------------------------------------------ observing, stopping
    def counters(self) -> ClientCounters:
        with self._lock:
            return ClientCounters(**self._counts,
                                  pending=self._counts["enqueued"] - self._settled)

    def flush(self, timeout: float | None = None) -> bool:
        """Send what is queued now; True when all of it is settled within ``timeout``."""
        timeout = self.close_timeout if timeout is None else timeout
        with self._lock:
            target = self._counts["enqueued"]
        self._wake.set()
        end = time.monotonic() + timeout
        with self._settled_cv:
            while self._settled < target:
                left = end - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._settled_cv.wait(min(left, 0.1))
        return True

    def close(self, timeout: float | None = None) -> ClientCounters:
        """Flush (up to ``timeout`` seconds), stop the sender, return the final counters."""
        if self._closed:
            return self.counters()
        self._closed = True
        timeout = self.close_timeout if timeout is None else timeout
        self._deadline = time.monotonic() + timeout
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout + 1.0)
        self._http.close()
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        return self.counters()

    def __enter__(self) -> TrackerClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ the sender thread
    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self._counts[name] += delta

    def _settle(self, n: int, **deltas: int) -> None:
        with self._settled_cv:
            for name, delta in deltas.items():
                self._counts[name] += delta
            self._settled += n
            self._settled_cv.notify_all()

    def _expired(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _run(self) -> None:
        while True:
            batch = self._collect()
            if batch:
                by_kind: dict[str, list[_Wire]] = {}
                for kind, event in batch:
                    by_kind.setdefault(kind, []).append(event)
                for kind, events in by_kind.items():
                    try:
                        self._send(kind, events)
                    except Exception as error:  # never let the sender thread die
                        self.last_error = f"{type(error).__name__}: {error}"
                        log.exception("tracker client: unexpected error; batch given up")
                        self._settle(len(events), failed=len(events))
            elif self._stopping.is_set() and self._queue.empty():
                return

    def _collect(self) -> list[tuple[str, _Wire]]:
        """Up to ``batch_size`` events: as soon as that many are queued, or when
        ``flush_interval`` has passed since the first, or at once on flush/close."""
        batch: list[tuple[str, _Wire]] = []
        try:
            batch.append(self._queue.get(timeout=0.05 if self._wake.is_set() else
                                         min(self.flush_interval, 0.25)))
        except queue.Empty:
            self._wake.clear()  # everything asked for is sent; wait for new events again
            return batch
        end = time.monotonic() + self.flush_interval
        while len(batch) < self.batch_size:
            try:
                batch.append(self._queue.get_nowait())
                continue
            except queue.Empty:
                pass
            if self._wake.is_set() or self._stopping.is_set():
                break
            left = end - time.monotonic()
            if left <= 0:
                break
            try:
                batch.append(self._queue.get(timeout=min(left, 0.05)))
            except queue.Empty:
                continue
        return batch

    def _send(self, kind: str, events: list[_Wire]) -> None:
        """Deliver one batch, retrying as documented; settles every event exactly once."""
        pending = [events]
        while pending:
            part = pending.pop()
            try:
                outcome = self._post(kind, part)
            except _Giveup:
                self._settle(len(part), failed=len(part))
                continue
            status, body = outcome
            if status == 200:
                self._settle(len(part), batches=1, stored=body.get("stored", 0),
                             duplicates=body.get("duplicates", 0),
                             conflicts=body.get("conflicts", 0))
            elif status == 413 and len(part) > 1:
                half = len(part) // 2
                pending += [part[half:], part[:half]]
            elif status == 422:
                pending += self._drop_rejected(kind, part, body)
            elif status == 403 and isinstance(body.get("stored"), int):
                self._took_within_scope(kind, part, body)
            else:
                self._settle(len(part), failed=len(part))

    def _drop_rejected(self, kind: str, part: list[_Wire], body: dict) -> list[list[_Wire]]:
        """After a 422 (the collector stored nothing of ``part``): settle the events the
        answer names as rejected and return the rest to send again. An answer that names
        none by a valid index splits the batch in halves (a single event is rejected), so
        the valid events still get through in O(bad · log n) requests."""
        bad = _rejected_indexes(body, len(part))
        if not bad and len(part) > 1:
            half = len(part) // 2
            return [part[half:], part[:half]]
        if not bad:
            bad = {0}
        self._settle(len(bad), rejected=len(bad))
        log.warning("tracker client: %d %s rejected by the collector (%s)", len(bad), kind,
                    self.last_error)
        rest = [event for i, event in enumerate(part) if i not in bad]
        return [rest] if rest else []

    def _took_within_scope(self, kind: str, part: list[_Wire], body: dict) -> None:
        """After a 403 naming records of experiments outside the API key's (the collector
        took the others): those are settled ``rejected``, the rest as the body counts them."""
        bad = _rejected_indexes(body, len(part))
        self._settle(len(bad), rejected=len(bad))
        self._settle(len(part) - len(bad), batches=1, stored=body.get("stored", 0),
                     duplicates=body.get("duplicates", 0), conflicts=body.get("conflicts", 0))
        log.warning("tracker client: %d %s refused by the collector (%s)", len(bad), kind,
                    shorten(str(body.get("message")), 300))

    def _post(self, kind: str, events: list[_Wire]) -> tuple[int, dict]:
        """POST until an answer that is not retryable; raises _Giveup after close's deadline."""
        return self._retrying(self._attempt, self.endpoint + _PATHS[kind], _batch_body(events))

    def _attempt(self, url: str, body: bytes) -> tuple[int, dict]:
        """One POST: the status and JSON body of an answer that is not retryable; raises
        :class:`_Retryable` (with the server's Retry-After) for one that is."""
        if self._expired():
            raise _Giveup
        try:
            response = self._http.post(url, content=body)
        except httpx.HTTPError as error:  # connection refused/reset, timeout, ...
            self.last_error = f"{type(error).__name__}: {error}"
            raise _Retryable(None) from error
        status = response.status_code
        if status >= 500 or status in _RETRY_STATUSES:
            self.last_error = f"HTTP {status}: {response.text[:200]}"
            raise _Retryable(_retry_after(response.headers.get("retry-after")))
        try:
            data = response.json()
        except ValueError:
            data = {}
        if status != 200:
            message = data.get("message") if isinstance(data, dict) else None
            self.last_error = f"HTTP {status}: {message or response.text[:200]}"
        return status, data if isinstance(data, dict) else {}

    def _wait(self, state: tenacity.RetryCallState) -> float:
        """Exponential backoff with equal jitter, ``[1/2, 1]`` of ``retry_base * 2**n`` capped
        at ``retry_max`` (tenacity's fixed half plus its random half), and at least the
        server's Retry-After (itself capped at ``retry_max``)."""
        delay = self._backoff(state)
        retry_after = state.outcome.exception().retry_after if state.outcome else None
        return delay if retry_after is None else max(delay, min(retry_after, self.retry_max))

    def _sleep(self, seconds: float) -> None:  # tenacity's sleep: a retry follows
        self._pause(seconds)
        self._count(retries=1)

    def _pause(self, seconds: float) -> None:
        """Sleep before a retry; raises _Giveup when close()'s deadline comes first."""
        end = time.monotonic() + seconds
        while True:
            if self._deadline is not None and end >= self._deadline:
                raise _Giveup
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))
