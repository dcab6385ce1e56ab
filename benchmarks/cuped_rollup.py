"""What CUPED's covariates cost the rollup: the scenario of benchmarks/rollup.py (a history
day, then a new day of N impressions x 10 items, ~1 interaction each) rolled up with the
experiment's ``cuped_days`` at 14 (the default: per-user covariates of the users first seen,
their sums per arm and metric, daily and cumulative) and at 0 (no covariates).

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


def run(kind: str, folder: Path, cuped_days: int, n: int, users: int) -> tuple[float, float]:
    """Seconds of the first rollup (history day) and of the next one (the new day)."""
    name = f"bench_cuped_{cuped_days}_{os.getpid()}"
    url = fresh_url(kind, folder, name)
    try:
        experiment, arms = setup(url)
        with Tracker(url) as t:
            t.update_experiment("bench", cuped_days=cuped_days)
        generate_day(url, experiment, arms, NEW_DAY - timedelta(days=1), n, users)
        first, _, _ = timed_rollup(url)
        generate_day(url, experiment, arms, NEW_DAY, n, users)
        second, peak, summary = timed_rollup(url)
        print(f"  {kind:10} cuped_days {cuped_days:2d}: first day {first:.2f} s, new day "
              f"{second:.2f} s (days recomputed {len(summary['days_recomputed'])}, "
              f"peak RSS {peak:.0f} MiB)", flush=True)
        return first, second
    finally:
        drop(kind, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--impressions", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=200_000)
    args = parser.parse_args()
    kinds = ["postgresql", "sqlite"] if args.db == "both" else [args.db]
    print(f"CUPED rollup cost: days of {args.impressions:,} impressions x 10 items, "
          f"{args.users:,} users; {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="tracker-bench-") as tmp:
        for kind in kinds:
            off = run(kind, Path(tmp), 0, args.impressions, args.users)
            on = run(kind, Path(tmp), 14, args.impressions, args.users)
            print(f"  {kind:10} => with / without CUPED: first day {on[0] / off[0]:.2f}x, "
                  f"new day {on[1] / off[1]:.2f}x", flush=True)


if __name__ == "__main__":
    main()
