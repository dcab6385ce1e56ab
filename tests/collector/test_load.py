"""Load with faults: several producer processes send impressions and interactions through a
``tracker serve`` process while it is killed and restarted and (PostgreSQL) its database
connections are terminated mid-batch; 5% of the batches are re-sent on purpose. Afterwards
the database holds exactly the distinct events, and the producers' counters add up.

Full size (200,000 + 200,000 events) on PostgreSQL, as CI runs it; a tenth of that on SQLite
(one writer at a time: the same faults, a smaller bill). ``TRACKER_LOAD_EVENTS`` overrides.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import sqlalchemy as sa

from tests.collector.server import ROOT, Subprocess, make_keys
from tests.conftest import PG_URL
from tests.helpers import count, make_experiment

EVENTS = int(os.environ.get("TRACKER_LOAD_EVENTS", 200_000 if PG_URL else 20_000))
PRODUCERS = 4


def _terminate_backends(engine: sa.Engine, application: str) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = :name AND pid <> pg_backend_pid()"),
            {"name": application}).scalar_one()


def test_concurrent_producers_with_resends_kills_and_dropped_connections(settings, tracker,
                                                                        tmp_path):
    make_experiment(tracker, relevance={"click": 1})
    keys = make_keys(settings.database_url)
    application = f"tracker-load-{uuid.uuid4().hex[:8]}"
    url = settings.database_url
    if PG_URL:
        url += ("&" if "?" in url else "?") + f"application_name={application}"
    collector = Subprocess(url, env={"TRACKER_COLLECTOR_RETRY_AFTER_SECONDS": "1"},
                           log=tmp_path / "collector.log").start()
    share = EVENTS // PRODUCERS
    producers = [subprocess.Popen(
        [sys.executable, "-m", "tests.collector.load_client", collector.base, keys.ingest,
         str(i * share), str(share)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for i in range(PRODUCERS)]
    faults = {"kills": 0, "terminated": 0}

    def progress() -> int:
        return count(tracker.engine, "impression")

    def wait_for(n: int, limit: float = 120) -> None:
        end = time.monotonic() + limit
        while progress() < n and time.monotonic() < end:
            time.sleep(0.1)

    def inject() -> None:
        wait_for(EVENTS // 4)
        collector.kill()                 # SIGKILL mid-load: requests in flight are cut
        faults["kills"] += 1
        time.sleep(0.5)
        collector.start()
        if PG_URL:
            for target in (EVENTS // 2, EVENTS * 3 // 4):
                wait_for(target)
                for _ in range(3):
                    faults["terminated"] += _terminate_backends(tracker.engine, application)
                    time.sleep(0.2)

    injector = threading.Thread(target=inject, daemon=True)
    injector.start()
    try:
        outputs = [p.communicate(timeout=300)[0] for p in producers]
        injector.join(60)
    finally:
        collector.stop()
    assert all(p.returncode == 0 for p in producers), outputs
    counters = [json.loads(out) for out in outputs]

    # the database: exactly the distinct events, no more, no less
    with tracker.engine.connect() as conn:
        impressions = conn.execute(sa.text(
            "SELECT count(*), count(DISTINCT impression_key), min(impression_key), "
            "sum(CASE WHEN impression_key LIKE 'imp-%' THEN 1 ELSE 0 END) "
            "FROM impression")).one()
        interactions = conn.execute(sa.text(
            "SELECT count(*), count(DISTINCT event_key) FROM interaction")).one()
    assert impressions[0] == impressions[1] == impressions[3] == share * PRODUCERS
    assert interactions[0] == interactions[1] == share * PRODUCERS

    # the producers' counters say what happened
    total = {k: sum(c[k] for c in counters) for k in counters[0] if k != "last_error"}
    sent = 2 * share * PRODUCERS + total["resent"]
    assert total["enqueued"] == sent and total["dropped"] == 0
    assert total["failed"] == total["rejected"] == total["conflicts"] == total["pending"] == 0
    assert total["stored"] + total["duplicates"] == sent
    # a batch whose answer was lost to a fault is stored once and later reported duplicate
    assert total["stored"] <= 2 * share * PRODUCERS
    assert total["duplicates"] >= total["resent"] > 0
    assert faults["kills"] == 1 and total["retries"] > 0
    if PG_URL:
        assert faults["terminated"] > 0
    print(f"\nload: {sent} events sent ({total['resent']} re-sent), {total['stored']} stored, "
          f"{total['duplicates']} duplicates, {total['retries']} retries, "
          f"{total['batches']} batches; faults: {faults}; "
          f"database: {impressions[0]} impressions, {interactions[0]} interactions")
