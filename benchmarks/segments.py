"""What declared dimensions cost the rollup: the day of benchmarks/rollup.py (N impressions x
10 items, ~1 interaction each, three arms) with a ``context`` on every list, rolled up
``--full`` with no dimension and with two dimensions of at most 20 levels (``surface``: 20
values, skewed; ``device``: 5; by default both list dimensions, ``--dimensions
surface:list,device`` makes ``device`` a user dimension), alternately, in a fresh process
each; the CPU seconds of that process (the rollup's threads; SQLite runs inside it), its
wall time and its peak resident memory. Then the rows per user of the day's stored per-user
totals (``rollup_units``: a row per user and cell), after the last run of each: what every
step after scoring works through, and so what the dimensions multiply.

    .venv/bin/python benchmarks/segments.py --impressions 1000000 --runs 5
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.rollup import NEW_DAY, drop, fresh_url, generate_day, setup  # noqa: E402
from tracker import Tracker  # noqa: E402
from tracker.rollup import state  # noqa: E402
from tracker.store.db import create_engine  # noqa: E402

DIMENSIONS = ["surface:list", "device:list"]

SQLITE_CONTEXT = """
UPDATE impression SET context = json_object(
    'surface', 's' || (CASE WHEN id % 10 < 5 THEN id % 3 ELSE id % 20 END),
    'device', 'd' || (id * 7 % 5)) WHERE context IS NULL
"""
PG_CONTEXT = """
UPDATE impression SET context = jsonb_build_object(
    'surface', 's' || (CASE WHEN id % 10 < 5 THEN id % 3 ELSE id % 20 END),
    'device', 'd' || (id * 7 % 5)) WHERE context IS NULL
"""


def add_context(url: str, db: str) -> None:
    """Give every list without a ``context`` one holding ``surface`` and ``device``."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(PG_CONTEXT if db == "postgresql" else SQLITE_CONTEXT))
    finally:
        engine.dispose()


def rows_per_user(url: str) -> tuple[int, int]:
    """The rows and the distinct users of the daily per-user totals stored
    (``rollup_units``, :data:`~tracker.rollup.state.UNITS`: one row per user and cell)."""
    engine = create_engine(url)
    rows, users = 0, set()
    try:
        with engine.connect() as conn:
            for (data,) in conn.execute(sa.text(
                    "SELECT data FROM rollup_units WHERE NOT cumulative")):
                table = state.read(bytes(data), state.UNITS)
                rows += table.num_rows
                users.update(table["user_id"].to_pylist())
    finally:
        engine.dispose()
    return rows, len(users)


def _child(url: str, segments: list[str], queue) -> None:
    with Tracker(url) as t:
        t.update_experiment("bench", segments=segments)
        before = resource.getrusage(resource.RUSAGE_SELF)
        began = time.perf_counter()
        (summary,) = t.rollup("bench", full=True)
        wall = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    queue.put((cpu, wall, after.ru_maxrss / 1024))


def one_run(url: str, segments: list[str]) -> tuple[float, float, float]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(url, segments, queue))
    process.start()
    found = queue.get()
    process.join()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impressions", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--dimensions", default=",".join(DIMENSIONS),
                        help="the two dimensions declared, comma-separated")
    args = parser.parse_args()
    dimensions = args.dimensions.split(",")
    with tempfile.TemporaryDirectory() as folder:
        name = "bench_segments"
        url = fresh_url(args.db, Path(folder), name)
        try:
            experiment, arms = setup(url)
            generate_day(url, experiment, arms, NEW_DAY, args.impressions, args.users)
            add_context(url, args.db)
            found: dict[str, list[tuple[float, float, float]]] = {"none": [], "two": []}
            counted: dict[str, tuple[int, int]] = {}
            for run in range(args.runs):
                for label, segments in (("none", []), ("two", dimensions)):
                    found[label].append(one_run(url, segments))
                    cpu, wall, peak = found[label][-1]
                    print(f"  run {run + 1} {label:4}: {cpu:6.2f} CPU-s, {wall:6.2f} s wall, "
                          f"peak {peak:,.0f} MiB", flush=True)
                    if run == args.runs - 1:
                        counted[label] = rows_per_user(url)
        finally:
            drop(args.db, name)
    for label, (rows, users) in counted.items():
        print(f"  {label:4}: {rows:,} (user, cell) rows for {users:,} users: "
              f"{rows / max(users, 1):.2f} a user")
    cpu = {k: statistics.median(c for c, _, _ in v) for k, v in found.items()}
    wall = {k: statistics.median(w for _, w, _ in v) for k, v in found.items()}
    peak = {k: max(p for _, _, p in v) for k, v in found.items()}
    print(f"{args.db}, {args.impressions:,} impressions, medians of {args.runs}: "
          f"no dimension {cpu['none']:.2f} CPU-s ({wall['none']:.2f} s wall), "
          f"{', '.join(dimensions)} {cpu['two']:.2f} CPU-s ({wall['two']:.2f} s wall): "
          f"{cpu['two'] / cpu['none']:.2f}x CPU, {wall['two'] / wall['none']:.2f}x wall; "
          f"peak {peak['none']:,.0f} MiB -> {peak['two']:,.0f} MiB")


if __name__ == "__main__":
    main()
