"""Run the collector on uvicorn (``tracker serve``).

Slow clients cannot hold connections: a request's headers must arrive within
``TRACKER_COLLECTOR_READ_TIMEOUT`` seconds of the connection opening (or of the previous
response on a kept-alive connection), else the connection is closed; its body then has the
same time again (``tracker.collector.bodies`` answers 408 and closes). Headers are also bounded
in size (``MAX_HEADER_BYTES``: more is a 400 and the connection is closed). uvicorn alone
bounds neither: ``timeout_keep_alive`` starts only after a response, h11's
``h11_max_incomplete_event_size`` bounds the size of partial headers but not their duration,
and with httptools (the parser uvicorn[standard] picks) 200 MB of headers were buffered.

With several workers, ``/metrics`` adds up every worker's series through the folder
``PROMETHEUS_MULTIPROC_DIR`` names (:func:`tracker.collector.telemetry.multiprocess_dir`:
a temporary folder per server start unless the variable names one).
"""

from __future__ import annotations

import functools
from typing import Any

from tracker.collector.telemetry import multiprocess_dir
from tracker.config import Settings

try:  # uvicorn[standard] brings httptools, the faster parser; h11 is the fallback
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Http
except ImportError:  # pragma: no cover - tracker depends on uvicorn[standard]
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Http


MAX_HEADER_BYTES = 64 * 1024
"""The most bytes a request line and headers may take (nginx allows 32 KiB, h11 16 KiB)."""

WORKER_HEALTHCHECK_SECONDS = 30
"""How long uvicorn waits for a worker process to answer its health ping before it kills and
replaces it. uvicorn's default, 5 s, also bounds a worker's start (a spawned process imports
tracker, FastAPI and pandas before it can answer): on a loaded host (2 cores, load 14) every
replacement worker was killed before it answered, so the server never got its second worker."""


class HeaderDeadlineProtocol(_Http):
    """uvicorn's HTTP/1.1 protocol with a deadline and a size bound on request headers.

    The deadline is armed when the connection opens and again after each response; when it
    passes while no request is being served (no request yet, or the last one answered), the
    connection is closed: its client was sending headers too slowly, or nothing at all.
    Bytes received while no request is being served are headers; more than
    ``MAX_HEADER_BYTES`` of them is a 400 and the connection is closed.
    """

    def __init__(self, *args: Any, read_timeout: float, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.read_timeout = read_timeout
        self.header_deadline: Any = None
        self.header_bytes = 0

    def _serving(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def data_received(self, data: bytes) -> None:
        waiting = not self._serving()
        super().data_received(data)
        if self._serving() or self.transport.is_closing():
            self.header_bytes = 0  # the headers were complete: a request is being served
            return
        if waiting:
            self.header_bytes += len(data)
            if self.header_bytes > MAX_HEADER_BYTES:
                self.send_400_response(f"request headers over {MAX_HEADER_BYTES} bytes")

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self.header_deadline = self.loop.call_later(self.read_timeout, self._header_timeout)

    def _disarm_header_deadline(self) -> None:
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _header_timeout(self) -> None:
        self.header_deadline = None
        if not self._serving() and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.header_bytes = 0
        if not self.transport.is_closing():
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)


def http_protocol(settings: Settings) -> functools.partial:
    """The protocol factory ``uvicorn.Config(http=...)`` takes, with the settings' timeout."""
    return functools.partial(HeaderDeadlineProtocol,
                             read_timeout=settings.collector_read_timeout)


def serve(settings: Settings, *, host: str | None = None, port: int | None = None,
          workers: int | None = None) -> None:
    """Serve the collector until interrupted (SIGINT/SIGTERM finish the requests in flight).

    Each worker process builds its own app from the ``TRACKER_*`` environment; their
    ``/metrics`` series meet in the multiprocess folder, ready before the first one starts.
    """
    import uvicorn

    workers = workers or settings.collector_workers
    with multiprocess_dir(workers):
        uvicorn.run(
            "tracker.collector.app:create_app", factory=True,
            host=host or settings.collector_host, port=port or settings.collector_port,
            workers=workers, http=http_protocol(settings),
            access_log=False,  # the collector writes its own JSON access log (no secrets)
            server_header=False, timeout_graceful_shutdown=30, log_level="info",
            timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
        )
