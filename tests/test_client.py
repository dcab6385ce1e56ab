"""TrackerClient against a real collector (uvicorn on a local port, the test database), and
against one that fails on purpose: retries, backoff, Retry-After, no double counting."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.collector.server import free_port, in_thread, make_keys
from tests.helpers import count, impression, interaction, make_experiment
from tracker.client import TrackerClient, _retry_after

ROOT = Path(__file__).resolve().parents[1]


class Faulty:
    """The collector app behind a script of faults, one per POST in order, then normal:
    ``(status, headers)`` answers that without storing; ``"lost"`` stores through the real
    app, then answers 500 as if the response had been lost."""

    def __init__(self, app, script):
        self.app = app
        self.script = list(script)
        self.posts: list[tuple[float, int]] = []  # (time, status answered)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        fault = self.script.pop(0) if self.script else None
        if fault is None:
            status = []

            async def keep(message):
                if message["type"] == "http.response.start":
                    status.append(message["status"])
                await send(message)

            await self.app(scope, receive, keep)
            self.posts.append((time.monotonic(), status[0]))
            return
        if fault == "lost":
            async def swallow(message):
                pass

            await self.app(scope, receive, swallow)
            fault = (500, {})
        code, headers = fault
        self.posts.append((time.monotonic(), code))
        await send({"type": "http.response.start", "status": code,
                    "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]})
        await send({"type": "http.response.body", "body": b'{"message": "injected"}'})


@pytest.fixture
def home(settings, tracker):
    make_experiment(tracker)
    return make_keys(settings.database_url)


def faulty(settings, script) -> Faulty:
    from tracker.collector import create_app

    return Faulty(create_app(settings), script)


def client(base: str, key: str, **options) -> TrackerClient:
    options = {"flush_interval": 0.05, "retry_base": 0.01, "retry_max": 0.5, **options}
    return TrackerClient(base, key, **options)


def test_events_reach_the_database_and_the_counters_say_so(settings, tracker, home):
    with in_thread(settings) as base:
        c = client(base, home.ingest, batch_size=7)
        ids = [c.log_impression(**impression(i)) for i in range(20)]
        ids += [c.log_interaction(**interaction(i)) for i in range(10)]
        assert c.flush(10)
        c.log_impressions([impression(i) for i in range(5)])  # a retry by the application
        counters = c.close()
    assert ids[:3] == ["imp-0", "imp-1", "imp-2"]
    assert (counters.enqueued, counters.stored, counters.duplicates, counters.pending) == (
        35, 30, 5, 0)
    assert counters.batches >= 5 and counters.failed == counters.dropped == 0
    assert (count(tracker.engine, "impression"), count(tracker.engine, "interaction")) == (20, 10)


def test_ids_are_made_client_side_so_a_retried_batch_is_stored_once(settings, tracker, home):
    app = faulty(settings, ["lost", "lost"])
    with in_thread(settings, app=app) as base:
        c = client(base, home.ingest)
        records = [impression(i, impression_id=None) for i in range(10)]
        ids = [c.log_impression(**{k: v for k, v in r.items() if k != "impression_id"})
               for r in records]
        counters = c.close()
    assert len(set(ids)) == 10 and all(len(i) == 32 for i in ids)
    assert [status for _, status in app.posts] == [500, 500, 200]
    assert (counters.stored, counters.duplicates, counters.retries) == (0, 10, 2)
    assert count(tracker.engine, "impression") == 10


@pytest.mark.parametrize("fault", [
    pytest.param((500, {}), id="500"),
    pytest.param((502, {}), id="502"),
    pytest.param((503, {"Retry-After": "0"}), id="503"),
    pytest.param((429, {}), id="429-too-many-requests"),
])
def test_server_errors_and_throttling_are_retried(settings, tracker, home, fault):
    app = faulty(settings, [fault, fault, fault])
    with in_thread(settings, app=app) as base:
        c = client(base, home.ingest)
        for i in range(5):
            c.log_impression(**impression(i))
        counters = c.close()
    assert [status for _, status in app.posts] == [fault[0]] * 3 + [200]
    assert (counters.stored, counters.retries, counters.failed) == (5, 3, 0)
    assert count(tracker.engine, "impression") == 5


def test_retry_after_is_honoured_and_backoff_grows(settings, home):
    app = faulty(settings, [(503, {"Retry-After": "1"}), (500, {}), (500, {}), (500, {})])
    with in_thread(settings, app=app) as base:
        c = client(base, home.ingest, retry_base=0.1, retry_max=5)
        c.log_impression(**impression(0))
        c.close(timeout=15)
    times = [t for t, _ in app.posts]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps[0] >= 0.95                   # Retry-After: 1
    assert 0.1 <= gaps[1] < 0.6              # 0.2 * [0.5, 1]
    assert 0.2 <= gaps[2] < 1.0              # 0.4 * [0.5, 1]
    assert gaps[3] >= 0.4                    # 0.8 * [0.5, 1]


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_other_client_errors_are_not_retried(settings, home, status):
    app = faulty(settings, [(status, {})])
    with in_thread(settings, app=app) as base:
        c = client(base, home.ingest)
        for i in range(3):
            c.log_impression(**impression(i))
        counters = c.close()
    assert len(app.posts) == 1
    assert (counters.failed, counters.retries, counters.stored) == (3, 0, 0)
    assert c.last_error.startswith(f"HTTP {status}")


def test_a_wrong_key_fails_without_retrying(settings, home):
    with in_thread(settings) as base:
        c = client(base, home.read)
        c.log_impression(**impression(0))
        counters = c.close()
    assert (counters.failed, counters.retries) == (1, 0)
    assert "HTTP 403" in c.last_error


def test_invalid_events_are_counted_rejected_and_the_rest_resent(settings, tracker, home):
    with in_thread(settings) as base:
        c = client(base, home.ingest, flush_interval=0.5)
        for i in range(6):
            c.log_impression(**impression(i, **({"arm": "nope"} if i % 3 == 0 else {})))
        counters = c.close()
    assert (counters.rejected, counters.stored, counters.failed) == (2, 4, 0)
    assert count(tracker.engine, "impression") == 4


def test_a_batch_over_the_collector_limit_is_split(settings, tracker, home):
    with in_thread(settings.replace(collector_max_batch=4)) as base:
        c = client(base, home.ingest, batch_size=50, flush_interval=0.5)
        for i in range(30):
            c.log_impression(**impression(i))
        counters = c.close()
    assert (counters.stored, counters.failed) == (30, 0)
    assert count(tracker.engine, "impression") == 30


def test_connection_errors_are_retried_until_the_collector_comes_up(settings, tracker, home):
    port = free_port()
    c = client(f"http://127.0.0.1:{port}", home.ingest, retry_max=0.2)
    for i in range(10):
        c.log_impression(**impression(i))
    time.sleep(0.5)
    assert c.counters().retries >= 1 and "ConnectError" in c.last_error
    with in_thread(settings, port=port):
        assert c.flush(10)
        counters = c.close()
    assert (counters.stored, counters.failed, counters.pending) == (10, 0, 0)
    assert count(tracker.engine, "impression") == 10


def test_logging_never_waits_and_a_full_queue_drops_newest_and_counts():
    c = client(f"http://127.0.0.1:{free_port()}", "trk_x", queue_size=10, batch_size=5)
    began = time.perf_counter()
    for i in range(100):
        c.log_impression(**impression(i))
    assert time.perf_counter() - began < 0.5
    counters = c.counters()
    assert counters.enqueued + counters.dropped == 100
    assert counters.dropped >= 100 - 10 - 5
    began = time.perf_counter()
    final = c.close(timeout=0.3)
    assert time.perf_counter() - began < 2
    assert final.failed == final.enqueued and final.pending == 0


def test_block_policy_waits_at_most_its_timeout_then_counts_the_drop():
    c = client(f"http://127.0.0.1:{free_port()}", "trk_x", queue_size=1, batch_size=1,
               on_full="block", block_timeout=0.2)
    for i in range(3):
        c.log_impression(**impression(i))
    began = time.perf_counter()
    c.log_impression(**impression(9))
    waited = time.perf_counter() - began
    assert 0.15 <= waited < 1.0
    assert c.counters().dropped >= 1
    c.close(timeout=0.2)


def test_close_at_interpreter_exit_sends_what_is_queued(settings, tracker, home):
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.helpers import impression
from tracker.client import TrackerClient
c = TrackerClient(sys.argv[1], sys.argv[2], flush_interval=30)
for i in range(25):
    c.log_impression(**impression(i))
# no close(): atexit sends the queue
"""
    with in_thread(settings) as base:
        subprocess.run([sys.executable, "-c", script, base, home.ingest], check=True,
                       timeout=60)
    assert count(tracker.engine, "impression") == 25


def test_retry_after_accepts_seconds_and_http_dates():
    assert _retry_after("3") == 3.0
    assert _retry_after(None) is None and _retry_after("soon") is None
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
