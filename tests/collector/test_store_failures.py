"""The collector and the store's failures: overlapping batches sent at once all succeed (no
deadlock), and when the store gives up on a transient failure the answer is 503 with
Retry-After, after which a resend stores the batch once."""

from __future__ import annotations

import contextlib
import random
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.collector.server import in_thread, make_keys
from tests.collector.test_api import post, wire
from tests.conftest import BACKEND
from tests.helpers import count, impression, make_experiment
from tests.store.faults import ALWAYS, fail_statements, stop_failing, write_lock_held
from tracker.config import Settings


@pytest.fixture
def settings(db_url) -> Settings:
    return Settings(database_url=db_url, store_retries=1, sqlite_busy_timeout_ms=50,
                    collector_retry_after_seconds=3)


@contextlib.contextmanager
def _store_failing(collector):
    """Every write meets a transient failure: a deadlock on PostgreSQL (a trigger raising
    40P01), a write lock held by another connection on SQLite."""
    if BACKEND == "postgresql":
        fail_statements(collector.tracker.engine, "impression", ALWAYS, "40P01")
        yield
        stop_failing(collector.tracker.engine, "impression")
    else:
        with write_lock_held(collector.settings.database_url, 2.0):
            yield


def test_a_store_that_stays_unavailable_answers_503_with_retry_after(collector):
    batch = [wire(impression(i)) for i in range(3)]
    with _store_failing(collector):
        refused = post(collector, "impressions", batch)
    assert (refused.status_code, refused.json()["error"]) == (503, "database_unavailable")
    assert refused.headers["retry-after"] == "3"
    assert count(collector.tracker.engine, "impression") == 0
    resent = post(collector, "impressions", batch)
    assert resent.status_code == 200
    assert count(collector.tracker.engine, "impression") == 3


SENDERS = 8
REQUESTS = 48
SHARED = 1_000


def test_overlapping_batches_sent_at_once_are_all_stored_without_deadlock(tracker, db_url):
    # the report: 8 and 13 of 48 such requests answered 500 (DeadlockDetected)
    make_experiment(tracker)
    tracker.log_impression(**impression(SHARED // 2))
    keys = make_keys(db_url)
    headers = {"Authorization": f"Bearer {keys.ingest}"}
    batches = []
    for n in range(REQUESTS):
        ids = random.Random(n).sample(range(SHARED), SHARED // 2)
        batches.append([wire(impression(i)) for i in ids])
    no_retries = Settings(database_url=db_url, store_retries=0)  # a deadlock would show
    with in_thread(no_retries) as base, ThreadPoolExecutor(SENDERS) as pool:
        answers = list(pool.map(lambda batch: httpx.post(f"{base}/v1/impressions", json=batch,
                                                         headers=headers, timeout=120),
                                batches))
    assert [a.status_code for a in answers] == [200] * REQUESTS
    sent = {i for n in range(REQUESTS) for i in random.Random(n).sample(range(SHARED),
                                                                           SHARED // 2)}
    assert sum(a.json()["stored"] for a in answers) == len(sent - {SHARED // 2})
    assert sum(a.json()["conflicts"] for a in answers) == 0
    assert count(tracker.engine, "impression") == len(sent | {SHARED // 2})
