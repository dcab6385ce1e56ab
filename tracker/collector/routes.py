"""The collector's routes, in three groups: events (``/v1/impressions``,
``/v1/interactions``), experiments (``/v1/experiments``), operations (``/health``,
``/metrics``). Each builder takes the app's :class:`~tracker.collector.service.Collector`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from tracker.collector.access_log import ACCESS_LOG, json_line
from tracker.collector.auth import Caller
from tracker.collector.bodies import decode_events, read_body
from tracker.collector.errors import RESPONSES, ApiError, bounded
from tracker.collector.schemas import (
    ErrorOut,
    HealthOut,
    ImpressionIn,
    IngestOut,
    InteractionIn,
    body_schema,
)
from tracker.collector.service import Collector
from tracker.errors import NotFound, StoreError, shorten
from tracker.ingest.result import IngestResult, Rejection
from tracker.ingest.write import log_impressions, log_interactions
from tracker.store.base import KEY_LENGTH
from tracker.store.db import SCHEMA_REVISION, schema_revision, transaction
from tracker.store.experiments import get_experiment, list_experiments


async def _ingest(collector: Collector, request: Request, kind: str, log: Callable,
                  caller: Caller) -> JSONResponse:
    """Read, decode and store one request's events (all or nothing: tracker.ingest checks
    them); 422 with the list of invalid ones. Impressions of experiments outside the caller's
    key are refused one by one and the others stored: 403 naming each refused record."""
    settings = collector.settings
    body = await read_body(request, settings.collector_max_body_bytes,
                           settings.collector_read_timeout, settings.collector_max_elements)
    events = await run_in_threadpool(decode_events, body, settings.collector_max_batch)
    kept, refused = _within_scope(events, caller) if kind == "impressions" else \
        (list(range(len(events))), [])
    result: IngestResult = await collector.call_store(
        log, collector.engine, settings, [events[i] for i in kept],
        on_invalid="all_or_nothing")
    result.rejected[:] = sorted(
        [Rejection(kept[r.index], r.id, r.field, r.reason) for r in result.rejected] + refused,
        key=lambda r: r.index)
    collector.telemetry.count_events(result)
    request.state.ingest = {"kind": kind, "events": len(events), "stored": result.stored,
                            "duplicates": result.duplicates, "conflicts": result.conflicts,
                            "rejected": len(result.rejected)}
    rejected = [{"index": r.index, "id": bounded(r.id), "field": r.field,
                 "reason": bounded(r.reason, 500)} for r in result.rejected]
    if len(result.rejected) > len(refused):
        raise ApiError(
            422, "invalid_events",
            f"{len(result.rejected) - len(refused)} of {len(events)} events are invalid; "
            "nothing of this batch was stored (fix or drop them and resend)",
            body={"rejected": rejected})
    if refused:
        experiments = sorted({repr(shorten(events[r.index]["experiment"])) for r in refused})
        raise ApiError(
            403, "forbidden_experiment",
            f"API key {caller.key_id} may not write to experiment {', '.join(experiments)}: "
            f"{len(refused)} of {len(events)} events refused, the other "
            f"{len(events) - len(refused)} taken (see stored, duplicates, conflicts)",
            body={**result.to_dict(), "rejected": rejected})
    return JSONResponse(result.to_dict())


def _within_scope(events: list, caller: Caller) -> tuple[list[int], list[Rejection]]:
    """The positions of the events the caller's key may write, and a rejection (403) for
    each other one: an impression naming an experiment outside the key's experiments. An
    event without a readable experiment is left to the validation, which names it."""
    if caller.experiments is None:
        return list(range(len(events))), []
    kept, refused = [], []
    for index, event in enumerate(events):
        experiment = event.get("experiment") if isinstance(event, dict) else None
        if isinstance(experiment, str) and not caller.reaches(experiment):
            record_id = event.get("impression_id")
            refused.append(Rejection(index, record_id if isinstance(record_id, str) else None,
                                     "experiment", caller.refusal(experiment)))
        else:
            kept.append(index)
    return kept, refused


def event_routes(collector: Collector) -> APIRouter:
    router = APIRouter(tags=["events"], responses=RESPONSES)
    max_batch = collector.settings.collector_max_batch

    @router.post("/v1/impressions", response_model=IngestOut,
                 summary="Log served lists (one object or an array)",
                 openapi_extra={"requestBody": body_schema(ImpressionIn, max_batch)})
    async def post_impressions(request: Request, caller: Caller = Depends(
            collector.require("ingest"))) -> JSONResponse:
        return await _ingest(collector, request, "impressions", log_impressions, caller)

    @router.post("/v1/interactions", response_model=IngestOut,
                 summary="Log user interactions (one object or an array)",
                 openapi_extra={"requestBody": body_schema(InteractionIn, max_batch)})
    async def post_interactions(request: Request, caller: Caller = Depends(
            collector.require("ingest"))) -> JSONResponse:
        return await _ingest(collector, request, "interactions", log_interactions, caller)

    return router


def experiment_routes(collector: Collector) -> APIRouter:
    router = APIRouter(tags=["experiments"],
                       responses={k: v for k, v in RESPONSES.items() if k in (401, 403, 503)})

    def read(key: str | None, caller: Caller) -> Any:
        with transaction(collector.engine) as conn:
            if key is None:
                return [e.to_dict() for e in list_experiments(conn) if caller.reaches(e.key)]
            return get_experiment(conn, key).to_dict()

    @router.get("/v1/experiments", summary="Every experiment with its arms (those of the key's "
                "experiments when it is limited to some)")
    async def experiments(caller: Caller = Depends(collector.require("read"))
                          ) -> list[dict[str, Any]]:
        return await collector.call_store(read, None, caller)

    @router.get("/v1/experiments/{key}", summary="One experiment with its arms",
                responses={404: {"model": ErrorOut, "description": "unknown experiment"}})
    async def experiment(key: str, caller: Caller = Depends(collector.require("read"))
                         ) -> dict[str, Any]:
        if "\x00" in key or len(key) > KEY_LENGTH:  # no key is that long or holds a NUL
            raise NotFound(f"unknown experiment {shorten(key)!r}")
        if not caller.reaches(key):
            raise ApiError(403, "forbidden_experiment", caller.refusal(key).removeprefix("403: "))
        return await collector.call_store(read, key, caller)

    return router


async def _health(collector: Collector) -> JSONResponse:
    """200 when the database answers at the current schema, else 503 saying why."""
    def revision() -> str | None:
        with transaction(collector.engine) as conn:
            return schema_revision(conn)

    try:
        found = await run_in_threadpool(revision)
    except StoreError as error:
        ACCESS_LOG.warning(json_line({"event": "health", "detail": str(error)}))
        return JSONResponse({"status": "unavailable", "database": "unreachable"},
                            status_code=503, headers=collector.retry_after())
    if found != SCHEMA_REVISION:
        return JSONResponse({"status": "unavailable",
                             "database": f"schema {found or 'missing'}, needs "
                                         f"{SCHEMA_REVISION}: run `tracker db upgrade`",
                             "schema_revision": found}, status_code=503,
                            headers=collector.retry_after())
    return JSONResponse({"status": "ok", "database": "ok", "schema_revision": found})


def operation_routes(collector: Collector) -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/health", response_model=HealthOut, summary="Whether the collector can store "
                "events", responses={503: {"model": HealthOut, "description": "database "
                                           "unavailable or schema not current"}})
    async def health() -> JSONResponse:
        return await _health(collector)

    @router.get("/metrics", response_class=Response, summary="Counters and latency histogram "
                "of every worker process (Prometheus text format)")
    async def metrics() -> Response:
        text, media_type = collector.telemetry.render()
        return Response(text, media_type=media_type)

    return router
