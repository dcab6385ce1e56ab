"""Nightly cost over an experiment's life: N days logged and rolled up night by night on
the nightly clock (30 minutes after each day ends), the rollup CPU of every night. The
target of the rollup-core issue: the 30th night costs at most 1.15x the 3rd, that is, the
nightly cost follows the new data, not the history.

    .venv/bin/python benchmarks/nightly.py --db sqlite                       # dense, 30 nights
    .venv/bin/python benchmarks/nightly.py --db postgresql --users 1000000 --active 20   # sparse
    .venv/bin/python benchmarks/nightly.py --db sqlite --nights 8 --impressions 20000   # quick
    .venv/bin/python benchmarks/nightly.py --db sqlite --segments surface:list,device   # sliced
    .venv/bin/python benchmarks/nightly.py --db sqlite --nights 8 --crossover 50   # 5% cross

Before the first night, ``--history-days`` days of another experiment's lists and
interactions (the product's history: surprisal's reference period, CUPED's pre-period). Each
day's rows are generated inside the database as ``benchmarks/rollup.py`` does (lists of 10
items, ~one interaction each within the hour, 3 arms, k = 5, 10, 20, CUPED on by default),
``--impressions`` a day over a population of ``--users`` users of whom one in
``--active`` is active on a given day. The dense shape (the default: 300,000 users, all
eligible every day) sees most of its population within the first week and keeps them; the
sparse shape (1M users, one in 20 active a day) keeps meeting new ones. Each rollup runs in a
fresh process: printed per night are its wall seconds, its CPU seconds (the rollup call's
own, all threads), on PostgreSQL the CPU seconds of the server's processes serving it, its
peak RSS, and the ratio of the night's total CPU to the 3rd night's. ``--segments``
declares dimensions on the experiment (issue 33: the nightly cost with them must still follow
the new data) and gives every list the ``context`` of ``benchmarks/segments.py`` (``surface``:
20 values, skewed; ``device``: 5).
"""

from __future__ import annotations

import argparse
import cProfile
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

import first_day  # noqa: E402  (ServerCpu, instrument)
import next_day  # noqa: E402  (its spans)
import rollup as bench  # noqa: E402  (the generated rows and the nightly clock)
import segments  # noqa: E402  (the lists' context)

from tracker import Tracker  # noqa: E402

SPANS = next_day.SPANS + [
    ("tracker.rollup.engine", "publish_exposure_days", "  exposure-day view"),
    ("tracker.rollup.engine", "covariates.resum_changed", "  CUPED sums re-summed (late rows)"),
]


def _child(url: str, now, queue, spans: bool, profile: str | None) -> None:
    wall_spans: dict[str, float] = {}
    cpu_spans: dict[str, float] = {}
    if spans:
        first_day.instrument(wall_spans, SPANS, cpu_spans)
    profiler = cProfile.Profile() if profile else None
    with Tracker(url) as t:
        wall, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        (summary,) = t.rollup("bench", now=now)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put((wall, cpu, peak, len(summary.days_recomputed), wall_spans, cpu_spans))


def night(url: str, kind: str, now, spans: bool = False, profile: str | None = None) -> tuple:
    """One rollup in a fresh process: wall, its CPU, the server's CPU (PostgreSQL), peak
    RSS in MiB, the days it recomputed, and (``spans``) the wall and calling-thread CPU
    seconds of the engine's steps; ``profile``: a file for the calling thread's cProfile
    statistics."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(url, now, queue, spans, profile))
    server = first_day.ServerCpu(url.rsplit("/", 1)[1].split("?")[0]) \
        if kind == "postgresql" else None
    if server is not None:
        server.__enter__()
    try:
        process.start()
        wall, cpu, peak, days, wall_spans, cpu_spans = queue.get()
        process.join()
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    return (wall, cpu, None if server is None else server.seconds, peak, days, wall_spans,
            cpu_spans)


def history(url: str, days: list, args) -> None:
    """The product's history before the first night: days generated as the nights are, for
    another experiment (``previous``: its lists and their interactions)."""
    with Tracker(url) as t:
        info = t.create_experiment("previous", arms={"control": 1, "two-tower": 1,
                                                     "diverse": 1}, control="control",
                                   attribution_window=timedelta(hours=24))
    for day in days:
        bench.generate_day(url, info.id, [arm.id for arm in info.arms], day, args.impressions,
                           args.users, args.active)


def vacuum(url: str) -> None:
    """``VACUUM ANALYZE`` of the whole database (dead rows reclaimed, planner statistics)."""
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("VACUUM ANALYZE"))
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql"], required=True)
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--impressions", type=int, default=100_000, help="a day's impressions")
    parser.add_argument("--users", type=int, default=300_000)
    parser.add_argument("--active", type=int, default=1,
                        help="one user in ACTIVE is active on a given day")
    parser.add_argument("--history-days", type=int, default=7,
                        help="days of another experiment's logs before the first night: "
                             "the product's history (surprisal's reference period, CUPED's "
                             "pre-period)")
    parser.add_argument("--vacuum", action="store_true",
                        help="PostgreSQL: VACUUM ANALYZE the database before each night's "
                             "rollup, outside its measured CPU, as autovacuum does on a "
                             "production server in the day between two runs (this machine's "
                             "server runs with autovacuum off)")
    parser.add_argument("--profile", metavar="DIR",
                        help="write the calling thread's cProfile statistics of the 3rd and "
                             "the last night to DIR (night-3.prof, night-N.prof)")
    parser.add_argument("--segments", metavar="DIMS", default="",
                        help="dimensions declared on the experiment, comma-separated (e.g. "
                             "surface:list,device); every list gets a context holding both")
    parser.add_argument("--crossover", type=int, default=0, metavar="PER_MILLE",
                        help="per mille of the users whose lists each go to an arm of their "
                             "own: crossover users (the crossover cells of intent-to-treat)")
    parser.add_argument("--spans", action="store_true",
                        help="print where the 3rd and the last night spent their time")
    args = parser.parse_args()
    if args.nights < 3:
        parser.error("--nights must be at least 3 (the ratio is to the 3rd night)")
    if args.vacuum and args.db != "postgresql":
        parser.error("--vacuum is for --db postgresql (SQLite keeps no dead rows to reclaim)")
    if args.profile:  # made before the first night: a child that cannot write its file
        Path(args.profile).mkdir(parents=True, exist_ok=True)  # would leave us waiting
    print(f"nightly benchmark ({args.db}): {args.nights} nights of {args.impressions:,} "
          f"impressions x 10 items, {args.users:,} users (1 in {args.active} active a day), "
          f"3 arms, k = 5, 10, 20; {os.cpu_count()} CPUs"
          f"{'; dimensions ' + args.segments if args.segments else ''}", flush=True)
    name = f"bench_nightly_{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="tracker-bench-") as tmp:
        url = bench.fresh_url(args.db, Path(tmp), name)
        try:
            experiment, arms = bench.setup(url)
            if args.segments:
                with Tracker(url) as t:
                    t.update_experiment("bench", segments=args.segments.split(","))
            first = bench.NEW_DAY - timedelta(days=args.nights - 1)
            history(url, [first - timedelta(days=back)
                          for back in range(args.history_days, 0, -1)], args)
            totals: list[float] = []
            shown_spans: dict[int, tuple[dict, dict]] = {}
            print(" night  day         wall s   CPU s  server CPU s  peak MiB  days  "
                  "CPU / 3rd", flush=True)
            for n in range(args.nights):
                day = first + timedelta(days=n)
                bench.generate_day(url, experiment, arms, day, args.impressions, args.users,
                                   args.active, args.crossover)
                if args.segments:
                    segments.add_context(url, args.db)
                if args.vacuum:
                    vacuum(url)
                wall, cpu, server, peak, days, wall_spans, cpu_spans = night(
                    url, args.db, bench.nightly(day), args.spans,
                    f"{args.profile}/night-{n + 1}.prof"
                    if args.profile and n in (2, args.nights - 1) else None)
                if n in (2, args.nights - 1):
                    shown_spans[n + 1] = (wall_spans, cpu_spans)
                totals.append(cpu + (server or 0.0))
                ratio = f"{totals[-1] / totals[2]:.2f}x" if n >= 2 else ""
                shown = f"{server:12.2f}" if server is not None else f"{'-':>12}"
                print(f" {n + 1:5d}  {day}  {wall:7.2f} {cpu:7.2f} {shown}  {peak:8.0f}  "
                      f"{days:4d}  {ratio:>9}", flush=True)
            last = totals[-3:]
            print(f" => night {args.nights} / night 3 (CPU, rollup process + server): "
                  f"{totals[-1] / totals[2]:.2f}x; mean of the last 3 nights / night 3: "
                  f"{sum(last) / len(last) / totals[2]:.2f}x", flush=True)
            if args.spans:
                nights = sorted(shown_spans)
                print(" step (wall s / calling thread's CPU s)" + "".join(
                    f"{'night ' + str(k):>22}" for k in nights))
                for _, _, label in SPANS:
                    cells = [shown_spans[k][0].get(label) for k in nights]
                    if any(c is not None for c in cells):
                        print(f" {label:40}" + "".join(
                            f"{c or 0:11.2f} / {shown_spans[k][1].get(label, 0):7.2f}"
                            for c, k in zip(cells, nights, strict=True)))
        finally:
            bench.drop(args.db, name)


if __name__ == "__main__":
    main()
