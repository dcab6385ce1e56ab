"""What CUPED's covariates cost the rollup: the scenario of benchmarks/rollup.py (a history
day, then a new day of N impressions x 10 items, ~1 interaction each) rolled up with the
experiment's ``cuped_days`` at 14 (the default: per-user covariates of the users first seen,
their pre-period metrics included, their sums per arm and metric, daily and cumulative) and
at 0 (no covariates). The day before the history day, the same users were served N lists of
another experiment ("bench-previous", with their interactions): the pre-period lists each
user's pre-period metrics are scored from (``--no-previous`` leaves them out).

    .venv/bin/python benchmarks/cuped_rollup.py --impressions 200000 --db sqlite
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.rollup import (  # noqa: E402
    NEW_DAY,
    drop,
    fresh_url,
    generate_day,
    setup,
    timed_rollup,
)
from tracker import Tracker  # noqa: E402
from tracker.store import computed  # noqa: E402


def run(kind: str, folder: Path, cuped_days: int, n: int, users: int,
        previous: bool) -> tuple[float, float]:
    """Seconds of the first rollup (history day) and of the next one (the new day)."""
    name = f"bench_cuped_{cuped_days}_{os.getpid()}"
    url = fresh_url(kind, folder, name)
    try:
        experiment, arms = setup(url)
        with Tracker(url) as t:
            t.update_experiment("bench", cuped_days=cuped_days)
            if previous:
                info = t.create_experiment(
                    "bench-previous", arms={"a": 1, "b": 1, "c": 1}, control="a",
                    attribution_window=timedelta(hours=24),
                    relevance={"click": 1, "play": 1, "save": 2, "purchase": 3})
        if previous:
            generate_day(url, info.id, [arm.id for arm in info.arms],
                         NEW_DAY - timedelta(days=2), n, users)
        generate_day(url, experiment, arms, NEW_DAY - timedelta(days=1), n, users)
        first, _, _ = timed_rollup(url)
        generate_day(url, experiment, arms, NEW_DAY, n, users)
        second, peak, summary = timed_rollup(url)
        if cuped_days:
            print(f"  {kind:10} users with pre-period lists: {_with_lists(url):.0%}")
        print(f"  {kind:10} cuped_days {cuped_days:2d}: first day {first:.2f} s, new day "
              f"{second:.2f} s (days recomputed {len(summary['days_recomputed'])}, "
              f"peak RSS {peak:.0f} MiB)", flush=True)
        return first, second
    finally:
        drop(kind, name)


def _with_lists(url: str) -> float:
    """The share of the users of the cumulative hit_rate@10 rows with a pre-period list."""
    with Tracker(url) as t:
        sums = computed.covariate_table(t.engine, "bench")
        rows = computed.metric_table(t.engine, "bench", cumulative=True)
    last = sums["day"].max()
    sums = sums[(sums["day"] == last) & (sums["metric"] == "hit_rate") & (sums["k"] == 10)]
    rows = rows[(rows["day"] == last) & (rows["metric"] == "hit_rate") & (rows["k"] == 10)]
    return 1 - sums["x:no_pre_lists"].sum() / rows["users"].sum()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--impressions", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--no-previous", dest="previous", action="store_false",
                        help="no lists of another experiment before the history day")
    args = parser.parse_args()
    kinds = ["postgresql", "sqlite"] if args.db == "both" else [args.db]
    print(f"CUPED rollup cost: days of {args.impressions:,} impressions x 10 items, "
          f"{args.users:,} users; {os.cpu_count()} CPUs; pre-period lists of another "
          f"experiment: {'yes' if args.previous else 'no'}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tracker-bench-") as tmp:
        for kind in kinds:
            off = run(kind, Path(tmp), 0, args.impressions, args.users, args.previous)
            on = run(kind, Path(tmp), 14, args.impressions, args.users, args.previous)
            print(f"  {kind:10} => with / without CUPED: first day {on[0] / off[0]:.2f}x, "
                  f"new day {on[1] / off[1]:.2f}x", flush=True)


if __name__ == "__main__":
    main()
