"""How long slow clients hold ``tracker serve``'s connections.

Starts ``tracker serve`` on a fresh SQLite database in a temporary folder, opens N connections
that send partial headers and N that send full headers and a partial body (both trickling a
byte now and then, as a slowloris client does), and prints how many are still open over time.

    .venv/bin/python benchmarks/slowloris.py --connections 300 --read-timeout 2 --watch 8
"""

from __future__ import annotations

import argparse
import contextlib
import select
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.collector.server import Subprocess, make_keys  # noqa: E402
from tracker.store import schema  # noqa: E402
from tracker.store.db import create_engine  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=300, help="of each kind")
    parser.add_argument("--read-timeout", type=float, default=2.0)
    parser.add_argument("--watch", type=float, default=8.0, help="seconds to watch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'tracker.db'}"
        engine = create_engine(url)
        schema.upgrade(engine)
        engine.dispose()
        keys = make_keys(url)
        server = Subprocess(url, env={"TRACKER_COLLECTOR_READ_TIMEOUT": str(args.read_timeout)})
        server.start()
        try:
            watch(server.port, keys.ingest, args)
        finally:
            server.stop()


def watch(port: int, token: str, args) -> None:
    head = b"POST /v1/impressions HTTP/1.1\r\nHost: collector\r\n"
    body = (head + b"Authorization: Bearer " + token.encode()
            + b"\r\nContent-Length: 100000\r\n\r\n[")
    socks = {}
    for first in [head] * args.connections + [body] * args.connections:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(first)
        sock.setblocking(False)
        socks[sock] = "headers" if first is head else "body"
    started = time.monotonic()
    next_report = 0.0
    while time.monotonic() - started < args.watch:
        readable, _, _ = select.select(list(socks), [], [], 0.2)
        for sock in readable:
            try:
                while sock.recv(65536):
                    pass
                gone = True
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            if gone:
                sock.close()
                del socks[sock]
        for sock, kind in socks.items():
            with contextlib.suppress(OSError):
                sock.send(b"X-Slow: 1\r\n" if kind == "headers" else b" ")
        elapsed = time.monotonic() - started
        if elapsed >= next_report:
            kinds = list(socks.values())
            print(f"{elapsed:5.1f} s: {kinds.count('headers')} partial-header and "
                  f"{kinds.count('body')} partial-body connections open")
            next_report += 1.0
    for sock in socks:
        sock.close()


if __name__ == "__main__":
    main()
