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
- ``GET /metrics``: Prometheus text format. ``GET /openapi.json``, ``/docs``.

Errors are JSON ``{"error": code, "message": ..., "request_id": ...}``: 400 malformed JSON,
401/403 API key, 404 unknown experiment or route, 408 a body that did not arrive within
``TRACKER_COLLECTOR_READ_TIMEOUT`` (the connection is closed), 413 body over
``TRACKER_COLLECTOR_MAX_BODY_BYTES`` or batch over ``TRACKER_COLLECTOR_MAX_BATCH``, 415 a
compressed body, 422 invalid events, 503 with ``Retry-After`` when the database is unavailable
(the batch may be resent as is: ids make it idempotent).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import orjson
import sqlalchemy as sa
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from tracker.collector.auth import AuthError, Caller, KeyVerifier, check, split_header
from tracker.collector.metrics import Metrics
from tracker.collector.schemas import (
    ErrorOut,
    HealthOut,
    ImpressionIn,
    IngestOut,
    InteractionIn,
    body_schema,
)
from tracker.config import Settings, mask_password
from tracker.errors import NotFound, SchemaOutdated, StoreError, StoreUnavailable, shorten
from tracker.ingest.result import IngestResult
from tracker.ingest.write import log_impressions, log_interactions
from tracker.store.db import SCHEMA_REVISION, create_engine, schema_revision, transaction
from tracker.store.experiments import get_experiment, list_experiments
from tracker.store.models import KEY_LENGTH

ACCESS_LOG = logging.getLogger("tracker.collector.access")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_bearer = HTTPBearer(auto_error=False, scheme_name="apiKey",
                     description="An API key from `tracker keys create`: "
                                 "`Authorization: Bearer trk_<id>_<secret>`")


class ApiError(Exception):
    """An error answer: HTTP status, stable code, message, optional extra body and headers."""

    def __init__(self, status: int, code: str, message: str, *,
                 body: dict[str, Any] | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.body = body or {}
        self.headers = headers or {}


def _error_response(request_id: str, status: int, code: str, message: str,
                    body: dict | None = None, headers: dict | None = None) -> JSONResponse:
    content = {"error": code, "message": message, "request_id": request_id, **(body or {})}
    return JSONResponse(content, status_code=status, headers=headers)


def _bounded(value: str | None, limit: int = 64) -> str | None:
    """A rejected value as a response may echo it: None stays None, text is shortened."""
    return None if value is None else shorten(value, limit)


def _request_id(request: Request) -> str:
    return request.scope.get("state", {}).get("request_id", "-")


def _version() -> str:
    try:
        return version("tracker")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


class Collector:
    """What the routes share: settings, engine, key verifier, counters."""

    def __init__(self, settings: Settings, engine: sa.Engine):
        self.settings = settings
        self.engine = engine
        self.keys = KeyVerifier(engine, settings.collector_key_cache_seconds)
        self.metrics = Metrics()

    def unavailable(self, message: str) -> ApiError:
        self.metrics.count_unavailable()
        return ApiError(503, "database_unavailable", message,
                        headers={"Retry-After": str(self.settings.collector_retry_after_seconds)})

    async def call_store(self, function: Callable, *args, **kwargs):
        """Run blocking store work on the thread pool; database trouble becomes a 503."""
        try:
            return await run_in_threadpool(function, *args, **kwargs)
        except SchemaOutdated as error:
            ACCESS_LOG.error(_json({"event": "schema_outdated", "detail": str(error)}))
            raise self.unavailable("the database schema is not current; the operator must "
                                   "run `tracker db upgrade`; retry later") from error
        except StoreUnavailable as error:
            ACCESS_LOG.warning(_json({"event": "database_unavailable", "detail": str(error)}))
            raise self.unavailable("the database is unavailable; retry later (resending "
                                   "the same events is safe)") from error


def _json(record: dict[str, Any]) -> str:
    return json.dumps({"ts": datetime.now(UTC).isoformat(timespec="milliseconds"), **record},
                      default=str)


# ---------------------------------------------------------------------------- access log
class AccessLogMiddleware:
    """Request ids, one JSON access-log line per request, latency metrics, and a JSON 500
    (with the request id) for any unexpected error. Never logs headers, bodies or query
    strings, so no key or secret can leak into the log."""

    def __init__(self, app, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers") or ()).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        started = time.perf_counter()
        status = 500
        response_started = False
        logged = False

        def finish(failure: BaseException | None = None) -> None:
            nonlocal logged
            if logged:
                return
            logged = True
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.observe_request(route, scope["method"], status, elapsed)
            record = {"event": "access", "request_id": request_id, "method": scope["method"],
                      "path": scope["path"], "route": route, "status": status,
                      "duration_ms": round(elapsed * 1000, 2),
                      "client": (scope.get("client") or ("-",))[0]}
            caller = state.get("caller")
            if caller is not None:
                record["key_id"] = caller.key_id
            if "ingest" in state:
                record.update(state["ingest"])
            if failure is None:
                ACCESS_LOG.info(_json(record))
                return
            record["error"] = "".join(traceback.format_exception_only(failure)).strip()
            ACCESS_LOG.error(_json(record))
            ACCESS_LOG.error(_json({"event": "traceback", "request_id": request_id,
                                    "traceback": "".join(traceback.format_exception(failure))}))

        async def send_with_id(message):
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                message["headers"] = [*message.get("headers", ()),
                                      (b"x-request-id", request_id.encode())]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                finish()  # before the last byte leaves: a client never outruns its log line
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as error:  # the last line of defence: answer 500, log, keep serving
            finish(error)  # status 500 unless the response had already started
            if not response_started:
                response = _error_response(request_id, 500, "internal_error",
                                           "internal error; the collector logged it with this "
                                           "request id")
                await response(scope, receive, send_with_id)
        finally:
            finish()


def _configure_logging() -> None:
    if not ACCESS_LOG.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        ACCESS_LOG.addHandler(handler)
        ACCESS_LOG.setLevel(logging.INFO)
        ACCESS_LOG.propagate = False


# ---------------------------------------------------------------------------- request bodies
async def _read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The request body, at most ``limit`` bytes (else 413), all of it within ``timeout``
    seconds (else 408, and the connection is closed: a slow body cannot hold it)."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise ApiError(415, "unsupported_encoding",
                       f"Content-Encoding {shorten(encoding)!r} is not supported; "
                       "send plain JSON")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise ApiError(400, "bad_request", "Content-Length must be a whole number")
        if int(declared) > limit:
            raise ApiError(413, "body_too_large",
                           f"the body is {int(declared)} bytes, the limit is {limit} "
                           "(TRACKER_COLLECTOR_MAX_BODY_BYTES); send smaller batches")
    chunks = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ApiError(413, "body_too_large",
                                   f"the body is over the limit of {limit} bytes "
                                   "(TRACKER_COLLECTOR_MAX_BODY_BYTES); send smaller batches")
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, "request_timeout",
                       f"the body did not arrive within {timeout:g} s "
                       "(TRACKER_COLLECTOR_READ_TIMEOUT); resend it",
                       headers={"Connection": "close"}) from None
    return b"".join(chunks)


def _decode_events(body: bytes, max_batch: int) -> list[Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise ApiError(400, "malformed_json",
                       f"the body is not valid JSON: {shorten(str(error), 200)}") from None
    if isinstance(data, dict):
        return [data]
    if not isinstance(data, list):
        raise ApiError(422, "invalid_body", "expected a JSON object (one event) or a JSON "
                                            f"array of events, got {type(data).__name__}")
    if len(data) > max_batch:
        raise ApiError(413, "batch_too_large",
                       f"the batch holds {len(data)} events, the limit is {max_batch} "
                       "(TRACKER_COLLECTOR_MAX_BATCH); split it")
    return data


# ---------------------------------------------------------------------------- the app
def create_app(settings: Settings | None = None, engine: sa.Engine | None = None) -> FastAPI:
    """The collector application on ``settings`` (default: the ``TRACKER_*`` environment)."""
    settings = settings or Settings.from_env()
    owns_engine = engine is None
    engine = engine or create_engine(settings.database_url, settings)
    collector = Collector(settings, engine)
    _configure_logging()

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        ACCESS_LOG.info(_json({"event": "start", "database": mask_password(
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
    app.add_middleware(AccessLogMiddleware, metrics=collector.metrics)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, error: ApiError):
        return _error_response(_request_id(request), error.status, error.code, error.message,
                               error.body, error.headers)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, error: HTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
        return _error_response(_request_id(request), error.status_code, code,
                               str(error.detail), headers=getattr(error, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, error: RequestValidationError):
        details = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}"
                            for e in error.errors())
        return _error_response(_request_id(request), 422, "invalid_request", details)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, error: NotFound):
        return _error_response(_request_id(request), 404, "not_found", str(error))

    @app.exception_handler(StoreError)
    async def _store_error(request: Request, error: StoreError):
        ACCESS_LOG.error(_json({"event": "store_error", "request_id": _request_id(request),
                                "detail": str(error)}))
        return _error_response(_request_id(request), 500, "store_error",
                               "the database refused the operation; the collector logged it")

    def require(scope: str):
        async def dependency(request: Request, _credentials=Depends(_bearer)) -> Caller:
            stored = None
            try:
                key_id, secret = split_header(request.headers.get("authorization"))
                hit = collector.keys.cached(key_id)
                stored = (hit.stored if hit is not None else
                          await collector.call_store(collector.keys.load, key_id))
                caller = check(stored, secret, scope)
            except AuthError as error:
                if error.status == 403 and stored is not None:  # log which key was refused
                    request.state.caller = Caller(stored.key_id, stored.scope)
                headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
                code = "unauthorized" if error.status == 401 else "forbidden"
                raise ApiError(error.status, code, error.message, headers=headers) from None
            request.state.caller = caller
            return caller

        return dependency

    errors = {
        400: {"model": ErrorOut, "description": "malformed JSON"},
        401: {"model": ErrorOut, "description": "no, unknown or revoked API key"},
        403: {"model": ErrorOut, "description": "API key without the scope this endpoint needs"},
        408: {"model": ErrorOut, "description": "the body did not arrive within "
                                                "TRACKER_COLLECTOR_READ_TIMEOUT seconds"},
        413: {"model": ErrorOut, "description": "body or batch too large"},
        422: {"model": ErrorOut, "description": "invalid events (the list of errors); "
                                                "nothing was stored"},
        503: {"model": ErrorOut, "description": "database unavailable: retry after "
                                                "Retry-After seconds"},
    }

    async def ingest(request: Request, kind: str, log) -> JSONResponse:
        body = await _read_body(request, settings.collector_max_body_bytes,
                                settings.collector_read_timeout)
        events = _decode_events(body, settings.collector_max_batch)
        result: IngestResult = await collector.call_store(  # validation: tracker.ingest's
            log, engine, settings, events, on_invalid="all_or_nothing")
        collector.metrics.count_events(result)
        request.state.ingest = {"kind": kind, "events": len(events), "stored": result.stored,
                                "duplicates": result.duplicates,
                                "conflicts": result.conflicts, "rejected": len(result.rejected)}
        if result.rejected:
            raise ApiError(
                422, "invalid_events",
                f"{len(result.rejected)} of {len(events)} events are invalid; nothing of this "
                "batch was stored (fix or drop them and resend)",
                body={"rejected": [{"index": r.index, "id": _bounded(r.id), "field": r.field,
                                    "reason": _bounded(r.reason, 500)}
                                   for r in result.rejected]})
        return JSONResponse(result.to_dict())

    @app.post("/v1/impressions", response_model=IngestOut, responses=errors,
              tags=["events"], summary="Log served lists (one object or an array)",
              openapi_extra={"requestBody": body_schema(ImpressionIn,
                                                        settings.collector_max_batch)})
    async def post_impressions(request: Request,
                               _caller: Caller = Depends(require("ingest"))) -> JSONResponse:
        return await ingest(request, "impressions", log_impressions)

    @app.post("/v1/interactions", response_model=IngestOut, responses=errors,
              tags=["events"], summary="Log user interactions (one object or an array)",
              openapi_extra={"requestBody": body_schema(InteractionIn,
                                                        settings.collector_max_batch)})
    async def post_interactions(request: Request,
                                _caller: Caller = Depends(require("ingest"))) -> JSONResponse:
        return await ingest(request, "interactions", log_interactions)

    def _read_experiments(key: str | None):
        with transaction(engine) as conn:
            if key is None:
                return [e.to_dict() for e in list_experiments(conn)]
            return get_experiment(conn, key).to_dict()

    read_errors = {k: v for k, v in errors.items() if k in (401, 403, 503)}  # no body read

    @app.get("/v1/experiments", tags=["experiments"], responses=read_errors,
             summary="Every experiment with its arms")
    async def experiments(_caller: Caller = Depends(require("read"))) -> list[dict[str, Any]]:
        return await collector.call_store(_read_experiments, None)

    @app.get("/v1/experiments/{key}", tags=["experiments"],
             responses={**read_errors, 404: {"model": ErrorOut,
                                             "description": "unknown experiment"}},
             summary="One experiment with its arms")
    async def experiment(key: str,
                         _caller: Caller = Depends(require("read"))) -> dict[str, Any]:
        if "\x00" in key or len(key) > KEY_LENGTH:  # no key is that long or holds a NUL
            raise NotFound(f"unknown experiment {shorten(key)!r}")
        return await collector.call_store(_read_experiments, key)

    def _health() -> str | None:
        with transaction(engine) as conn:
            return schema_revision(conn)

    @app.get("/health", response_model=HealthOut, tags=["operations"],
             responses={503: {"model": HealthOut, "description": "database unavailable or "
                                                                 "schema not current"}},
             summary="Whether the collector can store events")
    async def health() -> JSONResponse:
        retry = {"Retry-After": str(settings.collector_retry_after_seconds)}
        try:
            revision = await run_in_threadpool(_health)
        except StoreError as error:
            ACCESS_LOG.warning(_json({"event": "health", "detail": str(error)}))
            return JSONResponse({"status": "unavailable", "database": "unreachable"},
                                status_code=503, headers=retry)
        if revision != SCHEMA_REVISION:
            return JSONResponse({"status": "unavailable",
                                 "database": f"schema {revision or 'missing'}, needs "
                                             f"{SCHEMA_REVISION}: run `tracker db upgrade`",
                                 "schema_revision": revision}, status_code=503, headers=retry)
        return JSONResponse({"status": "ok", "database": "ok", "schema_revision": revision})

    @app.get("/metrics", tags=["operations"], response_class=PlainTextResponse,
             summary="Counters and latency histogram (Prometheus text format)")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(collector.metrics.render(),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    return app
