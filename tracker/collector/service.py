"""What the collector's routes share: settings, engine, API-key verifier, telemetry, and the
two ways route code reaches outside (the store on the thread pool, the caller's key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from fastapi import Depends, Request
from fastapi.security import HTTPBearer
from starlette.concurrency import run_in_threadpool

from tracker.collector.access_log import ACCESS_LOG, json_line
from tracker.collector.auth import AuthError, Caller, KeyVerifier, check, split_header
from tracker.collector.errors import ApiError
from tracker.collector.telemetry import Telemetry
from tracker.config import Settings
from tracker.errors import SchemaOutdated, StoreUnavailable

_bearer = HTTPBearer(auto_error=False, scheme_name="apiKey",
                     description="An API key from `tracker keys create`: "
                                 "`Authorization: Bearer trk_<id>_<secret>`")


class Collector:
    """One collector app's shared state."""

    def __init__(self, settings: Settings, engine: sa.Engine):
        self.settings = settings
        self.engine = engine
        self.keys = KeyVerifier(engine, settings.collector_key_cache_seconds)
        self.telemetry = Telemetry()

    def retry_after(self) -> dict[str, str]:
        return {"Retry-After": str(self.settings.collector_retry_after_seconds)}

    def unavailable(self, message: str) -> ApiError:
        self.telemetry.count_unavailable()
        return ApiError(503, "database_unavailable", message, headers=self.retry_after())

    async def call_store(self, function: Callable, *args, **kwargs) -> Any:
        """Run blocking store work on the thread pool; database trouble becomes a 503."""
        try:
            return await run_in_threadpool(function, *args, **kwargs)
        except SchemaOutdated as error:
            ACCESS_LOG.error(json_line({"event": "schema_outdated", "detail": str(error)}))
            raise self.unavailable("the database schema is not current; the operator must "
                                   "run `tracker db upgrade`; retry later") from error
        except StoreUnavailable as error:
            ACCESS_LOG.warning(json_line({"event": "database_unavailable",
                                          "detail": str(error)}))
            raise self.unavailable("the database is unavailable; retry later (resending "
                                   "the same events is safe)") from error

    def require(self, scope: str) -> Callable:
        """A route dependency: the verified caller, whose key must have ``scope`` (else 401
        or 403). The key id of a refused key of the wrong scope is logged."""
        async def caller(request: Request, _credentials=Depends(_bearer)) -> Caller:
            stored = None
            try:
                key_id, secret = split_header(request.headers.get("authorization"))
                hit = self.keys.cached(key_id)
                stored = (hit.stored if hit is not None else
                          await self.call_store(self.keys.load, key_id))
                verified = check(stored, secret, scope)
            except AuthError as error:
                if error.status == 403 and stored is not None:  # log which key was refused
                    request.state.caller = Caller(stored.key_id, stored.scope)
                headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
                code = "unauthorized" if error.status == 401 else "forbidden"
                raise ApiError(error.status, code, error.message, headers=headers) from None
            request.state.caller = verified
            return verified

        return caller
