"""Several processes log at once, overlapping ids included: exact counts afterwards."""

from __future__ import annotations

import multiprocessing

from tests.helpers import count, impression, interaction, make_experiment

PROCESSES = 4
PER_PROCESS = 600
SHARED = 300  # ids every process sends (the same payload): stored once


def _producer(url: str, worker: int, queue) -> None:
    from tracker import Tracker

    own = [impression(10_000 + worker * PER_PROCESS + i) for i in range(PER_PROCESS - SHARED)]
    shared = [impression(i) for i in range(SHARED)]
    records = [r for pair in zip(shared, own, strict=False) for r in pair] + own[len(shared):]
    events = [interaction(worker * 1000 + i) for i in range(100)] + [interaction(i)
                                                                    for i in range(50)]
    totals = {"stored": 0, "duplicates": 0, "conflicts": 0, "events": 0}
    with Tracker(url) as t:
        for start in range(0, len(records), 50):  # many small transactions interleave
            result = t.log_impressions(records[start:start + 50])
            totals["stored"] += result.stored
            totals["duplicates"] += result.duplicates
            totals["conflicts"] += result.conflicts
        for i in range(0, len(events), 25):
            totals["events"] += t.log_interactions(events[i:i + 25]).stored
        if worker == 0:
            t.log_impression(**impression(10**6))
            totals["stored"] += 1
    queue.put(totals)


def test_concurrent_processes_store_each_distinct_id_exactly_once(tracker, db_url):
    make_experiment(tracker)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_producer, args=(db_url, w, queue))
               for w in range(PROCESSES)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert w.exitcode == 0
    totals = [queue.get(timeout=5) for _ in workers]
    distinct = PROCESSES * (PER_PROCESS - SHARED) + SHARED + 1
    assert count(tracker.engine, "impression") == distinct
    assert sum(t["stored"] for t in totals) == distinct
    assert sum(t["duplicates"] for t in totals) == (PROCESSES - 1) * SHARED
    assert sum(t["conflicts"] for t in totals) == 0
    distinct_events = PROCESSES * 100 + 50 - 50  # interaction(i) for i < 50 is worker 0's own
    assert count(tracker.engine, "interaction") == distinct_events
    assert sum(t["events"] for t in totals) == distinct_events
