"""The HTTP collector: production services log impressions and interactions over the network.

``create_app()`` builds the FastAPI application (``tracker serve`` runs it on uvicorn).

- ``POST /v1/impressions``, ``POST /v1/interactions`` (scope ``ingest``): one event (a JSON
  object) or a batch (a JSON array, at most ``TRACKER_COLLECTOR_MAX_BATCH``). The events go
  through the same ingest code as the SDK (:mod:`tracker.ingest.write`): same validation,
  same idempotency (a resent id is a duplicate; the same id with a different payload a
  conflict, reported and not stored). A batch with any invalid event is refused whole: 422
  with the list of (index, id, field, reason), nothing stored — an unknown experiment or arm
  is one of those reasons.
- ``GET /v1/experiments``, ``GET /v1/experiments/{key}`` (scope ``read``).
- ``GET /health``: 200 when the database answers and its schema is current, else 503.
- ``GET /metrics``: Prometheus text format, summed over the server's worker processes
  (:mod:`tracker.collector.telemetry`). ``GET /openapi.json``, ``/docs``.

Errors are JSON ``{"error": code, "message": ..., "request_id": ...}``: 400 malformed JSON,
401/403 API key, 404 unknown experiment or route, 408 a body that did not arrive within
``TRACKER_COLLECTOR_READ_TIMEOUT`` (the connection is closed), 413 body over
``TRACKER_COLLECTOR_MAX_BODY_BYTES`` or batch over ``TRACKER_COLLECTOR_MAX_BATCH``, 415 a
compressed body, 422 invalid events, 503 with ``Retry-After`` when the database is unavailable
(the batch may be resent as is: ids make it idempotent).

The parts: :mod:`~tracker.collector.routes` (the endpoints), :mod:`~tracker.collector.bodies`
(reading request bodies), :mod:`~tracker.collector.errors` (error answers),
:mod:`~tracker.collector.access_log` (request ids and the JSON log),
:mod:`~tracker.collector.auth` (API keys), :mod:`~tracker.collector.service` (what the routes
share).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

import sqlalchemy as sa
from fastapi import FastAPI

from tracker.collector.access_log import (
    ACCESS_LOG,
    AccessLogMiddleware,
    configure_logging,
    json_line,
)
from tracker.collector.errors import add_error_handlers
from tracker.collector.routes import event_routes, experiment_routes, operation_routes
from tracker.collector.service import Collector
from tracker.config import Settings, mask_password
from tracker.install import DISTRIBUTION
from tracker.store.db import create_engine


def _version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


def create_app(settings: Settings | None = None, engine: sa.Engine | None = None) -> FastAPI:
    """The collector application on ``settings`` (default: the ``TRACKER_*`` environment)
    and ``engine`` (default: a new one on the settings' database, disposed at shutdown)."""
    settings = settings or Settings.from_env()
    owns_engine = engine is None
    engine = engine or create_engine(settings.database_url, settings)
    collector = Collector(settings, engine)
    configure_logging()

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        ACCESS_LOG.info(json_line({"event": "start", "database": mask_password(
            engine.url.render_as_string(hide_password=False))}))
        yield
        if owns_engine:
            engine.dispose()

    app = FastAPI(
        title="tracker collector",
        version=_version(),
        description="Log served recommendation lists (impressions) and user interactions "
                    "of A/B experiments; read experiments. Every event carries a client id, "
                    "so resending a batch never double-counts.",
        lifespan=lifespan,
    )
    app.state.collector = collector
    app.add_middleware(AccessLogMiddleware, telemetry=collector.telemetry)
    add_error_handlers(app)
    for routes in (event_routes, experiment_routes, operation_routes):
        app.include_router(routes(collector))
    return app
