"""One heavy user's day: a full rollup (final) of one day of ordinary users (generated as
benchmarks/rollup.py does) plus one user (a bot, a shared anonymous id) served N lists and
clicking M times on distinct items, spread over the day (24 h attribution window: each
list is answered by every later click of the day), against the same ordinary day without
that user. Prints wall and CPU seconds and the peak RSS of the rollup process (each run
in its own process, so the peak is its own).

    .venv/bin/python benchmarks/heavy_user.py                           # 100,000 / 20,000
    .venv/bin/python benchmarks/heavy_user.py --lists 40000 --clicks 8000
    TRACKER_TREE=/other/tree .venv/bin/python benchmarks/heavy_user.py --lists 10000 --clicks 2000

SQLite only, in ``$TMPDIR`` (removed at the end). Without bounded attribution the heavy day
makes lists x clicks pairs at once: 100,000 x 20,000 reached 23.5 GB before an OOM kill.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rollup as bench  # noqa: E402  (benchmarks/rollup.py: the ordinary day's rows)

if os.environ.get("TRACKER_TREE"):  # time another checkout's tracker (before/after pairs)
    for module in [m for m in sys.modules if m == "tracker" or m.startswith("tracker.")]:
        del sys.modules[module]
    sys.path.insert(0, os.environ["TRACKER_TREE"])

HEAVY_IMPRESSIONS = """
WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < :n),
s AS MATERIALIZED (SELECT x, :start + abs(random()) % :span AS served FROM g)
INSERT INTO impression (impression_key, experiment_id, arm_id, user_id, served_at,
                        received_at, items)
SELECT 'bot-' || x, :experiment, :arm, 'bot', served, served, json_array({items}) FROM s
"""

HEAVY_CLICKS = """
WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < :m),
s AS MATERIALIZED (SELECT x, :start + abs(random()) % :span AS at FROM g)
INSERT INTO interaction (event_key, user_id, item_id, event_type, occurred_at, received_at)
SELECT 'bot-e' || x, 'bot', 'i' || ((x * 7919) % :catalog),
       CASE x % 4 WHEN 0 THEN 'purchase' WHEN 1 THEN 'save' ELSE 'click' END, at, at
FROM s
"""


def add_heavy_user(url: str, experiment: int, arm: int, lists: int, clicks: int) -> None:
    """The bot's lists (10 items each) and its clicks on ``clicks`` distinct items (while
    ``clicks`` < the catalog's 49,999), at random times of the benchmark day."""
    day = bench.NEW_DAY - timedelta(days=1)
    start = int((datetime(day.year, day.month, day.day, tzinfo=UTC)
                 - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)
    items = ", ".join(f"'i' || ((x * 31 + {j} * 977) % :catalog)" for j in range(10))
    params = {"n": lists, "m": clicks, "start": start, "span": bench.DAY_US,
              "experiment": experiment, "arm": arm, "catalog": bench.CATALOG}
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(HEAVY_IMPRESSIONS.format(items=items)), params)
        conn.execute(sa.text(HEAVY_CLICKS), params)
    engine.dispose()


def _child(url: str, queue) -> None:
    from tracker import Tracker

    with Tracker(url) as tracker:
        began, cpu = time.perf_counter(), time.process_time()
        (summary,) = tracker.rollup("bench", full=True)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    queue.put((wall, cpu, peak, summary.impressions_read, summary.truth_pairs_read))


def timed(url: str) -> tuple[float, float, float, int, int]:
    """A full rollup in its own process: wall s, CPU s, peak RSS MiB, impressions, pairs
    (or the exit code's news when the process dies, e.g. killed out of memory)."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(url, queue))
    process.start()
    process.join()
    if process.exitcode != 0:
        raise SystemExit(f"the rollup process ended with exit code {process.exitcode}")
    return queue.get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lists", type=int, default=100_000, help="the heavy user's lists")
    parser.add_argument("--clicks", type=int, default=20_000, help="the heavy user's clicks")
    parser.add_argument("--impressions", type=int, default=50_000,
                        help="the ordinary users' lists")
    parser.add_argument("--users", type=int, default=10_000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench_heavy_user_"))
    try:
        plain = bench.fresh_url("sqlite", folder, "plain")
        experiment, arms = bench.setup(plain)
        day = bench.NEW_DAY - timedelta(days=1)
        bench.generate_day(plain, experiment, arms, day, args.impressions, args.users)
        shutil.copy(folder / "plain.db", folder / "heavy.db")
        heavy = bench.fresh_url("sqlite", folder, "heavy")
        add_heavy_user(heavy, experiment, arms[0], args.lists, args.clicks)
        import tracker

        print(f"sqlite, one day of {args.impressions:,} ordinary lists ({args.users:,} users),"
              f" final, full rollup; tracker of {Path(tracker.__file__).parents[1]}")
        for label, url in ((f"with a user of {args.lists:,} lists, {args.clicks:,} clicks",
                            heavy), ("without it", plain)):
            wall, cpu, peak, impressions, pairs = timed(url)
            print(f"  {label:<44} {wall:7.2f} s wall  {cpu:7.2f} s CPU  peak RSS "
                  f"{peak:7.0f} MiB  ({impressions:,} lists, {pairs:,} truth pairs)",
                  flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
