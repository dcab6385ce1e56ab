"""A real collector for tests: uvicorn in a thread (in-process) or ``tracker serve`` in a
subprocess (for the tests that kill it), on a free local port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from tracker.config import Settings
from tracker.store.db import create_engine, transaction
from tracker.store.keys import create_key

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


Samples = dict[tuple[str, frozenset], float]


def scrape(base: str, request_id: str | None = None) -> Samples:
    """``/metrics`` as {(sample name, its labels): value}, read by prometheus_client's parser
    (``request_id``: sent as ``X-Request-ID``, to find the answer in the access log)."""
    headers = {"X-Request-ID": request_id} if request_id else None
    text = httpx.get(base + "/metrics", headers=headers, timeout=10).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (KeyError: the scrape does not hold it)."""
    return samples[(name, frozenset(labels.items()))]


@dataclass
class Keys:
    ingest: str
    read: str


def make_keys(url: str) -> Keys:
    engine = create_engine(url)
    with transaction(engine, write=True) as conn:
        _, ingest = create_key(conn, "test-ingest", "ingest")
        _, read = create_key(conn, "test-read", "read")
    engine.dispose()
    return Keys(ingest, read)


@contextmanager
def in_thread(settings: Settings, app=None, port: int = 0) -> Iterator[str]:
    """Serve the collector app (or ``app``) on 127.0.0.1:``port`` (default: a free one) in a
    thread; yields its base URL."""
    from tracker.collector import create_app

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    from tracker.collector.server import http_protocol

    config = uvicorn.Config(app or create_app(settings), log_level="warning", access_log=False,
                            lifespan="on", http=http_protocol(settings))  # as `tracker serve`
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("collector did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


class Subprocess:
    """``tracker serve`` as a child process that tests may kill and restart."""

    def __init__(self, url: str, port: int | None = None, workers: int = 1,
                 env: dict[str, str] | None = None, log: Path | None = None):
        self.db_url = url
        self.port = port or free_port()
        self.workers = workers
        self.env = {**os.environ, "TRACKER_DATABASE_URL": url, **(env or {})}
        self.log = log
        self.process: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: float = 60.0) -> Subprocess:
        # 60 s: with several workers on a loaded 2-core machine (benchmarks beside the suite)
        # startup took over 20 s once; a server that exits is caught at once either way
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tracker.cli", "serve", "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", str(self.workers)],
            env=self.env, stdout=out, stderr=out, cwd=ROOT)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tracker serve exited with {self.process.returncode}")
            try:
                if httpx.get(self.base + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("tracker serve did not become healthy")

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, requests in flight are cut."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
