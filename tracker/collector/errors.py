"""The collector's error answers: JSON ``{"error": code, "message": ..., "request_id": ...}``.

:class:`ApiError` is what route code raises; :func:`add_error_handlers` turns it, FastAPI's
own errors (unknown route, bad path parameter) and the store's errors into that shape.
``RESPONSES`` documents the statuses of the event routes in the OpenAPI document.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from tracker.collector.access_log import ACCESS_LOG, json_line
from tracker.collector.schemas import ErrorOut
from tracker.errors import NotFound, StoreError, shorten


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


RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "malformed JSON"},
    401: {"model": ErrorOut, "description": "no, unknown or revoked API key"},
    403: {"model": ErrorOut, "description": "API key without the scope this endpoint needs, or "
                                            "limited to other experiments (the refused events "
                                            "in rejected; the others were stored)"},
    408: {"model": ErrorOut, "description": "the body did not arrive within "
                                            "TRACKER_COLLECTOR_READ_TIMEOUT seconds"},
    413: {"model": ErrorOut, "description": "body or batch too large"},
    422: {"model": ErrorOut, "description": "invalid events (the list of errors); "
                                            "nothing was stored"},
    503: {"model": ErrorOut, "description": "database unavailable: retry after "
                                            "Retry-After seconds"},
}
"""The error answers of the event routes, for the OpenAPI document."""


def error_response(request_id: str, status: int, code: str, message: str,
                   body: dict | None = None, headers: dict | None = None) -> JSONResponse:
    content = {"error": code, "message": message, "request_id": request_id, **(body or {})}
    return JSONResponse(content, status_code=status, headers=headers)


def bounded(value: str | None, limit: int = 64) -> str | None:
    """A rejected value as a response may echo it: None stays None, text is shortened."""
    return None if value is None else shorten(value, limit)


def request_id(request: Request) -> str:
    """The id the access-log middleware gave this request."""
    return request.scope.get("state", {}).get("request_id", "-")


async def _api_error(request: Request, error: ApiError) -> JSONResponse:
    return error_response(request_id(request), error.status, error.code, error.message,
                          error.body, error.headers)


async def _http_error(request: Request, error: HTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
    return error_response(request_id(request), error.status_code, code, str(error.detail),
                          headers=getattr(error, "headers", None))


async def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    details = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}"
                        for e in error.errors())
    return error_response(request_id(request), 422, "invalid_request", details)


async def _not_found(request: Request, error: NotFound) -> JSONResponse:
    return error_response(request_id(request), 404, "not_found", str(error))


async def _store_error(request: Request, error: StoreError) -> JSONResponse:
    ACCESS_LOG.error(json_line({"event": "store_error", "request_id": request_id(request),
                                "detail": str(error)}))
    return error_response(request_id(request), 500, "store_error",
                          "the database refused the operation; the collector logged it")


def add_error_handlers(app: FastAPI) -> None:
    """Answer every known error as JSON with the request id (anything else: the access-log
    middleware's 500)."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(NotFound, _not_found)
    app.add_exception_handler(StoreError, _store_error)
