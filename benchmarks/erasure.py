"""Erasure cost: ``Tracker.delete_user`` on a history of N impressions, then the rollup that
recomputes the days it marked, against a ``--full`` rollup of the same data.

    .venv/bin/python benchmarks/erasure.py                          # 200k impressions, SQLite
    .venv/bin/python benchmarks/erasure.py --impressions 50000 --db postgresql

The logs come through the SDK's bulk path (lists of 10 items from 5,000, one interaction per
impression within the hour); the erased user has impressions on every day. Prints seconds.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracker import Tracker  # noqa: E402
from tracker.store import schema  # noqa: E402
from tracker.store.db import create_engine  # noqa: E402

PG_URL = os.environ.get("TRACKER_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
START = datetime(2026, 10, 1, tzinfo=UTC)
NOW = datetime(2026, 11, 20, tzinfo=UTC)


def _logs(n: int, days: int, users: int):
    rng = random.Random(1)
    for i in range(n):
        user = f"u{rng.randrange(users)}"
        served = START + timedelta(seconds=rng.randrange(days * 86_400))
        items = [f"i{rng.randrange(5000)}" for _ in range(10)]
        yield ({"impression_id": f"imp{i}", "experiment": "bench",
                "arm": ("a", "b")[int(user[1:]) % 2], "user_id": user, "items": items,
                "served_at": served},
               {"event_id": f"evt{i}", "user_id": user, "item_id": rng.choice(items),
                "event": "click", "occurred_at": served + timedelta(minutes=rng.randrange(60))})


def _timed(label: str, work) -> None:
    started = time.perf_counter()
    work()
    print(f"  {label:<34} {time.perf_counter() - started:8.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impressions", type=int, default=200_000)
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    args = parser.parse_args()
    schema_name = None
    if args.db == "sqlite":
        url = f"sqlite:///{tempfile.mkdtemp()}/erasure.db"
    else:
        schema_name = f"bench_{uuid.uuid4().hex[:8]}"
        admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema_name}")
        url = f"{PG_URL}?options=-csearch_path%3D{schema_name}"
    schema.upgrade(create_engine(url))
    try:
        with Tracker(url) as t:
            t.create_experiment("bench", {"a": 1, "b": 1}, relevance={"click": 1})
            pairs = list(_logs(args.impressions, args.days, args.users))
            t.log_impressions([p[0] for p in pairs])
            t.log_interactions([p[1] for p in pairs])
            print(f"{args.db}: {args.impressions} impressions over {args.days} days, "
                  f"{args.users} users")
            _timed("rollup (first, every day)", lambda: t.rollup(now=NOW))
            _timed("delete_user", lambda: t.delete_user("u7", now=NOW))
            _timed("rollup after the erasure", lambda: t.rollup(now=NOW))
            _timed("rollup --full (for comparison)", lambda: t.rollup("bench", full=True,
                                                                      now=NOW))
    finally:
        if schema_name:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA {schema_name} CASCADE")


if __name__ == "__main__":
    main()
