"""Request bodies of the event routes: bounded in size and time, decoded to a list of events.

The events are not checked here: :mod:`tracker.ingest` does that, as for every other way in.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from fastapi import Request

from tracker.collector.errors import ApiError
from tracker.errors import shorten


def _check_headers(request: Request, limit: int) -> None:
    """415 for a compressed body, 400 for a malformed ``Content-Length``, 413 for a declared
    length over ``limit``: refused before a byte of the body is read."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise ApiError(415, "unsupported_encoding",
                       f"Content-Encoding {shorten(encoding)!r} is not supported; "
                       "send plain JSON")
    declared = request.headers.get("content-length")
    if declared is None:
        return
    if not declared.strip().isdigit():
        raise ApiError(400, "bad_request", "Content-Length must be a whole number")
    if int(declared) > limit:
        raise ApiError(413, "body_too_large",
                       f"the body is {int(declared)} bytes, the limit is {limit} "
                       "(TRACKER_COLLECTOR_MAX_BODY_BYTES); send smaller batches")


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The request body, at most ``limit`` bytes (else 413), all of it within ``timeout``
    seconds (else 408, and the connection is closed: a slow body cannot hold it)."""
    _check_headers(request, limit)
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


def decode_events(body: bytes, max_batch: int) -> list[Any]:
    """One event (a JSON object) or a batch (an array of at most ``max_batch``) as a list."""
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
