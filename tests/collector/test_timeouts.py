"""Slow clients cannot hold the collector's connections: ``tracker serve`` (a real subprocess
on 127.0.0.1) closes connections whose headers or body do not arrive within
``TRACKER_COLLECTOR_READ_TIMEOUT``, even when the client trickles bytes (slowloris)."""

from __future__ import annotations

import contextlib
import select
import socket
import time

import httpx
import pytest

from tests.collector.server import Subprocess, make_keys
from tests.helpers import impression, make_experiment

READ_TIMEOUT = 1.0
SLACK = 2.0  # scheduling on a busy machine; the test fails if a connection outlives it


def _connect(port: int, first: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    if first:
        sock.sendall(first)
    sock.setblocking(False)
    return sock


def _closed_by_server(sock: socket.socket, seen: bytearray) -> bool:
    """Read what the server sent; True once it has closed the connection."""
    try:
        while chunk := sock.recv(65536):
            seen.extend(chunk)
        return True  # end of file
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


@pytest.fixture
def serve(settings, tracker, tmp_path):
    make_experiment(tracker)
    keys = make_keys(settings.database_url)
    server = Subprocess(settings.database_url, log=tmp_path / "serve.log",
                        env={"TRACKER_COLLECTOR_READ_TIMEOUT": str(READ_TIMEOUT)}).start()
    yield server, keys
    server.stop()


def test_partial_headers_and_partial_bodies_are_closed_within_the_read_timeout(serve):
    server, keys = serve
    head = b"POST /v1/impressions HTTP/1.1\r\nHost: collector\r\n"
    body_head = (head + b"Authorization: Bearer " + keys.ingest.encode()
                 + b"\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
                 + b'[{"impression_id": "slow')
    keep_alive = b"GET /health HTTP/1.1\r\nHost: collector\r\n\r\n"
    groups = {
        "silent": [_connect(server.port, b"") for _ in range(8)],
        "partial-headers": [_connect(server.port, head) for _ in range(12)],
        "partial-body": [_connect(server.port, body_head) for _ in range(12)],
        "kept-alive-then-partial-headers": [_connect(server.port, keep_alive)
                                            for _ in range(4)],
    }
    opened = time.monotonic()
    seen = {id(s): bytearray() for group in groups.values() for s in group}
    open_ = {id(s): s for group in groups.values() for s in group}
    closed_after: dict[int, float] = {}
    trickled_after_response: set[int] = set()
    while open_ and time.monotonic() - opened < READ_TIMEOUT + SLACK + 1:
        readable, _, _ = select.select(list(open_.values()), [], [], 0.1)
        for sock in readable:
            if _closed_by_server(sock, seen[id(sock)]):
                closed_after[id(sock)] = time.monotonic() - opened
                del open_[id(sock)]
        for name in ("partial-headers", "partial-body", "kept-alive-then-partial-headers"):
            for sock in groups[name]:  # a slowloris client keeps trickling bytes
                if id(sock) not in open_:
                    continue
                if name.startswith("kept-alive") and id(sock) not in trickled_after_response:
                    if b"\r\n\r\n" not in seen[id(sock)]:
                        continue  # its first request is not answered yet
                    trickled_after_response.add(id(sock))
                    payload = head
                else:
                    payload = b"X-Slow: 1\r\n" if name != "partial-body" else b"x"
                with contextlib.suppress(OSError):  # closed meanwhile
                    sock.send(payload)
    for sock in (s for group in groups.values() for s in group):
        sock.close()
    still = [name for name, group in groups.items() for s in group if id(s) in open_]
    assert not still, f"still open after {READ_TIMEOUT + SLACK + 1} s: {still}"
    for name, group in groups.items():
        latest = max(closed_after[id(s)] for s in group)
        assert latest <= READ_TIMEOUT + SLACK, f"{name}: closed after {latest:.1f} s"
        assert min(closed_after[id(s)] for s in group) >= READ_TIMEOUT * 0.9, name
    for sock in groups["partial-body"]:
        assert seen[id(sock)].startswith(b"HTTP/1.1 408"), bytes(seen[id(sock)][:200])
        assert b"TRACKER_COLLECTOR_READ_TIMEOUT" in seen[id(sock)]
    for sock in groups["kept-alive-then-partial-headers"]:
        assert seen[id(sock)].startswith(b"HTTP/1.1 200")  # its first request was served
    assert len(trickled_after_response) == len(groups["kept-alive-then-partial-headers"])
    answer = httpx.post(server.base + "/v1/impressions", headers={
        "Authorization": f"Bearer {keys.ingest}"},
        json={k: v.isoformat() if hasattr(v, "isoformat") else v
              for k, v in impression(0).items()})
    assert answer.status_code == 200, answer.text  # a prompt client is served as before


def test_headers_over_the_size_bound_are_refused_and_the_connection_closed(serve):
    from tracker.collector.server import MAX_HEADER_BYTES

    server, _keys = serve
    line = b"X-Big: " + b"a" * 1000 + b"\r\n"
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: collector\r\n")
    sent, started = 0, time.monotonic()
    with contextlib.suppress(OSError):  # the server closes while we send
        while sent < 50 * MAX_HEADER_BYTES:
            sock.sendall(line)
            sent += len(line)
    answer = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            answer += chunk
    sock.close()
    assert time.monotonic() - started < READ_TIMEOUT  # refused for size, not for time
    assert sent < 50 * MAX_HEADER_BYTES  # closed soon after the bound
    if answer:  # else the kernel's reset (we were still sending) overtook the answer
        assert answer.startswith(b"HTTP/1.1 400") and b"request headers over" in answer
    fine = httpx.get(server.base + "/health", headers={"X-Big": "a" * (MAX_HEADER_BYTES // 2)})
    assert fine.status_code == 200  # headers within the bound are served as before
