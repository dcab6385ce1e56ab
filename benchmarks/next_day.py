"""A first day and the next day of a rollup on the same rows, for several trees: two days
generated once as benchmarks/rollup.py does (the second kept aside), then per run a copy of
them, the first day rolled up, the second day put back, the next day rolled up, each in its
own process (wall seconds, peak RSS and the engine's steps).

    .venv/bin/python benchmarks/next_day.py --db postgresql --generate [--users 2000000 --active 10]
    .venv/bin/python benchmarks/next_day.py --db postgresql              # this tree
    TRACKER_TREE=/other/worktree .venv/bin/python benchmarks/next_day.py --db postgresql

Both rollups run on the nightly clock (30 minutes after their day ends: the previous day is
provisional when the next one arrives). The rows live in the database ``bench_next_day``
(PostgreSQL, on the server of ``TRACKER_BENCH_PG_URL``; each run copies it as a template)
or ``$TMPDIR/bench_next_day.db`` (SQLite, copied per run) until ``--drop``; ``BENCH_TAG=x``
names another set of rows (``bench_next_day_x``), e.g. the sparse shape beside the dense.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

import first_day  # noqa: E402  (its spans; importing it honours TRACKER_TREE, another tree)
import rollup as bench  # noqa: E402  (benchmarks/rollup.py: the same generated rows)

NAME = "bench_next_day" + (f"_{os.environ['BENCH_TAG']}" if os.environ.get("BENCH_TAG") else "")
RUN = NAME + "_run"
FIRST = bench.NEW_DAY - timedelta(days=1)
SPANS = [  # (module, attribute, label): the wall time of each call is summed
    ("tracker.rollup.engine", "_Run._plan", "plan"),
    ("tracker.rollup.plan", "_DayImpressions.of", "  a day's impressions (or its state)"),
    ("tracker.rollup.plan", "_answered", "  the users new interactions answer"),
    ("tracker.rollup.plan", "_named", "  the users new interactions name"),
    ("tracker.rollup.plan", "_audience_days", "  the days whose audience interacted"),
    ("tracker.rollup.queries", "changed_hours", "  the hours of the new interactions"),
    ("tracker.rollup.engine", "_Run._compute_days", "days (read, score, write)"),
    ("tracker.rollup.engine", "recompute_day", "  days read whole"),
    ("tracker.rollup.engine", "rescore_users", "  days from their state"),
    ("tracker.rollup.partial", "final_pass", "    final passes"),
    ("tracker.rollup.partial", "results.units", "    stored units read"),
    ("tracker.rollup.partial", "provisional.new_interactions", "    new interactions read"),
    ("tracker.rollup.provisional", "ProvisionalDay.answer", "    merged into the truth"),
    ("tracker.rollup.provisional", "ProvisionalDay.totals_of", "    changed users scored"),
    ("tracker.rollup.day", "provisional.save", "  provisional state written"),
    ("tracker.rollup.partial", "write_state", "  state of days from their state written"),
    ("tracker.rollup.engine", "_Run._commit", "last transaction"),
    ("tracker.rollup.engine", "covariates.refresh", "  CUPED covariates of new users"),
    ("tracker.rollup.engine", "covariates.publish_daily", "  CUPED daily sums"),
    ("tracker.rollup.engine", "recompute_cumulative", "  cumulative pass"),
]


def _server() -> str:
    return bench.PG_URL.rsplit("/", 1)[0]


def _url(kind: str, name: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{Path(tempfile.gettempdir()) / (name + '.db')}"
    return f"{_server()}/{name}"


def _admin(sql: str) -> None:
    engine = sa.create_engine(bench.PG_URL, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(sql)
    engine.dispose()


def _fresh(kind: str, name: str, template: str | None = None) -> str:
    """An empty database (or a copy of ``template``) named ``name``."""
    url = _url(kind, name)
    if kind == "sqlite":
        path = Path(url.removeprefix("sqlite:///"))
        for old in path.parent.glob(path.name + "*"):
            old.unlink()
        if template:
            shutil.copyfile(_url(kind, template).removeprefix("sqlite:///"), path)
        return url
    _admin(f"DROP DATABASE IF EXISTS {name}")
    _admin(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
    return url


def generate(kind: str, impressions: int, users: int, active: int) -> None:
    """Both days; the second one's rows moved aside (``*_next`` tables, ids kept)."""
    url = _fresh(kind, NAME)
    experiment, arms = bench.setup(url)
    seconds = bench.generate_day(url, experiment, arms, FIRST, impressions, users, active)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        top = [conn.exec_driver_sql(f"SELECT coalesce(max(id), 0) FROM {t}").scalar()
               for t in ("impression", "interaction")]
    seconds += bench.generate_day(url, experiment, arms, bench.NEW_DAY, impressions, users,
                                  active)
    with engine.begin() as conn:
        for table, above in zip(("impression", "interaction"), top, strict=True):
            conn.exec_driver_sql(f"CREATE TABLE {table}_next AS SELECT * FROM {table} "
                                 f"WHERE id > {above}")
            conn.exec_driver_sql(f"DELETE FROM {table} WHERE id > {above}")
    _analyze(engine)
    engine.dispose()
    print(f"generated 2 x {impressions:,} impressions ({users:,} users, 1 in {active} "
          f"active a day) in {seconds:.0f} s", flush=True)


def _analyze(engine: sa.Engine) -> None:
    if engine.dialect.name == "postgresql":  # what autovacuum does after a bulk load
        with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
            conn.exec_driver_sql("VACUUM ANALYZE impression")
            conn.exec_driver_sql("VACUUM ANALYZE interaction")


def put_back(url: str) -> float:
    """The second day's rows into the logs (their ids kept)."""
    began = time.perf_counter()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for table in ("impression", "interaction"):
            conn.exec_driver_sql(f"INSERT INTO {table} SELECT * FROM {table}_next")
    _analyze(engine)
    engine.dispose()
    return time.perf_counter() - began


def _child(url: str, day, queue) -> None:
    import resource

    from tracker import Tracker

    spans: dict[str, float] = {}
    first_day.instrument(spans, SPANS)
    with Tracker(url) as tracker:
        began = time.perf_counter()
        (summary,) = tracker.rollup("bench", now=bench.nightly(day))
        seconds = time.perf_counter() - began
    usage = resource.getrusage(resource.RUSAGE_SELF)
    spans["CPU seconds of the process (all threads)"] = usage.ru_utime + usage.ru_stime
    queue.put((seconds, usage.ru_maxrss / 1024, summary.to_dict(), spans))


def rollup(url: str, day) -> tuple[float, float, dict, dict]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(url, day, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql"], required=True)
    parser.add_argument("--generate", action="store_true", help="generate the two days")
    parser.add_argument("--drop", action="store_true", help="drop the generated rows")
    parser.add_argument("--impressions", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--active", type=int, default=1)
    args = parser.parse_args()
    if args.drop:
        for name in (RUN, NAME):
            if args.db == "sqlite":
                for path in Path(tempfile.gettempdir()).glob(name + ".db*"):
                    path.unlink()
            else:
                _admin(f"DROP DATABASE IF EXISTS {name}")
        return
    if args.generate:
        generate(args.db, args.impressions, args.users, args.active)
        return
    url = _fresh(args.db, RUN, NAME)
    tree = os.environ.get("TRACKER_TREE") or str(bench.ROOT)
    commit = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    first, first_peak, _, first_spans = rollup(url, FIRST)
    put_back(url)
    seconds, peak, summary, spans = rollup(url, bench.NEW_DAY)
    import tracker
    assert Path(tracker.__file__).parents[1] == Path(tree).resolve(), tracker.__file__
    print(f"{args.db} {tree} ({commit}), load {load}: first day {first:.2f} s "
          f"({first_peak:.0f} MiB), next day {seconds:.2f} s ({peak:.0f} MiB): "
          f"{seconds / first:.2f}x; users recomputed {summary.get('users_recomputed', 0):,}, "
          f"impressions read {summary['impressions_read']:,}", flush=True)
    print(f"  {'step (wall seconds, summed over calls)':44} {'first':>7}   {'next':>7}")
    for label in [label for _, _, label in SPANS] + ["CPU seconds of the process (all threads)"]:
        if label in spans or label in first_spans:
            print(f"  {label:44} {first_spans.get(label, 0):7.2f} s {spans.get(label, 0):7.2f} s")


if __name__ == "__main__":
    main()
