"""Request bodies of the event routes: bounded in size and time, decoded to a list of events.

The events are not checked here: :mod:`tracker.ingest` does that, as for every other way in.

**Bounded parsing.** What a parse costs is not the body's size but its number of values: a
16 MiB body of ``[[],[],...]`` is 5M lists, ~0.6 GB and seconds of parsing. So while the body
arrives, :func:`count_elements` bounds its values from above with three byte counts per chunk
(``,``, ``[`` and ``{``: C-speed ``bytes.count``), and the moment they pass
``TRACKER_COLLECTOR_MAX_ELEMENTS`` the request is refused (413) without reading the rest:
such a body costs neither its parse nor its memory. The count is conservative: those
characters inside strings count too, so an unusual body may be refused that holds fewer
values (the client splits a batch on 413). Nesting is bounded while parsing by orjson itself
(1024 levels, an error at the first level past it: 400); the validation then holds a context
to 8. The body is read into one buffer (not chunks then a copy), and the parse runs on the
thread pool, off the event loop. A custom count rather than a streaming parser: none is
installed that builds the same values as orjson, and a string-aware scan in Python costs
seconds for 16 MiB (a regular expression skipping strings: 5 s for 4M short strings).
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


async def read_body(request: Request, limit: int, timeout: float,
                    max_elements: int | None = None) -> bytearray:
    """The request body, at most ``limit`` bytes (else 413) and ``max_elements`` JSON values
    as :func:`count_elements` bounds them (else 413, as soon as the count passes it), all of
    it within ``timeout`` seconds (else 408, and the connection is closed: a slow body cannot
    hold it)."""
    _check_headers(request, limit)
    body = bytearray()
    values = 1  # the top value
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                if len(body) + len(chunk) > limit:
                    raise ApiError(413, "body_too_large",
                                   f"the body is over the limit of {limit} bytes "
                                   "(TRACKER_COLLECTOR_MAX_BODY_BYTES); send smaller batches")
                values += count_elements(chunk)
                if max_elements is not None and values > max_elements:
                    raise ApiError(413, "body_too_complex",
                                   f"the body holds more than {max_elements} JSON values "
                                   "(TRACKER_COLLECTOR_MAX_ELEMENTS, counted from its ',', "
                                   "'[' and '{'); send smaller batches")
                body += chunk
    except TimeoutError:
        raise ApiError(408, "request_timeout",
                       f"the body did not arrive within {timeout:g} s "
                       "(TRACKER_COLLECTOR_READ_TIMEOUT); resend it",
                       headers={"Connection": "close"}) from None
    return body


def count_elements(part: bytes | bytearray) -> int:
    """The JSON values a part of a body can begin past its first one: one per ``,`` (the
    next item or member) and one per ``[`` or ``{`` (its first). Summed over a body's parts,
    plus one for the top value, it is never below the body's values (array items and object
    members): those characters inside strings count too.

    >>> 1 + count_elements(b'[{"a": 1, "b": [1, 2]}, []]')  # 7 values; the empty [] counts
    8
    """
    return part.count(b",") + part.count(b"[") + part.count(b"{")


def decode_events(body: bytes | bytearray, max_batch: int) -> list[Any]:
    """One event (a JSON object) or a batch (an array of at most ``max_batch``) as a list.
    Blocking: the collector calls it on the thread pool, once :func:`read_body` has bounded
    the body's values."""
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
