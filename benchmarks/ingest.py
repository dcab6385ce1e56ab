"""Bulk ingest speed: ``Tracker.log_impressions`` against a bare baseline, side by side.

    .venv/bin/python benchmarks/ingest.py                        # 200k impressions, both DBs
    .venv/bin/python benchmarks/ingest.py --impressions 50000 --repeat 5 --db postgresql

N impressions of 10 distinct items with scores (the shape the issue's target names) are
generated once, then written into the ``impression`` table of a fresh database per backend
(a SQLite temp file; a new PostgreSQL schema, dropped afterwards), in rounds. Each round runs,
one after the other, each in its own forked process on an emptied table:

- ``baseline``: the bare write of the same rows, prepared beforehand outside the timer
  (PostgreSQL: psycopg binary ``COPY`` with the column types set; SQLite: stdlib ``sqlite3``
  ``executemany`` of rows with the JSON text already built, one transaction per 10,000 rows);
- ``dataframe``: ``Tracker.log_impressions(frame)`` on a pandas DataFrame (aware datetimes);
- ``dicts``: ``Tracker.log_impressions(records)`` on a list of dicts (aware datetimes).

Figures are medians over the rounds; ratios are taken within a round (these machines are
shared, timings drift). "peak MiB" is the growth of the process's peak resident set during the
call (VmHWM after minus VmRSS before, the input data excluded). The per-call path
(``Tracker.log_impression``, one transaction each) is timed on a warm tracker.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from tracker import Tracker  # noqa: E402
from tracker.store import schema  # noqa: E402
from tracker.store.db import create_engine  # noqa: E402
from tracker.store.types import to_micros  # noqa: E402

PG_URL = os.environ.get("TRACKER_BENCH_PG_URL",
                        "postgresql+psycopg://postgres@127.0.0.1:5432/test")
T0 = datetime(2026, 11, 1, tzinfo=UTC)
COLUMNS = ("impression_key", "experiment_id", "arm_id", "user_id", "served_at", "received_at",
           "items", "scores", "baseline_items", "context")
PG_TYPES = ["text", "int4", "int4", "text", "int8", "int8", "text[]", "float8[]", "text[]",
            "jsonb"]
BATCH = 10_000

# Set in the parent before forking, read by the children (copy-on-write, never pickled).
DATA: dict = {}


def make_records(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        items = [f"i{x}" for x in rng.sample(range(50_000), 10)]
        records.append({
            "impression_id": f"imp-{i:08d}", "experiment": "home",
            "arm": "control" if i % 2 else "two-tower", "user_id": f"u{rng.randrange(50_000)}",
            "items": items, "scores": [round(1 - j / 10 + rng.random() / 100, 6)
                                       for j in range(10)],
            "served_at": T0 + timedelta(microseconds=i * 1000),
        })
    return records


def baseline_rows(records: list[dict], arm_ids: dict[str, int], experiment_id: int,
                  sqlite: bool) -> list[tuple]:
    now = to_micros(datetime.now(UTC))
    rows = []
    for r in records:
        items, scores = r["items"], r["scores"]
        if sqlite:
            items, scores = json.dumps(items), json.dumps(scores)
        rows.append((r["impression_id"], experiment_id, arm_ids[r["arm"]], r["user_id"],
                     to_micros(r["served_at"]), now, items, scores, None, None))
    return rows


# ---------------------------------------------------------------------------- databases

def pg_schema_url(name: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options={quote(f'-csearch_path={name}')}"


def prepare(url: str) -> tuple[int, dict[str, int]]:
    engine = create_engine(url)
    schema.upgrade(engine)
    engine.dispose()
    with Tracker(url) as t:
        info = t.create_experiment("home", arms={"control": 0.5, "two-tower": 0.5},
                                   control="control")
        return info.id, {a.key: a.id for a in info.arms}


def empty_table(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("TRUNCATE impression")
        else:
            conn.exec_driver_sql("DELETE FROM impression")
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()


# ---------------------------------------------------------------------------- the timed runs

def _vm(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _baseline_pg(url: str) -> None:
    import psycopg

    dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        rows = DATA["pg_rows"]
        with cur.copy(f"COPY impression ({', '.join(COLUMNS)}) FROM STDIN "
                      "(FORMAT BINARY)") as copy:
            copy.set_types(PG_TYPES)
            for row in rows:
                copy.write_row(row)
        conn.commit()


def _baseline_sqlite(url: str) -> None:
    import sqlite3

    conn = sqlite3.connect(sa.make_url(url).database, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    rows = DATA["sqlite_rows"]
    sql = (f"INSERT INTO impression ({', '.join(COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(COLUMNS))})")
    for start in range(0, len(rows), BATCH):
        conn.execute("BEGIN")
        conn.executemany(sql, rows[start:start + BATCH])
        conn.execute("COMMIT")
    conn.close()


def _ours(url: str, source: str) -> None:
    with Tracker(url) as t:
        records = DATA["frame"] if source == "dataframe" else DATA["records"]
        started = time.perf_counter()
        result = t.log_impressions(records)
        DATA["elapsed"] = time.perf_counter() - started
    if result.stored != len(DATA["records"]):
        raise SystemExit(f"{source}: stored {result.stored}, rejected {result.rejected[:3]}")


def _child(method: str, url: str, queue) -> None:
    rss_before = _vm("VmRSS")
    started = time.perf_counter()
    if method == "baseline":
        (_baseline_pg if url.startswith("postgresql") else _baseline_sqlite)(url)
    else:
        _ours(url, method)
    elapsed = DATA.get("elapsed") or time.perf_counter() - started
    queue.put((elapsed, (_vm("VmHWM") - rss_before) / 2**20))


def timed(method: str, url: str) -> tuple[float, float]:
    empty_table(url)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_child, args=(method, url, queue))
    process.start()
    elapsed, peak = queue.get()
    process.join()
    if process.exitcode:
        raise SystemExit(f"{method} failed")
    return elapsed, peak


def per_call_ms(url: str, calls: int) -> tuple[float, float]:
    empty_table(url)
    records = DATA["records"][:calls]
    latencies = []
    with Tracker(url) as t:
        for record in records:
            started = time.perf_counter()
            t.log_impression(**record)
            latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.95)]


def bare_commit_ms(url: str, calls: int) -> float:
    """Median of one prepared row INSERT + COMMIT through the bare driver: the floor of any
    per-call path (PostgreSQL: a WAL flush per commit)."""
    empty_table(url)
    sqlite = url.startswith("sqlite")
    rows = DATA["sqlite_rows" if sqlite else "pg_rows"][:calls]
    sql = (f"INSERT INTO impression ({', '.join(COLUMNS)}) "
           f"VALUES ({', '.join(('?' if sqlite else '%s') for _ in COLUMNS)})")
    latencies = []
    if sqlite:
        import sqlite3

        conn = sqlite3.connect(sa.make_url(url).database, isolation_level=None)
        conn.execute("PRAGMA synchronous=NORMAL")
        for row in rows:
            started = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(sql, row)
            conn.execute("COMMIT")
            latencies.append((time.perf_counter() - started) * 1000)
        conn.close()
    else:
        import psycopg
        from psycopg.types.json import Jsonb

        dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(
            hide_password=False)
        with psycopg.connect(dsn) as conn:
            for row in rows:
                started = time.perf_counter()
                conn.execute(sql, row[:-1] + (None if row[-1] is None else Jsonb(row[-1]),))
                conn.commit()
                latencies.append((time.perf_counter() - started) * 1000)
    return statistics.median(latencies)


# ---------------------------------------------------------------------------- report

def bench(name: str, url: str, n: int, repeat: int, methods: list[str], calls: int) -> None:
    experiment_id, arm_ids = prepare(url)
    DATA["pg_rows" if name == "PostgreSQL" else "sqlite_rows"] = baseline_rows(
        DATA["records"], arm_ids, experiment_id, sqlite=name == "SQLite")
    rounds: dict[str, list[tuple[float, float]]] = {m: [] for m in methods}
    for round_no in range(repeat):
        for method in methods:
            rounds[method].append(timed(method, url))
        base = rounds["baseline"][-1][0]
        print(f"  {name} round {round_no + 1}: " + ", ".join(
            f"{m} {n / rounds[m][-1][0]:,.0f}/s" + ("" if m == "baseline" else
                                                    f" ({base / rounds[m][-1][0]:.2f}x)")
            for m in methods), flush=True)
    print(f"\n{name}: {n:,} impressions x 10 items, median of {repeat} rounds")
    print(f"  {'path':<32} {'impressions/s':>14} {'vs baseline':>12} {'peak MiB':>9}")
    for method in methods:
        times = [t for t, _ in rounds[method]]
        ratio = statistics.median(b / t for (b, _), t in zip(rounds["baseline"], times,
                                                              strict=True))
        label = {"baseline": "baseline (" + ("psycopg binary COPY)" if name == "PostgreSQL"
                                             else "sqlite3 executemany)"),
                 "dataframe": "log_impressions(DataFrame)",
                 "dicts": "log_impressions(list of dicts)"}[method]
        print(f"  {label:<32} {n / statistics.median(times):>14,.0f} {ratio:>11.2f}x "
              f"{max(p for _, p in rounds[method]):>9.0f}")
    median, p95 = per_call_ms(url, calls)
    print(f"  log_impression (per call, {calls} calls): median {median:.2f} ms, "
          f"p95 {p95:.2f} ms; bare one-row INSERT + COMMIT: median "
          f"{bare_commit_ms(url, calls):.2f} ms\n", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impressions", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians are reported)")
    parser.add_argument("--db", choices=("both", "postgresql", "sqlite"), default="both")
    parser.add_argument("--calls", type=int, default=500, help="per-call path: calls timed")
    parser.add_argument("--inputs", default="dataframe,dicts",
                        help="comma-separated: dataframe, dicts")
    args = parser.parse_args()

    import pandas as pd

    DATA["records"] = make_records(args.impressions)
    DATA["frame"] = pd.DataFrame(DATA["records"])
    methods = ["baseline", *args.inputs.split(",")]
    print(f"bulk ingest benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
          f"{os.cpu_count()} CPUs", flush=True)
    if args.db in ("both", "postgresql"):
        name = f"bench_ingest_{uuid.uuid4().hex[:8]}"
        admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {name}")
        try:
            bench("PostgreSQL", pg_schema_url(name), args.impressions, args.repeat, methods,
                  args.calls)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA {name} CASCADE")
            admin.dispose()
    if args.db in ("both", "sqlite"):
        with tempfile.TemporaryDirectory() as folder:
            bench("SQLite", f"sqlite:///{folder}/bench.db", args.impressions, args.repeat,
                  methods, args.calls)


if __name__ == "__main__":
    main()
