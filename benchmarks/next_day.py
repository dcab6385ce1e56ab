"""A first day and the next day of a rollup on the same rows, for several trees: two days
generated once as benchmarks/rollup.py does (the second kept aside), then per run a copy of
them, the first day rolled up, the second day put back, the next day rolled up, each in its
own process (wall seconds, peak RSS and the engine's steps).

    .venv/bin/python benchmarks/next_day.py --db postgresql --generate [--users 2000000 --active 10]
    .venv/bin/python benchmarks/next_day.py --db postgresql              # this tree
    TRACKER_TREE=/other/worktree .venv/bin/python benchmarks/next_day.py --db postgresql

Both rollups run on the nightly clock (30 minutes after their day ends: the previous day is
provisional when the next one arrives).

``--history-days N`` (N > 1, with ``--generate``: N days before the new day, the new day
kept aside): the history is rolled up once per tree and commit (on the nightly clock of its
last day, in its own process) into a kept copy (``<rows>_h<commit>``), and each run copies
that, puts the new day back and times only the new day's rollup (and, on PostgreSQL, the
CPU seconds of the server's processes serving it). Compare it with the same new day on a
1-day history (another ``BENCH_TAG``, ``--history-days 1``, the default).

The rows live in the database ``bench_next_day`` (PostgreSQL, on the server of
``TRACKER_BENCH_PG_URL``; each run copies it as a template) or ``$TMPDIR/bench_next_day.db``
(SQLite, copied per run) until ``--drop``; ``BENCH_TAG=x`` names another set of rows
(``bench_next_day_x``), e.g. the sparse shape beside the dense.
"""

from __future__ import annotations

import argparse
import contextlib
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
HISTORY = Path(tempfile.gettempdir()) / (NAME + ".history")  # how many days were generated
SPANS = [  # (module, attribute, label): the wall time of each call is summed
    ("tracker.rollup.engine", "_Run._plan", "plan"),
    ("tracker.rollup.plan", "_DayImpressions.of", "  a day's impressions"),
    ("tracker.rollup.plan", "_answered", "  the users new interactions answer"),
    ("tracker.rollup.plan", "_named", "  the users new interactions name"),
    ("tracker.rollup.plan", "_audience_days", "  the days whose audience interacted"),
    ("tracker.rollup.queries", "changed_hours", "  the hours of the new interactions"),
    ("tracker.rollup.engine", "_Run._compute_days", "days (read, score, write)"),
    ("tracker.rollup.engine", "recompute_day", "  days read whole"),
    ("tracker.rollup.engine", "finalize_day", "  days final as stored"),
    ("tracker.rollup.partial", "results.units", "    stored units read"),
    ("tracker.rollup.engine", "recompute_users", "  days in part"),
    # trees before store_day only wrote their state here; store_day also makes their
    # report rows (aside)
    ("tracker.rollup.partial", "write_state", "  days in part: state written"),
    ("tracker.rollup.partial", "store_day", "  days in part: state written, rows made"),
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


def generate(kind: str, impressions: int, users: int, active: int, days: int = 1) -> None:
    """``days`` days before the new day and the new day; the new day's rows moved aside
    (``*_next`` tables, ids kept)."""
    url = _fresh(kind, NAME)
    experiment, arms = bench.setup(url)
    seconds = sum(bench.generate_day(url, experiment, arms, bench.NEW_DAY - timedelta(days=back),
                                     impressions, users, active)
                  for back in range(days, 0, -1))
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
    HISTORY.write_text(str(days))
    print(f"generated {days + 1} x {impressions:,} impressions ({users:,} users, 1 in {active} "
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
    database = url.rsplit("/", 1)[-1]
    with Tracker(url) as tracker, first_day.ServerCpu(database) \
            if url.startswith("postgresql") else contextlib.nullcontext() as server:
        began = time.perf_counter()
        (summary,) = tracker.rollup("bench", now=bench.nightly(day))
        seconds = time.perf_counter() - began
    usage = resource.getrusage(resource.RUSAGE_SELF)
    spans["CPU seconds of the process (all threads)"] = usage.ru_utime + usage.ru_stime
    if server is not None and server.seconds is not None:
        spans["CPU seconds of the PostgreSQL server"] = server.seconds
    queue.put((seconds, usage.ru_maxrss / 1024, summary.to_dict(), spans))


def rollup(url: str, day) -> tuple[float, float, dict, dict]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(url, day, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def _history(kind: str, tree: str, commit: str) -> str:
    """The kept copy of the rows with the history rolled up by ``tree`` at ``commit``
    (made on first use: one rollup of every history day, not timed)."""
    name = f"{NAME}_h{commit}"
    if kind == "sqlite":
        done = Path(_url(kind, name).removeprefix("sqlite:///"))
        if not done.exists():
            url = _fresh(kind, name + "_tmp", NAME)
            seconds, peak, _, _ = rollup(url, FIRST)
            os.replace(url.removeprefix("sqlite:///"), done)
            print(f"history rolled up by {tree} in {seconds:.1f} s ({peak:.0f} MiB)", flush=True)
        return name
    engine = sa.create_engine(bench.PG_URL)
    with engine.connect() as conn:
        exists = conn.exec_driver_sql(
            f"SELECT 1 FROM pg_database WHERE datname = '{name}'").first() is not None
    engine.dispose()
    if not exists:
        url = _fresh(kind, name + "_tmp", NAME)
        seconds, peak, _, _ = rollup(url, FIRST)
        _admin(f"ALTER DATABASE {name}_tmp RENAME TO {name}")
        print(f"history rolled up by {tree} in {seconds:.1f} s ({peak:.0f} MiB)", flush=True)
    return name


def _drop_like(prefix: str) -> None:
    """Every PostgreSQL database whose name starts with ``prefix`` (the kept histories)."""
    engine = sa.create_engine(bench.PG_URL)
    with engine.connect() as conn:
        names = conn.exec_driver_sql("SELECT datname FROM pg_database").scalars().all()
    engine.dispose()
    for name in names:
        if name.startswith(prefix):
            _admin(f"DROP DATABASE IF EXISTS {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql"], required=True)
    parser.add_argument("--generate", action="store_true", help="generate the two days")
    parser.add_argument("--drop", action="store_true", help="drop the generated rows")
    parser.add_argument("--impressions", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--active", type=int, default=1)
    parser.add_argument("--history-days", type=int, default=1,
                        help="days before the new day (with --generate; > 1: the history "
                             "rolled up once per tree, only the new day timed)")
    args = parser.parse_args()
    if args.drop:
        for name in (RUN, NAME):
            if args.db == "sqlite":
                for path in Path(tempfile.gettempdir()).glob(name + "*.db*"):
                    path.unlink()
            else:
                _drop_like(name)
        return
    if args.generate:
        _drop_like(f"{NAME}_h") if args.db == "postgresql" else None
        generate(args.db, args.impressions, args.users, args.active, args.history_days)
        return
    tree = os.environ.get("TRACKER_TREE") or str(bench.ROOT)
    commit = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    days = int(HISTORY.read_text()) if HISTORY.exists() else 1
    template = _history(args.db, tree, commit) if days > 1 else NAME
    url = _fresh(args.db, RUN, template)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    first, first_peak, first_spans = 0.0, 0.0, {}
    if days == 1:
        first, first_peak, _, first_spans = rollup(url, FIRST)
    put_back(url)
    seconds, peak, summary, spans = rollup(url, bench.NEW_DAY)
    import tracker
    assert Path(tracker.__file__).parents[1] == Path(tree).resolve(), tracker.__file__
    before = (f"first day {first:.2f} s ({first_peak:.0f} MiB), " if days == 1 else
              f"on a {days}-day history, ")
    ratio = f": {seconds / first:.2f}x" if first else ""
    print(f"{args.db} {tree} ({commit}), load {load}: {before}next day {seconds:.2f} s "
          f"({peak:.0f} MiB){ratio}; days recomputed {len(summary['days_recomputed'])}, "
          f"{summary.get('days_in_part', 0)} from their state or for some users; users "
          f"recomputed {summary.get('users_recomputed', 0):,}, "
          f"impressions read {summary['impressions_read']:,}; load after "
          + ", ".join(f"{v:.1f}" for v in os.getloadavg()), flush=True)
    print(f"  {'step (wall seconds, summed over calls)':44} {'first':>7}   {'next':>7}")
    labels = dict.fromkeys(label for _, _, label in SPANS)  # once each, in order
    for label in [*labels, "CPU seconds of the process (all threads)",
                  "CPU seconds of the PostgreSQL server"]:
        if label in spans or label in first_spans:
            print(f"  {label:44} {first_spans.get(label, 0):7.2f} s {spans.get(label, 0):7.2f} s")


if __name__ == "__main__":
    main()
