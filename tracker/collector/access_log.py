"""The collector's log: one JSON line per request (and per notable event) on stderr.

:class:`AccessLogMiddleware` gives each request an id (the client's ``X-Request-ID`` when it
is a plain token, else a new one; returned in that header), writes its access line, counts it
in the telemetry, and answers any unexpected error with a JSON 500 carrying the id. It never
logs headers, bodies or query strings, so no key or secret can reach the log; a line names the
caller by its public key id, and the worker process by its pid.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
import traceback
import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi.responses import JSONResponse

from tracker.collector.telemetry import Telemetry

ACCESS_LOG = logging.getLogger("tracker.collector.access")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def json_line(record: dict[str, Any]) -> str:
    """``record`` as one JSON log line, timestamped."""
    return json.dumps({"ts": datetime.now(UTC).isoformat(timespec="milliseconds"), **record},
                      default=str)


def configure_logging() -> None:
    """Bare JSON lines on stderr, unless the application configured the logger itself."""
    if not ACCESS_LOG.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        ACCESS_LOG.addHandler(handler)
        ACCESS_LOG.setLevel(logging.INFO)
        ACCESS_LOG.propagate = False


class _Exchange:
    """One request as the middleware follows it: its id, status, and whether its line is
    written (exactly once, however the request ends)."""

    def __init__(self, scope, telemetry: Telemetry):
        incoming = dict(scope.get("headers") or ()).get(b"x-request-id", b"").decode("latin-1")
        self.request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        self.scope = scope
        self.state = scope.setdefault("state", {})
        self.state["request_id"] = self.request_id
        self.telemetry = telemetry
        self.started = time.perf_counter()
        self.status = 500
        self.response_started = False
        self.logged = False

    def finish(self, failure: BaseException | None = None) -> None:
        """Count the request and write its access line (the first call only)."""
        if self.logged:
            return
        self.logged = True
        elapsed = time.perf_counter() - self.started
        scope = self.scope
        route = getattr(scope.get("route"), "path", None) or "unmatched"
        self.telemetry.observe_request(route, scope["method"], self.status, elapsed)
        record = {"event": "access", "request_id": self.request_id, "method": scope["method"],
                  "path": scope["path"], "route": route, "status": self.status,
                  "duration_ms": round(elapsed * 1000, 2),
                  "client": (scope.get("client") or ("-",))[0], "pid": os.getpid()}
        caller = self.state.get("caller")
        if caller is not None:
            record["key_id"] = caller.key_id
        record.update(self.state.get("ingest", {}))
        if failure is None:
            ACCESS_LOG.info(json_line(record))
            return
        record["error"] = "".join(traceback.format_exception_only(failure)).strip()
        ACCESS_LOG.error(json_line(record))
        ACCESS_LOG.error(json_line({"event": "traceback", "request_id": self.request_id,
                                    "traceback": "".join(traceback.format_exception(failure))}))

    def sending(self, send):
        """``send`` that records the status, adds the ``X-Request-ID`` header and writes the
        line just before the last byte leaves (a client never outruns its log line)."""
        async def send_with_id(message):
            if message["type"] == "http.response.start":
                self.status = message["status"]
                self.response_started = True
                message["headers"] = [*message.get("headers", ()),
                                      (b"x-request-id", self.request_id.encode())]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                self.finish()
            await send(message)

        return send_with_id


class AccessLogMiddleware:
    """Request ids, one JSON access line per request, request telemetry, and a JSON 500 (with
    the request id) for any unexpected error."""

    def __init__(self, app, telemetry: Telemetry):
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = _Exchange(scope, self.telemetry)
        send_with_id = exchange.sending(send)
        try:
            await self.app(scope, receive, send_with_id)
        except Exception as error:  # the last line of defence: answer 500, log, keep serving
            exchange.finish(error)  # status 500 unless the response had already started
            if not exchange.response_started:
                response = JSONResponse(
                    {"error": "internal_error", "message": "internal error; the collector "
                     "logged it with this request id", "request_id": exchange.request_id},
                    status_code=500)
                await response(scope, receive, send_with_id)
        finally:
            exchange.finish()
