"""Rollup speed: one day of N impressions x 10 items (~N interactions), all metrics at
k = 5, 10, 20, on PostgreSQL and SQLite; the same new day on a 1-day and on a long history;
a re-run with nothing new; peak memory of the rollup process.

    .venv/bin/python benchmarks/rollup.py                    # 1M a day, 30 days, both DBs
    .venv/bin/python benchmarks/rollup.py --impressions 200000 --history-days 7 --db sqlite
    .venv/bin/python benchmarks/rollup.py --users 2000000 --active 10 --no-history  # sparse

The logs are generated inside the database with SQL (generate_series / a recursive CTE), so
the benchmark measures the rollup, not the ingest path (benchmarks/ingest.py does that):
users pick an arm by id, lists of 10 distinct items from a 49,999-item catalog with a
popularity skew, a shadow baseline list on every impression, ~one interaction per impression
(80% on a served item with position bias, 20% elsewhere) within the hour after serving.
Every rollup runs in its own process (peak RSS = that process's maximum resident set).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if os.environ.get("TRACKER_TREE"):  # time another checkout's tracker (before/after pairs)
    sys.path.insert(0, os.environ["TRACKER_TREE"])

from tracker import Tracker  # noqa: E402
from tracker.store import schema  # noqa: E402
from tracker.store.db import create_engine  # noqa: E402

PG_URL = os.environ.get("TRACKER_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
CATALOG = 49_999  # prime: (a + j*b) mod CATALOG are distinct for j < 10
DAY_US = 86_400_000_000
NEW_DAY = date(2026, 10, 1)

PG_IMPRESSIONS = """
INSERT INTO impression (impression_key, experiment_id, arm_id, user_id, served_at,
                        received_at, items, baseline_items)
SELECT 'd' || :tag || '-' || g, :experiment,
       (ARRAY[:arm0, :arm1, :arm2])[(CASE WHEN u % 1000 < :crossover THEN u + g ELSE u END) % 3
                                    + 1],
       'u' || u, served, served,
       ARRAY(SELECT 'i' || ((a + j * b) % :catalog) FROM generate_series(0, 9) j),
       ARRAY(SELECT 'i' || ((j * 7919) % :catalog) FROM generate_series(0, 9) j)
FROM (SELECT g, r * :spread + ((((r * 48271 + 1) % 2147483647) * :dayno) % 2147483647)
                             % :spread AS u, served, a, b
      FROM (SELECT g, floor(random() * :slots)::bigint AS r,
                   :start + floor(random() * :span)::bigint AS served,
                   floor(power(random(), 3) * :catalog)::int AS a,
                   1 + floor(random() * (:catalog - 1))::int AS b
            FROM generate_series(1, :n) g) r) s
"""

PG_INTERACTIONS = """
INSERT INTO interaction (event_key, user_id, item_id, event_type, occurred_at, received_at)
SELECT 'e' || imp.id, imp.user_id,
       CASE WHEN random() < 0.8 THEN imp.items[1 + floor(power(random(), 2) * 10)::int]
            ELSE 'i' || floor(random() * :catalog)::int END,
       (ARRAY['click', 'play', 'save', 'purchase'])[1 + floor(power(random(), 2) * 4)::int],
       imp.served_at + floor(random() * 3600000000)::bigint,
       imp.served_at + 3600000000
FROM impression imp
WHERE imp.experiment_id = :experiment AND imp.served_at >= :start
  AND imp.served_at < :start + :span
"""

SQLITE_IMPRESSIONS = """
WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < :n),
r AS MATERIALIZED (SELECT x, abs(random()) % :slots AS r,
             :start + abs(random()) % :span AS served,
             CAST((abs(random()) % 1000000) / 1e6 * (abs(random()) % 1000000) / 1e6
                  * (abs(random()) % 1000000) / 1e6 * :catalog AS INTEGER) AS a,
             1 + abs(random()) % (:catalog - 1) AS b FROM g),
s AS (SELECT x, r * :spread + ((((r * 48271 + 1) % 2147483647) * :dayno) % 2147483647)
                              % :spread AS u, served, a, b FROM r)
INSERT INTO impression (impression_key, experiment_id, arm_id, user_id, served_at,
                        received_at, items, baseline_items)
SELECT 'd' || :tag || '-' || x, :experiment,
       CASE (CASE WHEN u % 1000 < :crossover THEN u + x ELSE u END) % 3
            WHEN 0 THEN :arm0 WHEN 1 THEN :arm1 ELSE :arm2 END,
       'u' || u, served, served,
       json_array({items}), json_array({baseline})
FROM s
"""

SQLITE_INTERACTIONS = """
INSERT INTO interaction (event_key, user_id, item_id, event_type, occurred_at, received_at)
SELECT 'e' || imp.id, imp.user_id,
       CASE WHEN abs(random()) % 10 < 8
            THEN json_extract(imp.items, '$[' || ((abs(random()) % 10) * (abs(random()) % 10)
                                                 / 10) || ']')
            ELSE 'i' || (abs(random()) % :catalog) END,
       CASE abs(random()) % 7 WHEN 0 THEN 'purchase' WHEN 1 THEN 'save'
            WHEN 2 THEN 'play' WHEN 3 THEN 'play' ELSE 'click' END,
       imp.served_at + abs(random()) % 3600000000, imp.served_at + 3600000000
FROM impression imp
WHERE imp.experiment_id = :experiment AND imp.served_at >= :start
  AND imp.served_at < :start + :span
"""


def _sqlite_sql() -> str:
    items = ", ".join(f"'i' || ((a + {j} * b) % :catalog)" for j in range(10))
    baseline = ", ".join(f"'i' || ({j * 7919 % CATALOG})" for j in range(10))
    return SQLITE_IMPRESSIONS.format(items=items, baseline=baseline)


def fresh_url(kind: str, folder: Path, name: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{folder / (name + '.db')}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {name}")
    admin.dispose()
    return f"{PG_URL}?options=-csearch_path%3D{name}"


def drop(kind: str, name: str) -> None:
    if kind == "postgresql":
        admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        admin.dispose()


def setup(url: str) -> tuple[int, list[int]]:
    engine = create_engine(url)
    schema.upgrade(engine)
    engine.dispose()
    with Tracker(url) as t:
        info = t.create_experiment(
            "bench", arms={"control": 1, "two-tower": 1, "diverse": 1}, control="control",
            attribution_window=timedelta(hours=24),
            relevance={"click": 1, "play": 1, "save": 2, "purchase": 3},
            starts_at=datetime(2026, 8, 1, tzinfo=UTC))
    return info.id, [arm.id for arm in info.arms]


def generate_day(url: str, experiment: int, arms: list[int], day: date, n: int,
                 users: int, active: int = 1, crossover: int = 0) -> float:
    """One day of ``n`` impressions of users among ``users``; ``active``: one user in that
    many is active on a given day (a user's slot r holds users r*active .. r*active +
    active - 1, one of them active that day by a hash of (r, day): about one in ``active``
    of a day's users was active the day before too). ``crossover``: per mille of the users
    whose lists each go to an arm of their own (crossover users, once served twice)."""
    start = int((datetime(day.year, day.month, day.day, tzinfo=UTC)
                 - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)
    params = {"tag": day.strftime("%Y%m%d"), "experiment": experiment, "arm0": arms[0],
              "arm1": arms[1], "arm2": arms[2], "users": users, "start": start,
              "span": DAY_US, "catalog": CATALOG, "n": n, "spread": active,
              "slots": max(users // active, 1), "dayno": day.toordinal(),
              "crossover": int(crossover)}
    began = time.perf_counter()
    engine = create_engine(url)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text(PG_IMPRESSIONS), params)
            conn.execute(sa.text(PG_INTERACTIONS), params)
        else:
            conn.execute(sa.text(_sqlite_sql()), params)
            conn.execute(sa.text(SQLITE_INTERACTIONS), params)
    if engine.dialect.name == "postgresql":  # what autovacuum does after a bulk load
        with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
            conn.exec_driver_sql("VACUUM ANALYZE impression")
            conn.exec_driver_sql("VACUUM ANALYZE interaction")
    engine.dispose()
    return time.perf_counter() - began


def _child(url: str, queue, now: datetime | None) -> None:
    with Tracker(url) as t:
        began = time.perf_counter()
        (summary,) = t.rollup("bench", now=now)
        seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put((seconds, peak, summary.to_dict()))


def nightly(day: date | None) -> datetime | None:
    """The clock of a nightly run after ``day`` (None: the machine's clock, which sees every
    benchmark day final): 30 minutes after the day ends, inside the hour of grace after
    the previous day's last 24-hour window, so that day is still provisional."""
    if day is None:
        return None
    return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1, minutes=30)


def timed_rollup(url: str, now: datetime | None = None) -> tuple[float, float, dict]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(url, queue, now))
    process.start()
    result = queue.get()
    process.join()
    return result


def scenario(kind: str, folder: Path, history_days: int, n: int, history_n: int,
             users: int, active: int = 1, night: bool = False) -> dict:
    name = f"bench_rollup_{history_days}d_{os.getpid()}"
    url = fresh_url(kind, folder, name)
    try:
        experiment, arms = setup(url)
        gen = 0.0
        for back in range(history_days, 0, -1):
            gen += generate_day(url, experiment, arms, NEW_DAY - timedelta(days=back),
                                history_n, users, active)
        last = NEW_DAY - timedelta(days=1)
        history_seconds, _, _ = timed_rollup(url, nightly(last if night else None)) \
            if history_days else (0.0, 0, {})
        gen += generate_day(url, experiment, arms, NEW_DAY, n, users, active)
        seconds, peak, summary = timed_rollup(url, nightly(NEW_DAY if night else None))
        noop, _, noop_summary = timed_rollup(url, nightly(NEW_DAY if night else None))
        part = (f", {summary['days_in_part']} for {summary['users_recomputed']:,} users only"
                if summary.get("days_in_part") else "")
        print(f"  {kind:10} history {history_days:2d} day(s) x {history_n:,}: generated in "
              f"{gen:.0f} s, history rollup {history_seconds:.1f} s; new day of {n:,}: "
              f"rollup {seconds:.2f} s (days recomputed: {len(summary['days_recomputed'])}"
              f"{part}, impressions read {summary['impressions_read']:,}, "
              f"peak RSS {peak:.0f} MiB); re-run with nothing new {noop:.2f} s", flush=True)
        if history_days == 1:
            print(f"  {kind:10} => next day / first day: {seconds / history_seconds:.2f}x",
                  flush=True)
        assert noop_summary["days_recomputed"] == []
        return {"seconds": seconds, "peak": peak, "noop": noop,
                "days": summary["days_recomputed"], "first": history_seconds}
    finally:
        drop(kind, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--impressions", type=int, default=1_000_000)
    parser.add_argument("--history-days", type=int, default=30)
    parser.add_argument("--history-impressions", type=int, default=None,
                        help="impressions per history day (default: --impressions)")
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--no-history", action="store_true",
                        help="only the new day on a 1-day history (skip the long history)")
    parser.add_argument("--nightly", action="store_true",
                        help="run each rollup 30 minutes after the newest day ends (the "
                             "previous day still provisional), not at the machine's clock "
                             "(which sees every day final)")
    parser.add_argument("--active", type=int, default=1,
                        help="one user in ACTIVE is active on a given day (the sparse shape: "
                             "--users 2000000 --active 10)")
    args = parser.parse_args()
    history_n = args.history_impressions or args.impressions
    kinds = ["postgresql", "sqlite"] if args.db == "both" else [args.db]
    print(f"rollup benchmark: new day {NEW_DAY} of {args.impressions:,} impressions x 10 "
          f"items, ~1 interaction each, {args.users:,} users (1 in {args.active} active a day), "
          "3 arms, k = 5, 10, 20; "
          f"{os.cpu_count()} CPUs; clock: "
          f"{'nightly' if args.nightly else 'the machine (every day final)'}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tracker-bench-") as tmp:
        folder = Path(tmp)
        for kind in kinds:
            short = scenario(kind, folder, 1, args.impressions, history_n, args.users,
                             args.active, args.nightly)
            if args.no_history:
                continue
            long = scenario(kind, folder, args.history_days, args.impressions, history_n,
                            args.users, args.active, args.nightly)
            print(f"  {kind:10} => new day on {args.history_days}-day history / on 1-day "
                  f"history: {long['seconds'] / short['seconds']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
