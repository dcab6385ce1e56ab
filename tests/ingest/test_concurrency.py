"""Several processes log at once, overlapping ids included: exact counts afterwards."""

from __future__ import annotations

import multiprocessing
import os
import random

from tests.helpers import count, impression, interaction, make_experiment, stored_impressions

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


# The deadlock reproduction (issue 13): producers resend overlapping batches ("resend whenever
# unsure"), each in its own order; one id of each round is stored before they start, so no
# batch can be COPYed straight in and all of them take the staged ON CONFLICT insert together.
RESENDERS = 4
OVERLAP = 2_000
ROUNDS = 3


def _round_ids(round_: int) -> range:
    return range(100_000 * (round_ + 1), 100_000 * (round_ + 1) + OVERLAP)


def _resender(url: str, worker: int, barrier, queue) -> None:
    # no retries: a deadlock must not happen at all, not merely be retried away
    os.environ["TRACKER_STORE_RETRIES"] = "0"
    from tracker import Tracker

    with Tracker(url) as t:
        for round_ in range(ROUNDS):
            records = [impression(i) for i in _round_ids(round_)]
            random.Random(f"{worker}-{round_}").shuffle(records)
            barrier.wait(timeout=120)
            try:
                result = t.log_impressions(records)
            except Exception as error:  # reported to the test, whatever its type
                queue.put((round_, f"{type(error).__module__}.{type(error).__name__}: {error}"))
                continue
            queue.put((round_, (result.stored, result.duplicates, result.conflicts)))


def test_overlapping_batches_in_different_orders_never_deadlock(tracker, db_url):
    make_experiment(tracker)
    for round_ in range(ROUNDS):
        tracker.log_impression(**impression(_round_ids(round_)[OVERLAP // 2]))
    context = multiprocessing.get_context("spawn")
    barrier, queue = context.Barrier(RESENDERS), context.Queue()
    workers = [context.Process(target=_resender, args=(db_url, w, barrier, queue))
               for w in range(RESENDERS)]
    for w in workers:
        w.start()
    outcomes = [queue.get(timeout=300) for _ in range(RESENDERS * ROUNDS)]
    for w in workers:
        w.join(timeout=60)
    failures = [outcome for outcome in outcomes if isinstance(outcome[1], str)]
    assert failures == []
    for round_ in range(ROUNDS):
        counts = [c for r, c in outcomes if r == round_]
        assert sum(stored for stored, _, _ in counts) == OVERLAP - 1
        assert sum(dup for _, dup, _ in counts) == RESENDERS * OVERLAP - (OVERLAP - 1)
        assert sum(conflicts for _, _, conflicts in counts) == 0
    assert count(tracker.engine, "impression") == ROUNDS * OVERLAP
    assert set(stored_impressions(tracker.engine)) == {
        impression(i)["impression_id"] for r in range(ROUNDS) for i in _round_ids(r)}
    assert all(w.exitcode == 0 for w in workers)
