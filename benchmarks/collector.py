"""Collector throughput: impressions of 10 items POSTed in batches of 500 into PostgreSQL.

    .venv/bin/python benchmarks/collector.py                       # 200k impressions
    .venv/bin/python benchmarks/collector.py --impressions 100000 --workers 2 --senders 4

A fresh PostgreSQL schema is migrated, an experiment and an ingest API key are created, and
``tracker serve`` starts as a child process (``--workers`` uvicorn processes) on a free local
port. ``--senders`` client processes then POST their share of the impressions (JSON bodies
encoded before the clock starts, one keep-alive connection each, a new batch as soon as the
previous one is answered) to ``/v1/impressions``. Client and server share the machine.
Printed: impressions per second over the whole run (first request sent to last answer),
batch latency percentiles (request to response, as a sender sees it), and the stored count
checked against the database. With ``--client`` the same load goes through
``TrackerClient`` instead (queue, background batching) for comparison.

``--hostile KIND`` (issue 29) measures the collector under hostile bodies instead: one worker,
``--bodies`` concurrent POSTs of a ~16 MiB body (``lists``: ``[[],[],...]``, ``dicts``:
``[{},{},...]``, ``numbers``: ``[1,1,...]``, ``nested``: ``[[[...]]]``) while ``/health`` is
polled every 20 ms. Printed: the worker's resident memory before and at its peak (sampled
every 5 ms from ``/proc``), the answers, and ``/health``'s latency while they are in flight.

    .venv/bin/python benchmarks/collector.py --hostile lists --bodies 8
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import orjson  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from tracker import Tracker  # noqa: E402
from tracker.config import Settings  # noqa: E402
from tracker.store import schema  # noqa: E402
from tracker.store.db import create_engine, transaction  # noqa: E402
from tracker.store.keys import create_key  # noqa: E402

PG_URL = os.environ.get("TRACKER_BENCH_PG_URL",
                        "postgresql+psycopg://postgres@127.0.0.1:5432/test")
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def impressions(start: int, n: int, run: str) -> list[dict]:
    return [{"impression_id": f"{run}-{i}", "experiment": "bench",
             "arm": "control" if i % 2 else "treatment", "user_id": f"user-{i % 50_000}",
             "items": [f"item-{(i * 7 + j) % 20_000}" for j in range(10)],
             "scores": [1.0 - j / 10 for j in range(10)],
             "served_at": (T0 + timedelta(milliseconds=i)).isoformat()}
            for i in range(start, start + n)]


def sender(args) -> list[float]:
    base, key, start, n, batch, run, barrier = args
    bodies = [orjson.dumps(impressions(s, min(batch, start + n - s), run))
              for s in range(start, start + n, batch)]
    latencies = []
    with httpx.Client(base_url=base, timeout=120, headers={
            "Authorization": f"Bearer {key}", "Content-Type": "application/json"}) as http:
        barrier.wait()
        for body in bodies:
            began = time.perf_counter()
            response = http.post("/v1/impressions", content=body)
            latencies.append(time.perf_counter() - began)
            if response.status_code != 200:
                raise SystemExit(f"HTTP {response.status_code}: {response.text[:300]}")
    return latencies


def client_sender(args) -> list[float]:
    from tracker.client import TrackerClient

    base, key, start, n, batch, run, barrier = args
    records = impressions(start, n, run)
    client = TrackerClient(base, key, batch_size=batch, queue_size=n + 1, flush_interval=0.2)
    barrier.wait()
    for record in records:
        client.log_impression(**record)
    counters = client.close(timeout=600)
    if counters.stored != n:
        raise SystemExit(f"client counters: {counters}")
    return []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


MiB = 1024 * 1024
HOSTILE = {
    "lists": lambda size: b"[" + b",".join([b"[]"] * (size // 3)) + b"]",
    "dicts": lambda size: b"[" + b",".join([b"{}"] * (size // 3)) + b"]",
    "numbers": lambda size: b"[" + b",".join([b"1"] * (size // 2)) + b"]",
    "nested": lambda size: b"[" * (size // 2) + b"]" * (size // 2),
}


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def post_hostile(base: str, key: str, kind: str, seconds: float, nice: int, answers,
                 barrier) -> None:
    """Hostile POSTs from a process of its own (its sending does not slow the poller): the
    body is built, then, once every sender has built its own, posted again and again on one
    connection (a new one when the collector closes it) for ``seconds``."""
    if nice:
        os.nice(nice)
    body = HOSTILE[kind](16 * MiB - 64)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    barrier.wait()
    until = time.perf_counter() + seconds
    codes: list[int] = []
    with httpx.Client(base_url=base, timeout=600) as http:
        while not codes or time.perf_counter() < until:
            try:
                codes.append(http.post("/v1/impressions", content=body,
                                       headers=headers).status_code)
            except httpx.HTTPError as error:  # refused mid-send: the server closed it
                codes.append(type(error).__name__)
    answers.put(codes)


def percentiles(latencies: list[float]) -> str:
    latencies = sorted(latencies)
    if not latencies:
        return "no answers"
    at = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731
    return (f"{len(latencies)} answers, p50 {at(0.5):.0f} ms, p99 {at(0.99):.0f} ms, "
            f"max {latencies[-1] * 1000:.0f} ms")


def hostile(base: str, key: str, pid: int, kind: str, bodies: int, seconds: float,
            nice: int) -> None:
    """``bodies`` senders posting hostile bodies for ``seconds``, each a process of its own;
    the worker's memory and /health (polled every 20 ms on a warm keep-alive connection from
    this process) meanwhile, and /health on the idle collector beforehand for comparison."""
    health: list[float] = []
    idle: list[float] = []
    done = threading.Event()
    answers = multiprocessing.Queue()
    barrier = multiprocessing.Barrier(bodies + 1)
    senders = [multiprocessing.Process(target=post_hostile,
                                       args=(base, key, kind, seconds, nice, answers, barrier))
               for _ in range(bodies)]
    with httpx.Client(base_url=base, timeout=600) as http:
        for _ in range(50):
            started = time.perf_counter()
            http.get("/health")
            idle.append(time.perf_counter() - started)
            time.sleep(0.02)
        before = rss_mib(pid)
        peak = [before]

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], rss_mib(pid))
                time.sleep(0.005)

        for process in senders:
            process.start()
        barrier.wait()
        sampler = threading.Thread(target=sample)
        sampler.start()
        began = time.perf_counter()
        while any(p.is_alive() for p in senders):
            started = time.perf_counter()
            http.get("/health")
            health.append(time.perf_counter() - started)
            time.sleep(0.02)
        elapsed = time.perf_counter() - began
    done.set()
    sampler.join()
    codes: dict[object, int] = {}
    for _ in senders:
        for code in answers.get():
            codes[code] = codes.get(code, 0) + 1
    print(f"collector, 1 worker: {bodies} senders posting 16 MiB bodies of {kind!r} for "
          f"{seconds:g} s, answered {dict(sorted(codes.items(), key=str))} in {elapsed:.1f} s")
    print(f"  worker RSS: {before:.0f} MiB before, {peak[0]:.0f} MiB at peak "
          f"(+{peak[0] - before:.0f} MiB)")
    print(f"  /health idle:             {percentiles(idle)}")
    print(f"  /health while in flight:  {percentiles(health)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--impressions", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2, help="collector worker processes")
    parser.add_argument("--senders", type=int, default=4, help="client processes")
    parser.add_argument("--client", action="store_true", help="send through TrackerClient")
    parser.add_argument("--hostile", choices=sorted(HOSTILE),
                        help="measure memory and /health under hostile bodies instead")
    parser.add_argument("--bodies", type=int, default=8, help="--hostile: concurrent senders")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="--hostile: how long each sender keeps posting")
    parser.add_argument("--nice", type=int, default=0,
                        help="--hostile: the senders' niceness (clients on other machines "
                             "do not take the collector's CPU; here they share two cores)")
    options = parser.parse_args()
    if options.hostile:
        options.workers = 1

    name = f"bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {name}")
    url = f"{PG_URL}?options={quote(f'-csearch_path={name}')}"
    server = None
    try:
        engine = create_engine(url)
        schema.upgrade(engine)
        with Tracker(settings=Settings(database_url=url)) as t:
            t.create_experiment("bench", {"control": 1, "treatment": 1})
        with transaction(engine, write=True) as conn:
            _, key = create_key(conn, "bench", "ingest")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "tracker.cli", "serve", "--port", str(port),
             "--workers", str(options.workers)],
            env={**os.environ, "TRACKER_DATABASE_URL": url}, cwd=ROOT,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                if httpx.get(base + "/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        if options.hostile:
            hostile(base, key, server.pid, options.hostile, options.bodies, options.seconds,
                    options.nice)
            return
        n, k = options.impressions, options.senders
        share = -(-n // k)
        share += -share % options.batch  # whole batches per sender
        manager = multiprocessing.Manager()
        barrier = manager.Barrier(k + 1)
        jobs = [(base, key, i * share, max(0, min(share, n - i * share)), options.batch,
                 "run", barrier) for i in range(k)]
        with multiprocessing.Pool(k) as pool:
            pending = pool.map_async(client_sender if options.client else sender, jobs)
            barrier.wait()
            began = time.perf_counter()
            latencies = sorted(x for part in pending.get() for x in part)
            elapsed = time.perf_counter() - began
        with engine.connect() as conn:
            stored = conn.execute(sa.text("SELECT count(*) FROM impression")).scalar_one()
        how = "TrackerClient" if options.client else "raw HTTP"
        print(f"collector, {options.workers} worker(s), {k} sender process(es) ({how}), "
              f"PostgreSQL: {n} impressions x 10 items in batches of {options.batch}")
        print(f"  {n / elapsed:,.0f} impressions/s ({elapsed:.1f} s); stored {stored} "
              f"({'ok' if stored == n else 'MISMATCH'})")
        if latencies:
            def pct(p: float) -> float:
                return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

            print(f"  batch latency ms: p50 {pct(0.50):.0f}, p95 {pct(0.95):.0f}, "
                  f"p99 {pct(0.99):.0f}, max {latencies[-1] * 1000:.0f} "
                  f"(mean {statistics.mean(latencies) * 1000:.0f}, {len(latencies)} batches)")
        engine.dispose()
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {name} CASCADE")
        admin.dispose()


if __name__ == "__main__":
    main()
