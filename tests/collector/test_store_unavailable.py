"""The collector answers 503 with Retry-After when the store gives up on a transient failure
(retries spent), and a resend afterwards stores the batch once."""

from __future__ import annotations

import contextlib

import pytest

from tests.collector.test_api import post, wire
from tests.conftest import BACKEND
from tests.helpers import count, impression
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
