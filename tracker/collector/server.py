"""Run the collector on uvicorn (``tracker serve``)."""

from __future__ import annotations

from tracker.config import Settings


def serve(settings: Settings, *, host: str | None = None, port: int | None = None,
          workers: int | None = None) -> None:
    """Serve the collector until interrupted (SIGINT/SIGTERM finish the requests in flight).

    Each worker process builds its own app from the ``TRACKER_*`` environment.
    """
    import uvicorn

    uvicorn.run(
        "tracker.collector.app:create_app", factory=True,
        host=host or settings.collector_host, port=port or settings.collector_port,
        workers=workers or settings.collector_workers,
        access_log=False,  # the collector writes its own JSON access log (no secrets)
        server_header=False, timeout_graceful_shutdown=30, log_level="info",
    )
