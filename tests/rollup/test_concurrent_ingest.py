"""Rows committed while a rollup runs are never lost, even when a slow batch holds lower ids
than a batch committed before it (PostgreSQL sequences hand out ids before commit)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from tests.helpers import T0
from tests.rollup.scenario import create, dump
from tests.rollup.test_rollup import NOW
from tracker.ingest.write import IMPRESSIONS, now_micros
from tracker.store import bulk
from tracker.store.db import transaction


def _imp(n: int) -> dict:
    return {"impression_id": f"late-{n}", "experiment": "home", "arm": "control",
            "user_id": f"u{n}", "items": ["a", "b"], "served_at": T0 + timedelta(minutes=n)}


def test_a_batch_committing_late_with_lower_ids_is_rolled_up(tracker):
    create(tracker)
    tracker.log_impressions([_imp(n) for n in range(5)])
    tracker.rollup("home", now=NOW)
    info = tracker.experiment("home")
    arm = info.arm("control").id
    inserted, release = threading.Event(), threading.Event()

    def slow_batch():  # takes its id first, commits last
        row = ("slow", info.id, arm, "u-slow", int(T0.timestamp() * 1e6) + 60_000_000,
               now_micros(), ["a"], None, None, None)
        with transaction(tracker.engine, write=True) as conn:
            bulk.insert_new(conn, IMPRESSIONS.table, IMPRESSIONS.columns, IMPRESSIONS.key,
                            [row])
            inserted.set()
            release.wait(30)

    writers = [threading.Thread(target=slow_batch),
               threading.Thread(target=lambda: (inserted.wait(30),
                                                tracker.log_impressions([_imp(99)])))]
    for thread in writers:
        thread.start()
    inserted.wait(30)
    time.sleep(0.5)  # the fast batch commits (PostgreSQL) or queues (SQLite)
    rollup = threading.Thread(target=lambda: tracker.rollup("home", now=NOW))
    rollup.start()
    time.sleep(0.5)
    release.set()
    for thread in [*writers, rollup]:
        thread.join(60)
    tracker.rollup("home", now=NOW)
    health = tracker.health_table("home", cumulative=True)
    whole = health[health["arm"].isna()].sort_values("day").iloc[-1]
    assert whole.impressions == 7  # 5 + the fast one + the slow one
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental
